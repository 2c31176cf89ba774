// An exported file's stand-in for the notebook's model (anywidget's get/set/on/save_changes):
// every payload was computed by qkv's engine before the file was written; a change looks the
// new one up. Choices the file holds no numbers for are refused with a message, never guessed.
function qkvOfflineModel(data) {
  const state = { ...data.start };  // select, temperature, head, layer
  const pending = {};
  const handlers = {};
  let error = "";
  const fire = (event) => (handlers[event] || []).forEach((cb) => cb());
  const payloadOf = (s) => {
    const row = data.rows[[data.info.tau.values.indexOf(s.temperature), s.layer, s.head,
                           s.select].join("|")];
    if (!row) return null;
    return { scene: data.scene, settings: row.settings, trace: data.traces[row.trace],
             selected: row.selected, walkthrough: row.walkthrough.map((k) => data.sections[k]) };
  };
  let payload = payloadOf(state);
  return {
    get: (name) => (name === "payload" ? payload : name === "info" ? data.info
      : name === "error" ? error : state[name]),
    set: (name, value) => { pending[name] = value; },
    save_changes() {
      const next = { ...state, ...pending };
      for (const k of Object.keys(pending)) delete pending[k];
      const found = payloadOf(next);
      if (found) {
        Object.assign(state, next);
        payload = found;
        error = "";
        fire("change:payload");
      } else {
        error = `this file holds no numbers for τ = ${next.temperature}, layer ${next.layer}, ` +
          `head ${next.head}, token ${next.select}: export it with that choice included`;
      }
      fire("change:error");
    },
    on: (event, cb) => { (handlers[event] ||= []).push(cb); },
    off: (event, cb) => { handlers[event] = (handlers[event] || []).filter((f) => f !== cb); },
  };
}

// The file's numbers: JSON, gzip-compressed, base64 (decompressed by the browser itself).
async function qkvData() {
  const text = document.getElementById("qkv-data").textContent.trim();
  const bytes = Uint8Array.from(atob(text), (c) => c.charCodeAt(0));
  const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
  return JSON.parse(await new Response(stream).text());
}

qkvData().then((data) => {
  const model = data.info.kind === "why"  // a "why this token" panel: nothing to look up
    ? { get: (name) => (name === "info" ? data.info : null), on() {}, off() {} }
    : qkvOfflineModel(data);
  qkvWidget.render({ model, el: document.getElementById("qkv") });
}).catch((e) => {
  document.getElementById("qkv").textContent = `cannot read this file's numbers: ${e.message}`;
});
