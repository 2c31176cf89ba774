// The zooming heatmap's input (zoom.js): wheel zooms around the pointer, a drag pans, a click
// selects the query under it; keys: arrows pan, + and − zoom, 0 shows everything; a rectangle
// dragged on the small overview (a click centres the view there) zooms to that region.

const clamp01 = (t) => Math.max(0, Math.min(1, t));

// main, brush: the canvases; reset: the "show all" button; api: zoomView's controller;
// box: {ML, MT, W, H, BRUSH}, the main canvas's margins and plot size, the brush's size.
export function listen({ main, brush, reset, api, box }) {
  const { ML, MT, W, H, BRUSH } = box;

  const at = (e) => {
    const r = main.getBoundingClientRect();
    return [(e.clientY - r.top - MT) / H, (e.clientX - r.left - ML) / W];
  };
  main.addEventListener("wheel", (e) => {
    if (!api.state.ov) return;
    e.preventDefault();
    const [fy, fx] = at(e);
    api.zoomBy(Math.exp(e.deltaY * 0.0015), clamp01(fy), clamp01(fx));
  }, { passive: false });
  let drag = null;
  main.addEventListener("pointerdown", (e) => {
    if (!api.state.ov) return;
    main.setPointerCapture(e.pointerId);
    drag = { x: e.clientX, y: e.clientY, view: api.state.view.slice(), moved: false };
  });
  main.addEventListener("pointermove", (e) => {
    if (!drag) return;
    const dx = e.clientX - drag.x, dy = e.clientY - drag.y;
    if (Math.abs(dx) + Math.abs(dy) > 3) drag.moved = true;
    if (!drag.moved) return;
    const [r0, r1, c0, c1] = drag.view;
    const dr = (-dy / H) * (r1 - r0), dc = (-dx / W) * (c1 - c0);
    api.show(r0 + dr, r1 + dr, c0 + dc, c1 + dc);
  });
  main.addEventListener("pointerup", (e) => {
    const was = drag;
    drag = null;
    if (!was || was.moved) return;
    const [fy, fx] = at(e);
    if (fy < 0 || fy > 1 || fx < 0 || fx > 1) return;
    const [r0, r1] = api.state.view;
    api.select(Math.min(api.state.ov.header.L - 1, Math.floor(r0 + fy * (r1 - r0))), true);
  });
  main.addEventListener("keydown", (e) => {
    if (!api.state.ov) return;
    const [r0, r1, c0, c1] = api.state.view;
    const dr = Math.max(1, (r1 - r0) / 10), dc = Math.max(1, (c1 - c0) / 10);
    const act = {
      ArrowUp: () => api.panBy(-dr, 0), ArrowDown: () => api.panBy(dr, 0),
      ArrowLeft: () => api.panBy(0, -dc), ArrowRight: () => api.panBy(0, dc),
      "+": () => api.zoomBy(0.5), "=": () => api.zoomBy(0.5), "-": () => api.zoomBy(2),
      0: () => api.show(0, api.state.ov.header.L, 0, api.state.ov.header.S),
    }[e.key];
    if (!act) return;
    e.preventDefault();
    act();
  });
  reset.addEventListener("click", () => api.state.ov && api.show(0, api.state.ov.header.L, 0, api.state.ov.header.S));
  let brushing = null;
  const onBrush = (e) => {
    const r = brush.getBoundingClientRect();
    const { L, S } = api.state.ov.header;
    return [clamp01((e.clientY - r.top) / BRUSH) * L, clamp01((e.clientX - r.left) / BRUSH) * S];
  };
  brush.addEventListener("pointerdown", (e) => {
    if (!api.state.ov) return;
    brush.setPointerCapture(e.pointerId);
    brushing = onBrush(e);
  });
  brush.addEventListener("pointermove", (e) => {
    if (!brushing) return;
    const [r, c] = onBrush(e);
    api.drawBrush([Math.min(r, brushing[0]), Math.max(r, brushing[0]),
               Math.min(c, brushing[1]), Math.max(c, brushing[1])]);
  });
  brush.addEventListener("pointerup", (e) => {
    if (!brushing) return;
    const [r, c] = onBrush(e);
    const [r0, c0] = brushing;
    brushing = null;
    const [vr0, vr1, vc0, vc1] = api.state.view;
    if (Math.abs(r - r0) < 2 && Math.abs(c - c0) < 2) {  // a click: centre the view there
      api.show(r - (vr1 - vr0) / 2, r + (vr1 - vr0) / 2, c - (vc1 - vc0) / 2, c + (vc1 - vc0) / 2);
    } else api.show(Math.min(r, r0), Math.max(r, r0), Math.min(c, c0), Math.max(c, c0));
  });

}
