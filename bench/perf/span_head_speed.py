"""Training and prediction speed of an NER head on a task's real windows: optimiser steps (forward, backward,
AdamW) and predict() on fixed batches, real (non-pad) input tokens per second, medians over repeats, and
the process's peak memory (RSS) after prediction and after training.

Why a script of its own: the span head is the costliest head of the French protocol (it once trained at 26.7
tokens/s at max_length 1024), and its faster compute path must keep the same outputs
(tests/heads/test_ner_compute.py holds the equality). `--baseline REV` measures the heads of another git
revision in the same run, side by side: each arm runs in its own fresh process, the baseline with the
package tree of REV first on its path (the script only uses the API both share: `get_head`, featurize /
collate / build / predict), and the table gives each arm's ratio to the baseline.

    .venv/bin/python bench/perf/span_head_speed.py --model preset:tiny --max-length 1024 --batch-size 4 \\
        --baseline main --threads 1 --out span.json
    .venv/bin/python bench/perf/span_head_speed.py --compare old.json new.json   # runs of separate checkouts
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from biobench.eval.encoder import load_encoder
from biobench.heads import get_head
from biobench.perf.perf_common import ARM_WINDOWS, ArmClock, disturbance_summary
from biobench.runtime.checkout import package_dirs
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec
from biobench.training.presets import PRESETS, build_modernbert_mlm, train_tokenizer

ROOT = Path(__file__).resolve().parents[2]
# checkout folder -> where its import package lies in an import tree (bench -> biobench, heads -> biobench/heads)
PACKAGE_DIRS = {folder: package.replace(".", "/") for package, folder in package_dirs(ROOT).items()}


def encoder_and_tokenizer(name: str, train_texts: list[str]):
    """`preset:tiny|small`: a fresh ModernBERT with a tokenizer trained on the task's training texts (seeded),
    the README's CPU model, which takes 1,024 positions; anything else: biobench.eval.encoder.load_encoder."""
    if name.startswith("preset:"):
        import torch

        preset = name.removeprefix("preset:")
        tokenizer = train_tokenizer(train_texts, vocab_size=PRESETS[preset]["vocab_size"])
        torch.manual_seed(0)
        return build_modernbert_mlm(tokenizer, preset, seed=0).model, tokenizer

    encoder, tokenizer, _ = load_encoder(name)
    return encoder, tokenizer


