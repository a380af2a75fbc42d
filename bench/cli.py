"""`biobench` command line: a thin dispatcher over one module per subcommand.

Each subcommand lives in `biobench.commands.<name>` and exposes `add_parser(subparsers)`, which registers
its arguments and sets `func(args) -> int`. Heavy imports (torch, transformers) happen inside `func`, so
`biobench --help` stays instant.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys

from biobench import __version__
from biobench.errors import BiobenchError

# Order in which subcommands are listed in --help. A subcommand appears once its module exists.
COMMANDS = ["demo", "tasks", "data", "models", "eval", "compare", "pretrain", "card", "analyze", "leaderboard", "results"]


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="biobench",
        description="Score biomedical encoders on the paper's 19 tasks, run the CLM-detour pretraining "
        "recipe, and browse results (arXiv 2605.12438).",
    )
    parser.add_argument("--version", action="version", version=f"biobench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in COMMANDS:
        module_name = f"biobench.commands.{name.replace('-', '_')}"
        if importlib.util.find_spec(module_name) is None:
            continue
        importlib.import_module(module_name).add_parser(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except BiobenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted; finished results are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
