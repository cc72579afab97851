/* The builder page (templates/research/study_new.html): the task-type select offers the chosen
   protocol's tasks only, and only the settings of that protocol (and task) are shown. Without
   JavaScript every option and setting is visible; the server reads the chosen protocol's only. */
(function () {
  "use strict";
  var form = document.querySelector("form[data-builder]");
  if (!form) { return; }
  var protocol = form.querySelector("select[name=protocol]");
  var task = form.querySelector("select[name=task_type]");
  var tasksByProtocol = {};
  (task.getAttribute("data-tasks-by-protocol") || "").split(" ").forEach(function (pair) {
    var parts = pair.split(":");
    if (parts.length === 2) { tasksByProtocol[parts[0]] = parts[1].split(","); }
  });
  var labels = {};
  Array.prototype.forEach.call(form.querySelectorAll("select[name=protocol] option"), function (o) {
    labels[o.value] = o.textContent;
  });

  function update() {
    var chosen = protocol.value;
    var groupLabel = labels[chosen];
    var firstVisible = null;
    var current = task.options[task.selectedIndex];
    Array.prototype.forEach.call(task.querySelectorAll("optgroup"), function (group) {
      var show = group.label === groupLabel;
      group.hidden = !show;
      group.disabled = !show;
      if (show && !firstVisible) { firstVisible = group.querySelector("option"); }
    });
    if (!current || current.parentNode.disabled) {
      // the same task in the chosen protocol's group if it has it (text_to_image is in several)
      var same = null;
      Array.prototype.forEach.call(task.querySelectorAll("optgroup:not([disabled]) option"), function (o) {
        if (current && o.value === current.value && !same) { same = o; }
      });
      if (same || firstVisible) { (same || firstVisible).selected = true; }
    }
    Array.prototype.forEach.call(form.querySelectorAll("fieldset[data-protocol]"), function (set) {
      var own = set.getAttribute("data-protocol");
      set.hidden = own !== "" && own !== chosen;
    });
    Array.prototype.forEach.call(form.querySelectorAll("label[data-tasks]"), function (label) {
      label.hidden = label.getAttribute("data-tasks").split(" ").indexOf(task.value) < 0;
    });
  }
  protocol.addEventListener("change", update);
  task.addEventListener("change", update);
  update();
})();
