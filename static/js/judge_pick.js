// Judges page: choosing "judge · dimension" fills the two hidden fields and reloads the page.
// A file of its own, not an onchange attribute: the Content-Security-Policy allows no inline script.
document.addEventListener("change", (event) => {
  const select = event.target.closest("select[data-judge-pick]");
  if (!select) return;
  const [judge, dimension] = select.value.split("|");
  select.form.elements.judge.value = judge;
  select.form.elements.dim.value = dimension;
  select.form.submit();
});
