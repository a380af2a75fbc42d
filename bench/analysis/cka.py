"""Linear CKA between two encoders, layer by layer (paper §5.1).

CKA(X, Y) = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F) with column-centred features, computed in
float64 (float32 loses the small divergences between related checkpoints). Divergence = 1 - CKA. The
seed-noise ratio r_l = div(A, B) / div(N, B) compares A (e.g. the CLM-detour model) against a reference
B (MLM seed 1) with the divergence between two seeds of the reference (N = MLM seed 2 vs B = MLM seed 1):
r_l > 1 means A differs from B by more than seed noise does at layer l.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from biobench.errors import ConfigError


def linear_cka(x: np.ndarray, y: np.ndarray) -> float:
    """Linear CKA of two feature matrices with the same rows (examples), in float64."""
    x = np.asarray(x, dtype=np.float64)
    y = np.asarray(y, dtype=np.float64)
    if x.ndim != 2 or y.ndim != 2 or x.shape[0] != y.shape[0]:
        raise ValueError(f"CKA needs two 2-D arrays with the same number of rows, got {x.shape} and {y.shape}")
    x = x - x.mean(axis=0, keepdims=True)
    y = y - y.mean(axis=0, keepdims=True)
    cross = np.linalg.norm(y.T @ x, "fro") ** 2
    norm = np.linalg.norm(x.T @ x, "fro") * np.linalg.norm(y.T @ y, "fro")
    return float(cross / norm) if norm > 0 else 0.0


def layer_pairs(n_a: int, n_b: int, align_relative: bool = False) -> list[tuple[int, int]]:
    """Which hidden state of A is compared with which of B (index 0 = embeddings). Equal depth: one to
    one. Different depth: an error unless `align_relative`, which pairs each layer of the shallower model
    with the layer of the deeper one at the nearest relative depth."""
    if n_a == n_b:
        return [(i, i) for i in range(n_a)]
    if not align_relative:
        raise ConfigError(
            f"models have different depths ({n_a - 1} and {n_b - 1} layers); CKA compares layer l with "
            "layer l — pass --align-relative to pair layers by relative depth instead"
        )
    if n_a <= n_b:
        return [(i, round(i * (n_b - 1) / (n_a - 1))) for i in range(n_a)]
    return [(round(j * (n_a - 1) / (n_b - 1)), j) for j in range(n_b)]


def sample_indices(n_texts: int, n: int, seeds: Sequence[int]) -> dict[int, np.ndarray]:
    """Per sample seed, n distinct text indices (all texts, in order, when there are at most n)."""
    if n_texts == 0:
        raise ConfigError("no texts to compute CKA on")
    if n_texts <= n:
        return {s: np.arange(n_texts) for s in seeds}
    return {s: np.sort(np.random.default_rng(s).choice(n_texts, size=n, replace=False)) for s in seeds}


def divergences(
    feats_a: list[np.ndarray], feats_b: list[np.ndarray], pairs: list[tuple[int, int]], rows: np.ndarray
) -> list[float]:
    """1 - CKA per layer pair on the selected rows."""
    return [1.0 - linear_cka(feats_a[i][rows], feats_b[j][rows]) for i, j in pairs]


def cka_report(
    feats: dict[str, list[np.ndarray]],
    a: str,
    b: str,
    noise: str | None,
    samples: dict[int, np.ndarray],
    align_relative: bool = False,
) -> dict[str, Any]:
    """The cka.json payload from cached per-layer features of models a, b (and the noise replicate of b).

    Divergences are averaged over sample seeds; the ratio is mean div(a, b) / mean div(noise, b)."""
    pairs = layer_pairs(len(feats[a]), len(feats[b]), align_relative)
    if noise is not None and len(feats[noise]) != len(feats[b]):
        raise ConfigError(
            f"the noise model has {len(feats[noise]) - 1} layers but the reference model has "
            f"{len(feats[b]) - 1}; the noise model must be another seed of the reference (same architecture)"
        )
    per_seed = {s: divergences(feats[a], feats[b], pairs, rows) for s, rows in samples.items()}
    noise_seed = (
        {s: divergences(feats[noise], feats[b], [(j, j) for _, j in pairs], rows) for s, rows in samples.items()}
        if noise
        else None
    )
    layers = []
    for k, (i, j) in enumerate(pairs):
        div = np.array([per_seed[s][k] for s in samples])
        row: dict[str, Any] = {
            "layer": j, "layer_a": i, "layer_b": j,
            "cka": float(1.0 - div.mean()), "divergence": float(div.mean()),
            "divergence_std": float(div.std(ddof=1)) if len(div) > 1 else 0.0,
            "ratio": None, "noise_divergence": None,
        }
        if noise_seed is not None:
            nd = float(np.mean([noise_seed[s][k] for s in samples]))
            row["noise_divergence"] = nd
            row["ratio"] = float(row["divergence"] / nd) if nd > 0 else None
        layers.append(row)
    return {
        "schema": "biobench.cka/1",
        "ratio_definition": "div(A, B) / div(noise, B): A vs reference B, over seed noise of B",
        "layers": layers,
        "mean_divergence": float(np.mean([r["divergence"] for r in layers])),
        "per_seed": {str(s): v for s, v in per_seed.items()},
        "noise_per_seed": {str(s): v for s, v in noise_seed.items()} if noise_seed else None,
    }
