/* Keyboard-first rating: the highlighted question takes the keys shown on its choices.
   Enter submits, ← / Backspace go back, ↑/↓ move between questions, ? opens the rubric,
   a click on an image (or Z) opens it filling the window, F flickers an edit's output with its
   source. Works on every screen htmx swaps in.
   Scales past nine points have two-digit keys ("10"): digits typed within 600 ms add up; a key
   no longer key could extend is taken at once, otherwise when the time runs out or Enter comes. */
(function () {
  "use strict";
  var active = 0;
  var TYPING_MS = 600;
  var typed = "", typedQ = null, typedTimer = null;

  function unit() { return document.getElementById("unit"); }
  function questions() { var u = unit(); return u ? Array.prototype.slice.call(u.querySelectorAll("[data-question]")) : []; }
  function answered(q) { return !!q.querySelector("input:checked"); }
  function openDialog() { return document.querySelector("dialog[open]"); }

  function setActive(i, scroll) {
    var qs = questions();
    if (!qs.length) return;
    active = Math.max(0, Math.min(i, qs.length - 1));
    qs.forEach(function (q, j) { q.classList.toggle("active", j === active); });
    if (scroll) qs[active].scrollIntoView({ block: "nearest", behavior: "smooth" });
  }

  function nextUnanswered(from) {
    var qs = questions();
    for (var k = 1; k <= qs.length; k++) {
      var j = (from + k) % qs.length;
      if (!answered(qs[j])) return j;
    }
    return -1;
  }

  function start() {
    var qs = questions();
    if (!qs.length) return;
    var first = qs.findIndex(function (q) { return !answered(q); });
    setActive(first === -1 ? 0 : first, false);
  }

  function choose(q, input) {
    input.checked = true;
    q.classList.remove("missing");
    var qs = questions();
    var i = qs.indexOf(q);
    var n = nextUnanswered(i);
    setActive(n === -1 ? Math.min(i + 1, qs.length - 1) : n, true);
  }

  function submit() {
    var u = unit();
    if (!u) return;
    var form = u.querySelector("form.unit-form");
    var missing = questions().filter(function (q) { return !answered(q); });
    var box = u.querySelector(".form-error");
    if (missing.length) {
      missing.forEach(function (q) { q.classList.add("missing"); });
      var label = missing[0].querySelector("legend").firstChild.textContent.trim();
      // On a screen of several images (an EvalMi trial) say which image the question belongs to.
      var panel = missing[0].closest(".panel");
      var where = panel && u.querySelectorAll(".panel").length > 1 ? panel.getAttribute("aria-label") + ", " : "";
      if (box) box.textContent = "Please answer every question: " + where + "“" + label + "” is not answered yet.";
      setActive(questions().indexOf(missing[0]), true);
      return;
    }
    form.requestSubmit();
  }

  function keyed(q, key) { return q.querySelector('.choice[data-key="' + key + '"]'); }
  function extendable(q, prefix) {
    return Array.prototype.some.call(q.querySelectorAll(".choice[data-key]"), function (c) {
      var k = c.getAttribute("data-key");
      return k.length > prefix.length && k.indexOf(prefix) === 0;
    });
  }
  function showTyping(q, key) {
    Array.prototype.forEach.call(document.querySelectorAll(".choice.typing"), function (c) { c.classList.remove("typing"); });
    var label = q && key ? keyed(q, key) : null;
    if (label) label.classList.add("typing");
  }
  function flushTyped() {
    clearTimeout(typedTimer);
    typedTimer = null;
    var q = typedQ, key = typed;
    typed = "";
    typedQ = null;
    showTyping(null, "");
    var label = q && key && q.isConnected ? keyed(q, key) : null;
    if (label) choose(q, label.querySelector("input"));
  }
  function cancelTyped() {
    clearTimeout(typedTimer);
    typedTimer = null;
    typed = "";
    typedQ = null;
    showTyping(null, "");
  }
  function typeKey(key) {
    var q = questions()[active];
    if (!q) return false;
    if (typedQ && typedQ !== q) flushTyped();
    var candidate = typed + key;
    if (typed && !keyed(q, candidate) && !extendable(q, candidate)) {
      flushTyped(); // what was typed so far is a whole key; this keystroke starts the next one
      q = questions()[active];
      candidate = key;
    }
    if (!keyed(q, candidate) && !extendable(q, candidate)) return false;
    typed = candidate;
    typedQ = q;
    clearTimeout(typedTimer);
    if (extendable(q, candidate)) {
      showTyping(q, candidate);
      typedTimer = setTimeout(flushTyped, TYPING_MS);
    } else {
      flushTyped();
    }
    return true;
  }

  function goBack() {
    var back = document.querySelector("#unit [data-back]");
    if (back) back.click();
  }

  function openRubric() {
    var link = document.querySelector("[data-rubric]");
    if (link) link.click();
  }

  // Zoom (Z) and flicker (F): the image fills the window; on editing tasks F swaps the output
  // with its source (on the screen and in the zoomed view), to see what the edit changed.
  function lightbox() { return document.getElementById("lightbox"); }
  function flickerButton() { return document.querySelector("#unit [data-flicker]"); }
  function zoomTarget() {
    var qs = questions();
    var panel = qs.length && qs[active] ? qs[active].closest(".panel") : null;
    return (panel && panel.querySelector(".output a.zoom")) || document.querySelector("#unit .output a.zoom, #unit .side a.zoom");
  }
  function openLightbox(zoom) {
    var box = lightbox();
    if (!box || !box.showModal || !zoom) return false;
    var button = flickerButton();
    var img = box.querySelector("img");
    img.src = zoom.getAttribute("data-full");
    box.setAttribute("data-output", zoom.getAttribute("data-output-full") || zoom.getAttribute("data-full"));
    box.setAttribute("data-source", button && zoom.closest(".output") ? button.getAttribute("data-full") : "");
    box.showModal();
    return true;
  }
  function flickerLightbox() {
    var box = lightbox(), img = box.querySelector("img");
    var source = box.getAttribute("data-source"), output = box.getAttribute("data-output");
    if (!source) return;
    img.src = img.getAttribute("src") === source ? output : source;
  }
  function flicker() {
    var button = flickerButton();
    if (!button) return;
    var showing = button.getAttribute("aria-pressed") === "true";
    Array.prototype.forEach.call(document.querySelectorAll("#unit .output a.zoom"), function (zoom) {
      var img = zoom.querySelector("img");
      if (!showing) {
        zoom.setAttribute("data-output-full", zoom.getAttribute("data-full"));
        img.setAttribute("data-output-src", img.getAttribute("src"));
        img.setAttribute("data-output-srcset", img.getAttribute("srcset") || "");
        img.setAttribute("src", button.getAttribute("data-src"));
        img.setAttribute("srcset", button.getAttribute("data-srcset"));
        zoom.setAttribute("data-full", button.getAttribute("data-full"));
      } else {
        img.setAttribute("src", img.getAttribute("data-output-src"));
        img.setAttribute("srcset", img.getAttribute("data-output-srcset"));
        zoom.setAttribute("data-full", zoom.getAttribute("data-output-full"));
      }
      var figure = zoom.closest(".output"), caption = figure.querySelector("figcaption");
      figure.classList.toggle("flickered", !showing);
      if (caption) {  // say which image is on screen
        if (!showing) { caption.setAttribute("data-output-caption", caption.textContent); caption.textContent = "Source (F: back to the output)"; }
        else { caption.textContent = caption.getAttribute("data-output-caption"); }
      }
    });
    button.setAttribute("aria-pressed", showing ? "false" : "true");
  }

  document.addEventListener("keydown", function (e) {
    if (e.altKey || e.ctrlKey || e.metaKey) return;
    var box = lightbox();
    if (box && box.open && (e.key === "z" || e.key === "Z")) { e.preventDefault(); box.close(); return; }
    if (box && box.open && (e.key === "f" || e.key === "F")) { e.preventDefault(); flickerLightbox(); return; }
    if (openDialog()) return; // Esc closes dialogs natively
    if (e.target.closest && e.target.closest(".report")) return;  // the report form types and submits as a form
    var tag = (e.target.tagName || "").toLowerCase();
    if (tag === "textarea" || (tag === "input" && e.target.type !== "radio" && e.target.type !== "checkbox")) return;
    var key = e.key;
    if (!unit()) {
      // consent and instructions pages: Enter continues
      var form = document.querySelector("form[data-enter-submit]");
      if (key === "Enter" && form && tag !== "button" && tag !== "a") { e.preventDefault(); form.requestSubmit(); }
      return;
    }
    // Enter on a focused link or button (Back, Rubric, zoom) presses it, as everywhere on the web;
    // only the screen's own submit button, or no focused control, submits the answers.
    if (key === "Enter" && (tag === "a" || (tag === "button" && e.target.type !== "submit"))) return;
    if (key === "Enter") { e.preventDefault(); flushTyped(); submit(); return; }
    if (key === "ArrowLeft" || key === "Backspace") { e.preventDefault(); flushTyped(); goBack(); return; }
    if (key === "ArrowDown") { e.preventDefault(); cancelTyped(); setActive(active + 1, true); return; }
    if (key === "ArrowUp") { e.preventDefault(); cancelTyped(); setActive(active - 1, true); return; }
    if (key === "?") { e.preventDefault(); openRubric(); return; }
    if (key === "z" || key === "Z") { if (openLightbox(zoomTarget())) e.preventDefault(); return; }
    if ((key === "f" || key === "F") && flickerButton()) { e.preventDefault(); flicker(); return; }
    if (key.length === 1 && typeKey(key.toLowerCase())) e.preventDefault();
  });

  document.addEventListener("change", function (e) {
    var q = e.target.closest && e.target.closest("[data-question]");
    if (q && e.target.type === "radio") choose(q, e.target);
  });

  document.addEventListener("click", function (e) {
    var q = e.target.closest && e.target.closest("[data-question]");
    if (q && !e.target.closest(".choice")) setActive(questions().indexOf(q), false);
    var zoom = e.target.closest && e.target.closest("a.zoom");
    if (zoom && openLightbox(zoom)) e.preventDefault();
    if (e.target.closest && e.target.closest("[data-flicker]")) flicker();
    var copy = e.target.closest && e.target.closest("[data-copy]");
    if (copy) {
      var text = (document.getElementById(copy.getAttribute("data-copy")) || {}).textContent || "";
      var said = function () { copy.textContent = "Copied"; };
      if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(text.trim()).then(said);
      else {  // plain http (a lab server): select the code so Ctrl-C takes it
        var range = document.createRange();
        range.selectNodeContents(document.getElementById(copy.getAttribute("data-copy")));
        var sel = window.getSelection(); sel.removeAllRanges(); sel.addRange(range);
        if (document.execCommand && document.execCommand("copy")) said();
      }
    }
    if (e.target.closest && e.target.closest("[data-rubric]")) {
      var dialog = document.getElementById("rubric-dialog");
      if (dialog && dialog.showModal && !dialog.open) dialog.showModal();
    }
  });

  // htmx swaps only 2xx answers: a 403, a 503 "please try again" or a dropped connection would
  // leave the screen as it was with no word why. Say what happened in the screen's message line;
  // the form is not swapped, so the answers the rater gave stay and Next can be pressed again.
  var RETRY = "Your answers are still here: press Next again in a few seconds.";
  function serverMessage(xhr) {
    var type = (xhr.getResponseHeader("Content-Type") || "").toLowerCase();
    var body = xhr.responseText || "";
    if (type.indexOf("text/plain") === 0) return body.trim();
    if (type.indexOf("text/html") !== 0 || !window.DOMParser) return "";
    // DOMParser builds an inert document: nothing in the answer runs.
    var doc = new DOMParser().parseFromString(body, "text/html");
    var scope = doc.querySelector("main") || doc.body;
    if (!scope) return "";
    var title = scope.querySelector("h1"), text = scope.querySelector("h1 ~ p, p");
    return [title && title.textContent.trim(), text && text.textContent.trim()].filter(Boolean).join(": ");
  }
  function explain(status, xhr) {
    if (status === 0) return "Not saved: the connection to the site failed. " + RETRY;
    if (status >= 500 || status === 429) return "Not saved: the site is busy (" + status + "). " + RETRY;
    var said = xhr ? serverMessage(xhr) : "";
    if (said.length > 300) said = said.slice(0, 300) + "…";
    return (said || "This screen could not be saved (" + status + ").") + " Reload the page to go on.";
  }
  function showFailure(message) {
    var u = unit();
    var box = u && u.querySelector(".form-error");
    if (!box) { window.alert(message); return; }
    box.textContent = message;
    box.setAttribute("data-failed", "");
    box.scrollIntoView({ block: "nearest" });
  }
  document.addEventListener("htmx:responseError", function (e) {
    if (e.target && (e.target.id === "rubric-content" || e.target.id === "report")) return;
    var xhr = e.detail && e.detail.xhr;
    showFailure(explain(xhr ? xhr.status : 0, xhr));
  });
  document.addEventListener("htmx:sendError", function (e) {
    if (e.target && (e.target.id === "rubric-content" || e.target.id === "report")) return;
    showFailure(explain(0, null));
  });
  document.addEventListener("htmx:beforeRequest", function () {
    var box = document.querySelector("#unit .form-error[data-failed]");
    if (box) { box.textContent = ""; box.removeAttribute("data-failed"); }
  });

  document.addEventListener("DOMContentLoaded", start);
  // A new screen: keys typed for the old one are dropped, and the first open question takes the
  // keys as soon as the screen is in the page (not only after htmx settles, ~20 ms later).
  document.addEventListener("htmx:beforeSwap", function (e) {
    if (e.target && e.target.id !== "rubric-content" && e.target.id !== "report") cancelTyped();
  });
  document.addEventListener("htmx:afterSwap", function (e) {
    if (e.target && (e.target.id === "rubric-content" || e.target.id === "report")) return;
    active = 0;
    start();
  });
  document.addEventListener("htmx:afterSettle", function (e) {
    if (e.target && (e.target.id === "rubric-content" || e.target.id === "report")) return;
    start();
    window.scrollTo({ top: 0 });
  });
})();
