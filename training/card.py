"""Hugging Face model cards for pretraining checkpoints (README.md with YAML metadata).

Why: a checkpoint folder should be publishable as it is (`huggingface-cli upload`), and the hub shows and
indexes a model by its card: base model, pipeline, languages, licence, training data, tags and, once scored,
`model-index` results. The card is rebuilt from the checkpoint's own `biobench_pretrain.json` and the run's
`train_log.jsonl`, so it never disagrees with them; `add_results` merges evaluation results in.
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

from biobench.runtime.files import atomic_write
from biobench.training.corpus import is_local

CARD = "README.md"


def _throughput(log_path: Path) -> dict[int, dict[str, Any]]:
    """Median tokens/s and MFU per phase from a run's train_log.jsonl (empty when there is no log)."""
    per_phase: dict[int, dict[str, list[float]]] = {}
    if not log_path.is_file():
        return {}
    for line in log_path.read_text().splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        bucket = per_phase.setdefault(int(record.get("phase", 0)), {"tokens_per_s": [], "mfu": [], "loss": []})
        for key in bucket:
            if isinstance(record.get(key), int | float):
                bucket[key].append(float(record[key]))
    return {phase: {"tokens_per_s": statistics.median(v["tokens_per_s"]) if v["tokens_per_s"] else None,
                    "mfu": statistics.median(v["mfu"]) if v["mfu"] else None,
                    "last_loss": v["loss"][-1] if v["loss"] else None, "steps": len(v["loss"])}
            for phase, v in sorted(per_phase.items())}


def _tokens(n: int | None) -> str:
    if not n:
        return "0"
    for unit, size in (("B", 1e9), ("M", 1e6), ("k", 1e3)):
        if n >= size:
            return f"{n / size:.3g}{unit}"
    return str(n)


def _corpus_rows(record: Any) -> list[str]:
    """The corpus files a run recorded (training.corpus.corpus_record): name, size and sha256 prefix, so a reader
    (and `biobench eval --check-contamination`) knows exactly which text the model saw."""
    if not isinstance(record, dict):
        return []
    store = record["token_store"] if isinstance(record.get("token_store"), dict) else {}
    rows = [f"| mixture | {_mix_cell(store['plan'])} |"] if isinstance(store.get("plan"), list) else []
    if store.get("id") and not store.get("raw"):
        rows.append(f"| token store | `{Path(str(store.get('store'))).name}` (content id {store['id']}, "
                    f"{store.get('tokens', 0):,} tokens) |")
    files = [f for f in record.get("files") or [] if isinstance(f, dict)]
    if not files:
        return rows + ([f"| corpus files | hub dataset `{record.get('hub')}` |"] if record.get("hub") else [])
    shown = ", ".join(f"`{Path(str(f.get('path'))).name}` ({f.get('bytes', 0):,} bytes, sha256 "
                      f"{str(f.get('sha256'))[:12]})" for f in files[:5])
    more = f" and {record.get('n_files', len(files)) - 5} more" if record.get("n_files", len(files)) > 5 else ""
    return rows + [f"| corpus files | {shown}{more}; {record.get('bytes') or 0:,} bytes in all |"]


def _mix_cell(plan: list[Any]) -> str:
    """The mix plan table in one cell: source, target and realised share (in tokens), passes."""
    return "; ".join(f"{r.get('name')}: {r.get('target_share', 0):.1%} target, {r.get('realised_share', 0):.1%} "
                     f"realised, {r.get('passes', 0):.2f} passes" for r in plan[:64] if isinstance(r, dict))


def card_metadata(meta: dict[str, Any], language: str | None = None, license: str | None = None) -> dict[str, Any]:
    """The YAML header: what the hub indexes."""
    base = meta.get("base_model", "")
    data: dict[str, Any] = {
        "library_name": "transformers",
        "pipeline_tag": "text-generation" if meta.get("decoder") else "fill-mask",
        "tags": ["biobench", "biomedical", "continued-pretraining", f"recipe-{meta.get('recipe')}"],
    }
    if base and not str(base).startswith("preset:") and not is_local(str(base)):
        data["base_model"] = base
    if language:
        data["language"] = [language]
    if license:
        data["license"] = license
    corpus = str(meta.get("corpus", ""))
    if corpus and not is_local(corpus) and "/" in corpus:
        data["datasets"] = [corpus]
    return data


