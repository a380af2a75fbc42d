"""`corpus build --claim-units` and `--launcher slurm` (issue 49 §1): several processes share one store's work
units by claims (bench/eval/claims, the leases eval's runs use); a killed or requeued process leaves its unit to the
others; the store is byte-identical to a local build. `--dry-run` shows the units done, held (by whom) and to do."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from biobench import cli
from biobench.runtime.ownership import MARKER
from biobench.training import token_store

WORDS = "le patient présente une fièvre traitement scanner normal hemoglobin platelets admission carcinome".split()
UNIT_MB = "0.02"


def _corpus(path: Path, n: int, seed: int) -> Path:
    rng = np.random.default_rng(seed)
    docs = [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 60)))) for _ in range(n)]
    path.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    return path



def _content(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name not in (token_store.VERIFIED, MARKER)}  # the marker holds a time


def _local(src: Path, out: Path, tok_dir: Path) -> Path:
    return token_store.build([str(src)], out, str(tok_dir), unit_bytes=int(float(UNIT_MB) * 2**20))


def test_claimed_build_in_one_process_equals_a_local_build_and_dry_run_says_where_it_is(tmp_path, tok_dir, capsys):
    src = _corpus(tmp_path / "c.jsonl", 1500, 1)
    base = ["corpus", "build", str(src), "--tokenizer", str(tok_dir), "--out", str(tmp_path / "s"), "--unit-mb", UNIT_MB]
    assert cli.main([*base, "--dry-run"]) == 0
    line = capsys.readouterr().out.strip()
    n_units = len(token_store.plan_units([str(src)], int(float(UNIT_MB) * 2**20)))
    assert n_units >= 3
    assert line == f"{tmp_path / 's'} (not started): {n_units} work unit(s): 0 done, 0 being tokenised, {n_units} to do"
    assert not (tmp_path / "s").exists()  # a dry run writes nothing
    assert cli.main([*base, "--claim-units", "--claim-seconds", "30"]) == 0
    out = capsys.readouterr().out
    assert f"{n_units} of {n_units} work unit(s) tokenised by this process" in out
    assert _content(tmp_path / "s") == _content(_local(src, tmp_path / "local", tok_dir))
    assert cli.main([*base, "--dry-run"]) == 0
    assert capsys.readouterr().out.startswith(f"{tmp_path / 's'}: finished token store (content id ")
    # the flags that do not go together, one line each
    assert cli.main([*base, "--claim-units", "--workers", "2"]) != 0
    assert "--claim-units tokenises in this process" in capsys.readouterr().err
    assert cli.main([*base, "--claim-units", "--launcher", "slurm"]) != 0
    assert "--claim-units is what each --launcher slurm element runs" in capsys.readouterr().err
    assert cli.main([*base, "--claim-units", "--claim-seconds", "0"]) != 0
    assert "--claim-seconds" in capsys.readouterr().err
    # a submit that cannot work is refused before anything is submitted
    assert cli.main([*base[:-4], "--out", str(tmp_path / "s2"), "--launcher", "slurm", "--claim-seconds", "0"]) != 0
    assert "--claim-seconds" in capsys.readouterr().err and not (tmp_path / "s2").exists()
    assert cli.main([*base[:-4], "--out", str(tmp_path / "s2"), "--launcher", "slurm", "--workers", "0"]) != 0
    assert "--workers 0: give 1 to" in capsys.readouterr().err


@pytest.mark.slow
def test_processes_sharing_units_one_killed_give_the_local_store(tmp_path, tok_dir):
    """Three real `--claim-units` processes on one --out; one is killed with SIGKILL while it holds a unit (its
    holder is gone on this machine: the others take the unit at once). The other two end rc 0, between them they
    tokenised every unit the killed one did not finish, and the store is byte-identical to a local build.
    `--dry-run` meanwhile names a holder."""
    src = _corpus(tmp_path / "big.jsonl", 12_000, 7)
    out = tmp_path / "shared"
    cmd = [sys.executable, "-m", "biobench.cli", "corpus", "build", str(src), "--tokenizer", str(tok_dir),
           "--out", str(out), "--unit-mb", UNIT_MB, "--claim-units"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    from biobench.eval.claims import read_claim

    victim = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    held = None
    while held is None and time.monotonic() < deadline and victim.poll() is None:
        # frozen (SIGSTOP) while it holds a claim, so the dry run below sees that claim
        for claim in (out / "work").glob("*.claim") if (out / "work").is_dir() else []:
            victim.send_signal(signal.SIGSTOP)
            info = read_claim(claim.with_suffix(".json"))
            if info is not None and info.held:
                held = claim
                break
            victim.send_signal(signal.SIGCONT)
        time.sleep(0.005)
    assert held is not None, victim.stderr.read()[-2000:]
    dry = subprocess.run([*cmd[:-1], "--dry-run"], env=env, capture_output=True, text=True, timeout=120)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    victim_done = len(list((out / "work").glob("*.done")))
    assert dry.returncode == 0 and "work unit(s):" in dry.stdout, dry.stderr[-2000:]
    assert "1 being tokenised" in dry.stdout and f"unit {int(held.stem):6d}: being tokenised by " in dry.stdout
    assert f"pid {victim.pid}" in dry.stdout, dry.stdout
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _out, err in outs]
    n_units = len(token_store.plan_units([str(src)], int(float(UNIT_MB) * 2**20)))
    mine = [int(o.split(" of ")[0].rsplit(" ", 1)[1]) for o, _e in outs for o in o.splitlines()
            if "tokenised by this process" in o]
    # every unit tokenised once: the survivors did exactly what the killed process had not finished
    assert len(mine) == 2 and sum(mine) == n_units - victim_done, [o[-3000:] for o, _e in outs]
    assert _content(out) == _content(_local(src, tmp_path / "local", tok_dir))


@pytest.mark.slow
def test_launcher_slurm_array_with_a_requeue_builds_the_local_store(slurm_cluster, tok_dir, tmp_path):
    """`corpus build --launcher slurm --workers 2` on the real one-node cluster: the array's two elements claim the
    units; one element is requeued (`scontrol requeue`) while it holds a unit, gives it up and runs again; both
    elements end COMPLETED and the store is byte-identical to a local build."""
    src = _corpus(tmp_path / "big.jsonl", 12_000, 9)
    out, log_dir = tmp_path / "store", tmp_path / "logs"
    env = {**slurm_cluster.env, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    submitted = subprocess.run([sys.executable, "-m", "biobench.cli", "corpus", "build", str(src), "--tokenizer",
                                str(tok_dir), "--out", str(out), "--unit-mb", UNIT_MB, "--launcher", "slurm",
                                "--workers", "2", "--partition", "debug", "--cpus-per-task", "1", "--time", "10",
                                "--log-dir", str(log_dir), "--claim-seconds", "60"],
                               env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert submitted.returncode == 0, submitted.stderr[-2000:]
    lines = submitted.stdout.splitlines()
    assert lines[0].startswith("submitted SLURM array ") and "2 worker(s) on " in lines[0], submitted.stdout
    job = int(lines[0].split()[3].rstrip(":"))
    assert lines[2].startswith("progress: biobench corpus build ") and lines[2].endswith("--dry-run")
    launched = json.loads((log_dir / "launch.json").read_text())
    assert launched["argv"][1:3] == ["corpus", "build"] and "--claim-units" in launched["argv"]
    assert launched["sbatch"].get("slurm_gpus_per_task") is None  # a CPU build asks for no GPU

    from biobench.eval.claims import read_claim

    deadline = time.monotonic() + 180
    element = None
    while element is None:  # an element holds a unit: it tokenises
        assert time.monotonic() < deadline and "FAILED" not in slurm_cluster.states(job), \
            {p.name: p.read_text() for p in log_dir.glob("*_log.*")}
        for claim in (out / "work").glob("*.claim") if (out / "work").is_dir() else []:
            info = read_claim(claim.with_suffix(".json"))
            if info is not None and info.held and info.holder and info.holder.slurm_array_task_id is not None:
                element = info.holder.slurm_array_task_id
                break
        time.sleep(0.02)
    slurm_cluster.client("scontrol", "requeue", f"{job}_{element}")
    states = slurm_cluster.wait(job, timeout=600)
    logs = {p.name: p.read_text() for p in sorted(log_dir.glob("*_log.*"))}
    assert states == ["COMPLETED", "COMPLETED"], logs
    requeued = logs[f"{job}_{element}_0_log.err"] + logs[f"{job}_{element}_0_log.out"]
    assert requeued.count("Starting with JobEnvironment") == 2, logs
    assert (out / "done").is_file() and not (out / "work").exists()
    assert _content(out) == _content(_local(src, tmp_path / "local", tok_dir))
