"""Linear CKA between two encoders, layer by layer (paper §5.1).

CKA(X, Y) = ||Yc^T Xc||_F^2 / (||Xc^T Xc||_F ||Yc^T Yc||_F) with column-centred features, computed in
float64 (float32 loses the small divergences between related checkpoints). Divergence = 1 - CKA. The
seed-noise ratio r_l = div(A, B) / div(N, B) compares A (e.g. the CLM-detour model) against a reference
B (MLM seed 1) with the divergence between two seeds of the reference (N = MLM seed 2 vs B = MLM seed 1):
r_l > 1 means A differs from B by more than seed noise does at layer l.

Layer numbering (the same as `--freeze` and `analyze transplant`): the embedding output is reported on its
own ("embeddings"), transformer layers are numbered 0..L-1 (layer l = the output of transformer block l;
for models whose last hidden state is taken after a final norm, as transformers' decoders do, layer L-1 is
that normed state). Averages over layers cover the transformer layers only unless `include_embeddings`.

Table-4 summary: for each sample seed, the mean divergence over layers; the reported figure is the mean of
those per-seed means with a Student-t 95% CI over the sample seeds (3 seeds: t with 2 degrees of freedom).
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
from biobench.errors import ConfigError
from biobench.stats import seed_summary
from biobench.tasks import needle
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec


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


def sample_mixed(source_sizes: Sequence[int], n: int, seeds: Sequence[int]) -> dict[int, np.ndarray]:
    """Per sample seed, n text indices into the concatenation of several sources, drawn in equal shares
    (n // k per source, the first n % k sources one more) so a large corpus does not crowd out a small one;
    a source with fewer texts than its share gives all of them. One source: `sample_indices`."""
    if not source_sizes or sum(source_sizes) == 0:
        raise ConfigError("no texts to compute CKA on")
    empty = [i for i, size in enumerate(source_sizes) if size == 0]
    if empty:
        raise ConfigError(f"text source #{empty[0] + 1} holds no text")
    k = len(source_sizes)
    if k == 1:
        return sample_indices(source_sizes[0], n, seeds)
    offsets = np.concatenate([[0], np.cumsum(source_sizes)[:-1]]).astype(int)
    out = {}
    for s in seeds:
        parts = []
        for i, size in enumerate(source_sizes):
            share = n // k + (1 if i < n % k else 0)
            rng = np.random.default_rng([s, i])  # one stream per (seed, source)
            rows = np.arange(size) if size <= share else rng.choice(size, size=share, replace=False)
            parts.append(offsets[i] + rows)
        out[s] = np.sort(np.concatenate(parts))
    return out


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
    include_embeddings: bool = False,
) -> dict[str, Any]:
    """The cka.json payload from cached per-layer features of models a, b (and the noise replicate of b).

    Per-layer divergences are averaged over sample seeds; the ratio is mean div(a, b) / mean div(noise, b).
    Feature lists are hidden states (index 0 = embeddings); the report renumbers them (module docstring)."""
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
    rows = []
    for k, (i, j) in enumerate(pairs):
        div = np.array([per_seed[s][k] for s in samples])
        row: dict[str, Any] = {
            "layer": j - 1, "layer_a": i - 1, "layer_b": j - 1,
            "cka": float(1.0 - div.mean()), "divergence": float(div.mean()),
            "divergence_std": float(div.std(ddof=1)) if len(div) > 1 else 0.0,
            "ratio": None, "noise_divergence": None,
        }
        if noise_seed is not None:
            nd = float(np.mean([noise_seed[s][k] for s in samples]))
            row["noise_divergence"] = nd
            row["ratio"] = float(row["divergence"] / nd) if nd > 0 else None
        rows.append(row)
    embeddings, layers = rows[0], rows[1:]
    embeddings["layer"] = embeddings["layer_a"] = embeddings["layer_b"] = "embeddings"
    first = 0 if include_embeddings else 1
    if len(pairs) <= first:
        raise ConfigError("the models have no transformer layer to average over")
    summary = table4_summary({s: v[first:] for s, v in per_seed.items()})
    summary["layers_averaged"] = ("embeddings + " if include_embeddings else "") + f"transformer layers 0-{len(layers) - 1}"
    if noise_seed is not None:
        noise_summary = table4_summary({s: v[first:] for s, v in noise_seed.items()})
        summary["noise"] = {k: noise_summary[k] for k in ("mean_divergence", "ci_low", "ci_high")}
    return {
        "schema": "biobench.cka/2",
        "layer_numbering": "embeddings separate; transformer layers 0..L-1 (as --freeze and transplant)",
        "ratio_definition": "div(A, B) / div(noise, B): A vs reference B, over seed noise of B",
        "embeddings": embeddings,
        "layers": layers,
        "mean_divergence": summary["mean_divergence"],
        "summary": summary,
        "per_seed": {str(s): v[1:] for s, v in per_seed.items()},
        "per_seed_embeddings": {str(s): v[0] for s, v in per_seed.items()},
        "noise_per_seed": {str(s): v[1:] for s, v in noise_seed.items()} if noise_seed else None,
    }


def table4_summary(per_seed: dict[int, list[float]], confidence: float = 0.95) -> dict[str, Any]:
    """Paper Table 4: per sample seed, the mean divergence over the given layers; then their mean and
    Student-t CI over the seeds (null bounds with a single seed)."""
    means = {str(s): float(np.mean(v)) for s, v in per_seed.items()}
    summ = seed_summary(list(means.values()), confidence)

    def finite(x: float) -> float | None:  # JSON has no NaN: an undefined interval is null
        return None if math.isnan(x) else float(x)

    return {"mean_divergence": summ.mean, "ci_low": finite(summ.ci_low), "ci_high": finite(summ.ci_high),
            "ci_half_width": finite(summ.half_width), "std_over_seeds": summ.std, "n_seeds": summ.n,
            "per_seed_mean": means, "confidence": confidence}


def table4_row(report: dict[str, Any]) -> str:
    """One Table-4 style line: mean divergence over layers (%) with its 95% CI half-width over seeds."""
    s = report["summary"]
    half = s["ci_half_width"]
    models = report.get("models", {})
    names = " vs ".join(str(m.get("id", "?")) for r, m in models.items() if r in ("a", "b")) or "A vs B"
    if half is None:
        return (f"{names}: mean divergence {100 * s['mean_divergence']:.1f} (no CI: one sample seed; "
                f"{s['layers_averaged']})")
    return (f"{names}: mean divergence {100 * s['mean_divergence']:.1f} ± {100 * half:.1f} "
            f"(95% CI [{100 * s['ci_low']:.1f}, {100 * s['ci_high']:.1f}], {s['n_seeds']} sample seeds, "
            f"{s['layers_averaged']})")


# --- the trajectory of a pretraining run (paper Figure 3a) ------------------------------------------------

_STEP = re.compile(r"step-(\d+)$")
PHASE_FOLDERS = ("phase1", "final")


def run_checkpoints(run: Path) -> list[dict[str, Any]]:
    """The checkpoints of a `biobench pretrain` run in training order: every step-<tokens>/ folder, then
    phase1/ and final/, each with the tokens seen (from biobench_pretrain.json when present)."""
    run = Path(run)
    if not run.is_dir():
        raise ConfigError(f"--run {run}: not a folder (expected a `biobench pretrain --out` folder)")
    found = []
    for folder in sorted(p for p in run.iterdir() if p.is_dir()):
        step = _STEP.fullmatch(folder.name)
        if not (step or folder.name in PHASE_FOLDERS) or not (folder / "config.json").is_file():
            continue
        meta = _read_meta(folder)
        tokens = meta.get("tokens", {}).get("seen") if meta else None
        tokens = int(tokens) if tokens is not None else int(step[1]) if step else None
        found.append({"checkpoint": folder.name, "path": str(folder), "tokens": tokens,
                      "phase": meta.get("phase") if meta else None})
    if not found:
        raise ConfigError(f"--run {run}: no step-*/, phase1/ or final/ checkpoint with a config.json; "
                          "train with `biobench pretrain --save-every N` to get step checkpoints")
    order = {"phase1": 1, "final": 2}
    return sorted(found, key=lambda c: (c["tokens"] if c["tokens"] is not None else float("inf"),
                                        order.get(c["checkpoint"], 0)))


def _read_meta(folder: Path) -> dict[str, Any] | None:
    path = folder / "biobench_pretrain.json"
    if not path.is_file():
        return None
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as err:
        raise ConfigError(f"{path}: unreadable checkpoint metadata ({err})") from None


def start_model(run: Path, checkpoints: list[dict[str, Any]], override: str | None) -> str:
    """The model the run started from: --start, else base_model in the checkpoints' metadata (a preset
    such as preset:tiny is built from a config and has no saved weights: then --start is required)."""
    if override:
        return override
    bases = {(_read_meta(Path(c["path"])) or {}).get("base_model") for c in checkpoints} - {None}
    if len(bases) != 1:
        raise ConfigError(f"--run {run}: cannot tell the start model from the checkpoints' metadata "
                          f"(found {sorted(map(str, bases)) or 'none'}); pass --start MODEL")
    base = str(bases.pop())
    if base.startswith("preset:"):
        raise ConfigError(f"--run {run} started from {base}, built from a config with no saved weights; "
                          "pass --start with a saved copy of the start model (or start the run from a folder)")
    return base


def trajectory_point(start_feats: list[np.ndarray], feats: list[np.ndarray], samples: dict[int, np.ndarray],
                     include_embeddings: bool = False) -> dict[str, Any]:
    """Divergence of one checkpoint from the start model: per layer (mean over sample seeds), the
    embeddings apart, and the Table-4 summary over layers."""
    report = cka_report({"start": start_feats, "ckpt": feats}, "ckpt", "start", None, samples,
                        include_embeddings=include_embeddings)
    s = report["summary"]
    return {"mean_divergence": s["mean_divergence"], "ci_low": s["ci_low"], "ci_high": s["ci_high"],
            "per_seed_mean": s["per_seed_mean"], "embeddings": report["embeddings"]["divergence"],
            "layers": [r["divergence"] for r in report["layers"]]}


# ------------------------------------------------------------------------------------------------ the texts
def read_text_source(value: str, data_dir: str | Path | None = None) -> tuple[list[str], str]:
    """(texts, where they come from) of one `--texts` value: a text file or folder (tasks.needle.read_texts), else
    a task id (every example of its train, dev and test splits, loaded from `data_dir`)."""
    if Path(value).exists():
        return needle.read_texts(value), value
    task = load_task(get_spec(value), data_dir)
    return [ex.text for split in ("train", "dev", "test") for ex in task.splits.get(split, [])], task.source


def sample_texts(values: Sequence[str], n: int, seeds: Sequence[int],
                 data_dir: str | Path | None = None) -> tuple[list[str], dict[int, np.ndarray], list[dict[str, Any]]]:
    """(the sampled texts, per seed their rows in that list, the sources): each source of `values` gives an
    equal share of `n` texts per sample seed (sample_mixed); only texts some seed draws are kept (and encoded)."""
    texts: list[str] = []
    sources: list[dict[str, Any]] = []
    for value in values:
        got, source = read_text_source(value, data_dir)
        sources.append({"source": source, "n_texts": len(got)})
        texts.extend(got)
    samples = sample_mixed([s["n_texts"] for s in sources], n, seeds)
    bounds = np.cumsum([0] + [s["n_texts"] for s in sources])
    first = samples[seeds[0]]  # every seed draws the same number from each source
    for k, src in enumerate(sources):
        src["drawn_per_seed"] = int(np.sum((first >= bounds[k]) & (first < bounds[k + 1])))
    union = np.unique(np.concatenate(list(samples.values())))
    position = {int(t): k for k, t in enumerate(union)}
    samples = {s: np.array([position[int(t)] for t in rows]) for s, rows in samples.items()}
    return [texts[i] for i in union], samples, sources