def card_text(meta: dict[str, Any], throughput: dict[int, dict[str, Any]], hardware: str | None) -> str:
    """The card's body: recipe, budgets, hyper-parameters, lineage, hardware and throughput."""
    tokens = meta.get("tokens", {})
    opt, schedule = meta.get("optimizer", {}), meta.get("schedule", {})
    phases = len(meta.get("attention") or {}) or 2  # the recipe's phases (a phase1/ card counts phase 2's 0 too)
    per_phase = ", ".join(f"phase {i} {tokens.get(f'phase{i}', 0):,}" for i in range(1, phases + 1))
    lines = [f"# {meta.get('recipe')} · {Path(str(meta.get('base_model', ''))).name or meta.get('base_model')} · "
             f"{_tokens(tokens.get('seen'))} tokens", "",
             f"Continued pretraining with the biobench recipe **{meta.get('recipe')}** (arXiv 2605.12438: a causal-LM "
             "detour, then a masked-LM decay). This checkpoint is the end of "
             f"**{meta.get('phase')}**.", "",
             "| | |", "|---|---|",
             f"| base model | `{meta.get('base_model')}` |",
             f"| corpus | `{meta.get('corpus')}` |",
             *_corpus_rows(meta.get("corpus_record")),
             f"| tokens seen | {tokens.get('seen', 0):,} ({per_phase}) |",
             f"| attention per phase | {', '.join(f'{k}: {v}' for k, v in (meta.get('attention') or {}).items()) or '-'} |",
             f"| frozen layers | {meta.get('frozen') or 'none'} |",
             f"| sequence length x batch | {meta.get('seq_len')} x {meta.get('batch_size')} sequences |",
             f"| optimiser | {opt.get('name')} lr {opt.get('lr')}, betas {opt.get('betas')}, eps {opt.get('eps')}, "
             f"weight decay {opt.get('weight_decay')}, grad clip {opt.get('grad_clip')} |",
             f"| schedule | warmup {schedule.get('warmup_steps')} steps, steps per phase {schedule.get('steps')} |",
             f"| decay ratio | {meta.get('decay_ratio')} |",
             f"| seeds | init/masking {meta.get('seed')}, data order {meta.get('data_seed', meta.get('seed'))} |",
             f"| world size | {meta.get('world_size')} |",
             f"| hardware | {hardware or 'not recorded'} |", ""]
    if throughput:
        lines += ["| phase | steps | median tokens/s | median MFU | last loss |", "|---|---|---|---|---|"]
        for phase, t in throughput.items():
            tps = f"{t['tokens_per_s']:,.0f}" if t["tokens_per_s"] else "-"
            mfu = f"{t['mfu']:.3f}" if t["mfu"] is not None else "-"
            loss = f"{t['last_loss']:.4f}" if t["last_loss"] is not None else "-"
            lines.append(f"| {phase} | {t['steps']} | {tps} | {mfu} | {loss} |")
        lines.append("")
    lines += ["Load it with `AutoModelForMaskedLM.from_pretrained(...)` (or `AutoModel` for features), score it with "
              "`biobench eval --model <this folder>`, and add the scores here with `biobench card <folder> "
              "--results <results dir>`.", ""]
    return "\n".join(lines)


def write_card(folder: Path, meta: dict[str, Any], log_path: Path | None = None, hardware: str | None = None,
               language: str | None = None, license: str | None = None) -> Path:
    """Write folder/README.md for the checkpoint whose metadata is `meta`."""
    from huggingface_hub import ModelCard, ModelCardData

    data = ModelCardData(**card_metadata(meta, language, license))
    text = card_text(meta, _throughput(log_path) if log_path else {}, hardware)
    card = ModelCard(f"---\n{data.to_yaml()}\n---\n\n{text}")
    path = Path(folder) / CARD
    atomic_write(path, str(card))  # a full disk never truncates an existing card
    return path


def add_results(folder: Path, model_name: str, results: list[dict[str, Any]]) -> Path:
    """Merge evaluation results (rows: task_id, task_name, metric, value, seeds, lang) into the card's
    `model-index`, keeping the card's text. Creates a minimal card when the folder has none."""
    from huggingface_hub import EvalResult, ModelCard, ModelCardData

    path = Path(folder) / CARD
    card = ModelCard.load(path) if path.is_file() else ModelCard(f"---\n{ModelCardData().to_yaml()}\n---\n\n# {model_name}\n")
    # huggingface_hub types a card's data as the CardData base class; a ModelCard's is its ModelCardData
    card.data.model_name = model_name  # type: ignore[union-attr]
    card.data.eval_results = [  # type: ignore[union-attr]
        EvalResult(task_type="token-classification" if r["kind"] == "ner" else "text-classification",
                   dataset_type=r["task_id"], dataset_name=r["task_id"], metric_type=r["metric"],
                   metric_value=round(r["value"], 4), metric_name=f"{r['metric']} (mean of {len(r['seeds'])} seeds: "
                                                                 f"{', '.join(map(str, r['seeds']))})")
        for r in results]
    atomic_write(path, str(card))  # a full disk never truncates an existing card
    return path
