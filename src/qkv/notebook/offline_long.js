// A long text's file (notebook/export_long.py): the stand-in for the kernel. The widget's view
// asks it what it would ask a kernel (channel.js, requests.py: hello, overview, row, search,
// window) and it answers from the arrays the file holds: each head's max-pooled overview and
// each query's heaviest keys. What the file leaves out is refused in words, never guessed.
const qkvZoomData = Object.entries(__mods).find(([k]) => k.endsWith("web/static/zoomdata.js"))[1];
const ROW_WIDTH = 1024;  // views.zoom.ROW_WIDTH: the row strip's most bars
const THUMBS = 32;  // notebook/requests.py's THUMBS: cells a side of a thumbnail

function qkvOfflineLong(data, bytes) {
  const info = data.info, tokens = info.tokens, K = data.long.top;
  const state = { ...data.start };  // select, temperature, head, layer
  const pending = {}, handlers = {}, decoded = new Map();
  const fire = (event, ...args) => (handlers[event] || []).forEach((cb) => cb(...args));
  const slice = (ref) => bytes.slice(ref.at, ref.at + ref.n);  // an ArrayBuffer of its own
  const headOf = (s) => data.long.heads[`${s.layer}|${s.head}`];
  function topsOf(s) {  // {keys: Uint16Array (L·K), weights: Float32Array (L·K)} of one head
    const key = `${s.layer}|${s.head}`;
    if (!decoded.has(key)) {
      const hd = headOf(s);
      const planes = new Uint8Array(slice(hd.weights)), n = planes.length / 2;  // lo, hi bytes
      decoded.set(key, { keys: new Uint16Array(slice(hd.keys)),
                         weights: Float32Array.from({ length: n }, (_, i) => half(planes[i] | (planes[n + i] << 8))) });
    }
    return decoded.get(key);
  }
  const top = (s, q) => {
    const t = topsOf(s);
    return Array.from({ length: K }, (_, r) => ({ index: t.keys[q * K + r],
      token: tokens[t.keys[q * K + r]], weight: t.weights[q * K + r] }));
  };
  const payloadOf = (s) => ({ settings: { ...s }, selected: { index: s.select,
    token: tokens[s.select], head: s.head,
    top_keys: top(s, s.select).map((k) => ({ position: k.index, token: k.token, weight: k.weight })) } });
  let payload = payloadOf(state);

  function answer(content) {
    const s = { ...state, layer: content.layer ?? state.layer, head: content.head ?? state.head };
    const hd = headOf(s);
    if (content.ask === "hello") return [{ file: true }, []];
    if (content.ask === "search") return [qkvZoomData.searchTokens(tokens, content.text), []];
    if (content.ask === "thumbnails") return thumbnails(content.size ?? THUMBS);
    if (!hd) throw new Error(`this file holds no numbers for layer ${s.layer}, head ${s.head}`);
    if (content.ask === "overview") return [hd.overview.header, [slice(hd.overview.data)]];
    if (content.ask === "row") {
      const q = content.q, S = hd.overview.header.S, f = Math.max(1, Math.ceil(S / ROW_WIDTH));
      const strip = new Float32Array(Math.ceil(S / f));
      const keys = top(s, q);
      for (const k of keys) strip[Math.floor(k.index / f)] = Math.max(strip[Math.floor(k.index / f)], k.weight);
      return [{ view: "row", L: tokens.length, S, head: s.head, q, token: tokens[q], factor: f,
                encoding: "float32", top: keys, entropy: null, sum: null, shape: [strip.length],
                dtype: "float32", legend: `this file holds each query's ${K} heaviest keys only` },
              [strip.buffer]];
    }
    throw new Error(`this file holds each head max-pooled and each query's ${K} heaviest keys, ` +
      "not the exact weights of a zoomed-in region: qkv.show or qkv serve computes them");
  }

  // Every head's overview max-pooled again to at most size × size: the grid's thumbnails (the
  // bytes are √-shades, so the largest byte is the largest weight).
  function thumbnails(size) {
    const layers = info.layers ?? [0], H = info.n_heads ?? 1;
    const [R, C] = data.long.heads[`${layers[0]}|0`].overview.header.shape;
    const g = Math.max(1, Math.ceil(Math.max(R, C) / size)), r = Math.ceil(R / g), c = Math.ceil(C / g);
    const out = new Uint8Array(layers.length * H * r * c);
    layers.forEach((layer, li) => {
      for (let hh = 0; hh < H; hh++) {
        const ov = new Uint8Array(slice(headOf({ layer, head: hh }).overview.data));
        const at = (li * H + hh) * r * c;
        for (let i = 0; i < R; i++) {
          for (let j = 0; j < C; j++) {
            const k = at + Math.floor(i / g) * c + Math.floor(j / g);
            if (ov[i * C + j] > out[k]) out[k] = ov[i * C + j];
          }
        }
      }
    });
    return [{ view: "thumbnails", layers, shape: [layers.length, H, r, c], dtype: "uint8",
              encoding: "uint8 sqrt" }, [out.buffer]];
  }

  return {
    get: (name) => (name === "payload" ? payload : name === "info" ? info
      : name === "error" ? "" : name === "picture" ? null : state[name]),
    set: (name, value) => { pending[name] = value; },
    save_changes() {
      Object.assign(state, pending);
      for (const k of Object.keys(pending)) delete pending[k];
      payload = payloadOf(state);
      fire("change:payload");
    },
    send(content) {
      setTimeout(() => {
        try {
          const [header, buffers] = answer(content);
          fire("msg:custom", { ...header, id: content.id, ask: content.ask },
               buffers.map((b) => new DataView(b)));
        } catch (e) {
          fire("msg:custom", { id: content.id, ask: content.ask, error: e.message }, []);
        }
      }, 0);
    },
    on: (event, cb) => { (handlers[event] ||= []).push(cb); },
    off: (event, cb) => { handlers[event] = (handlers[event] || []).filter((f) => f !== cb); },
  };
}

// IEEE 754 half precision (the file's weights) -> a number.
function half(h) {
  const sign = h >> 15 ? -1 : 1, e = (h >> 10) & 31, f = h & 1023;
  if (e === 0) return sign * f * 2 ** -24;
  if (e === 31) return f ? NaN : sign * Infinity;
  return sign * (1 + f / 1024) * 2 ** (e - 15);
}
