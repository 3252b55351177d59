// The console's one script: copy buttons, and a question before a form that cannot be undone
// (`data-confirm`) is sent. It never sees a sign-in token (the console keeps none in the page)
// and reaches nothing but the clipboard.
"use strict";
document.addEventListener("submit", (event) => {
  const question = event.target.dataset && event.target.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
document.addEventListener("click", (event) => {
  const button = event.target.closest("button[data-copy]");
  if (!button) return;
  const source = document.getElementById(button.dataset.copy);
  if (!source || !navigator.clipboard) return;
  navigator.clipboard.writeText(source.textContent.trim()).then(
    () => { button.textContent = "Copied"; },
    () => { button.textContent = "Select and copy"; },
  );
});
