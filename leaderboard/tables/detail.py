"""One model at a time: the detail view of a board row (`model_detail`) and the Model tab's panel (`model_panel`, from the JSON routes' row)."""

from __future__ import annotations

from typing import Any

import pandas as pd
from biobench.leaderboard.tables.costs import entry_runs, pretraining_cost, round_or_none, run_timing
from biobench.leaderboard.tables.escape import md, md_code
from biobench.names import human_tokens
from biobench.standings.entries import Board, fmt
from biobench.store.trust import SMOKE_MARK


def _protocol_text(protocol: dict[str, Any]) -> str:
    fields = [f"{k} {protocol[k]}" for k in ("epochs", "max_steps", "lr", "batch_size", "max_length", "head",
                                             "dev_metric") if protocol.get(k) is not None]
    return f"{protocol.get('name', '?')} ({', '.join(fields)}; hash {str(protocol.get('hash', '?'))[:19]})"


def model_detail(board: Board, lang: str, key: str) -> tuple[str, pd.DataFrame]:
    """The detail view of one row: a Markdown summary (where the model comes from, lineage, pretraining cost,
    protocols, fine-tuning time) and its per-task, per-seed scores with each run's timings and protocol hash."""
    e = board.entry(key, lang)
    if e is None:
        return f"No {md(lang)} model {md(repr(key))}.", pd.DataFrame()
    bench = board.benchmark.get(lang, [])
    avg = e.average(bench)
    lines = [f"### {md(e.name)}", "", "| about | value |", "|---|---|",
             f"| source | {e.source}{' (the paper’s published numbers)' if e.source == 'reported' else ''} |"]
    if e.source == "reported":
        lines.append(f"| recipe / citation | {md(e.lineage or e.recipe)} |")
        lines.append(f"| seeds | {e.reported_seeds} |")
    else:
        meta = entry_runs(e)[0].model_meta
        lines += [f"| model | {md_code(e.model_id)} |", f"| revision | {md_code(meta.get('revision', '?'))} |",
                  f"| parameters | {e.params:,} |" if e.params else "| parameters | ? |",
                  f"| context | {md(e.context or '?')} |", f"| architecture | {md(meta.get('architecture') or '?')} |"]
        if e.lineage:
            lines.append(f"| lineage | {md(e.lineage)} |")
        cost = pretraining_cost(meta.get("lineage"))
        if cost:
            parts = [f"{md(human_tokens(cost.get('tokens')))} tokens"]
            if cost.get("hours") is not None:
                parts.append(f"{cost['hours']:.3g} {md(cost['hours_unit'])}")
            if cost.get("hardware"):
                parts.append(f"on {md(cost['hardware'])}")
            lines.append(f"| pretraining | {', '.join(parts[:2])}{' ' + parts[2] if len(parts) > 2 else ''}"
                         f"{'' if len(parts) > 1 else ' (time and hardware not recorded)'} |")
        protocols = sorted({_protocol_text(r.details["protocol"]) for r in entry_runs(e) if isinstance(r.details.get("protocol"), dict)})
        lines += [f"| protocol | {md(p)} |" for p in protocols]
        train = [t for r in entry_runs(e) if (t := run_timing(r, "train_s")) is not None]
        if train:
            lines.append(f"| fine-tuning | {len(train)} run{'' if len(train) == 1 else 's'}, {sum(train) / 3600:.3g} h in all, "
                         f"{sum(train) / len(train):.1f} s per run |")
    lines.append(f"| average ({md(lang)}) | {fmt(avg.value)}{f' (partial: {avg.k}/{avg.n} tasks)' if avg.partial else ''} |")
    rows = []
    for task in board.columns(lang):
        cell = e.cells.get(task)
        if cell is None:
            continue
        if e.source == "reported" or not e.runs.get(task):
            rows.append({"task": task, "seed": "reported", "macro-F1": round(cell.mean, 2)})
            continue
        for r in e.runs[task]:
            protocol = r.details["protocol"] if isinstance(r.details.get("protocol"), dict) else {}
            rows.append({"task": task, "seed": r.seed, "macro-F1": round(100 * r.score, 2),
                         "dev": round(100 * r.details["dev_score"], 2) if isinstance(r.details.get("dev_score"), int | float) else None,
                         "train s": round_or_none(run_timing(r, "train_s"), 1), "tokens/s": round_or_none(run_timing(r, "tokens_per_s"), 0),
                         "device": r.details.get("device"), "protocol": str(protocol.get("hash", ""))[:19]})
        rows.append({"task": task, "seed": "mean", "macro-F1": round(cell.mean, 2)})
    return "\n".join(lines), pd.DataFrame(rows)


