// Which of the page's two modes is shown: the toy scenes (app.js) or a real model (model.js),
// kept in body's data-mode. The URL's ?mode= is read here, once, when the first module script
// loads: the scenes' module may answer and rewrite the URL with its own state before the model
// mode's module (a larger graph of imports) has even arrived.

export const opened = new URLSearchParams(location.search).get("mode") === "model" ? "model" : "scenes";
document.body.dataset.mode = opened;

export const shown = () => document.body.dataset.mode || "scenes";
