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
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=True)
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
