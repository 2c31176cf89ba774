// Requests to the kernel through anywidget's custom messages: each carries an id, and the
// kernel's answer with that id (a JSON header and binary buffers) settles its promise.
export function channel(model) {
  let last = 0;
  const waiting = new Map();
  const onMessage = (content, buffers) => {
    const found = content && waiting.get(content.id);
    if (!found) return;
    waiting.delete(content.id);
    if (content.error) found.reject(new Error(content.error));
    else found.resolve({ header: content, buffers: buffers || [] });
  };
  model.on("msg:custom", onMessage);
  return {
    // ask("hello") -> Promise<{header, buffers}>; rejected with the kernel's error message
    ask(kind, args = {}) {
      const id = ++last;
      return new Promise((resolve, reject) => {
        waiting.set(id, { resolve, reject });
        try {
          model.send({ id, ask: kind, ...args });
        } catch (e) {
          waiting.delete(id);
          reject(e);
        }
      });
    },
    close() { model.off("msg:custom", onMessage); waiting.clear(); },
  };
}
