"""biobench under a real scheduler: the one-node SLURM cluster of tests/slurm_cluster.py (Debian's 22.05,
started by the `slurm_cluster` fixture; skipped with the reason where it cannot run)."""

from __future__ import annotations

import json
import shlex
import socket
import sys
import time
from pathlib import Path

import pytest

from tests.support import predictions_by_run as _predictions
from tests.support import pretrain_args as _pretrain_args
from tests.support import pretrain_corpus as _corpus
from tests.support import slurm_toy_grid as _toy_grid
from tests.support import weights as _weights


def test_cluster_runs_a_batch_job_and_a_two_task_step(slurm_cluster, tmp_path):
    script = tmp_path / "hello.sbatch"
    script.write_text("#!/bin/bash\nsrun -n 2 bash -c 'echo task $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID'"
                      " | sort\n")
    job = slurm_cluster.sbatch("-n", "2", "--chdir", str(tmp_path), "-o", str(tmp_path / "out-%j.txt"), str(script))
    assert slurm_cluster.wait(job, timeout=300) == ["COMPLETED"]
    assert (tmp_path / f"out-{job}.txt").read_text().splitlines() == ["task 0 of 2 local 0", "task 1 of 2 local 1"]


def test_cluster_jobs_see_this_python(slurm_cluster, tmp_path):
    """A job runs with the submitter's environment (sbatch's default --export=ALL): the same interpreter."""
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(tmp_path / "py.txt"),
                               "--wrap", f"{sys.executable} -c 'import sys; print(sys.executable)'")
    assert slurm_cluster.wait(job, timeout=300) == ["COMPLETED"]
    assert (tmp_path / "py.txt").read_text().strip() == sys.executable


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.slow
def test_srun_two_process_pretraining_equals_torchrun(slurm_cluster, torchrun_pretraining, tmp_path):
    """`srun -n 2 biobench pretrain` joins torch.distributed from SLURM's variables (gloo on CPU) and trains the
    weights that `torchrun --nproc_per_node 2` trains (conftest's torchrun_pretraining), bit for bit."""
    import torch

    corpus, tokens, torchrun = torchrun_pretraining.corpus, torchrun_pretraining.tokens, torchrun_pretraining.out
    script = tmp_path / "pretrain.sbatch"
    command = " ".join(shlex.quote(a) for a in [sys.executable, *_pretrain_args(corpus, tmp_path / "srun", tokens)])
    script.write_text(f"#!/bin/bash\nexport MASTER_PORT={_free_port()} OMP_NUM_THREADS=1\nsrun -n 2 {command}\n")
    job = slurm_cluster.sbatch("-n", "2", "--chdir", str(tmp_path), "-o", str(tmp_path / "srun-%j.out"), str(script))
    assert slurm_cluster.wait(job, timeout=300) == ["COMPLETED"], (tmp_path / f"srun-{job}.out").read_text()[-2000:]
    a, b = _weights(torchrun / "final"), _weights(tmp_path / "srun" / "final")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    from biobench.training import checkpoint

    assert checkpoint.read_meta(tmp_path / "srun" / "final")["world_size"] == 2  # two ranks, not one process
    start = _weights(tmp_path / "srun" / "init")
    assert any(not torch.equal(b[k], start[k]) for k in b)  # it trained
    losses = {name: [json.loads(x)["loss"] for x in (folder / "train_log.jsonl").read_text().splitlines()]
              for name, folder in (("torchrun", torchrun), ("srun", tmp_path / "srun"))}
    assert len(losses["srun"]) == 4 and losses["srun"] == losses["torchrun"]


def _train_in_process(corpus: Path, out: Path, tokens: int, recipe: str, micro: int):
    """The uninterrupted reference: the same configuration as `_pretrain_args`, on one thread."""
    import torch
    from biobench.training.trainer import PretrainConfig, train

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same kernels as the --threads 1 job
    try:
        return train(PretrainConfig(recipe=recipe, model="preset:tiny", corpus=str(corpus), out=out, tokens=tokens,
                                    batch_size=4, seq_len=64, micro_batch_size=micro, decay_ratio=0.34, lr=1e-3,
                                    progress=False, device="cpu", cache_dir=out.parent / f"cache-{out.name}"))
    finally:
        torch.set_num_threads(threads)


