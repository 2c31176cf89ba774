// The zooming heatmap's data source (web/static/zoomdata.js names the interface) in a notebook:
// each request is a custom message to the kernel (channel.js, requests.py), answered with a
// views.zoom payload: a JSON header and one binary buffer. params: {layer, head, temperature}.
import { fromBuffers } from "../web/static/zoomdata.js";

export function kernelSource(ask, params) {
  const get = (what, extra = {}) => ask(what, { ...params, ...extra })
    .then(({ header, buffers }) => fromBuffers(header, buffers[0]));
  return {
    params,
    overview: () => get("overview"),
    window: (r0, r1, c0, c1) => get("window", { r0, r1, c0, c1 }),
    row: (q) => get("row", { q }),
    search: (text) => ask("search", { ...params, text }).then(({ header }) => header),
  };
}