MODEL_PANEL_COLUMNS = ["task", "macro-F1", "± 95% CI", "seeds", "run"]


_METADATA_LABELS = {"parameters": "parameters", "context_length": "context length", "license": "license",
                    "base_model": "base model", "training_data": "training data", "open_weights": "open weights"}


def _metadata_text(field: str, value: Any) -> str:
    if value is None:
        return "?"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if field == "parameters" and isinstance(value, int):
        return f"{value:,} ({human_tokens(value)})"
    if field == "context_length" and isinstance(value, int):
        return f"{value:,} tokens"
    if isinstance(value, list):
        return ", ".join(md(v) for v in value)
    return md(value)


def model_panel(row: dict[str, Any] | None) -> tuple[str, pd.DataFrame]:
    """The Model tab: a model's metadata (each field said to be stated by its submitter or read from its model
    card / config) and its per-task results, from its row as /api/v1/models gives it (leaderboard/json_routes.py
    `model_row_json`: the same board model, nothing computed twice). Smoke runs are rows marked ⚑ with their
    overrides, never averaged with the protocol's seeds. Every value from results is escaped (`md`)."""
    if row is None:
        return "Pick a model.", pd.DataFrame(columns=MODEL_PANEL_COLUMNS)
    meta = row.get("metadata") or {}
    stated = set(meta.get("stated") or [])
    reported = row.get("source") == "reported"
    lines = [f"### {md(row['name'])}", ""]
    if reported:
        lines += ["The paper's published numbers (arXiv 2605.12438): no model card was read, nothing stated.", ""]
    lines += ["| metadata | value | from |", "|---|---|---|"]
    for field, label in _METADATA_LABELS.items():
        value = meta.get(field)
        source = ("stated by the submitter" if field in stated else "—" if value is None
                  else "model card / config")
        lines.append(f"| {label} | {_metadata_text(field, value)} | {source if not reported else '—'} |")
    if row.get("model_id"):
        lines.append(f"| model | {md_code(row['model_id'])} | |")
    avg = row.get("average") or {}
    if avg.get("value") is not None:
        partial = f" (partial: {avg['tasks']}/{avg['of']} tasks)" if avg.get("partial") else ""
        smoke_tasks = row.get("smoke_tasks") or []
        smoke = f" ({SMOKE_MARK} smoke runs on {', '.join(md(t) for t in smoke_tasks)})" if smoke_tasks else ""
        lines.append(f"| average | {fmt(avg['value'])}{partial}{smoke} | |")
    rows = []

    def half(cell: dict[str, Any]) -> float | None:
        low, high = cell.get("ci_low"), cell.get("ci_high")
        return None if low is None or high is None else round((high - low) / 2, 2)

    def add(task: str, cell: dict[str, Any], run: str) -> None:
        rows.append({"task": task, "macro-F1": cell.get("mean"), "± 95% CI": half(cell),
                     "seeds": cell.get("seeds") or ("reported" if reported else None), "run": run})

    for task, cell in (row.get("cells") or {}).items():
        add(task, cell, f"{SMOKE_MARK} smoke: {cell['smoke']}" if cell.get("smoke") else
            "paper (reported)" if reported else "protocol")
        for sub in row.get("smoke_runs") or []:  # the model's other smoke runs of this task, not shown in its cell
            if task in sub["cells"] and sub["smoke"] != cell.get("smoke"):
                add(task, sub["cells"][task], f"{SMOKE_MARK} smoke (not in the table): {sub['smoke']}")
    return "\n".join(lines), pd.DataFrame(rows, columns=MODEL_PANEL_COLUMNS)