@pytest.mark.slow
def test_pretraining_job_requeued_by_sigusr1_resumes_to_the_uninterrupted_weights(slurm_cluster, tmp_path):
    """The wall-clock warning (`#SBATCH --signal=B:USR1@N`; sent here at once with `scancel --signal=USR1 --batch`,
    the same signal to the same process, instead of waiting up to 30 s for the controller's time-limit check):
    pretrain saves its resumable checkpoint, requeues its job, and the requeued job (the same batch script, no
    --resume in it) continues to the weights of an uninterrupted run, bit for bit."""
    import torch

    corpus = _corpus(tmp_path)
    tokens = 45 * 4 * 64  # 45 + 15 steps: time to be signalled in the middle
    full = _train_in_process(corpus, tmp_path / "full", tokens, "mlm", micro=2)
    out = tmp_path / "job"
    script = tmp_path / "pretrain.sbatch"
    command = " ".join(shlex.quote(a) for a in [sys.executable, *_pretrain_args(corpus, out, tokens, "mlm", micro=2)])
    # exec: the batch shell becomes biobench, so the B: signal reaches it (bash would run a trap only after its
    # child exits)
    # --time=10: the job's time is nearly out (under runtime.slurm.NEAR_END_S), so the warning requeues it
    script.write_text(f"#!/bin/bash\n#SBATCH --requeue\n#SBATCH --time=10\n#SBATCH --open-mode=append\n"
                      f"export OMP_NUM_THREADS=1\necho start restart=${{SLURM_RESTART_COUNT:-0}}\nexec {command}\n")
    log = tmp_path / "job.out"
    job = slurm_cluster.sbatch("--chdir", str(tmp_path), "-o", str(log), str(script))
    train_log = out / "train_log.jsonl"
    deadline = time.monotonic() + 120
    while not (train_log.exists() and len(train_log.read_text().splitlines()) >= 3):
        assert time.monotonic() < deadline and slurm_cluster.states(job) != ["FAILED"], log.read_text()
        time.sleep(0.05)
    slurm_cluster.client("scancel", "--signal=USR1", "--batch", str(job))
    states = slurm_cluster.wait(job, timeout=240)
    text = log.read_text()
    assert states == ["COMPLETED"], text[-3000:]
    assert "start restart=0" in text and "start restart=1" in text
    assert "SIGUSR1: stopping after this step to save a resumable checkpoint" in text
    assert f"requeued SLURM job {job}" in text and "SLURM job restart 1: resuming from" in text
    resumed_from = int(text.split("SLURM job restart 1: resuming from ")[1].split("resume-")[1].split()[0])
    assert 3 * 4 * 64 <= resumed_from < tokens  # it stopped in the middle, not before or after
    a, b = _weights(full), _weights(out / "final")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


