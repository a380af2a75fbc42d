"""`biobench` command line: a thin dispatcher over one module per subcommand.

Each subcommand lives in `biobench.commands.<name>` and exposes `add_parser(subparsers)`, which registers
its arguments and sets `func(args) -> int`. The command line imports only the module of the command it runs
(`COMMANDS`, a registry of names, as pip's `commands_dict`): `biobench --help` lists the commands from the
registry's summaries and imports none of them, `biobench eval --help` imports the eval command alone.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Collection
from dataclasses import dataclass
from types import ModuleType
from typing import Any

from biobench import __version__
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


@dataclass(frozen=True)
class Command:
    """A subcommand as `biobench --help` lists it: the module that registers its arguments (imported only when
    the command is the one run) and the one line `--help` shows beside its name."""

    module: str
    summary: str

    def load(self) -> ModuleType:
        """The command's module. A missing or broken module is an ImportError naming it, never a command that
        silently disappears."""
        return importlib.import_module(self.module)


# Subcommands in the order --help lists them; each summary is stated here only (the module's own parser gets it
# from this table through `_Commands`).
COMMANDS: dict[str, Command] = {
    "demo": Command("biobench.commands.demo", "offline end-to-end demo: pretrain (detour vs mlm), eval, leaderboard"),
    "tasks": Command("biobench.commands.tasks", "list tasks and where their data is"),
    "data": Command("biobench.commands.data", "fetch, add and check task data"),
    "models": Command("biobench.commands.models", "list model aliases and their hub ids"),
    "eval": Command("biobench.commands.eval", "fine-tune and score a model on tasks x seeds (macro-F1, mean/std/95%% CI)"),
    "prefetch": Command("biobench.commands.prefetch",
                        "download a grid's models and data ahead, for compute nodes without internet"),
    "compare": Command("biobench.commands.compare",
                       "paired bootstrap between two models' results (difference, 95%% CI, p-value)"),
    "contamination": Command("biobench.commands.contamination",
                             "share of task examples that share a word n-gram with a corpus"),
    "corpus": Command("biobench.commands.corpus", "token stores for pretraining: build, info, plan a mix"),
    "pretrain": Command("biobench.commands.pretrain", "continued pretraining: CLM detour and its controls"),
    "study": Command("biobench.commands.study", "a whole study from one file: pretrain, eval, analyses, report"),
    "card": Command("biobench.commands.card", "add evaluation results (model-index) to a checkpoint's model card"),
    "analyze": Command("biobench.commands.analyze", "the paper's analyses: CKA, transplants, linear probes, needle test"),
    "leaderboard": Command("biobench.commands.leaderboard", "browse results in a Gradio app (or --export the table)"),
    "results": Command("biobench.commands.results",
                       "share results as a Hugging Face dataset (push) or export them (export)"),
    "submit": Command("biobench.commands.submit",
                      "request an evaluation in a queue (a folder or hf://datasets/ORG/NAME)"),
    "worker": Command("biobench.commands.worker",
                      "run queued evaluation requests (`biobench submit`) and publish their results"),
    "queue": Command("biobench.commands.queue", "list a request queue, approve or reject requests, configure review"),
    "space": Command("biobench.commands.space", "write a Hugging Face Space serving the leaderboard (init)"),
}


class _Commands(argparse._SubParsersAction):
    """The top-level subparsers: a command's parser gets its `--help` line from `COMMANDS`, whether its module
    registered it or it stands in for a module not imported."""

    def add_parser(self, name: str, **kwargs: Any) -> argparse.ArgumentParser:
        if name in COMMANDS:
            kwargs.setdefault("help", COMMANDS[name].summary)
        return super().add_parser(name, **kwargs)


def command_in(argv: list[str]) -> str | None:
    """The subcommand `argv` names: its first word that is not an option (the top level's options, --help and
    --version, take no value), when it is a known command."""
    word = next((a for a in argv if not a.startswith("-")), None)
    return word if word in COMMANDS else None


def build_parser(load: Collection[str] | None = None) -> argparse.ArgumentParser:
    """The whole command line. The commands in `load` (default: all) register their arguments; every other one
    is listed by name and summary only, its module not imported."""
    parser = CommandParser(
        prog="biobench",
        description="Score biomedical encoders on the paper's 19 tasks, run the CLM-detour pretraining "
        "recipe, and browse results (arXiv 2605.12438).",
    )
    parser.add_argument("--version", action="version", version=f"biobench {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", action=_Commands)
    for name, command in COMMANDS.items():
        if load is None or name in load:
            command.load().add_parser(sub)
        else:
            sub.add_parser(name)
    _with_defaults(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    quiet_library_bars()  # before any command imports the hub libraries: no library bars in a log file
    typed = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser(load=[name] if (name := command_in(typed)) else [])
    args = parser.parse_args(typed)
    args.argv = typed  # as typed: what a ⚠ fix line repeats (eval)
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
