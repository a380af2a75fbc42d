"""--report-to wandb: the same scalars as TensorBoard, one W&B run per pretraining run or fine-tuning seed.

The adapter is tested with a stand-in module everywhere; where the optional `wandb` package is installed, an
offline eval run is read back from the run file wandb writes (its `.wandb` transaction log)."""

from __future__ import annotations

import json
import struct
import sys
import types
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError
from biobench.eval import finetune as ft
from biobench.runtime import reporting


class FakeRun:
    def __init__(self, **kwargs):
        self.init, self.logged, self.finished = kwargs, [], False

    def log(self, values, step):
        self.logged.append((step, dict(values)))

    def finish(self):
        self.finished = True


@pytest.fixture
def fake_wandb(monkeypatch):
    runs: list[FakeRun] = []
    module = types.ModuleType("wandb")
    module.Settings = lambda **kwargs: kwargs
    module.init = lambda **kwargs: runs.append(FakeRun(**kwargs)) or runs[-1]
    monkeypatch.setitem(sys.modules, "wandb", module)
    return runs


def test_finetune_reports_each_evaluation_to_one_run(fake_wandb, toy_classification, tmp_path, monkeypatch):
    monkeypatch.setenv("WANDB_PROJECT", "my-project")
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=2)
    report = reporting.make_reporter("wandb", tmp_path / "wandb" / "seed-0", name="m · t · seed 0",
                                     config={"seed": 0})
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False, report=report)
    report.close()
    (run,) = fake_wandb
    assert run.finished and run.init["project"] == "my-project" and run.init["name"] == "m · t · seed 0"
    assert run.init["dir"] == str(tmp_path / "wandb" / "seed-0") and run.init["config"] == {"seed": 0}
    assert [step for step, _ in run.logged] == [h["step"] for h in outcome.history] == [2, 4]
    assert [v[f"dev/{protocol.dev_metric}"] for _, v in run.logged] == pytest.approx(
        [h[f"dev_{protocol.dev_metric}"] for h in outcome.history])


def test_none_values_are_left_out_and_unknown_backends_listed(fake_wandb, tmp_path):
    report = reporting.make_reporter("wandb", tmp_path)
    report.scalars({"train/loss": 1.5, "train/mfu": None}, 3)
    report.scalars({"train/mfu": None}, 4)
    assert fake_wandb[0].logged == [(3, {"train/loss": 1.5})]
    with pytest.raises(ConfigError, match="--report-to 'comet': choose one of none, tensorboard, wandb"):
        reporting.make_reporter("comet", tmp_path)


def test_missing_wandb_says_how_to_install_it(monkeypatch, tmp_path):
    monkeypatch.setitem(sys.modules, "wandb", None)  # importing it raises ImportError
    with pytest.raises(ConfigError, match=r"pip install -e '.\[wandb\]'"):
        reporting.make_reporter("wandb", tmp_path)


def read_wandb_records(path: Path) -> list:
    """The records of a `.wandb` run file: a LevelDB-style log (7-byte file header, 32 KiB blocks, records of
    checksum u32 / length u16 / type u8 + payload, FULL=1 / FIRST=2 / MIDDLE=3 / LAST=4) of protobuf Records."""
    from wandb.proto import wandb_internal_pb2

    data, block, pos = path.read_bytes(), 32768, 7
    assert data[:4] == b":W&B"
    records, pending = [], b""
    while pos + 7 <= len(data):
        left = block - pos % block
        if left < 7:
            pos += left
            continue
        _, length, kind = struct.unpack("<IHB", data[pos:pos + 7])
        if length == 0 and kind == 0:
            pos += left
            continue
        pending += data[pos + 7:pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = wandb_internal_pb2.Record()
            record.ParseFromString(pending)
            records.append(record)
            pending = b""
    return records


def test_eval_offline_run_files_hold_the_results_history(tiny_mlm_dir, tmp_path, monkeypatch, capsys):
    pytest.importorskip("wandb", reason="the optional 'wandb' extra is not installed")
    for name in ("WANDB_DIR", "WANDB_CACHE_DIR", "WANDB_CONFIG_DIR", "WANDB_DATA_DIR"):
        monkeypatch.setenv(name, str(tmp_path / "wandb-home"))
    monkeypatch.setenv("WANDB_MODE", "offline")
    results = tmp_path / "results"
    assert main(["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "7", "--epochs", "2",
                 "--limit-train", "24", "--max-length", "32", "--batch-size", "8", "--results", str(results),
                 "--report-to", "wandb", "--no-progress", "--json"]) == 0
    capsys.readouterr()
    (result_path,) = results.glob("*/demo-cls/seed-7.json")
    history = json.loads(result_path.read_text())["history"]
    (run_file,) = (result_path.parent / "wandb" / "seed-7").glob("wandb/offline-run-*/run-*.wandb")
    records = read_wandb_records(run_file)
    run = next(r.run for r in records if r.WhichOneof("record_type") == "run")
    config = {item.key: json.loads(item.value_json) for item in run.config.update}
    assert run.display_name.endswith("· demo-cls · seed 7") and config["task"] == "demo-cls" and config["seed"] == 7
    logged = [{item.key or "/".join(item.nested_key): json.loads(item.value_json) for item in r.history.item}
              for r in records if r.WhichOneof("record_type") == "history"]
    assert [row["_step"] for row in logged] == [h["step"] for h in history]
    assert [row["train/loss"] for row in logged] == pytest.approx([h["train_loss"] for h in history])
    assert [row["dev/macro_f1"] for row in logged] == pytest.approx([h["dev_macro_f1"] for h in history])
