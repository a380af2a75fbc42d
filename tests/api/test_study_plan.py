"""`biobench study plan` (bench/api/study_plan.py, issue 60 item 5): each row is the stated arithmetic."""

from __future__ import annotations

import json
import math
import struct

import pytest
from biobench.api.study import load_study
from biobench.api.study_plan import CHECKPOINT_BYTES_PER_PARAM, PEAK_TFLOPS, plan_lines, study_plan
from biobench.errors import ConfigError

from tests.support import run_biobench

PARAMS = 1000 * 100 + 100  # the stand-in model's tensors


def _model(folder):
    """A local model folder whose safetensors header declares PARAMS elements (the plan reads no weights)."""
    folder.mkdir()
    header = json.dumps({"__metadata__": {"format": "pt"},
                         "w": {"dtype": "F32", "shape": [1000, 100], "data_offsets": [0, 400000]},
                         "b": {"dtype": "F32", "shape": [100], "data_offsets": [400000, 400400]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header)
    return folder


def _study(tmp_path):
    _model(tmp_path / "start")
    (tmp_path / "corpus.txt").write_text("Le patient.\n")
    path = tmp_path / "study.toml"
    path.write_text('[[pretrain]]\nname = "detour"\nrecipe = "detour"\nmodel = "start"\ncorpus = "corpus.txt"\n'
                    'tokens = "2B"\ndecay_ratio = 0.25\nsave_every = "1B"\n'
                    '\n[[eval]]\nname = "ner"\ntasks = ["quaero-emea"]\nseeds = "42-44"\n'
                    'models = [{ model = "run:detour/final" }]\n')
    return path


def test_the_pretraining_row_is_six_x_parameters_x_tokens(tmp_path):
    plan = study_plan(load_study(_study(tmp_path)), "h100", 4, 0.5)
    pretrain, evaluation = plan.rows
    tokens = 2e9 * 1.25  # phase 1 and its decay
    assert pretrain.params == PARAMS and pretrain.work == "2.50B tokens"
    assert pretrain.flops == 6 * PARAMS * tokens
    assert math.isclose(pretrain.gpu_hours, 6 * PARAMS * tokens / (989e12 * 0.5) / 3600)
    assert PEAK_TFLOPS["h100"] == 989.0
    # on all 4 GPUs from the start; phase1/, final/ and step-1B, step-2B of 12 bytes a parameter
    assert (pretrain.gpus, pretrain.start_h) == (4, 0.0) and math.isclose(pretrain.end_h, pretrain.gpu_hours / 4)
    assert pretrain.disk_bytes == 4 * CHECKPOINT_BYTES_PER_PARAM * PARAMS
    # quaero-emea's protocol: 4,000 steps of 16 x 1,024 tokens, 3 seeds; after the run it evaluates
    assert evaluation.work == "3 runs" and evaluation.flops == 3 * 6 * PARAMS * 4000 * 16 * 1024
    assert math.isclose(evaluation.start_h, pretrain.end_h) and plan.critical_path == ["pretrain/detour", "eval/ner/detour"]
    assert plan.stores == {f"{tmp_path / 'corpus.txt'} ({tmp_path / 'start'})": tokens * 2}
    total = next(line for line in plan_lines(plan) if line.startswith("total:"))
    assert total.startswith("total: 2.50B pretraining tokens, 3 fine-tuning runs;") and "on 4 H100 SXM" in total


def test_study_plan_prints_its_table_and_refuses_bad_numbers(tmp_path):
    path = _study(tmp_path)
    done = run_biobench("study", "plan", str(path), "--gpu", "a100", "--gpus", "2", cwd=tmp_path)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("throughput: A100 SXM published dense bf16 peak 312 TFLOPS x MFU 0.40 (assumed")
    row = next(line for line in done.stdout.splitlines() if line.startswith("pretrain/detour"))
    assert row.split()[1:6] == ["2.50B", "tokens", "100.10", "K", "1.50"]  # 6 x 100,100 x 2.5B = 1.50 PFLOPs
    for bad, message in ((["--mfu", "nan"], "--mfu"), (["--gpus", "0"], "--gpus 0: give 1 to 4096")):
        done = run_biobench("study", "plan", str(path), *bad, cwd=tmp_path)
        assert done.returncode == 2 and message in done.stderr and "Traceback" not in done.stderr
    with pytest.raises(ConfigError, match="--gpu h300"):
        study_plan(load_study(path), "h300")


@pytest.mark.parametrize("name", ["tiny", "paper-fr-base", "paper-en-base", "paper-fr-large", "paper-en-50b"])
def test_each_example_study_has_a_plan(name, tmp_path):
    """Issue 60: `study plan` of every example prints its table; a pretraining of a known hub model has its FLOPs."""
    from pathlib import Path

    path = Path(__file__).resolve().parents[2] / "examples" / "studies" / f"{name}.toml"
    plan = study_plan(load_study(path, tmp_path / "out"), "h100", 4)
    lines = plan_lines(plan)
    assert lines[1].split()[:3] == ["step", "work", "params"] and len(lines) > len(plan.rows) + 3
    assert next(line for line in lines if line.startswith("total:")).endswith("days)")
    if name != "tiny":  # presets have no published size
        assert all(r.flops and r.flops > 1e18 for r in plan.rows if r.kind == "pretrain")
