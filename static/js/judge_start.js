// Judges page, "Start a run": show the fieldset that applies to the chosen judge kind (metrics
// for offline metrics, the endpoint for MLLM judges). Without script every fieldset shows and the
// server ignores what does not apply. A file of its own: the Content-Security-Policy allows no inline script.
function showFieldsetsFor(form) {
  const kind = form.elements.kind.value;
  for (const fieldset of form.querySelectorAll("fieldset[data-for-kinds]")) {
    fieldset.hidden = !fieldset.dataset.forKinds.split(" ").includes(kind);
  }
}
document.addEventListener("change", (event) => {
  const form = event.target.closest("form[data-judge-start]");
  if (form && event.target.name === "kind") showFieldsetsFor(form);
});
document.addEventListener("DOMContentLoaded", () => {
  for (const form of document.querySelectorAll("form[data-judge-start]")) showFieldsetsFor(form);
});
