"""Needle-in-a-haystack probe (paper Appendix I): frozen encoder, 2-layer MLP on the CLS vector.

Each example is encoded once as the pair (query, haystack), truncating only the haystack to the model's
context; the CLS vectors are cached, so the probe (Dropout -> Linear -> GELU -> Dropout -> Linear, AdamW,
3 epochs, lr 2e-5, batch 4 by default) trains in seconds. The epoch with the best dev accuracy is scored
on test, overall, by length, by position and by (length, position). Because truncation can cut the fact
out of long haystacks on short-context models, the share of test facts still inside the input is reported
("fact_visible").
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import numpy as np
from biobench.analysis import features, plots
from biobench.errors import ConfigError
from biobench.runtime.files import atomic_write


@dataclass(frozen=True)
class ProbeConfig:
    epochs: int = 3
    lr: float = 2e-5
    batch_size: int = 4
    dropout: float = 0.1
    weight_decay: float = 0.01

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def fact_visible(tokenizer, rows: Sequence[dict[str, Any]], max_length: int) -> list[bool]:
    """Whether each example's fact ends inside the truncated haystack (char offsets of kept tokens)."""
    visible = []
    for row in rows:
        enc = tokenizer(row["query"], row["text"], truncation="only_second", max_length=max_length,
                        return_offsets_mapping=True)
        ends = [end for (_, end), sid in zip(enc["offset_mapping"], enc.sequence_ids(), strict=True) if sid == 1]
        visible.append(bool(ends) and max(ends) >= row.get("fact_end", 0))
    return visible


def build_probe(hidden: int, dropout: float):
    from torch import nn

    return nn.Sequential(nn.Dropout(dropout), nn.Linear(hidden, hidden), nn.GELU(), nn.Dropout(dropout),
                         nn.Linear(hidden, 2))


