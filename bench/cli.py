"""`biobench` command line: a thin dispatcher over one module per subcommand.

Each subcommand lives in `biobench.commands.<name>` and exposes `add_parser(subparsers)`, which registers
its arguments and sets `func(args) -> int`. Heavy imports (torch, transformers) happen inside `func`, so
`biobench --help` stays instant.
"""

from __future__ import annotations

import argparse
import sys
from types import ModuleType

from biobench import __version__
from biobench.commands import (
    analyze,
    card,
    compare,
    contamination,
    corpus,
    data,
    demo,
    leaderboard,
    models,
    prefetch,
    pretrain,
    queue,
    results,
    space,
    study,
    submit,
    tasks,
    worker,
)
from biobench.commands import eval as eval_command
from biobench.errors import BiobenchError
from biobench.runtime.console import CommandParser, HelpFormatter, RawDescriptionHelpFormatter
from biobench.runtime.progress import quiet_library_bars


def _with_defaults(parser: argparse.ArgumentParser) -> None:
    """Give every (sub)parser the default-showing formatter, keeping hand-laid-out descriptions as they are."""
    raw = isinstance(parser.formatter_class, type) and issubclass(parser.formatter_class,
                                                                  argparse.RawDescriptionHelpFormatter)
    parser.formatter_class = RawDescriptionHelpFormatter if raw else HelpFormatter
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for sub in set(action.choices.values()):
                _with_defaults(sub)


# Subcommands in the order --help lists them. Imported explicitly: a missing or broken command module is an
# ImportError at start-up, never a subcommand that silently disappears.
COMMANDS: dict[str, ModuleType] = {
    "demo": demo, "tasks": tasks, "data": data, "models": models, "eval": eval_command, "prefetch": prefetch, "compare": compare,
    "contamination": contamination, "corpus": corpus,
    "pretrain": pretrain, "study": study, "card": card, "analyze": analyze, "leaderboard": leaderboard,
    "results": results, "submit": submit, "worker": worker, "queue": queue, "space": space,
}


def build_parser() -> argparse.ArgumentParser:
    parser = CommandParser(
        prog="biobench",
        description="Score biomedical encoders on the paper's 19 tasks, run the CLM-detour pretraining "
        "recipe, and browse results (arXiv 2605.12438).",
    )
    parser.add_argument("--version", action="version", version=f"biobench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module in COMMANDS.values():
        module.add_parser(sub)
    _with_defaults(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    quiet_library_bars()  # before any command imports the hub libraries: no library bars in a log file
    parser = build_parser()
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)  # as typed: what a ⚠ fix line repeats (eval)
    if not getattr(args, "func", None):
        parser.print_help()
        return 0
    try:
        return int(args.func(args) or 0)
    except BiobenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return getattr(err, "exit_code", 2)
    except KeyboardInterrupt:
        print("interrupted; finished results are kept", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
