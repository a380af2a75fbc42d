"""PNG figures of the analyses (matplotlib, Agg backend: no display needed)."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot_cka(report: dict[str, Any], path: Path) -> None:
    """Per-layer divergence (and seed-noise divergence); the ratio on a second panel when present. Transformer
    layers 0..L-1; the embedding output is the point at x = -1 ("emb")."""
    plt = _pyplot()
    rows = ([report["embeddings"]] if report.get("embeddings") else []) + list(report["layers"])
    xs = [-1 if r["layer"] == "embeddings" else r["layer"] for r in rows]
    ticks = (xs, ["emb" if x == -1 else str(x) for x in xs])
    has_ratio = any(r["ratio"] is not None for r in rows)
    fig, axes = plt.subplots(1, 2 if has_ratio else 1, figsize=(10 if has_ratio else 5.5, 3.8), squeeze=False)
    ax = axes[0][0]
    ax.plot(xs, [r["divergence"] for r in rows], "o-", label="A vs B")
    if has_ratio:
        ax.plot(xs, [r["noise_divergence"] for r in rows], "s--", label="noise vs B (seed noise)")
    summary = report.get("summary")
    title = "Linear CKA divergence"
    if summary:
        title += f" (mean {summary['mean_divergence']:.3f})"
    ax.set(xlabel="transformer layer (emb = embedding output)", ylabel="divergence = 1 - CKA", title=title)
    ax.set_xticks(*ticks)
    ax.legend(fontsize=8)
    if has_ratio:
        ax = axes[0][1]
        ax.plot(xs, [r["ratio"] if r["ratio"] is not None else float("nan") for r in rows], "o-")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="transformer layer", ylabel="$r_l$", title="div(A, B) / div(noise, B)")
        ax.set_xticks(*ticks)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_cka_trajectory(report: dict[str, Any], path: Path) -> None:
    """Figure 3a: mean divergence from the start model vs tokens seen, with the 95% CI over sample seeds."""
    plt = _pyplot()
    points = [p for p in report["points"] if p.get("tokens") is not None]
    fig, ax = plt.subplots(figsize=(6, 3.8))
    xs = [p["tokens"] for p in points]
    ax.plot(xs, [p["mean_divergence"] for p in points], "o-", color="black")
    lows = [p["ci_low"] for p in points]
    if all(v is not None for v in lows):  # null with a single sample seed
        ax.fill_between(xs, lows, [p["ci_high"] for p in points], alpha=0.2, color="black", lw=0)
    for p in points:
        if not p["checkpoint"].startswith("step-"):
            ax.annotate(p["checkpoint"], (p["tokens"], p["mean_divergence"]), fontsize=8,
                        textcoords="offset points", xytext=(3, 4))
    ax.set(xlabel="tokens seen", ylabel="mean divergence vs start (1 - CKA)",
           title=f"CKA trajectory: {Path(report['run']).name}")
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_needle(result: dict[str, Any], path: Path) -> None:
    """Test accuracy by haystack length, one line per position, and overall."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 3.8))
    lengths = list(result["by_length"])
    ax.plot(lengths, list(result["by_length"].values()), "o-", color="black", label="all positions")
    for position in result["by_position"]:
        values = [result["by_cell"].get(f"{length}/{position}", float("nan")) for length in lengths]
        ax.plot(lengths, values, ".--", label=position)
    ax.axhline(0.5, color="grey", lw=0.8, ls=":")
    ax.set(xlabel="haystack length", ylabel="test accuracy", ylim=(0, 1),
           title=f"Needle probe: {result.get('model', {}).get('id', '')} (overall {result['accuracy']:.3f})")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def plot_differences(rows: list[dict[str, Any]], title: str, path: Path) -> None:
    """A - B per task and on the average (points of macro-F1, %) with their 95% paired-bootstrap intervals, one
    row each, zero marked; a filled marker where the difference is significant (`significant`: the task's
    adjusted p, the average's own p, below 0.05). rows: label, diff, low, high (fractions), significant, average."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 0.45 * len(rows) + 1.4))
    ys = list(range(len(rows)))[::-1]
    for y, row in zip(ys, rows, strict=True):
        diff, low, high = (100 * row[k] for k in ("diff", "low", "high"))
        intervals = [[diff - low], [high - diff]] if low == low and high == high else None
        ax.errorbar(diff, y, xerr=intervals, fmt="D" if row["average"] else "o", capsize=3,
                    color="black" if row["average"] else "tab:blue",
                    markerfacecolor=None if row["significant"] else "white")
    ax.axvline(0, color="grey", linewidth=0.8, linestyle="--")
    ax.set_yticks(ys, [row["label"] for row in rows])
    ax.set(xlabel="A − B, macro-F1 points (95% paired-bootstrap CI)", title=title)
    fig.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
