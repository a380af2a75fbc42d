"""biobench under a real scheduler: the one-node SLURM cluster of tests/slurm_cluster.py (Debian's 22.05,
started by the `slurm_cluster` fixture; skipped with the reason where it cannot run)."""

from __future__ import annotations

import json
import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

import pytest


def test_cluster_runs_a_batch_job_and_a_two_task_step(slurm_cluster, tmp_path):
    script = tmp_path / "hello.sbatch"
    script.write_text("#!/bin/bash\nsrun -n 2 bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID'"
                      " | sort\n")
    job = slurm_cluster.sbatch("-n", "2", "--chdir", str(tmp_path), "-o", str(tmp_path / "out-%j.txt"), str(script))
    assert slurm_cluster.wait(job, timeout=60) == ["COMPLETED"]
    assert (tmp_path / f"out-{job}.txt").read_text().splitlines() == ["task 0 of 2 local 0", "task 1 of 2 local 1"]


def test_cluster_jobs_see_this_python(slurm_cluster, tmp_path):
    """A job runs with the submitter's environment (sbatch's default --export=ALL): the same interpreter."""
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(tmp_path / "py.txt"),
                               "--wrap", f"{sys.executable} -c 'import sys; print(sys.executable)'")
    assert slurm_cluster.wait(job, timeout=60) == ["COMPLETED"]
    assert (tmp_path / "py.txt").read_text().strip() == sys.executable


PRETRAIN_TEXTS = ["Le patient présente une fièvre à 39 degrés.", "Traitement par amoxicilline pendant sept jours.",
                  "Scanner thoracique : nodule pulmonaire de 12 mm.", "Hemoglobin 9.8 g/dL on admission."]


def _corpus(folder: Path) -> Path:
    corpus = folder / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"{t} Cas {i}."}) + "\n" for i in range(60) for t in PRETRAIN_TEXTS))
    return corpus


def _pretrain_args(corpus: Path, out: Path, tokens: int, recipe: str = "detour", micro: int = 1) -> list[str]:
    return ["-m", "biobench.cli", "pretrain", "--recipe", recipe, "--model", "preset:tiny", "--corpus", str(corpus),
            "--out", str(out), "--tokens", str(tokens), "--batch-size", "4", "--seq-len", "64", "--micro-batch-size",
            str(micro), "--decay-ratio", "0.34", "--lr", "1e-3", "--no-progress", "--device", "cpu", "--threads", "1",
            "--cache-dir", str(out.parent / f"cache-{out.name}")]


def _weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_srun_two_process_pretraining_equals_torchrun(slurm_cluster, tmp_path):
    """`srun -n 2 biobench pretrain` joins torch.distributed from SLURM's variables (gloo on CPU) and trains the
    weights that `torchrun --nproc_per_node 2` trains, bit for bit."""
    import torch

    corpus = _corpus(tmp_path)
    tokens = 3 * 4 * 64
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    launched = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                               "--master_port", str(_free_port()), *_pretrain_args(corpus, tmp_path / "torchrun", tokens)],
                              env=env, capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr[-2000:]
    script = tmp_path / "pretrain.sbatch"
    command = " ".join(shlex.quote(a) for a in [sys.executable, *_pretrain_args(corpus, tmp_path / "srun", tokens)])
    script.write_text(f"#!/bin/bash\nexport MASTER_PORT={_free_port()} OMP_NUM_THREADS=1\nsrun -n 2 {command}\n")
    job = slurm_cluster.sbatch("-n", "2", "--chdir", str(tmp_path), "-o", str(tmp_path / "srun-%j.out"), str(script))
    assert slurm_cluster.wait(job, timeout=300) == ["COMPLETED"], (tmp_path / f"srun-{job}.out").read_text()[-2000:]
    a, b = _weights(tmp_path / "torchrun" / "final"), _weights(tmp_path / "srun" / "final")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    from biobench.training import checkpoint

    assert checkpoint.read_meta(tmp_path / "srun" / "final")["world_size"] == 2  # two ranks, not one process
    start = _weights(tmp_path / "srun" / "init")
    assert any(not torch.equal(b[k], start[k]) for k in b)  # it trained
    losses = {name: [json.loads(x)["loss"] for x in (tmp_path / name / "train_log.jsonl").read_text().splitlines()]
              for name in ("torchrun", "srun")}
    assert len(losses["srun"]) == 4 and losses["srun"] == losses["torchrun"]