def measure(args: argparse.Namespace) -> dict:
    import torch

    torch.set_num_threads(args.threads)
    data = load_task(get_spec(args.task), args.data_dir)
    train = data.splits["train"]
    encoder, tokenizer = encoder_and_tokenizer(args.model, [ex.text for ex in train])
    head = get_head(args.head, "ner")
    features = head.featurize(train, tokenizer, args.max_length, list(data.labels))
    features = sorted(features, key=lambda f: -len(f["input_ids"]))  # the full-length windows: the common case
    batches = [head.collate(features[i:i + args.batch_size], tokenizer.pad_token_id)
               for i in range(0, args.batch_size * args.steps, args.batch_size)]
    torch.manual_seed(0)
    model = head.build(encoder, list(data.labels), train)
    optimizer = torch.optim.AdamW([{"params": model.encoder.parameters(), "lr": 5e-5},
                                   {"params": model.head_parameters(), "lr": 1e-3}])
    tokens = sum(int(b["attention_mask"].sum()) for b in batches)

    def step(batch: dict) -> None:
        loss = model(batch)["loss"]
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    def timed(fn) -> list[float]:
        rates = []
        for _ in range(args.repeats):
            started = time.perf_counter()
            for batch in batches:
                fn(batch)
            rates.append(tokens / (time.perf_counter() - started))
        return rates

    # prediction first, so that the process's peak RSS after it is prediction's own; then training
    model.eval()
    with torch.no_grad():
        model.predict(batches[0])  # warm-up (allocations, first-call overheads)
        eval_rates = timed(model.predict)
    eval_peak = peak_rss_mb()
    model.train()
    step(batches[0])
    train_rates = timed(step)
    # lazy: loads torch
    import biobench.heads.span_ner as span_module

    return {"head": args.head, "task": args.task, "model": args.model, "max_length": args.max_length,
            "batch_size": args.batch_size, "steps": args.steps, "repeats": args.repeats, "threads": args.threads,
            "windows": len(features), "tokens_per_repeat": tokens, "head_module": span_module.__file__,
            "encoder_params": sum(p.numel() for p in model.encoder.parameters()),
            "head_params": sum(p.numel() for p in model.head_parameters()),
            "tokens_per_s": train_rates, "median_tokens_per_s": statistics.median(train_rates),
            "eval_tokens_per_s": eval_rates, "median_eval_tokens_per_s": statistics.median(eval_rates),
            "eval_peak_rss_mb": eval_peak, "train_peak_rss_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """The process's peak resident memory so far (MiB)."""
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def package_tree(rev: str, into: Path) -> Path:
    """The import tree of git revision `rev` (biobench/, biobench/heads/, ... as pyproject.toml maps them)."""
    archive = subprocess.run(["git", "-C", str(ROOT), "archive", rev, *PACKAGE_DIRS], capture_output=True)
    if archive.returncode:
        raise SystemExit(f"--baseline {rev}: git archive failed in {ROOT}: {archive.stderr.decode().strip()}")
    source = into / "src"
    source.mkdir()
    subprocess.run(["tar", "-x", "-C", str(source)], input=archive.stdout, check=True)
    tree = into / "tree"
    for folder, package in sorted(PACKAGE_DIRS.items(), key=lambda item: item[1].count("/")):
        (tree / package).parent.mkdir(parents=True, exist_ok=True)
        (source / folder).rename(tree / package)
    return tree


def run_arm(argv: list[str], tree: Path | None, out: Path) -> dict:
    """This script in a fresh process measuring one arm (with `tree` first on its path when given)."""
    env = dict(os.environ)
    if tree is not None:
        env["PYTHONPATH"] = os.pathsep.join([str(tree), *filter(None, [env.get("PYTHONPATH")])])
    with ArmClock() as clock:  # its own CPU time (a waited-for child) and the machine's, over its window
        subprocess.run([sys.executable, __file__, *argv, "--out", str(out)], env=env, check=True)
    assert clock.window is not None  # set on leaving the with block
    ARM_WINDOWS.append(("baseline" if tree is not None else "this checkout", clock.window))
    return {**json.loads(out.read_text()), "cpu": clock.window.to_dict(), "flag": clock.window.flag}


def side_by_side(args: argparse.Namespace, argv: list[str]) -> dict:
    """The baseline revision and this checkout, each in its own process, one after the other."""
    with tempfile.TemporaryDirectory() as tmp:
        tree = package_tree(args.baseline, Path(tmp))
        runs = {f"baseline {args.baseline}": run_arm(argv, tree, Path(tmp) / "baseline.json"),
                "this checkout": run_arm(argv, None, Path(tmp) / "new.json")}
    table(runs)
    base, new = (run["median_tokens_per_s"] for run in runs.values())
    return {"runs": runs, "train_ratio": new / base,
            "eval_ratio": runs["this checkout"]["median_eval_tokens_per_s"]
            / runs[f"baseline {args.baseline}"]["median_eval_tokens_per_s"]}


def table(runs: dict[str, dict]) -> None:
    base = next(iter(runs.values()))
    print(f"{'run':<28} {'train tok/s':>11} {'ratio':>6} {'eval tok/s':>10} {'ratio':>6} "
          f"{'train MiB':>9} {'eval MiB':>9}  train repeats")
    for name, run in runs.items():
        reps = ", ".join(f"{r:.0f}" for r in run["tokens_per_s"])
        eval_rate = run.get("median_eval_tokens_per_s")
        eval_ratio = eval_rate / base["median_eval_tokens_per_s"] if eval_rate else float("nan")
        print(f"{name:<28} {run['median_tokens_per_s']:>11.1f} "
              f"{run['median_tokens_per_s'] / base['median_tokens_per_s']:>6.2f} {eval_rate or float('nan'):>10.1f} "
              f"{eval_ratio:>6.2f} {run.get('train_peak_rss_mb', float('nan')):>9.0f} "
              f"{run.get('eval_peak_rss_mb', float('nan')):>9.0f}  {reps}")


def main() -> None:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.splitlines()[0])
    parser.add_argument("--task", default="quaero-emea")
    parser.add_argument("--data-dir", default=None)
    parser.add_argument("--model", default="all-MiniLM-L6-v2",
                        help="alias, hub id or folder; preset:tiny builds the README's CPU model (1,024 positions)")
    parser.add_argument("--head", default="span")
    parser.add_argument("--max-length", type=int, default=256)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--steps", type=int, default=3, help="optimiser steps (and predict batches) per repeat")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--quick", action="store_true", help="1 step x 2 repeats (a smoke run)")
    parser.add_argument("--baseline", metavar="REV", default=None,
                        help="also measure the package of this git revision, side by side (e.g. main)")
    parser.add_argument("--out", default=None, help="write the JSON here (default: print it)")
    parser.add_argument("--compare", nargs="+", metavar="JSON", help="print runs side by side, ratios to the first")
    args = parser.parse_args()
    if args.quick:
        args.steps, args.repeats = 1, 2
    if args.compare:
        table({path: json.loads(Path(path).read_text()) for path in args.compare})
        return
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    if args.baseline:
        argv = [f"--{key.replace('_', '-')}={value}" for key, value in vars(args).items()
                if value is not None and key not in ("baseline", "out", "compare", "quick")]
        result = side_by_side(args, argv)

        result["disturbance"] = disturbance_summary()
        print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
        print(f"train ratio: {result['train_ratio']:.2f}  eval ratio: {result['eval_ratio']:.2f}  "
              f"{result['disturbance']}".rstrip())
    else:
        result = measure(args)
    text = json.dumps(result, indent=1)
    if args.out:
        Path(args.out).write_text(text + "\n")
    if not args.out:
        print(text)


if __name__ == "__main__":
    main()
