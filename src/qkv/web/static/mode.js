// Which of the page's two modes is shown: the toy scenes (app.js) or a real model (model.js),
// kept in body's data-mode. The URL's ?mode= is read here, once, when the first module script
// loads: the scenes' module may answer and rewrite the URL with its own state before the model
// mode's module (a larger graph of imports) has even arrived.

export const opened = new URLSearchParams(location.search).get("mode") === "model" ? "model" : "scenes";
document.body.dataset.mode = opened;

export const shown = () => document.body.dataset.mode || "scenes";

// model.js, or one of its imports, failing to arrive fires "error" on its script element (after
// this module has run: module scripts run in document order): say so where the page's errors go
// rather than leave the model mode blank
document.querySelector('script[src$="/static/model.js"]')?.addEventListener("error", () => {
  const box = document.getElementById("error");
  box.textContent =
    "The real-model view could not load (/static/model.js or one of its imports did not " +
    "arrive): reload the page, or check the server's log.";
  box.hidden = false;
});
