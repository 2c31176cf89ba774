// Every request the page makes to the API, with one error shape: a refused request throws an
// ApiError whose message is the server's one-line {"message": ...} (or the HTTP status).
// The render modules never fetch: they take the answers these functions return.

export class ApiError extends Error {
  constructor(message, status) {
    super(message);
    this.name = "ApiError";
    this.status = status;  // 0 when the server could not be reached
  }
}

// api("/api/trace", body) -> the JSON answer; a body makes it a POST of that JSON.
export async function api(path, body) {
  const options = body === undefined ? {} : {
    method: "POST", headers: { "content-type": "application/json" }, body: JSON.stringify(body) };
  let res;
  try {
    res = await fetch(path, options);
  } catch (e) {
    throw new ApiError(`cannot reach the server (${e.message})`, 0);
  }
  let data = null;
  try {
    data = await res.json();
  } catch {
    if (res.ok) throw new ApiError(`${path} did not answer JSON`, res.status);
  }
  if (!res.ok) throw new ApiError((data && data.message) || `${res.status} ${res.statusText}`,
                                  res.status);
  return data;
}

let limitsOnce = null;

// GET /api/limits, asked once per page: the API's bounds and the trace's step names
// {steps, max_abs, max_scene_tokens, max_dims, max_heads, max_token_chars, tau_min, tau_max,
//  model_page_tokens, model_max_chars, max_answer_chars}.
export function limits() {
  limitsOnce ??= api("/api/limits");
  return limitsOnce;
}
