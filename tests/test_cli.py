"""The CLI dispatcher: help is fast and errors are one line."""

import importlib
import json
import pkgutil
import re
import subprocess
import sys

import pytest
from biobench import cli, commands
from biobench.errors import ConfigError

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
    code = ("import sys, json; from biobench import cli; cli.build_parser().format_help(); "
            "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules} & "
            "{'torch', 'transformers', 'numpy', 'pandas', 'gradio', 'sklearn'})))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300, check=True)
    assert json.loads(done.stdout) == []


def test_a_missing_command_module_fails_loudly(monkeypatch):
    """No silent skip: a command module that cannot be imported stops the CLI with the import error."""
    monkeypatch.delattr(commands, "card")
    monkeypatch.setitem(sys.modules, "biobench.commands.card", None)  # importing it now raises ImportError
    with pytest.raises(ImportError, match="biobench.commands.card"):
        importlib.reload(cli)
    monkeypatch.undo()
    importlib.reload(cli)


def test_biobench_error_is_one_clean_line(capsys, monkeypatch):
    parser = cli.build_parser()

    def boom(_args):
        raise ConfigError("unknown thing 'x'; did you mean 'y'?")

    args = parser.parse_args([])
    args.func = boom
    monkeypatch.setattr(cli, "build_parser", lambda: type("P", (), {"parse_args": lambda self, a: args})())
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
