"""`biobench eval --compile`: torch.compile of the encoder changes kernels, not the protocol or the scores;
where the compiler cannot run, one warning line and an eager run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biobench import cli
from biobench.runtime import compiling

ARGS = ["--tasks", "demo-cls", "--seeds", "1", "--epochs", "2", "--limit-train", "40", "--max-length", "32",
        "--no-progress", "--json"]


def _eval(model: Path, results: Path, *extra: str) -> dict:
    assert cli.main(["eval", "--model", str(model), "--results", str(results), *ARGS, *extra]) == 0
    (path,) = sorted([*results.rglob("seed-1.json"), *results.rglob("seed-1.smoke-*.json")])  # a smoke run: its own file
    return json.loads(path.read_text())


def test_compile_problem_names_a_missing_cpp_compiler():
    from torch._inductor import config

    compiling.compile_problem.cache_clear()
    try:
        with config.patch({"cpp.cxx": ("biobench-no-such-c++",)}):  # torch's own patch: restores the config
            problem = compiling.compile_problem("cpu")
    finally:
        compiling.compile_problem.cache_clear()
    assert problem.startswith("its C++ toolchain is missing (") and "biobench-no-such-c++" in problem


def test_compile_falls_back_to_eager_with_one_warning(tiny_mlm_dir, tmp_path, monkeypatch, capsys):
    eager = _eval(tiny_mlm_dir, tmp_path / "eager")
    monkeypatch.setattr(compiling, "compile_problem", lambda device_type: "no C++ compiler (test)")
    monkeypatch.setattr(compiling, "_warned", set())
    capsys.readouterr()
    fallback = _eval(tiny_mlm_dir, tmp_path / "fallback", "--compile", "--seeds", "1,2")
    warnings = [line for line in capsys.readouterr().err.splitlines() if line.startswith("warning:")]
    assert warnings == ["warning: --compile: torch.compile cannot run on cpu here: no C++ compiler (test); running eager"]
    assert "compile" not in fallback and "compile" not in eager  # eager runs keep the schema as it was
    assert fallback["key"] == eager["key"] and fallback["metrics"] == eager["metrics"]
    assert [h["train_loss"] for h in fallback["history"]] == [h["train_loss"] for h in eager["history"]]


@pytest.fixture
def tiny_bert_with_dropout(tmp_path, tiny_tokenizer) -> Path:
    """A 2-layer BERT (MiniLM's architecture, 32 wide) with MiniLM's dropout 0.1 on hidden states and attention,
    saved with the tiny tokenizer: what the parity below needs is dropout in a compiled BERT, not its size."""
    from transformers import BertConfig, BertForMaskedLM

    config = BertConfig(vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=2, num_attention_heads=2,
                        intermediate_size=64, max_position_embeddings=128, hidden_dropout_prob=0.1,
                        attention_probs_dropout_prob=0.1, pad_token_id=tiny_tokenizer.pad_token_id)
    folder = tmp_path / "tiny-bert"
    BertForMaskedLM(config).save_pretrained(folder)
    tiny_tokenizer.save_pretrained(folder)
    return folder


@pytest.mark.slow
def test_compile_gives_the_same_scores_and_keeps_the_protocol(tiny_bert_with_dropout, tmp_path, capsys):
    """A BERT that trains with dropout 0.1 (as MiniLM does): the compiled run must draw the same dropout masks as
    the eager one (inductor's own RNG gave other masks and, with MiniLM on GAD, test macro-F1 0.349 instead of
    0.415). A 2-layer BERT rather than MiniLM: the same kernels to compile, two minutes less."""
    if compiling.compile_problem("cpu") is not None:
        pytest.skip(f"torch.compile cannot run here: {compiling.compile_problem('cpu')}")
    model = tiny_bert_with_dropout
    eager = _eval(model, tmp_path / "eager")
    compiled = _eval(model, tmp_path / "compiled", "--compile")
    assert compiled["compile"] is True and "compile" not in eager
    # an execution detail: same protocol and hash, so the run key (and skipping) ignore it
    assert compiled["protocol"] == eager["protocol"] and compiled["key"] == eager["key"]
    losses = [[h["train_loss"] for h in r["history"]] for r in (eager, compiled)]
    assert len(losses[0]) == 2 and losses[0] == pytest.approx(losses[1], rel=1e-3, abs=1e-4)
    for split in ("dev", "test"):
        assert compiled["metrics"][split]["macro_f1"] == pytest.approx(eager["metrics"][split]["macro_f1"], abs=1e-6)
    assert compiled["dev_score"] == pytest.approx(eager["dev_score"], abs=1e-6)
    # a compiled rerun over the eager results folder skips the finished run
    capsys.readouterr()
    _eval(model, tmp_path / "eager", "--compile")
    assert "1 already done" in capsys.readouterr().err
