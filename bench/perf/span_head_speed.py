"""Training speed of an NER head on a task's real windows: optimiser steps (forward, backward, AdamW) on fixed
batches, real (non-pad) input tokens per second, median over repeats.

Why a script of its own: issue 19 replaced the span head (sub-word spans, one CRF whose marginals are
differentiated through, BCE over sampled spans) and asks what it costs against the word-level head it
replaced. The script only uses the API both heads share (`get_head`, featurize / collate / build), so the
same file measures an older checkout too: run it once per checkout, with the same arguments, then
`--compare` the JSON files side by side.

    .venv/bin/python bench/perf/span_head_speed.py --task quaero-emea --data-dir DATA --out new.json
    PYTHONPATH=<old package tree> .venv/bin/python bench/perf/span_head_speed.py ... --out old.json
    .venv/bin/python bench/perf/span_head_speed.py --compare old.json new.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import time
from pathlib import Path


def measure(args: argparse.Namespace) -> dict:
    import torch
    from biobench.heads import get_head
    from biobench.models import load_encoder
    from biobench.tasks.loading import load_task
    from biobench.tasks.registry import get_spec

    torch.manual_seed(0)
    torch.set_num_threads(args.threads)
    data = load_task(get_spec(args.task), args.data_dir)
    encoder, tokenizer, _ = load_encoder(args.model)
    head = get_head(args.head, "ner")
    features = head.featurize(data.splits["train"], tokenizer, args.max_length, list(data.labels))
    features = sorted(features, key=lambda f: -len(f["input_ids"]))  # the full-length windows: the common case
    batches = [head.collate(features[i:i + args.batch_size], tokenizer.pad_token_id)
               for i in range(0, args.batch_size * args.steps, args.batch_size)]
    model = head.build(encoder, list(data.labels), data.splits["train"])
    optimizer = torch.optim.AdamW([{"params": model.encoder.parameters(), "lr": 5e-5},
                                   {"params": model.head_parameters(), "lr": 1e-3}])
    model.train()

    def step(batch: dict) -> None:
        loss = model(batch)["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    step(batches[0])  # warm-up (allocations, first-call overheads)
    rates = []
    for _ in range(args.repeats):
        tokens = sum(int(b["attention_mask"].sum()) for b in batches)
        started = time.perf_counter()
        for batch in batches:
            step(batch)
        rates.append(tokens / (time.perf_counter() - started))
    import biobench.heads.span_ner as span_module

    return {"head": args.head, "task": args.task, "model": args.model, "max_length": args.max_length,
            "batch_size": args.batch_size, "steps": args.steps, "repeats": args.repeats, "threads": args.threads,
            "windows": len(features), "head_module": span_module.__file__,
            "tokens_per_s": rates, "median_tokens_per_s": statistics.median(rates)}


def compare(paths: list[str]) -> None:
    runs = [json.loads(Path(p).read_text()) for p in paths]
    base = runs[0]["median_tokens_per_s"]
    print(f"{'run':<40} {'head':<12} {'median tok/s':>12} {'repeats':>30} {'ratio':>6}")
    for path, run in zip(paths, runs, strict=True):
        reps = ", ".join(f"{r:.0f}" for r in run["tokens_per_s"])
        print(f"{path:<40} {run['head']:<12} {run['median_tokens_per_s']:>12.0f} {reps:>30} "
              f"{run['median_tokens_per_s'] / base:>6.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="quaero-emea")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--head", default="span")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="optimiser steps per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1 step x 2 repeats (a smoke run)")
    parser.add_argument("--out", default=None, help="write the JSON here (default: print it)")
    parser.add_argument("--compare", nargs="+", metavar="JSON", help="print runs side by side, ratios to the first")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 1, 2
    if args.compare:
        compare(args.compare)
        return
    result = json.dumps(measure(args), indent=1)
    if args.out:
        Path(args.out).write_text(result + "\n")
    print(result)


if __name__ == "__main__":
    main()
