"""The CLI dispatcher: help is fast and errors are one line."""

from biobench import cli
from biobench.errors import ConfigError


def test_help_lists_no_missing_commands(capsys):
    assert cli.main([]) == 0
    out = capsys.readouterr().out
    assert "usage: biobench" in out


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
