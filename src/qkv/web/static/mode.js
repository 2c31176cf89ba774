// Which of the page's two modes is shown: the toy scenes (app.js) or a real model (model.js),
// kept in body's data-mode. The URL's ?mode= is read here, once, when the first module script
// loads: the scenes' module may answer and rewrite the URL with its own state before the model
// mode's module (a larger graph of imports) has even arrived.

export const opened = new URLSearchParams(location.search).get("mode") === "model" ? "model" : "scenes";
document.body.dataset.mode = opened;

export const shown = () => document.body.dataset.mode || "scenes";

// A module that only model.js's graph holds failing to arrive fires "error" on model.js's script
// element (after this module has run: module scripts run in document order). In model mode,
// say so where the page's errors go rather than leave the page blank (the scenes run without
// model.js, and clear that line once they have painted).
document.querySelector('script[src$="/static/model.js"]')?.addEventListener("error", () => {
  if (shown() !== "model") return;
  const box = document.getElementById("error");
  box.textContent =
    "The real-model view could not load (/static/model.js or one of its imports did not " +
    "arrive): reload the page, or check the server's log.";
  box.hidden = false;
});
