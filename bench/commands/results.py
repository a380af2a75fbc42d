"""`biobench results push`: share a results folder as a Hugging Face dataset (parquet + dataset card)."""

from __future__ import annotations

import argparse

import biobench
from biobench.api.export import export
from biobench.runtime.ownership import check_output_folder

EPILOG = """examples:
  biobench results push my-org/biobench-results --results results/
  biobench results push my-org/biobench-results --results results/ --dry-run shared/   # write, do not upload
  biobench leaderboard --results hf://datasets/my-org/biobench-results                  # browse it back
  biobench results export --format every-eval-ever --results results/ --out eee/      # one file per model"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "results", description="Results as a Hugging Face dataset: one parquet row per (model, task, seed) with the run key, "
        "metrics, the whole result and its predictions, plus a dataset card.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="action", metavar="ACTION", required=True)
    push = sub.add_parser("push", help="upload results.parquet + README.md to a hub dataset repo",
                          description="Build results.parquet (one row per model, task and seed) and a dataset card "
                          "from results folders and upload both to a Hugging Face dataset repo.",
                          epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    push.add_argument("repo_id", metavar="REPO_ID", help="dataset repo ORG/NAME (created when missing)")
    push.add_argument("--results", nargs="+", action="extend", required=True, metavar="DIR",
                      help="results folder(s) written by `biobench eval` (repeatable)")
    push.add_argument("--dry-run", metavar="OUT", help="write the folder that would be pushed to OUT and stop")
    push.add_argument("--private", action="store_true", help="create the repo private")
    push.add_argument("--token", help="hub token (default: HF_TOKEN or `hf auth login`'s)")
    push.add_argument("--message", default="biobench results", help="commit message")
    push.set_defaults(func=run_push)
    export = sub.add_parser("export", help="write results in another tool's schema (every-eval-ever)",
                            description="Write results folders in the Every Eval Ever schema (evaleval/every_eval_ever, "
                            "eval.schema.json 0.3.0): OUT/data/biobench/<developer>/<model>/<uuid>.json, one file per "
                            "model, one entry per task (seed mean, std, 95% interval, smoke and degenerate flags).",
                            epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
    export.add_argument("--format", dest="fmt", required=True, choices=["every-eval-ever"], help="the schema")
    export.add_argument("--results", nargs="+", action="extend", required=True, metavar="DIR",
                        help="results folder(s) written by `biobench eval`, a results.parquet or hf://datasets/ORG/NAME")
    export.add_argument("--out", required=True, metavar="OUT", help="folder to write into (created when missing)")
    export.set_defaults(func=run_export)


def run_push(args: argparse.Namespace) -> int:
    # lazy: loads pandas
    from biobench.standings import dataset

    # lazy: loads pandas
    from biobench.standings.aggregate import build_board

    if args.dry_run:

        # the folder a push would upload: new, or one biobench wrote (its marker, or an earlier dry run's two files)
        check_output_folder(args.dry_run, "--dry-run", "results dataset", legacy=lambda folder: {
            p.name for p in folder.iterdir()} <= {dataset.PARQUET, dataset.CARD}, mark=False)  # it is uploaded as is
    board = build_board(args.results, reference=False, significance=False)
    for problem in board.problems:
        print(f"warning: {problem.path}: {problem.reason} (left out)")
    runs = dataset.board_runs(board)
    left_out: list[tuple[str, str]] = []  # refused predictions files: the row goes without its predictions
    if args.dry_run:
        out = dataset.build_folder(runs, args.dry_run, args.repo_id, left_out)
        _warn_left_out(left_out)
        print(f"wrote {out / dataset.PARQUET} ({len(runs)} rows) and {out / dataset.CARD}; upload it with "
              f"`biobench results push {args.repo_id} --results ...` or `hf upload {args.repo_id} {out} "
              "--repo-type dataset`")
        return 0
    url = dataset.push(runs, args.repo_id, private=args.private, token=args.token, message=args.message,
                       problems=left_out)
    _warn_left_out(left_out)
    print(f"pushed {len(runs)} rows to hf://datasets/{args.repo_id} ({url})")
    return 0


def _warn_left_out(problems: list[tuple[str, str]]) -> None:
    for path, reason in problems:
        print(f"warning: {path}: {reason} (its predictions left out)")


def run_export(args: argparse.Namespace) -> int:
    results = biobench.load_results(args.results)
    for problem in results.problems:
        print(f"warning: {problem.path}: {problem.reason} (left out)")
    written = export(results, args.out, args.fmt)
    print(f"wrote {len(written)} file(s) ({len(results)} run{'' if len(results) == 1 else 's'}, {args.fmt}) under {args.out}")
    return 0
