"""The float64 weights of one head of a model's layer trace, from its q and k: what the zoom
views' tests check the page's numbers against; and the grid's thumbnails asked for over HTTP."""

from __future__ import annotations

import time

import numpy as np


def reference_weights(layer, head: int, rows: slice, *, tau: float = 1.0) -> np.ndarray:
    """Rows of one head's weights in float64 from the layer trace's q and k (after RoPE):
    softmax(q·kᵀ/√d_k/τ) with later keys masked when the layer is causal."""
    s = layer.settings
    g = head * s["n_kv_heads"] // s["n_heads"]  # the query head's K/V head
    q = np.asarray(layer["q"][head][rows], dtype=np.float64)  # (rows, d_k)
    k = np.asarray(layer["k"][g], dtype=np.float64)  # (S, d_k)
    scores = q @ k.T * s["scale"] / tau  # (rows, S)
    if s["causal"]:
        pos = np.arange(s["L"])[rows][:, None]
        scores = np.where(np.arange(s["S"])[None, :] <= pos, scores, -np.inf)
    e = np.exp(scores - scores.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def pool_thumbnails(client, run: str) -> list[dict]:
    """Ask for the run's thumbnails until they are pooled; the answers' JSON."""
    seen = [client.post("/api/model/thumbnails", json={"run": run})]
    while seen[-1].json()["state"] == "pooling":
        assert seen[-1].status_code == 202, seen[-1].text
        time.sleep(0.1)
        seen.append(client.post("/api/model/thumbnails", json={"run": run}))
    assert seen[-1].status_code == 200 and seen[-1].json()["state"] == "done", seen[-1].text
    return [r.json() for r in seen]