@pytest.mark.slow
def test_grid_array_with_a_forced_requeue_matches_a_sequential_run(slurm_cluster, slurm_toy_reference, tiny_mlm_dir,
                                                                   tmp_path):
    """Two array elements drain a 2-task x 2-seed grid with run claims; one element is requeued with `scontrol
    requeue` while it trains a run (eval abandons it, releases its claim; the element restarts and takes the next
    unfinished run). Every result exists once, predictions are byte-identical to a sequential run (conftest's
    slurm_toy_reference, shared with the launcher's test), no claim is left."""
    from biobench.eval.claims import read_claim

    eval_args = ["--device", "cpu", "--threads", "1", "--no-progress"]
    grid = _toy_grid(tmp_path, tiny_mlm_dir, "results", n_train=160)
    command = " ".join(shlex.quote(a) for a in [sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid),
                                                *eval_args])
    script = tmp_path / "eval.sbatch"
    script.write_text("#!/bin/bash\n#SBATCH --requeue\n#SBATCH --open-mode=append\nexport OMP_NUM_THREADS=1\n"
                      f"echo element $SLURM_ARRAY_TASK_ID restart=${{SLURM_RESTART_COUNT:-0}}\nexec {command}\n")
    job = slurm_cluster.sbatch("--array=0-1", "--chdir", str(tmp_path), "-o", str(tmp_path / "eval-%a.out"), str(script))
    results = tmp_path / "results"
    deadline = time.monotonic() + 180
    # Requeue the element that holds a claim (it trains), as tests/runtime/test_launch_slurm.py does: requeuing element 0
    # on any element's claim once landed while element 0 was still importing torch, with nothing to abandon (CI,
    # stop 45).
    element = None
    while element is None:
        assert time.monotonic() < deadline, [p.read_text() for p in tmp_path.glob("eval-*.out")]
        for claim in results.glob("*/*/seed-*.claim"):
            info = read_claim(claim.with_suffix(".json"))
            if info is not None and info.held and info.holder and info.holder.slurm_array_task_id is not None:
                element = info.holder.slurm_array_task_id
                break
        time.sleep(0.05)
    slurm_cluster.client("scontrol", "requeue", f"{job}_{element}")
    states = slurm_cluster.wait(job, timeout=600)
    logs = {p.name: p.read_text() for p in sorted(tmp_path.glob("eval-*.out"))}
    assert states == ["COMPLETED", "COMPLETED"], logs
    first, _, second = logs[f"eval-{element}.out"].partition(f"element {element} restart=1")
    assert "DUE TO JOB REQUEUE" in first and "abandoned" in first and second, logs  # stopped, then ran again
    assert list(results.glob("*/*/*.claim")) == []
    assert sorted(p.relative_to(results).as_posix() for p in results.glob("*/*/seed-*.json")) == \
        sorted(p.relative_to(slurm_toy_reference).as_posix() for p in slurm_toy_reference.glob("*/*/seed-*.json"))
    assert len(_predictions(results)) == 4 and _predictions(results) == _predictions(slurm_toy_reference)


def test_requeue_names_the_array_element_not_the_array(monkeypatch):
    from biobench.runtime.slurm import requeue_target

    for name in ("SLURM_JOB_ID", "SLURM_ARRAY_JOB_ID", "SLURM_ARRAY_TASK_ID"):
        monkeypatch.delenv(name, raising=False)
    assert requeue_target() is None
    monkeypatch.setenv("SLURM_JOB_ID", "7")
    assert requeue_target() == "7"
    monkeypatch.setenv("SLURM_ARRAY_JOB_ID", "7")
    monkeypatch.setenv("SLURM_ARRAY_TASK_ID", "1")
    assert requeue_target() == "7_1"  # element 1 carries the array's id: `scontrol requeue 7` would take both


@pytest.mark.slow
def test_an_array_element_requeues_itself_and_no_other(slurm_cluster, tmp_path):
    """On SLURM the element whose SLURM_JOB_ID is the array's own id exists (measured: array 7 = elements 8 and 7);
    requeue_self from it (the wall-clock warning, the job's --time=10 under the 15-minute rule) puts back that
    element only, the other one runs to its end once."""
    script = tmp_path / "element.sbatch"
    script.write_text(f"""#!/bin/bash
#SBATCH --requeue
#SBATCH --time=10
#SBATCH --open-mode=append
echo "job $SLURM_JOB_ID array $SLURM_ARRAY_JOB_ID task $SLURM_ARRAY_TASK_ID restart ${{SLURM_RESTART_COUNT:-0}}"
if [ "$SLURM_JOB_ID" = "$SLURM_ARRAY_JOB_ID" ] && [ "${{SLURM_RESTART_COUNT:-0}}" = 0 ]; then
  exec {shlex.quote(sys.executable)} -c "from biobench.runtime.slurm import requeue_self; import time; requeue_self(print); time.sleep(30)"
fi
sleep 4
""")
    job = slurm_cluster.sbatch("--array=0-1", "--chdir", str(tmp_path), "-o", str(tmp_path / "el-%a.out"), str(script))
    assert slurm_cluster.wait(job, timeout=120) == ["COMPLETED", "COMPLETED"]
    logs = [(tmp_path / f"el-{i}.out").read_text() for i in (0, 1)]
    requeued = [log for log in logs if "restart 1" in log]
    assert len(requeued) == 1 and f"requeued SLURM job {job}_" in requeued[0], logs
    other = next(log for log in logs if log is not requeued[0])
    assert other.count("restart 0") == 1 and "restart 1" not in other, logs  # never stopped, never started again
