// The view as a still picture (the PNG the kernel drew: views/picture.py) and the check that a
// kernel answers. A notebook saved with its widgets opens without one: then the view says so
// and shows the picture of what it showed last, instead of controls that do nothing.
import { h } from "../web/static/dom.js";

export const KERNEL_WAIT_MS = 3000;  // no answer by then: the notice shows (it goes on answer)
const GONE = "No kernel answers this view: the notebook was saved with it and the kernel " +
  "that computed it has stopped or restarted. The picture is the view as it was last drawn; " +
  "run the cell again to change it.";

// A figure with the kernel notice and the picture (hidden until watchStill decides).
export function stillFigure() {
  return h("figure", { class: "still", id: "still", hidden: true },
    h("p", { id: "kernel-gone", class: "notice", role: "status", hidden: true }, GONE),
    h("img", { id: "picture", alt: "the weights of the selected head (darker = more " +
      "weight) and, below them, the selected query's row" }));
}

// Keeps the figure's image equal to model.get("picture"); asks the kernel whether it answers.
// The figure shows when `always`, or when no answer came within KERNEL_WAIT_MS (with the notice).
export function watchStill(figure, model, ask, { always = false } = {}) {
  const img = figure.querySelector("#picture");
  const notice = figure.querySelector("#kernel-gone");
  let url = null, answered = false, late = false;
  const show = () => {
    const gone = late && !answered;
    notice.hidden = !gone;
    figure.hidden = !url || !(always || gone);
    figure.dataset.kernel = answered ? "answers" : gone ? "gone" : "asked";
  };
  const paint = () => {
    const bytes = model.get("picture");
    if (url) URL.revokeObjectURL(url);
    url = bytes && bytes.byteLength
      ? URL.createObjectURL(new Blob([bytes], { type: "image/png" })) : null;
    if (url) img.src = url; else img.removeAttribute("src");
    show();
  };
  paint();
  const timer = setTimeout(() => { late = true; show(); }, KERNEL_WAIT_MS);
  ask("hello").then(() => { answered = true; show(); }, () => {});
  model.on("change:picture", paint);
  return () => {
    clearTimeout(timer);
    model.off("change:picture", paint);
    if (url) URL.revokeObjectURL(url);
  };
}
