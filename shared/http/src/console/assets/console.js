// The console's one script: copy buttons, a question before a form that cannot be undone
// (`data-confirm`) is sent, and one send for each press of a form's button. It never sees a
// sign-in token (the console keeps none in the page) and reaches nothing but the clipboard.
"use strict";
document.addEventListener("submit", (event) => {
  const form = event.target;
  // Sent once, a form stays sent until its answer replaces the page: pressed again while a slow
  // answer (a cold start) is on its way, it sends nothing, so one token or link is made, not an
  // unseen second one. Its button says so.
  if (form.dataset.sent) {
    event.preventDefault();
    return;
  }
  const question = form.dataset.confirm;
  if (question && !window.confirm(question)) {
    event.preventDefault();
    return;
  }
  if (form.method !== "post") return;
  form.dataset.sent = "yes";
  const button = event.submitter;
  if (button) {
    button.dataset.label = button.textContent;
    button.textContent = "Sending\u2026";
  }
});
// A page shown again from the history is as it was before its form was sent.
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const form of document.forms) delete form.dataset.sent;
  for (const button of document.querySelectorAll("button[data-label]")) {
    button.textContent = button.dataset.label;
    delete button.dataset.label;
  }
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
