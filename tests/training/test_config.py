"""Pretraining settings stated once (training/trainer.py PretrainConfig): the flags are generated from its
fields, `pretrain --config run.toml` reads the same settings (flags override the file, unknown keys refused with
the closest name), and every run writes its resolved settings beside the checkpoints in that form, so the same
command with `--config <out>/pretrain_config.toml` trains the same weights."""

from __future__ import annotations

import argparse
import json
from dataclasses import MISSING, fields
from pathlib import Path

import pytest
import torch
from biobench.cli import main
from biobench.commands import pretrain as command
from biobench.errors import ConfigError
from biobench.training import optim
from biobench.training.config import PretrainConfig, config_defaults

TEXT = "Le patient présente une fièvre à 39 degrés et une toux sèche depuis trois jours. "


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser()
    command.add_config_flags(parser)
    return parser


def test_every_setting_with_a_help_text_is_a_flag_with_the_dataclass_default():
    parser = _parser()
    flags = {option for action in parser._actions for option in action.option_strings}
    with_help = [spec for spec in fields(PretrainConfig) if spec.metadata.get("help")]
    assert len(with_help) >= 30
    for spec in with_help:
        name = spec.name.replace("_", "-")
        assert f"--{name}" in flags or f"--no-{name}" in flags, spec.name
    # no default is restated: the flags default to "not given", the help shows the dataclass's own default
    assert all(action.default is None for action in parser._actions if action.dest in {s.name for s in with_help})
    helps = {action.dest: action.help for action in parser._actions}
    assert helps["lr"].endswith(f"(default: {optim.PAPER['lr']})")
    assert config_defaults()["lr"] == optim.PAPER["lr"] and config_defaults()["recipe"] == "detour"
    # settings without a help text (betas, eps, a test hook) are config-file settings only
    assert "--betas" not in flags and "--stop-after-steps" not in flags


def test_flags_parse_like_the_settings_they_come_from():
    args = _parser().parse_args(["--tokens", "2M", "--batch-size", "auto", "--no-progress", "--freeze", "0-1@clm",
                                 "--freeze", "2-3@decay", "--resume", "--lr", "3e-4", "--doc-mask",
                                 "--max-documents", "50"])
    settings = command.flag_settings(args)  # flags are text until setting_value turns them into values
    assert (settings["tokens"], settings["batch_size"], settings["progress"], settings["freeze"]) == (
        2_000_000, "auto", False, ["0-1@clm", "2-3@decay"])
    assert (settings["resume"], settings["lr"], settings["doc_mask"], settings["max_documents"]) == (
        True, 3e-4, True, 50)
    assert "seed" not in settings


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_a_config_file_is_checked_key_by_key(tmp_path):
    good = command.config_file(_write(tmp_path / "a.toml", 'recipe = "mlm"\nseq-len = 64\ntokens = "20K"\n'
                                                           'out = "runs/x"\nbetas = [0.9, 0.95]\ndoc_mask = true\n'))
    assert good == {"recipe": "mlm", "seq_len": 64, "tokens": 20_000, "out": Path("runs/x"), "betas": (0.9, 0.95),
                    "doc_mask": True}
    cases = {
        "seq_length = 64\n": "unknown setting 'seq_length': did you mean 'seq_len'?",
        'lr = "fast"\n': "lr = 'fast': expected a number",
        "doc_mask = 1\n": "doc_mask = '1': expected true or false",
        'tokens = "lots"\n': "token count 'lots'",
        "[section]\nlr = 1\n": "unknown setting 'section'",
        "lr = [[[[1]]]]\n": "lr = '[[[[1]]]]': expected a number",
        "lr = " + "[" * 100_000 + "]" * 100_000 + "\n": "nested too deeply",
        "not toml at all\n": "not valid TOML",
    }
    for number, (text, message) in enumerate(cases.items()):
        with pytest.raises(ConfigError) as err:
            command.config_file(_write(tmp_path / f"bad{number}.toml", text))
        assert message in str(err.value) and "\n" not in str(err.value), (text[:30], str(err.value))
    with pytest.raises(ConfigError, match="cannot read it"):
        command.config_file(tmp_path / "missing.toml")


def test_bad_values_from_a_file_are_one_line_and_nothing_is_written(tmp_path, capsys):
    corpus = _write(tmp_path / "c.txt", TEXT * 50)
    run = _write(tmp_path / "run.toml", f'model = "preset:tiny"\ncorpus = "{corpus}"\ntokens = 2000\n'
                                        f'out = "{tmp_path / "out"}"\nlr = nan\n')
    assert main(["pretrain", "--config", str(run)]) == 2
    assert capsys.readouterr().err.strip().splitlines() == ["error: bad --lr value 'nan': give a finite number"]
    assert not (tmp_path / "out").exists()
    assert main(["pretrain", "--config", str(_write(tmp_path / "partial.toml", "lr = 1e-4\n"))]) == 2
    assert "needs --model, --corpus, --tokens, --out, as flags or in --config" in capsys.readouterr().err


@pytest.mark.slow
def test_the_resolved_config_reruns_to_the_same_weights(tmp_path, monkeypatch, capsys):
    """A file plus a flag that overrides it; the run's pretain_config.toml then reruns bit for bit (~10 s CPU)."""
    from safetensors.torch import load_file

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    corpus = _write(tmp_path / "c.txt", "\n".join(f"{TEXT} Observation {i}." for i in range(300)))
    first = tmp_path / "first"
    run = _write(tmp_path / "run.toml", f'recipe = "mlm"\nmodel = "preset:tiny"\ncorpus = "{corpus}"\n'
                                        f'tokens = "8K"\nout = "{first}"\nseq-len = 64\nbatch_size = 4\n'
                                        f'save_minutes = 0\nlr = 1e-3\ncache_dir = "{tmp_path / "cache"}"\n')
    assert main(["pretrain", "--config", str(run), "--lr", "5e-4", "--no-progress", "--threads", "1"]) == 0
    resolved = (first / "pretrain_config.toml").read_text(encoding="utf-8")
    import tomllib

    settings = tomllib.loads(resolved)
    assert (settings["lr"], settings["recipe"], settings["seq_len"], settings["tokens"]) == (5e-4, "mlm", 64, 8000)
    assert "resume" not in settings and settings["progress"] is False
    second = tmp_path / "second"
    assert main(["pretrain", "--config", str(first / "pretrain_config.toml"), "--out", str(second),
                 "--threads", "1"]) == 0
    a, b = load_file(first / "final/model.safetensors"), load_file(second / "final/model.safetensors")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    assert json.loads(json.dumps(settings))  # plain values only: a TOML any reader reads back
    capsys.readouterr()


def test_every_setting_has_a_default_or_is_one_the_command_requires():
    required = {spec.name for spec in fields(PretrainConfig)
                if spec.default is MISSING and spec.default_factory is MISSING}
    assert required == {"model", "corpus", "out", "tokens"}
