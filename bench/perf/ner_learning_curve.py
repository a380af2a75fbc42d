"""Learning curve of an NER head: dev and test scores every `--eval-every` steps of ONE fine-tuning run.

Why a script of its own: to see whether the span head learns as fast as the harness's (a learning
curve, not a single point) next to `span-words` and `hf-token` on the same budget. `biobench eval` scores test
once, with the state best on dev; here every dev evaluation of the run also scores test with the current
weights, so one run of N steps gives the whole curve (same schedule, warmup and seed as `biobench eval
--max-steps N --eval-every K`). Rows go to a JSON lines file as they come, so a cut run keeps its curve.

    nice -n 10 .venv/bin/python bench/perf/ner_learning_curve.py --task quaero-emea --data-dir DATA \
        --head span --max-steps 600 --eval-every 100 --threads 1 --out curve-span.jsonl
    .venv/bin/python bench/perf/ner_learning_curve.py --table curve-span.jsonl curve-span-words.jsonl
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from biobench.eval.encoder import load_encoder
from biobench.heads import get_head
from biobench.metrics import score
from biobench.protocols import resolve_task_protocol
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec


def run(args: argparse.Namespace) -> None:
    # lazy: loads torch
    import biobench.eval.finetune as ft
    import torch

    torch.set_num_threads(args.threads)
    spec = get_spec(args.task)
    overrides = {"max_steps": args.max_steps, "eval_every": args.eval_every, "head": args.head}
    if args.max_length:
        overrides["max_length"] = args.max_length
    if args.limit_train:
        overrides["limit_train"] = args.limit_train
    for knob in ("lr", "head_lr", "warmup_ratio"):
        if getattr(args, knob) is not None:
            overrides[knob] = getattr(args, knob)
    protocol = resolve_task_protocol(spec, overrides)
    data = load_task(spec, args.data_dir)
    encoder, tokenizer, _ = load_encoder(args.model, "cpu", dtype=torch.float32)
    pad_id = tokenizer.pad_token_id if tokenizer.pad_token_id is not None else 0
    task = ft.prepare_task(get_head(protocol.head, spec.kind, protocol.head_config), data, tokenizer, protocol)
    out = Path(args.out)
    out.write_text("")
    started = time.perf_counter()
    evaluate = ft._Run.evaluate

    def evaluate_and_test(self: ft._Run, epoch: int, step: int, loss: float) -> None:
        evaluate(self, epoch, step, loss)
        preds = self.predict("test")
        test = score(task.kind, task.gold["test"], preds, task.labels)
        row = {**self.selection.history[-1], "test_macro_f1": test["macro_f1"], "test_micro_f1": test["micro_f1"],
               "n_pred_test": sum(map(len, preds)), "head": protocol.head, "task": args.task, "model": args.model,
               "seed": args.seed, "lr": protocol.lr, "head_lr": protocol.head_lr, "max_length": protocol.max_length, "train_windows": len(task.features["train"]),
               "elapsed_s": round(time.perf_counter() - started, 1)}
        with out.open("a") as f:
            f.write(json.dumps(row) + "\n")
        print(json.dumps(row), flush=True)
        self.model.train()

    # the point of this script: test scores at every evaluation
    ft._Run.evaluate = evaluate_and_test  # type: ignore[method-assign]
    outcome = ft.finetune(task, encoder, pad_id, protocol, args.seed, "cpu", progress=False)
    print(json.dumps({"best_step": outcome.best_step, "test_macro_f1_of_best": outcome.test_metrics["macro_f1"],
                      "timings": outcome.timings}), flush=True)


def table(paths: list[str]) -> None:
    """Markdown table: one row per step, per file dev selection score, dev / test macro-F1 (in %)."""
    runs = {p: [json.loads(line) for line in Path(p).read_text().splitlines() if line.strip()] for p in paths}
    steps = sorted({r["step"] for rows in runs.values() for r in rows})
    heads = [rows[0]["head"] if rows else p for p, rows in runs.items()]
    print("| step | " + " | ".join(f"{h} dev sel / dev F1 / test F1" for h in heads) + " |")
    print("|---|" + "---|" * len(heads))
    for step in steps:
        cells = []
        for rows in runs.values():
            row = next((r for r in rows if r["step"] == step), None)
            if row is None:
                cells.append("-")
                continue
            # the selection score dev_<dev_metric>: dev_macro_f1 itself for a run that selects on macro-F1 (its
            # rows hold that key once)
            sel = next((v for k, v in row.items() if k.startswith("dev_") and k != "dev_macro_f1"),
                       row["dev_macro_f1"])
            cells.append(f"{100 * sel:.1f} / {100 * row['dev_macro_f1']:.1f} / {100 * row['test_macro_f1']:.1f}")
        print(f"| {step} | " + " | ".join(cells) + " |")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="quaero-emea")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--head", default="span")
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--max-steps", type=int, default=600)
    parser.add_argument("--eval-every", type=int, default=100)
    parser.add_argument("--max-length", type=int, default=None, help="default: the task's")
    parser.add_argument("--limit-train", type=int, default=None)
    parser.add_argument("--lr", type=float, default=None, help="encoder lr (default: the protocol's)")
    parser.add_argument("--head-lr", type=float, default=None, help="head lr (default: the protocol's)")
    parser.add_argument("--warmup-ratio", type=float, default=None, help="default: the protocol's")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="ner-curve.jsonl", help="JSON lines, one per evaluation")
    parser.add_argument("--table", nargs="+", metavar="JSONL", help="print curves side by side and exit")
    args = parser.parse_args()
    if args.table:
        table(args.table)
        return
    run(args)


if __name__ == "__main__":
    main()
