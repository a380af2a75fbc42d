"""What a model cost: fine-tuning time from its runs' timings, pretraining from its checkpoint lineage, and the Efficiency tab's table of both."""

from __future__ import annotations

from typing import Any

import pandas as pd
from biobench.leaderboard.tables.filters import Filters, select
from biobench.lineage import Lineage
from biobench.names import human_tokens
from biobench.standings.entries import Board, Entry


def _median(values: list[float]) -> float | None:
    values = sorted(values)
    if not values:
        return None
    mid = len(values) // 2
    return values[mid] if len(values) % 2 else (values[mid - 1] + values[mid]) / 2


def entry_runs(e: Entry) -> list:
    return [r for task_runs in e.runs.values() for r in task_runs]


def run_timing(run, name: str) -> float | None:
    value = (run.details.get("timings") or {}).get(name)
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def pretraining_cost(lineage: Any) -> dict[str, Any]:
    """Tokens, device-hours and hardware of a `biobench pretrain` checkpoint, from its lineage
    (biobench.lineage; empty for other models; checkpoints written before compute was recorded give
    tokens only)."""
    record = Lineage.from_dict({**lineage, "recipe": lineage.get("recipe") or "?"}) if isinstance(lineage, dict) else None
    if record is None:
        return {}
    device = record.compute.get("device_type")
    kind = "GPU" if device == "cuda" else str(device or "device").upper()
    return {"tokens": record.tokens.get("seen"), "hours": record.device_hours, "hours_unit": f"{kind}-h",
            "hardware": record.hardware}


EFFICIENCY_COLUMNS = ["model", "runs", "fine-tune s/run", "fine-tune h total", "tokens/s", "fine-tune device",
                      "pretrain tokens", "pretrain device-h", "pretrain hardware", "key"]


def round_or_none(value: float | None, digits: int) -> float | None:
    return None if value is None else round(value, digits)


def efficiency_frame(board: Board, lang: str) -> pd.DataFrame:
    """One row per measured model of a language: fine-tuning cost from the result timings (mean training
    seconds per run, total hours, median tokens/s, device) and pretraining cost from the checkpoint lineage
    (tokens seen, device-hours with their kind, hardware). `key` identifies the row for the detail view."""
    rows = []
    for e in select(board, lang, Filters(sources=("measured",), sort_by="Model", include_smoke=True)):
        runs = entry_runs(e)
        train = [t for r in runs if (t := run_timing(r, "train_s")) is not None]
        speed = [t for r in runs if (t := run_timing(r, "tokens_per_s")) is not None]
        devices = sorted({str(r.details.get("device")) for r in runs if r.details.get("device")})
        cost = pretraining_cost(runs[0].model_meta.get("lineage") if runs else None)
        rows.append({
            "model": e.name, "runs": len(runs),
            "fine-tune s/run": round(sum(train) / len(train), 1) if train else None,
            "fine-tune h total": round(sum(train) / 3600, 6) if train else None,  # shown by frames.hours_text
            "tokens/s": round(median_speed) if (median_speed := _median(speed)) is not None else None,
            "fine-tune device": ", ".join(devices),
            "pretrain tokens": human_tokens(cost["tokens"]) if cost.get("tokens") else "",
            "pretrain device-h": f"{cost['hours']:.3g} {cost['hours_unit']}" if cost.get("hours") is not None else "",
            "pretrain hardware": str(cost.get("hardware") or ""),
            "key": e.key,
        })
    return pd.DataFrame(rows, columns=EFFICIENCY_COLUMNS)