def train_probe(
    feats: np.ndarray, labels: np.ndarray, splits: np.ndarray, config: ProbeConfig, seed: int
) -> tuple[np.ndarray, list[dict[str, float]], int]:
    """(test predictions of the best-dev epoch, per-epoch history, best epoch number from 1)."""
    import torch

    torch.manual_seed(seed)
    x = torch.tensor(feats, dtype=torch.float32)
    y = torch.tensor(labels, dtype=torch.long)
    train = np.flatnonzero(splits == "train")
    dev, test = np.flatnonzero(splits == "dev"), np.flatnonzero(splits == "test")
    probe = build_probe(x.shape[1], config.dropout)
    opt = torch.optim.AdamW(probe.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gen = torch.Generator().manual_seed(seed)

    def predict(idx: np.ndarray) -> np.ndarray:
        probe.eval()
        with torch.no_grad():
            return probe(x[idx]).argmax(-1).numpy()

    history, best, best_epoch, best_test = [], -1.0, 0, predict(test)
    for epoch in range(1, config.epochs + 1):
        probe.train()
        order = train[torch.randperm(len(train), generator=gen).numpy()]
        losses = []
        for start in range(0, len(order), config.batch_size):
            idx = order[start : start + config.batch_size]
            loss = torch.nn.functional.cross_entropy(probe(x[idx]), y[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses.append(loss.item())
        dev_acc = float((predict(dev) == labels[dev]).mean()) if len(dev) else float("nan")
        history.append({"epoch": epoch, "train_loss": float(np.mean(losses)), "dev_accuracy": dev_acc})
        if dev_acc > best or not len(dev):
            best, best_epoch, best_test = dev_acc, epoch, predict(test)
    return best_test, history, best_epoch


def accuracy_table(rows: Sequence[dict[str, Any]], correct: Sequence[bool]) -> dict[str, Any]:
    """Accuracy overall, by length, by position and by length/position."""
    groups: dict[str, dict[str, list[bool]]] = {"by_length": defaultdict(list), "by_position": defaultdict(list),
                                                "by_cell": defaultdict(list)}
    for row, ok in zip(rows, correct, strict=True):
        groups["by_length"][str(row["length"])].append(ok)
        groups["by_position"][row["position"]].append(ok)
        groups["by_cell"][f"{row['length']}/{row['position']}"].append(ok)
    table: dict[str, Any] = {"accuracy": float(np.mean(correct)) if len(correct) else float("nan")}
    for name, group in groups.items():
        keys = sorted(group, key=lambda k: (int(k.split("/")[0]) if k[0].isdigit() else 0, k))
        table[name] = {k: float(np.mean(group[k])) for k in keys}
    return table


def evaluate(
    rows: Sequence[dict[str, Any]], feats: np.ndarray, visible: Sequence[bool], seeds: Sequence[int],
    config: ProbeConfig,
) -> dict[str, Any]:
    """Train one probe per seed; accuracies are means over seeds (each seed's table is kept)."""
    labels = np.array([int(r["label"]) for r in rows])
    splits = np.array([r["split"] for r in rows])
    missing = [s for s in ("train", "dev", "test") if not (splits == s).any()]
    if missing:
        raise ConfigError(f"the needle data has no {'/'.join(missing)} examples; generate it with a larger --n")
    test = np.flatnonzero(splits == "test")
    test_rows = [rows[int(i)] for i in test]
    per_seed = []
    for seed in seeds:
        preds, history, best_epoch = train_probe(feats, labels, splits, config, seed)
        table = accuracy_table(test_rows, list(preds == labels[test]))
        per_seed.append({"seed": seed, "best_epoch": best_epoch, "history": history, **table})
    summary: dict[str, Any] = {"accuracy": float(np.mean([s["accuracy"] for s in per_seed]))}
    for name in ("by_length", "by_position", "by_cell"):
        summary[name] = {k: float(np.mean([s[name][k] for s in per_seed])) for k in per_seed[0][name]}
    summary["dev_accuracy"] = float(np.mean([max(h["dev_accuracy"] for h in s["history"]) for s in per_seed]))
    vis = accuracy_table(test_rows, [visible[int(i)] for i in test])
    summary["fact_visible"] = {"overall": vis["accuracy"], "by_length": vis["by_length"]}
    summary["n"] = {s: int((splits == s).sum()) for s in ("train", "dev", "test")}
    summary["per_seed"] = per_seed
    return summary


def run_needle(model: str, data: str | Path, rows: list[dict[str, Any]], seeds: Sequence[int], config: ProbeConfig,
               *, max_length: int | None = None, encode_batch_size: int = 8, device: str = "cpu",
               out: str | Path | None = None,
               note: Callable[[str], None] = lambda line: None) -> tuple[dict[str, Any], Path]:
    """`analyze needle run`: the frozen model's CLS features of `rows` (DATA/needle.jsonl or the lengths of it
    asked for; cached per model weights, data, max length), the probe trained and scored per seed (evaluate),
    the result written to `out` (default DATA/runs/<model>/) as needle_results.json and .png. `note`: told a
    line when the data's lengths were counted in another model's tokens. Returns (the result, its folder)."""

    data = Path(data)
    encoder, tokenizer, info = features.load_frozen_encoder(model, device)
    max_length = min(max_length or 10**9, features.model_max_length(encoder, tokenizer))
    meta_path = data / "needle_meta.json"
    meta = json.loads(meta_path.read_text(encoding="utf-8")) if meta_path.is_file() else {}
    if meta.get("tokenizer") and str(Path(meta["tokenizer"]).resolve()) != str(Path(info.source).resolve()):
        note(f"note: {data} counts lengths in the tokens of {meta['tokenizer']}, not of {info.source}; "
             "regenerate it with --tokenizer set to this model for exact lengths")
    start = time.time()
    # the encoder is frozen: CLS features are cached per (model weights, data, max length) for reruns
    cache = data / "features" / f"{info.slug}-{info.revision[-16:]}-{max_length}-{len(rows)}.npy"
    feats = features.cached(cache, data / "needle.jsonl", lambda: features.pooled_features(
        encoder, tokenizer, [r["query"] for r in rows], [r["text"] for r in rows], pooling="cls",
        max_length=max_length, batch_size=encode_batch_size))
    encode_s = time.time() - start
    visible = fact_visible(tokenizer, rows, max_length)
    summary = evaluate(rows, np.asarray(feats, dtype=np.float32), visible, seeds, config)
    result = {"schema": "biobench.needle/1", "model": {"id": info.id, "slug": info.slug, "revision": info.revision},
              "data": str(data), "max_length": max_length, "probe": config.to_dict(), "seeds": seeds,
              "timings": {"encode_s": round(encode_s, 1), "total_s": round(time.time() - start, 1)}, **summary}
    folder = Path(out) if out else data / "runs" / info.slug
    atomic_write(folder / "needle_results.json", json.dumps(result, indent=2, ensure_ascii=False) + "\n")
    plots.plot_needle(result, folder / "needle_results.png")
    return result, folder
