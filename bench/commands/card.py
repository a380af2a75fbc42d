"""`biobench card MODEL_DIR --results DIR`: add evaluation results to a checkpoint's model card."""

from __future__ import annotations

import argparse

from biobench.errors import ConfigError, DataError
from biobench.models import inspect_model
from biobench.names import display_name
from biobench.store.layout import results_of_revision
from biobench.store.summary import model_summaries
from biobench.store.trust import describe_overrides, overrides, split_smoke
from biobench.training.card import add_results


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "card", description="Writes the mean test score per task (the protocol's headline metric, over seeds) of MODEL_DIR "
        "into MODEL_DIR/README.md as Hugging Face `model-index` entries, keeping the card's text, so the folder can "
        "be pushed to the hub as it is. `biobench pretrain` writes the card itself; a folder without one gets a "
        "minimal card. Smoke runs (results made with protocol overrides: --epochs, --limit-train, --limit-eval, ...) "
        "are left out: model-index states the protocol's scores only.")
    parser.add_argument("model_dir", help="checkpoint folder (the one passed to `biobench eval --model`)")
    parser.add_argument("--results", default="results", help="results folder of `biobench eval` (default: results)")
    parser.add_argument("--name", help="model name in the card (default: the folder's display name)")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from pathlib import Path

    folder = Path(args.model_dir)
    if not (folder / "config.json").is_file():
        raise ConfigError(f"{folder} is not a model folder (no config.json): pass a checkpoint folder such as runs/x/final")
    info = inspect_model(str(folder))  # its results are found by the weights' revision, wherever they were evaluated
    results, smoke = split_smoke(results_of_revision(args.results, info.revision))
    where = f"the weights of {folder} (revision {info.revision[:19]}…) under {args.results}"
    if smoke and not results:
        raise DataError(f"only smoke runs for {where} ({len(smoke)}, protocol overrides "
                        f"{describe_overrides(overrides(smoke[0]))}): model-index states the protocol's scores; run "
                        "`biobench eval` without overrides first")
    rows = model_summaries(results, where)
    name = args.name or display_name(results[0].model)  # as on the leaderboard
    path = add_results(folder, name, rows)
    for r in rows:
        print(f"{r['task_id']:<18} {r['metric']} {100 * r['value']:.2f} (seeds {', '.join(map(str, r['seeds']))})")
    print(f"wrote {len(rows)} model-index entries to {path}")
    if smoke:
        print(f"left out {len(smoke)} smoke run(s) (protocol overrides, e.g. {describe_overrides(overrides(smoke[0]))}): "
              "not the protocol's scores")
    return 0
