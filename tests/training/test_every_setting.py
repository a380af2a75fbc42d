"""The freeze experiments of paper §3.3 (Table 3) and every pretraining setting, end to end (issue 51 §6).

On main 29866aa every run with frozen layers crashed when it wrote biobench_pretrain.json (`'Freeze' object has
no attribute 'to_json'`), `--max-documents 50` stayed the text '50' (a TypeError traceback), `--tokens 12Q` was a
43-line traceback and `freeze = [1]` in a config file another. Here every recipe of `pretrain --list` runs on a
tiny model deep enough for the recipes' own ranges (16 layers: 0-7 and 8-14 fit), from the flag and from
`--config`, and the frozen layers are checked bit-identical through the phase they are frozen in while the others
train; and every PretrainConfig field is given a non-default value, once as flags and once in a config file.
"""

from __future__ import annotations

import json
import tomllib
from dataclasses import fields
from pathlib import Path

import pytest
import torch
from biobench.cli import main
from biobench.training.config import PretrainConfig
from biobench.training.recipes import RECIPES

TEXT = "Le patient présente une fièvre à 39 degrés et une toux sèche depuis trois jours. "


@pytest.fixture(scope="module")
def deep_tiny(tmp_path_factory, tiny_tokenizer) -> Path:
    """A 16-layer, 32-wide ModernBERT MLM with its tokenizer: the recipes' freeze ranges (0-7, 8-14) fit it."""
    from biobench.training.presets import build_modernbert_mlm

    out = tmp_path_factory.mktemp("deep-tiny")
    build_modernbert_mlm(tiny_tokenizer, "tiny", seed=0, num_hidden_layers=16, hidden_size=32,
                         num_attention_heads=2, intermediate_size=64).save_pretrained(out)
    tiny_tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="module")
def corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "c.txt"
    path.write_text("\n".join(f"{TEXT} Observation {i}." for i in range(200)), encoding="utf-8")
    return path


def _small(tmp: Path) -> list[str]:
    return ["--seq-len", "32", "--batch-size", "4", "--save-minutes", "0", "--no-progress", "--threads", "1",
            "--device", "cpu", "--cache-dir", str(tmp / "tokens")]


def _layers(folder: Path) -> dict[int, dict[str, torch.Tensor]]:
    from safetensors.torch import load_file

    layers: dict[int, dict[str, torch.Tensor]] = {}
    for name, tensor in load_file(folder / "model.safetensors").items():
        parts = name.split(".")
        if "layers" in parts:
            layers.setdefault(int(parts[parts.index("layers") + 1]), {})[name] = tensor
    return layers


def _moved(before: Path, after: Path) -> set[int]:
    a, b = _layers(before), _layers(after)
    return {i for i in a if any(not torch.equal(a[i][k], b[i][k]) for k in a[i])}


@pytest.mark.slow
@pytest.mark.parametrize("source", ["flag", "config"])
def test_every_recipe_runs_and_its_frozen_layers_stay_frozen(tmp_path, deep_tiny, corpus, source, capsys):
    """~25 s: the five encoder recipes on the 16-layer model, decoder-control on preset:tiny-decoder."""
    for name, recipe in RECIPES.items():
        out = tmp_path / name
        model = "preset:tiny-decoder" if recipe.decoder else str(deep_tiny)
        if source == "flag":
            argv = ["pretrain", "--recipe", name, "--model", model, "--corpus", str(corpus), "--tokens", "1K",
                    "--out", str(out)]
        else:
            run = tmp_path / f"{name}.toml"
            run.write_text(f'recipe = "{name}"\nmodel = "{model}"\ncorpus = "{corpus}"\ntokens = "1K"\n'
                           f'out = "{out}"\n', encoding="utf-8")
            argv = ["pretrain", "--config", str(run)]
        rc = main([*argv, *_small(tmp_path)])
        err = capsys.readouterr().err
        assert rc == 0 and "Traceback" not in err, (name, err[-2000:])
        lineage = json.loads((out / "final" / "biobench_pretrain.json").read_text())
        assert lineage["frozen"] == [{"layers": [f.first, f.last], "phase": f.phase} for f in recipe.freezes]
        if recipe.decoder:
            continue
        frozen = {phase: {i for f in recipe.freezes if f.phase == phase for i in range(f.first, f.last + 1)}
                  for phase in ("clm", "decay")}
        in_phase1, in_phase2 = _moved(out / "init", out / "phase1"), _moved(out / "phase1", out / "final")
        # frozen layers are bit-identical through their phase; every other layer trained
        assert in_phase1 == set(range(16)) - frozen["clm"], (name, sorted(in_phase1))
        assert in_phase2 == set(range(16)) - frozen["decay"], (name, sorted(in_phase2))


