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
    """Per-layer divergence (and seed-noise divergence); the ratio on a second panel when present."""
    plt = _pyplot()
    layers = [r["layer"] for r in report["layers"]]
    has_ratio = any(r["ratio"] is not None for r in report["layers"])
    fig, axes = plt.subplots(1, 2 if has_ratio else 1, figsize=(10 if has_ratio else 5.5, 3.8), squeeze=False)
    ax = axes[0][0]
    ax.plot(layers, [r["divergence"] for r in report["layers"]], "o-", label="A vs B")
    if has_ratio:
        ax.plot(layers, [r["noise_divergence"] for r in report["layers"]], "s--", label="noise vs B (seed noise)")
    ax.set(xlabel="layer (0 = embeddings)", ylabel="divergence = 1 - CKA", title="Linear CKA divergence",
           xticks=layers)
    ax.legend(fontsize=8)
    if has_ratio:
        ax = axes[0][1]
        ax.plot(layers, [r["ratio"] if r["ratio"] is not None else float("nan") for r in report["layers"]], "o-")
        ax.axhline(1.0, color="grey", lw=0.8, ls=":")
        ax.set(xlabel="layer (0 = embeddings)", ylabel="$r_l$", title="div(A, B) / div(noise, B)", xticks=layers)
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
