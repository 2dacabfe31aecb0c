// Select-all and the Replay button's state; the confirmation is a server page.
document.addEventListener("DOMContentLoaded", () => {
  // The error page's Back: the page before it, where there is one (no inline script).
  document.querySelectorAll("a[data-back]").forEach((link) => {
    link.addEventListener("click", (event) => {
      if (window.history.length > 1) { event.preventDefault(); window.history.back(); }
    });
  });
  const form = document.getElementById("replay-form");
  if (!form) return;
  const all = document.getElementById("select-all");
  const button = document.getElementById("replay-selected");
  const rows = () => Array.from(form.querySelectorAll("input.row-select"));
  const refresh = () => {
    const ticked = rows().filter((box) => box.checked).length;
    if (button && rows().length) {
      button.disabled = ticked === 0;
      button.textContent = ticked ? `Replay selected (${ticked})` : "Replay selected";
    }
    if (all) all.checked = ticked > 0 && ticked === rows().length;
  };
  if (all) all.addEventListener("change", () => {
    rows().forEach((box) => { box.checked = all.checked; });
    refresh();
  });
  rows().forEach((box) => box.addEventListener("change", refresh));
  refresh();
});

// A replay run's page: ask the UI for the run's state every few seconds, and show the
// page again when it changes (the server says what the new state means).
document.addEventListener("DOMContentLoaded", () => {
  const run = document.querySelector("[data-poll]");
  if (!run) return;
  const shown = run.dataset.state;
  const ask = () => {
    fetch(run.dataset.poll, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((response) => (response.ok ? response.json() : null))
      .then((status) => {
        if (status && status.state !== shown) {
          window.location.replace(run.dataset.page);
        } else {
          window.setTimeout(ask, 3000);
        }
      })
      .catch(() => window.setTimeout(ask, 10000));
  };
  window.setTimeout(ask, 3000);
});
