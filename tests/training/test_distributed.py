"""Data parallelism: 2 processes on gloo reach the weights of 1 process with the same global batch."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch


def _cfg(corpus: Path, out: Path, recipe: str):
    from biobench.training.trainer import PretrainConfig

    return PretrainConfig(recipe=recipe, model="preset:tiny", corpus=str(corpus), out=out, tokens=3 * 4 * 64,
                          batch_size=4, seq_len=64, micro_batch_size=1, decay_ratio=0.34, progress=False,
                          cache_dir=out.parent / "cache", lr=1e-3, device="cpu")


@pytest.mark.slow
def test_two_processes_match_one(tmp_path, torchrun_pretraining):
    """One process against conftest's torchrun_pretraining (2 ranks, the same corpus, tokens and settings)."""
    from biobench.training.trainer import train
    from safetensors.torch import load_file

    ref = torchrun_pretraining
    assert ref.tokens == _cfg(ref.corpus, tmp_path / "x", "detour").tokens  # the same run, on one process
    train(_cfg(ref.corpus, tmp_path / "one", "detour"))
    one = load_file(tmp_path / "one" / "final" / "model.safetensors")
    two = load_file(ref.out / "final" / "model.safetensors")
    assert one.keys() == two.keys()
    start = load_file(tmp_path / "one" / "phase1" / "model.safetensors")
    for k in one:
        torch.testing.assert_close(two[k], one[k], rtol=1e-4, atol=1e-5)
    assert any(not torch.equal(one[k], start[k]) for k in one)  # phase 2 moved the weights
    log_one = [json.loads(x)["loss"] for x in (tmp_path / "one" / "train_log.jsonl").read_text().splitlines()]
    log_two = [json.loads(x)["loss"] for x in (ref.out / "train_log.jsonl").read_text().splitlines()]
    assert len(log_one) == len(log_two) == 4
    assert all(abs(a - b) < 1e-4 for a, b in zip(log_one, log_two, strict=True))


def test_srun_step_variables_become_torch_distributed_ones():
    from biobench.training.distributed import first_host, slurm_environment

    step = {"SLURM_STEP_ID": "0", "SLURM_PROCID": "3", "SLURM_STEP_NUM_TASKS": "4", "SLURM_NTASKS": "4",
            "SLURM_LOCALID": "1", "SLURM_STEP_NODELIST": "gpu[07-08]", "SLURM_JOB_ID": "123456"}
    assert slurm_environment(step) == {"RANK": "3", "WORLD_SIZE": "4", "LOCAL_RANK": "1", "MASTER_ADDR": "gpu07",
                                       "MASTER_PORT": str(20000 + 123456 % 10000)}  # below the ephemeral ports
    assert slurm_environment({**step, "MASTER_PORT": "29500", "MASTER_ADDR": "10.0.0.1"})["MASTER_ADDR"] == "10.0.0.1"
    # torchrun inside srun sets WORLD_SIZE: its variables win; the batch script of `sbatch -n 4` (no step) and a
    # one-task step are single processes
    assert slurm_environment({**step, "WORLD_SIZE": "8"}) == {}
    assert slurm_environment({k: v for k, v in step.items() if k != "SLURM_STEP_ID"}) == {}
    assert slurm_environment({**step, "SLURM_STEP_NUM_TASKS": "1"}) == {}
    no_scontrol = {"PATH": "/nonexistent"}  # the parser; tests/runtime/test_slurm_wall_clock.py checks it against scontrol
    assert [first_host(x, no_scontrol) for x in ("vm", "gpu[07-09,12],cpu01", "a01,a02", "n[3]", "r1-[001-004]-ib",
                                                 "r1i[0-1]n[0-3]")] == ["vm", "gpu07", "a01", "n3", "r1-001-ib", "r1i0n0"]
