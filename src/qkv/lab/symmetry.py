"""Why three matrices: tied W_Q = W_K forces symmetric, PSD scoring; tied W_K = W_V ties what a
head returns to what it matches."""

from __future__ import annotations

from typing import Any

import numpy as np

from qkv import attention
from qkv.explain import scenes
from qkv.lab.result import Result

CLAIM = (
    "with W_Q = W_K the scores are symmetric and the bilinear form W_Q·W_Kᵀ is positive "
    "semi-definite; separate matrices lift both limits"
)


def psd_eigenvalues(M):
    """Eigenvalues of the symmetric part of M: x·M·x ≥ 0 for every x iff all are ≥ 0."""
    return np.linalg.eigvalsh((M + M.T) / 2)


def run(*, seed: int = 0, T: int = 7, d_model: int = 9, d_k: int = 5) -> Result:
    rng = np.random.default_rng(seed)
    X = rng.standard_normal((T, d_model))
    W = rng.standard_normal((d_model, d_k))
    W_Q, W_K = rng.standard_normal((d_model, d_k)), rng.standard_normal((d_model, d_k))
    tied, separate = X @ W @ (X @ W).T, (X @ W_Q) @ (X @ W_K).T  # (T, T) scores
    eig_tied, eig_sep = psd_eigenvalues(W @ W.T), psd_eigenvalues(W_Q @ W_K.T)
    rows: list[list[Any]] = [  # Result's rows
        [
            "W_Q = W_K",
            float(np.abs(tied - tied.T).max()),
            float(eig_tied.min()),
            float(np.diag(tied).min()),
        ],
        [
            "separate",
            float(np.abs(separate - separate.T).max()),
            float(eig_sep.min()),
            float(np.diag(separate).min()),
        ],
    ]
    columns = [
        "weights",
        "max |S − Sᵀ|",
        "min eigenvalue of W_Q·W_Kᵀ (sym. part)",
        "min self-score x·M·x",
    ]

    # W_K = W_V on the agreement scene: the blank can only get back key-space features.
    scene = scenes.load("agreement")
    i = scene.select
    he = scene.tokens.index("he")
    x = scene.x
    q, k = x @ scene.W_Q, x @ scene.W_K
    z_sep = attention(q, k, x @ scene.W_V)[i]
    z_tied = attention(q, k, k)[i]  # V := K
    weights = attention(q, k, np.eye(len(x)))[i]  # rows of I: the weights themselves
    tied_is_key_mix = np.allclose(z_tied, weights @ k)
    extra = {
        "agreement": {
            "z_separate": z_sep.tolist(),
            "z_tied_WK_WV": z_tied.tolist(),
            "k_he": k[he].tolist(),
            "v_he": (x @ scene.W_V)[he].tolist(),
            "tied_output_is_mix_of_keys": bool(tied_is_key_mix),
        }
    }
    supported = (
        rows[0][1] < 1e-9
        and rows[0][2] >= -1e-9
        and rows[1][1] > 1e-3
        and rows[1][2] < 0
        and tied_is_key_mix
    )
    evidence = (
        f"tied: asymmetry {rows[0][1]:.1e}, min eigenvalue {rows[0][2]:.2e}; separate: "
        f"asymmetry {rows[1][1]:.2f}, min eigenvalue {rows[1][2]:.2f}; with W_K = W_V "
        f"the blank in 'he ___' gets back {np.round(z_tied, 2).tolist()} (a mix of keys) "
        f"instead of the '-s' value {np.round(z_sep, 2).tolist()}"
    )

    def plot(fig):
        axes = fig.subplots(1, 2)
        lim = max(np.abs(tied).max(), np.abs(separate).max())
        for ax, S, title in zip(
            axes, (tied, separate), ("W_Q = W_K", "separate W_Q, W_K"), strict=False
        ):
            im = ax.imshow(S, cmap="RdBu_r", vmin=-lim, vmax=lim)
            ax.set_title(f"scores, {title}")
            ax.set_xlabel("key j")
            ax.set_ylabel("query i")
        fig.colorbar(im, ax=list(axes), shrink=0.8)

    return Result("symmetry", CLAIM, columns, rows, bool(supported), evidence, extra, plot)
