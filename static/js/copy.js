// Copy buttons on researcher pages: <button data-copy="ID"> copies the text of element ID.
// (The rating screens have the same handler in rating.js; this file carries only this one.)
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-copy]");
    if (!button) return;
    var source = document.getElementById(button.getAttribute("data-copy"));
    if (!source) return;
    var said = function () { button.textContent = "Copied"; button.setAttribute("data-copied", "yes"); };
    var text = source.textContent.trim();
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(said, function () { select(source); });
    } else if (select(source) && document.execCommand && document.execCommand("copy")) {
      said();  // plain http (a lab server): the selection is copied, and stays selected for Ctrl-C
    }
  });
  function select(node) {
    var range = document.createRange();
    range.selectNodeContents(node);
    var selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    return true;
  }
})();
