"""The CLI dispatcher: help is fast and errors are one line."""

import json
import os
import pkgutil
import re
import subprocess
import sys

import pytest
from biobench import cli, commands
from biobench.errors import ConfigError

from tests.support import REPO

DOCUMENTED = ["eval", "pretrain", "compare", "analyze", "tasks", "models", "leaderboard", "demo", "data", "card"]


def test_help_lists_no_missing_commands(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: biobench")
    listed = set(re.findall(r"^ {4}([a-z-]+)(?: |$)", out.split("positional arguments:")[1], flags=re.M))
    assert listed == set(cli.COMMANDS) >= set(DOCUMENTED), f"not in `biobench --help`: {set(DOCUMENTED) - listed}"
    # every module under biobench.commands is a registered subcommand
    assert {m.name for m in pkgutil.iter_modules(commands.__path__)} == set(cli.COMMANDS)


def test_help_is_fast_and_imports_no_heavy_library():
    code = ("import sys, json; from biobench import cli; cli.build_parser(load=[]).format_help(); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'transformers', 'numpy', 'pandas', 'gradio', 'sklearn'})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(done.stdout) == []


def test_a_missing_command_module_fails_loudly(monkeypatch):
    """No silent skip: running a command whose module cannot be imported stops with the import error; the
    other commands still start."""
    monkeypatch.setitem(sys.modules, "biobench.commands.card", None)  # importing it now raises ImportError
    with pytest.raises(ImportError, match="biobench.commands.card"):
        cli.main(["card", "--help"])
    assert cli.main([]) == 0


def test_every_registered_command_loads_and_registers_its_own_name():
    """The registry names a module per command, each module registers the command of its name (and nothing
    else at the top level), and the summary `--help` lists is the registry's whether the module is loaded or not."""
    full = cli.build_parser()
    lazy = cli.build_parser(load=[])
    listing = [[(a.dest, a.help) for a in p._subparsers._group_actions[0]._choices_actions] for p in (full, lazy)]
    assert listing[0] == listing[1] == [(name, c.summary) for name, c in cli.COMMANDS.items()]
    for name, command in cli.COMMANDS.items():
        assert command.module == f"biobench.commands.{name}"
        assert list(cli.build_parser(load=[name])._subparsers._group_actions[0].choices) == list(cli.COMMANDS)


def test_the_command_named_on_the_line_is_the_one_loaded():
    assert cli.command_in(["eval", "--model", "x"]) == "eval"
    assert cli.command_in(["--help"]) is None and cli.command_in([]) is None
    assert cli.command_in(["-h", "data", "fetch"]) == "data"
    assert cli.command_in(["evaluate"]) is None  # an unknown word: argparse says "invalid choice" with the list


def test_importing_the_command_line_imports_no_command_module():
    """`import biobench.cli` and `biobench --help` import no module of biobench.commands; `biobench eval
    --help` imports the eval command's module alone."""
    code = ("import contextlib, io, sys\nfrom biobench import cli\nprint(sorted(m for m in sys.modules if m.startswith('biobench.commands')))\n"
            "for argv in (['--help'], ['eval', '--help']):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n        cli.main(argv)\n"
            "    print(sorted(m for m in sys.modules if m.startswith('biobench.commands.')))\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.splitlines() == ["[]", "[]", "['biobench.commands.eval']"]


@pytest.mark.parametrize(("argv", "golden"), [([], "help.txt"), (["eval"], "eval_help.txt")])
def test_help_prints_what_it_printed_before_the_registry(argv, golden):
    """`biobench --help` and `biobench eval --help` as printed before commands were loaded lazily (captured
    from main at fbd4962 with COLUMNS=100): the registry changed what is imported, not what is printed. A change
    to these help texts rewrites the files: `COLUMNS=100 biobench eval --help > tests/fixtures/cli/eval_help.txt`."""
    env = {**os.environ, "COLUMNS": "100"}
    done = subprocess.run([sys.executable, "-m", "biobench.cli", *argv, "--help"], capture_output=True, text=True,
                          timeout=60, env=env, check=True)
    assert done.stdout == (REPO / "tests/fixtures/cli" / golden).read_text(encoding="utf-8")


def test_biobench_error_is_one_clean_line(capsys, monkeypatch):
    parser = cli.build_parser()

    def boom(_args):
        raise ConfigError("unknown thing 'x'; did you mean 'y'?")

    args = parser.parse_args([])
    args.func = boom
    monkeypatch.setattr(cli, "build_parser", lambda load=None: type("P", (), {"parse_args": lambda self, a: args})())
    assert cli.main([]) == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: unknown thing 'x'; did you mean 'y'?"


def _parsers(parser, path=("biobench",)):
    """(command path, parser) for the parser and every subcommand below it."""
    import argparse

    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, (*path, name))


def test_every_option_of_every_subcommand_has_help_and_shows_its_default():
    import argparse

    skip = (argparse._HelpAction, argparse._VersionAction, argparse._SubParsersAction)
    seen = 0
    for path, parser in _parsers(cli.build_parser()):
        command = " ".join(path)
        assert len(path) == 1 or parser.description, f"`{command} --help` has no description"
        text = parser.format_help()
        assert "%%" not in text, f"`{command} --help` prints a doubled percent sign"
        for action in parser._actions:
            if isinstance(action, skip) or action.help == argparse.SUPPRESS:
                continue
            seen += 1
            name = "/".join(action.option_strings) or action.dest
            assert action.help, f"`{command}` {name} has no help string"
            shown = parser._get_formatter()._expand_help(action)  # the help text as --help prints it
            assert shown in " ".join(text.split()) or shown.split()[0] in text
            if action.option_strings and action.default not in (None, False, []):
                assert "default" in shown.lower(), f"`{command} --help` hides {name}'s default"
    assert seen > 150


def test_data_fetch_help_lists_the_fetchable_tasks(capsys):
    with pytest.raises(SystemExit):
        cli.main(["data", "fetch", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "Fetchable tasks: " in out and "ncbi-disease" in out and "deid" not in out.split("Fetchable tasks:")[1].split(".")[0]
