"""`biobench contamination`: which task examples share a word n-gram with a pretraining corpus."""

from __future__ import annotations

import argparse
import json
import sys

from biobench.api.contamination import check_tasks
from biobench.runtime.console import console
from biobench.tasks.registry import TaskCatalogue, add_task_arguments

EPILOG = """examples:
  biobench contamination --corpus ../shared/data/pretrain-fr --lang fr --data-dir ../shared/data
  biobench contamination --corpus corpus/ --tasks quaero-emea,fracco-30 --n 8 --json
  biobench eval --model runs/detour/final --lang fr --check-contamination   # the checkpoint's own corpus

The corpus is read as `biobench pretrain` reads it (a text file, a folder of .txt / .jsonl(.gz), a hub dataset
id), once, streamed: memory holds the tasks' n-grams and one batch of corpus words, whatever the corpus size."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "contamination", description="Per task and split: how many examples share a word n-gram (default 13, as the GPT-3 paper's "
        "overlap analysis) with the corpus, and the longest run of words shared. Both sides are normalised alike "
        "(NFKC, case folded, punctuation and line breaks ignored: words are runs of letters and digits).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--corpus", required=True, action="append", metavar="CORPUS",
                        help="text file, folder of .txt / .jsonl(.gz), or hub dataset id (repeatable)")
    parser.add_argument("--text-field", default="text", help="JSON field holding the text (default: text)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", help="comma-separated task ids (default: every paper task with data)")
    which.add_argument("--lang", choices=["fr", "en"], help="every task of a language that has data")
    parser.add_argument("--n", type=int, default=13, help="n-gram length in words (default 13)")
    parser.add_argument("--json", action="store_true", help="print the report as JSON")
    add_task_arguments(parser)
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    report = check_tasks(args.corpus, args.tasks, lang=args.lang, data_dir=args.data_dir, n=args.n,
                         catalogue=TaskCatalogue.build(args.task_file), text_field=args.text_field, progress=not args.json)
    if args.json:
        print(json.dumps(report, indent=2, ensure_ascii=False))
        return 0
    from rich.table import Table

    corpus = report["corpus"]
    typed = args.corpus if isinstance(args.corpus, list) else [args.corpus]  # the terminal's own paths, as typed
    table = Table(title=f"shared word {report['n']}-grams with {', '.join(map(str, typed))} "
                  f"({corpus['documents']:,} documents, {corpus['words']:,} words)", title_justify="left")
    for column in ("task", "split", "examples", "contaminated", "share", "longest run", "too short"):
        table.add_column(column, justify="left" if column in ("task", "split") else "right")
    for task, splits in report["tasks"].items():
        for split, found in splits.items():
            table.add_row(task, split, f"{found['examples']:,}", f"{found['contaminated']:,}",
                          f"{100 * found['share']:.2f}%", f"{found['longest']} words", f"{found['short']:,}",
                          style="bold" if found["share"] > 0.01 else None)
    console().print(table)
    print(f"read {corpus['chars'] / 1e6:,.1f} M characters in {corpus['seconds']:.1f} s; an example counts when any "
          f"of its {report['n']}-grams occurs in the corpus; 'too short': fewer than {report['n']} words, not checked",
          file=sys.stderr)
    for task, reason in report["unavailable"].items():
        print(f"not checked {task}: {reason}", file=sys.stderr)
    return 0
