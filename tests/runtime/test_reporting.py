"""--report-to tensorboard: the scalars read back from the event files equal the JSON logs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biobench.errors import ConfigError
from biobench.eval import finetune as ft
from biobench.runtime import reporting
from biobench.training.trainer import PretrainConfig, train

pytest.importorskip("tensorboard", reason="the 'tensorboard' extra (part of 'dev') is not installed")


def _scalars(log_dir: Path) -> dict[str, list[tuple[int, float]]]:
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    acc = EventAccumulator(str(log_dir))
    acc.Reload()
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def test_pretrain_reports_each_logged_step(tmp_path):
    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Le patient {i} présente une toux sèche et une fièvre."}) + "\n"
                              for i in range(200)))
    out = tmp_path / "run"
    train(PretrainConfig(recipe="mlm", model="preset:tiny", corpus=str(corpus), out=out, tokens=4 * 4 * 64,
                         batch_size=4, seq_len=64, micro_batch_size=2, decay_ratio=0.5, progress=False,
                         cache_dir=tmp_path / "cache", report_to="tensorboard"))
    log = [json.loads(line) for line in (out / "train_log.jsonl").read_text().splitlines()]
    scalars = _scalars(out / "tensorboard")
    assert [s for s, _ in scalars["train/loss"]] == [r["step"] for r in log]
    assert [v for _, v in scalars["train/loss"]] == pytest.approx([r["loss"] for r in log], rel=1e-6)
    assert [v for _, v in scalars["train/lr"]] == pytest.approx([r["lr"] for r in log], rel=1e-6)
    assert "train/mfu" not in scalars  # null on CPU: left out, not written as 0


def test_finetune_reports_each_evaluation(toy_classification, tmp_path):
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=2)
    report = reporting.make_reporter("tensorboard", tmp_path / "tb")
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False, report=report)
    report.close()
    scalars = _scalars(tmp_path / "tb")
    assert [s for s, _ in scalars["train/loss"]] == [h["step"] for h in outcome.history] == [2, 4]
    assert [v for _, v in scalars[f"dev/{protocol.dev_metric}"]] == pytest.approx(
        [h[f"dev_{protocol.dev_metric}"] for h in outcome.history])


def test_unknown_or_missing_backend_is_one_clear_error(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="--report-to 'comet': choose one of none, tensorboard, wandb"):
        reporting.make_reporter("comet", tmp_path)
    assert isinstance(reporting.make_reporter("none", tmp_path), reporting.NoReport)
    import builtins

    real_import = builtins.__import__

    def no_tensorboard(name, *args, **kwargs):
        if name.startswith("torch.utils.tensorboard"):
            raise ImportError("TensorBoard logging requires TensorBoard")
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_tensorboard)
    with pytest.raises(ConfigError, match=r"pip install -e '.\[tensorboard\]'"):
        reporting.make_reporter("tensorboard", tmp_path / "tb")


def test_eval_cli_reports_per_run_beside_its_result(tiny_mlm_dir, tmp_path, capsys):
    from biobench import cli
    from biobench.standings.scan import scan_results

    args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--epochs", "1",
            "--limit-train", "40", "--max-length", "32", "--results", str(tmp_path), "--no-progress", "--json",
            "--report-to", "tensorboard"]
    assert cli.main(args) == 0
    result = json.loads(capsys.readouterr().out)["runs"][0]
    (seed_file,) = tmp_path.glob("*/demo-cls/seed-1.smoke-*.json")  # --epochs 1: a smoke run, in its own file
    assert result["path"] == str(seed_file)
    scalars = _scalars(seed_file.parent / "tensorboard" / seed_file.name.removesuffix(".json"))
    assert "train/loss" in scalars and len(scalars["dev/macro_f1"]) == 1
    assert result["status"] == "done"
    scan = scan_results([tmp_path])
    assert len(scan.runs) == 1 and not scan.problems  # the event folder is not mistaken for a result