@pytest.mark.slow
def test_the_issue_freeze_runs_on_the_tiny_preset_with_a_range_scaled_to_its_four_layers(tmp_path, corpus, capsys):
    """`pretrain --freeze 0-1@clm` (the issue's command) on preset:tiny's 4 layers; 0-7 does not fit, one line."""
    out = tmp_path / "o"
    assert main(["pretrain", "--model", "preset:tiny", "--corpus", str(corpus), "--tokens", "1K", "--out", str(out),
                 "--freeze", "0-1@clm", *_small(tmp_path)]) == 0
    assert _moved(out / "init", out / "phase1") == {2, 3}
    assert json.loads((out / "final" / "biobench_pretrain.json").read_text())["frozen"] == [
        {"layers": [0, 1], "phase": "clm"}]
    capsys.readouterr()
    assert main(["pretrain", "--recipe", "detour-freeze-low", "--model", "preset:tiny", "--corpus", str(corpus),
                 "--tokens", "1K", "--out", str(tmp_path / "low"), *_small(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 1 and "outside the model's 4 layers" in lines[0], lines


# Every PretrainConfig field with a value other than its default (the flag's text; the config file's TOML value).
NON_DEFAULT: dict[str, tuple[list[str], str]] = {
    "recipe": (["mlm"], '"mlm"'), "text_field": (["body"], '"body"'), "decay_ratio": (["0.2"], "0.2"),
    "freeze": (["0-1@clm", "2-3@decay"], '["0-1@clm", "2-3@decay"]'), "micro_batch_size": (["2"], "2"),
    "lr": (["5e-4"], "5e-4"), "weight_decay": (["0.01"], "0.01"), "warmup_tokens": (["100"], "100"),
    "grad_clip": (["0.5"], "0.5"), "save_every": (["2K"], '"2K"'), "doc_mask": ([], "true"), "seed": (["3"], "3"),
    "data_seed": (["4"], "4"), "max_documents": (["50"], "50"), "max_model_gb": (["1"], "1"),
    "precision": (["fp32"], '"fp32"'), "attn": (["eager"], '"eager"'), "fsdp": ([], "true"),
    "gradient_checkpointing": ([], "true"), "language": (["fr"], '"fr"'), "license": (["mit"], '"mit"'),
    "loader_workers": (["1"], "1"), "report_to": (["tensorboard"], '"tensorboard"'),
    "heldout_docs": (["2"], "2"), "eval_every": (["1"], "1"),
}
CONFIG_ONLY = {"betas": "[0.9, 0.95]", "eps": "1e-7", "stop_after_steps": "100"}
# given by _small / the run itself (seq_len, batch_size, save_minutes, progress, device, cache_dir; model, corpus,
# tokens, out), or covered elsewhere: resume (test_pretrain_resume), compile (a torch.compile of the encoder: tens
# of seconds of CPU; tests/runtime/test_compiling.py)
ELSEWHERE = {"model", "corpus", "tokens", "out", "seq_len", "batch_size", "save_minutes", "progress", "device",
             "cache_dir", "resume", "compile"}


def test_the_table_of_non_default_values_names_every_setting():
    assert set(NON_DEFAULT) | set(CONFIG_ONLY) | ELSEWHERE == {f.name for f in fields(PretrainConfig)}


@pytest.mark.slow
def test_every_setting_runs_from_the_flags_and_from_a_config_file(tmp_path, deep_tiny, capsys):
    """~15 s: the same non-default settings as flags and as a file give the same resolved config and a run."""
    corpus = tmp_path / "c.jsonl"
    corpus.write_text("".join(json.dumps({"body": f"{TEXT} Note {i}."}) + "\n" for i in range(120)),
                      encoding="utf-8")
    base = {"model": str(deep_tiny), "corpus": str(corpus), "tokens": "2K"}
    flags = ["pretrain", *(a for k, v in base.items() for a in (f"--{k}", v))]
    for name, (values, _) in NON_DEFAULT.items():
        flag = "--" + name.replace("_", "-")
        flags += [a for v in values for a in (flag, v)] if values else [flag]
    config = "".join(f"{k} = {json.dumps(v)}\n" for k, v in base.items())
    config += "".join(f"{name} = {toml}\n" for name, (_, toml) in NON_DEFAULT.items())
    resolved = {}
    for source in ("flags", "config"):
        out = tmp_path / source
        if source == "flags":
            argv = [*flags, "--out", str(out)]
        else:
            (tmp_path / "run.toml").write_text(config + f'out = "{out}"\n', encoding="utf-8")
            argv = ["pretrain", "--config", str(tmp_path / "run.toml")]
        rc = main([*argv, *_small(tmp_path)])
        err = capsys.readouterr().err
        assert rc == 0 and "Traceback" not in err, (source, err[-2000:])
        resolved[source] = tomllib.loads((out / "pretrain_config.toml").read_text(encoding="utf-8"))
        assert (out / "final" / "model.safetensors").is_file() and list((out / "tensorboard").rglob("events*"))
        log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
        assert log and all(r["lr"] <= 5e-4 for r in log)
        assert all(set(r["validation"]) == {"corpus"} for r in log)  # --eval-every 1: the store's held-out loss
    settings = resolved["flags"]
    assert {k: v for k, v in settings.items() if k != "out"} == {k: v for k, v in resolved["config"].items()
                                                                 if k != "out"}
    assert (settings["max_documents"], settings["data_seed"], settings["freeze"], settings["text_field"]) == (
        50, 4, ["0-1@clm", "2-3@decay"], "body")
    assert (settings["lr"], settings["precision"], settings["attn"], settings["report_to"]) == (
        5e-4, "fp32", "eager", "tensorboard")
    (tmp_path / "only.toml").write_text(config + f'out = "{tmp_path / "only"}"\n'
                                        + "".join(f"{k} = {v}\n" for k, v in CONFIG_ONLY.items()), encoding="utf-8")
    assert main(["pretrain", "--config", str(tmp_path / "only.toml"), *_small(tmp_path)]) == 0
    saved = tomllib.loads((tmp_path / "only" / "pretrain_config.toml").read_text(encoding="utf-8"))
    assert (saved["betas"], saved["eps"]) == ([0.9, 0.95], 1e-7)
    capsys.readouterr()


def test_bad_settings_from_flags_and_files_are_one_line(tmp_path, capsys):
    """The issue's tracebacks, and each setting kind's bad value, from a flag and from a file: rc 2, one line."""
    base = ["pretrain", "--model", "preset:tiny", "--corpus", str(tmp_path / "c.txt"), "--tokens", "1K"]
    out = ["--out", str(tmp_path / "out")]
    cases = [
        ([*base, "--tokens", "12Q", *out], "token count '12Q'"),
        ([*base, "--max-documents", "lots", *out], "bad --max-documents value 'lots': expected a whole number"),
        ([*base, "--max-documents", "0", *out], "bad --max-documents value '0': must be from 1"),
        ([*base, "--loader-workers", "1.5", *out], "bad --loader-workers value '1.5'"),
        ([*base, "--max-model-gb", "nan", *out], "give a finite number"),
        ([*base, "--freeze", "7-0@clm", *out], "first layer 7 is after last layer 0"),
        ([*base, "--freeze", "0-1@lunch", *out], "expected FIRST-LAST@clm"),
        ([*base, "--batch-size", "-3", *out], "expected a positive integer or 'auto'"),
        ([*base, "--out", "x" * 1_000_000], "over the limit of 4,096"),
        ([*base, "--out", "runs/a\nb"], "U+000A"),
        ([*base, "--language", "fr\x1b[31m", *out], "U+001B"),
    ]
    files = {
        "freeze = [1]\n": "expected a list",
        'freeze = "0-1@lunch"\n': "expected FIRST-LAST@clm",
        'out = "' + "x" * 1_000_000 + '"\n': "over the limit of 4,096",
        'max_documents = "50"\n': "expected a whole number",
        "max_documents = 1.5\n": "must be a whole number",
        "tokens = true\n": "expected a token count",
        'betas = ["a", 1]\n': "expected a list",
        "language = 5\n": "expected text",
    }
    for i, (text, phrase) in enumerate(files.items()):
        (tmp_path / f"bad{i}.toml").write_text(text, encoding="utf-8")
        cases.append((["pretrain", "--config", str(tmp_path / f"bad{i}.toml"), *base[1:], *out], phrase))
    for argv, phrase in cases:
        assert main(argv) == 2, argv[-2:]
        lines = capsys.readouterr().err.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error: ") and phrase in lines[0], (phrase, lines)
        assert len(lines[0]) < 400
    assert not (tmp_path / "out").exists()
