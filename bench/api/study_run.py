"""Running a study (bench/api/study.py): each step's state, the steps run here in child processes (at most
`jobs` at once, each after the steps it needs), or submitted as SLURM jobs with `afterok` dependencies through
the submitit launcher that `eval --launcher slurm` uses (bench/runtime/launch.py: no second scheduler).

What a step has done is read from what it writes (a pretraining's final/, an eval grid's result files, an
analysis' output file), never from a record of ours, so a study run by hand, by another machine or half on a
cluster is judged the same. The records under <out>/.study/ only say where a step runs or ran (the local
process, the SLURM job) and where its log is, for `biobench study status`.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import biobench
from biobench.api.evaluation import plan_grid_model
from biobench.api.study import NO_DEVICE, Step, Study, order, write_step_files
from biobench.api.study_inputs import check_inputs
from biobench.api.study_report import write_report
from biobench.errors import BiobenchError, ConfigError
from biobench.eval.grid import grid_catalogue, grid_specs, plan_rows, resolved_grid_file
from biobench.models import resolve_model
from biobench.runtime import launch
from biobench.runtime.children import die_with_parent
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import UnsafeJSONError, open_regular, read_json
from biobench.runtime.ownership import check_output_folder
from biobench.runtime.paths import display_text
from biobench.tasks.loading import data_stamps

# lines of a step's output worth showing while it runs (the rest is in its log): a finished eval run, a
# pretraining's start, phases and end, and every error
SHOWN = (": test macro-F1 ", "biobench pretrain:", "done: ", "wrote ", "error", "Error", "⚠")
SLURM_STATES_RUNNING = launch.STATES_RUNNING
SLURM_STATES_WAITING = launch.STATES_WAITING


@dataclass
class StepState:
    step: str
    state: str  # done | running | waiting | to run | failed | cancelled (a need failed) | partly done
    detail: str = ""  # where it runs, what it waits on, its last log line
    retry: str = ""  # the command that runs it again (failed steps)


def _records(study: Study) -> Path:
    return study.out / ".study"


def step_log(study: Study, step: Step) -> Path:
    return study.out / "logs" / f"{step.id.replace('/', '--')}.log"


def _read_record(path: Path) -> dict[str, Any]:
    try:
        data = read_json(path, 1 << 20, confined=True)  # a record linked out of .study/ is not read
    except (OSError, UnsafeJSONError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _write_record(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write(path, json.dumps(data, indent=1, default=str) + "\n")


# ------------------------------------------------------------------------------------------------ done?
def eval_progress(study: Study, step: Step) -> tuple[int, int, int, str]:
    """(runs done, runs in all, runs claimed now, why it cannot be planned) of an eval step's grid; planning
    reads the model's weights (its revision) and the tasks' data, and trains nothing. The plan (each run's
    result path and key) is kept in <out>/.study/plans/ while what it was computed from is unchanged
    (_plan_fingerprint), so `study status` reads the result files and claims without planning again."""

    grid = study.grids[[s.id for s in study.steps if s.kind == "eval"].index(step.id)]
    entry = grid.models[0]
    if Path(entry.model).is_absolute() and not Path(entry.model).is_dir():
        return 0, 0, 0, f"{entry.model} does not exist yet"
    try:
        tasks = grid_catalogue(grid)  # the grid's task files read once, for its specs and its plan
        specs = grid_specs(grid, tasks)

        def plan():  # as `eval --config` plans the step's grid (api.evaluation.plan_grid_model)
            fingerprint = _plan_fingerprint(grid, specs)
            cache = _records(study) / "plans" / f"{step.id.replace('/', '--')}.json"
            if fingerprint is not None and (kept := _cached_plan(cache, fingerprint)) is not None:
                return kept
            planned = plan_grid_model(grid, entry, catalogue=tasks, overwrite=True)
            if fingerprint is not None:
                _keep_plan(cache, fingerprint, planned)
            return planned

        rows = plan_rows(grid.name, entry.name or entry.model, plan)
    except BiobenchError as err:
        return 0, 0, 0, str(err)
    cannot = [r.detail for r in rows if r.status == "cannot plan"]
    if cannot:
        return 0, 0, 0, cannot[0]
    runs = [r for r in rows if r.status != "no data"]
    return (sum(r.status == "done" for r in runs), len(runs), sum(r.status == "claimed" for r in runs),
            "; ".join(f"{r.task}: no data" for r in rows if r.status == "no data"))


# the code a plan's keys and result paths come from (protocols, task specs, the store's layout and keys)
PLAN_PACKAGES = ("biobench.eval", "biobench.tasks", "biobench.store")


def _stamps(folder: Path, pattern: str = "*") -> list[list[Any]]:
    return [[str(p), p.stat().st_size, p.stat().st_mtime_ns] for p in sorted(folder.glob(pattern))
            if p.is_file() and "__pycache__" not in p.parts]


def _plan_fingerprint(grid: Any, specs: list[Any]) -> str | None:
    """A digest of everything an eval step's plan depends on, read without planning: the step's grid as its
    file says it (model, tasks, seeds, overrides, results, data folder), the model folder's files (size and
    time: its revision is the sha256 of its weights), each task's data files (tasks.loading.data_stamps) and
    biobench's own planning code. None (plan every time) for a model or task data that is not local files: a
    hub revision or a hub dataset has no stamp to trust."""
    import hashlib
    from importlib import import_module


    try:  # a study's checkpoint folder, or an alias whose weights are a local folder (e.g. all-MiniLM-L6-v2)
        model = resolve_model(grid.models[0].model).path
    except BiobenchError:
        return None
    if model is None or not model.is_dir():
        return None
    data = [data_stamps(spec, grid.data_dir) for spec in specs]
    if any(d is None for d in data):
        return None
    code = [_stamps(Path(str(import_module(name).__file__)).parent, "**/*") for name in PLAN_PACKAGES]
    parts = [biobench.__version__, resolved_grid_file([grid]), _stamps(model), data, code]
    return hashlib.sha256(json.dumps(parts, default=str).encode()).hexdigest()


@dataclass
class _KeptTask:
    id: str


@dataclass
class _KeptRun:
    task: _KeptTask
    seed: int
    path: Path
    key: dict[str, Any]


@dataclass
class _KeptPlan:
    """What plan_rows reads of a runner Plan: the runs' result paths and keys, the tasks without data."""
    name: str
    grid: list[_KeptRun]
    unavailable: dict[str, str]


def _cached_plan(cache: Path, fingerprint: str) -> _KeptPlan | None:
    data = _read_record(cache)
    if data.get("fingerprint") != fingerprint:
        return None
    try:
        return _KeptPlan(str(data["name"]), [_KeptRun(_KeptTask(str(task)), int(seed), Path(path), dict(key))
                                             for task, seed, path, key in data["runs"]],
                         {str(k): str(v) for k, v in dict(data["unavailable"]).items()})
    except (KeyError, TypeError, ValueError):  # an older or damaged record: plan again
        return None


def _keep_plan(cache: Path, fingerprint: str, plan: Any) -> None:
    try:
        _write_record(cache, {"fingerprint": fingerprint, "name": plan.name,
                              "runs": [[run.task.id, run.seed, str(run.path), run.key] for run in plan.grid],
                              "unavailable": dict(plan.unavailable)})
    except OSError:  # a study folder this user cannot write (status on a login node): plan every time
        pass


def files_progress(step: Step) -> tuple[int, int]:
    """(seeds with their result file, seeds) of a probe step: one file per pattern of its results folder."""
    found = sum(step.done_dir is not None and next(step.done_dir.glob(p), None) is not None
                for p in step.done_patterns)
    return found, len(step.done_patterns)


def is_done(study: Study, step: Step) -> bool:
    if step.done_file is not None:
        return step.done_file.is_file()
    if step.done_patterns:
        done, total = files_progress(step)
        return done == total
    done, total, _, problem = eval_progress(study, step)
    return total > 0 and done == total and not problem.endswith("does not exist yet")


# ------------------------------------------------------------------------------------------------ locally
def _child_env(threads: int) -> dict[str, str]:
    # each step's torch uses `threads` cores: steps side by side share the machine instead of oversubscribing it
    return {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads),
            "BIOBENCH_STUDY_CHILD": "1"}


def local_argv(step: Step, threads: int) -> list[str]:
    argv = list(step.argv)
    if step.kind in ("pretrain", "eval"):
        argv += ["--threads", str(threads)]
    if step.kind == "pretrain":
        # lazy: loads torch
        from biobench.training import checkpoint

        run = Path(_pretrain_out(step))
        if run.is_dir() and checkpoint.latest(run) is not None:
            argv.append("--resume")  # a run stopped earlier continues from its latest checkpoint
    if step.kind == "analysis" and step.analysis not in NO_DEVICE:
        argv += ["--device", "cpu"] if os.environ.get("BIOBENCH_STUDY_DEVICE") == "cpu" else []
    return argv


def _pretrain_out(step: Step) -> str:
    text = step.grid_file.read_text(encoding="utf-8") if step.grid_file and step.grid_file.is_file() else ""
    for line in text.splitlines():
        if line.startswith("out = "):
            return json.loads(line[6:])
    return ""


def _relay(stream, log, step: Step, show: Callable[[str], None]) -> None:
    for raw in iter(stream.readline, b""):
        line = raw.decode("utf-8", "replace")
        log.write(line)
        log.flush()
        if any(mark in line for mark in SHOWN):
            show(f"[{step.id}] {line.rstrip()}")
    stream.close()


def run_local(study: Study, jobs: int = 1, threads: int | None = None,
              show: Callable[[str], None] = lambda line: print(line, file=sys.stderr, flush=True),
              only: set[str] | None = None) -> dict[str, str]:
    """Run the study's steps here, each as `python -m biobench.cli ARGV` in a child process, at most `jobs` at
    once and each only after the steps it needs; a step already done is skipped, a step whose need failed is
    not started. Each child gets `threads` CPU threads (default: the cores shared among the jobs). Returns each
    step's outcome: done | ran | failed | not run."""
    write_step_files(study)
    cores = os.cpu_count() or 1
    threads = threads or max(1, cores // max(1, jobs))
    outcome: dict[str, str] = {}
    pending = [s for s in order(study) if only is None or s.id in only]
    running: dict[str, tuple[subprocess.Popen, list[threading.Thread], Any, float]] = {}
    records = _records(study) / "local"
    try:
        while pending or running:
            for step in list(pending):
                if len(running) >= jobs:
                    break
                needs = [outcome.get(n, "done" if only is not None and n not in only else None) for n in step.needs]
                if any(n in ("failed", "not run") for n in needs):
                    pending.remove(step)
                    outcome[step.id] = "not run"
                    show(f"[{step.id}] not run: {', '.join(n for n in step.needs if outcome.get(n) != 'done' and outcome.get(n) != 'ran')} failed")
                    continue
                if not all(n in ("done", "ran") for n in needs):
                    continue
                pending.remove(step)
                if is_done(study, step):
                    outcome[step.id] = "done"
                    show(f"[{step.id}] done already: skipped")
                    continue
                log_path = step_log(study, step)
                log_path.parent.mkdir(parents=True, exist_ok=True)
                log = open(log_path, "a", encoding="utf-8")  # noqa: SIM115 - closed when the child ends
                argv = local_argv(step, threads)
                log.write(f"# {time.strftime('%Y-%m-%d %H:%M:%S')} biobench {' '.join(argv)}\n")
                log.flush()
                child = subprocess.Popen([sys.executable, "-m", "biobench.cli", *argv], env=_child_env(threads),
                                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=die_with_parent)
                relays = [threading.Thread(target=_relay, args=(s, log, step, show), daemon=True)
                          for s in (child.stdout, child.stderr)]
                for t in relays:
                    t.start()
                running[step.id] = (child, relays, log, time.perf_counter())
                _write_record(records / f"{step.id.replace('/', '--')}.json",
                              {"step": step.id, "host": socket.gethostname(), "pid": child.pid, "state": "running",
                               "log": str(log_path), "argv": argv, "started": time.time()})
                show(f"[{step.id}] started (log: {log_path})")
            if not running:
                continue
            time.sleep(0.2)
            for step_id, (child, relays, log, started) in list(running.items()):
                if child.poll() is None:
                    continue
                for t in relays:
                    t.join()
                log.close()
                del running[step_id]
                ok = child.returncode == 0
                outcome[step_id] = "ran" if ok else "failed"
                record = records / f"{step_id.replace('/', '--')}.json"
                _write_record(record, {**_read_record(record), "state": "finished" if ok else "failed",
                                       "returncode": child.returncode, "ended": time.time()})
                show(f"[{step_id}] {'finished' if ok else f'failed (exit {child.returncode})'} in "
                     f"{time.perf_counter() - started:.0f} s")
    except KeyboardInterrupt:  # the children got the same Ctrl-C: pretraining writes its checkpoint, eval stops
        for child, _relays, log, _ in running.values():
            try:
                child.wait(120)
            except subprocess.TimeoutExpired:
                child.kill()
            log.close()
        raise
    return outcome


# ------------------------------------------------------------------------------------------------ SLURM
@dataclass
class SlurmSettings:
    partition: str | None = None
    account: str | None = None
    gpus_per_task: int = 1
    cpus_per_task: int | None = None
    time_min: int = 20 * 60
    workers: int | None = None  # array elements per eval step (default: the study's `workers`)
    extra: dict[str, str] | None = None
    log_dir: Path | None = None


def submit_slurm(study: Study, settings: SlurmSettings, only: set[str] | None = None,
                 submitted_one: Callable[[Step, str, list[str]], None] = lambda step, job, waits: None,
                 ) -> list[tuple[Step, str, list[str]]]:
    """Submit every step not done (`only`: these steps; what they need must be done or queued) as a SLURM job
    (an eval step as an array of `workers` elements that claim its runs), each with `afterok` on the queued
    jobs of the steps it needs, through runtime.launch (submitit); returns (step, job id, what it waits on:
    "STEP: job ID") in submission order.

    Each submission happens once (issue 57 §4: a study whose third submission sbatch refused submitted its two
    pretrainings again on the rerun, two live jobs writing one run folder): every setting is checked before
    the first submission; each job is recorded in <out>/.study/slurm.json (atomically) as soon as sbatch
    accepted it, before the next one, and `submitted_one` is told; a step whose recorded job is still queued or
    running is not submitted again, and the steps after it wait on that job."""
    launch.import_submitit()
    launch.check_slurm(settings.partition)
    launch.check_writable(study.out, "the study folder")
    steps = [step for step in order(study) if only is None or step.id in only]
    eval_workers = study.workers if settings.workers is None else settings.workers  # 0 and -1 refused below
    launch.check_counts(eval_workers if any(step.kind == "eval" for step in steps) else 1, settings.gpus_per_task,
                        settings.cpus_per_task)  # every count before the first submission
    write_step_files(study)
    log_root = settings.log_dir or study.out / "slurm"
    record_path = _records(study) / "slurm.json"
    record = _read_record(record_path)
    job_of: dict[str, str] = {}  # the queued or running job of a step, submitted now or before

    def queued(step_id: str) -> str | None:
        if step_id not in job_of:
            previous = record.get(step_id)
            job = str(previous.get("job", "")) if isinstance(previous, dict) else ""
            job_of[step_id] = job if job and launch.is_live(job) else ""
        return job_of[step_id] or None

    todo = [step for step in steps if not is_done(study, step)]
    by_id = {step.id: step for step in study.steps}
    for step in todo:  # --step: a need outside the selection must be done or queued, or nothing is submitted
        for need in step.needs:
            if only is not None and need not in only and queued(need) is None and not is_done(study, by_id[need]):
                raise ConfigError(f"--step {step.id} needs {need}, which is neither done nor queued: add --step "
                                  f"{need}, or run it first")
    submitted: list[tuple[Step, str, list[str]]] = []
    for step in todo:
        if queued(step.id) is not None:
            continue  # still queued or running from an earlier submission: not twice
        waits = [job for need in step.needs if (job := queued(need)) is not None]
        extra = dict(settings.extra or {})
        if waits:
            extra["dependency"] = "afterok:" + ":".join(waits)
            extra["kill_on_invalid_dep"] = "yes"  # a failed need cancels the step instead of leaving it pending
        argv = list(step.argv)
        if step.kind == "pretrain":
            # lazy: loads torch
            from biobench.training import checkpoint

            run = Path(_pretrain_out(step))
            if run.is_dir() and checkpoint.latest(run) is not None:
                argv.append("--resume")
        workers = eval_workers if step.kind == "eval" else 1
        log_dir = (log_root / step.id.replace("/", "--")).resolve()
        job = launch.submit(launch.SlurmLaunch(
            argv, workers, log_dir, f"study-{step.id.replace('/', '-')}"[:60], settings.partition, settings.account,
            settings.gpus_per_task, settings.cpus_per_task, settings.time_min, None, extra,
            record={"study": str(study.path.resolve()), "step": step.id, "needs": waits},
            max_timeouts=study.step_lives(step.id) - 1))  # lives: the first start and each requeue
        job_of[step.id] = job
        record[step.id] = {"job": job, "log_dir": str(log_dir), "workers": workers, "needs": waits,
                           "argv": argv, "submitted": time.time()}
        _write_record(record_path, record)  # before the next submission: a rerun after a refusal sees this job
        said = [f"{n}: job {job_of[n]}" for n in step.needs if job_of.get(n)]
        submitted.append((step, job, said))
        submitted_one(step, job, said)
    return submitted


def _last_line(path: Path) -> str:
    try:  # a regular file in its own folder: a log planted as a link to another file is not shown
        with open_regular(path, 1 << 40, confined=True) as f:
            f.seek(max(0, os.fstat(f.fileno()).st_size - 8192))
            lines = [ln.strip() for ln in f.read().decode("utf-8", "replace").splitlines() if ln.strip()]
    except (OSError, UnsafeJSONError):
        return ""
    # the error line when there is one (a child's stdout and stderr reach the log from two threads, so the
    # error is not always the very last line), else the last line
    errors = [ln for ln in lines if ln.startswith("error:") or "Error:" in ln]
    return (errors or lines)[-1][:300] if lines else ""


def _slurm_logs(job: dict[str, Any]) -> list[Path]:
    """The logs of a step's SLURM job: in the folder the record names only when that folder's launch.json (written
    by runtime.launch.submit) is this job's, so a planted record cannot point status at any other file."""
    log_dir = Path(str(job.get("log_dir", "")))
    launched = _read_record(log_dir / "launch.json")
    if not str(job.get("job", "")) or str(launched.get("job_id")) != str(job.get("job")):
        return []
    return sorted(log_dir.glob("*_log.err")) + sorted(log_dir.glob("*_log.out"))


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def study_status(study: Study, retry: str) -> list[StepState]:
    """Each step's state: done; running (where: this machine's process, or the SLURM job and its state); waiting
    (on which steps, or SLURM's reason); failed (the last log line, and `retry`, the command that runs it
    again); to run. The same on a laptop and on a login node: done is read from the outputs."""
    slurm = _read_record(_records(study) / "slurm.json")
    states: dict[str, StepState] = {}
    for step in order(study):
        local = _read_record(_records(study) / "local" / f"{step.id.replace('/', '--')}.json")
        detail = ""
        if step.kind == "eval":
            done_runs, total, claimed, problem = eval_progress(study, step)
            finished = total > 0 and done_runs == total
            detail = f"{done_runs}/{total} runs done" + (f", {claimed} training now" if claimed else "") \
                if total else problem
        elif step.done_patterns:  # a probe: its seeds' result files
            done_seeds, total = files_progress(step)
            finished = done_seeds == total
            detail = f"{done_seeds}/{total} seeds done"
        else:
            finished = step.done_file is not None and step.done_file.is_file()
        if finished:
            states[step.id] = StepState(step.id, "done", detail or str(step.done_file))
            continue
        job = slurm.get(step.id, {})
        if isinstance(job, dict) and isinstance(job.get("job"), str | int) and not isinstance(job.get("job"), bool):
            slurm_state = launch.job_state(str(job["job"]))
            state = slurm_state.split(" ")[0]
            if state in SLURM_STATES_RUNNING:
                where = slurm_state.split(" ", 1)[1] if " " in slurm_state else "?"  # squeue's %R: the node(s)
                states[step.id] = StepState(step.id, "running", f"SLURM job {job['job']} {state} on {where}"
                                            + (f"; {detail}" if detail else ""))
                continue
            if state in SLURM_STATES_WAITING:
                waits = [n for n in step.needs if states.get(n) and states[n].state != "done"]
                states[step.id] = StepState(step.id, "waiting", f"SLURM job {job['job']} {slurm_state}"
                                            + (f", on {', '.join(waits)}" if waits else ""))
                continue
            cut = [n for n in step.needs if states.get(n) and states[n].state in ("failed", "cancelled")]
            if state == "CANCELLED" and cut:  # kill_on_invalid_dep: never started, its need failed
                states[step.id] = StepState(step.id, "cancelled", f"SLURM job {job['job']} cancelled before it "
                                            f"started: {', '.join(cut)} did not finish", retry)
                continue
            if state and state != "COMPLETED":
                logs = _slurm_logs(job)
                last = next((line for line in (_last_line(p) for p in logs) if line), "")
                states[step.id] = StepState(step.id, "failed", f"SLURM job {job['job']} {slurm_state}: {last}", retry)
                continue
        pid = local.get("pid")
        pid = pid if isinstance(pid, int) and not isinstance(pid, bool) and 0 < pid < 1 << 31 else 0
        if local.get("state") == "running" and local.get("host") == socket.gethostname() and pid and _pid_alive(pid):
            states[step.id] = StepState(step.id, "running", f"pid {pid} on {display_text(local['host'], 100)}"
                                        + (f"; {detail}" if detail else "") + f" (log: {step_log(study, step)})")
            continue
        if local.get("state") in ("failed", "running"):  # a running record whose process is gone: it died
            # the step's own log, where run_local writes it (never a path the record names)
            states[step.id] = StepState(step.id, "failed", _last_line(step_log(study, step)), retry)
            continue
        waits = [n for n in step.needs if states.get(n) and states[n].state != "done"]
        if waits:
            states[step.id] = StepState(step.id, "waiting", f"on {', '.join(waits)}")
        else:
            states[step.id] = StepState(step.id, "partly done" if detail and not detail.startswith("0/") and
                                        "/" in detail else "to run", detail)
    return [states[s.id] for s in study.steps]


def describe(study: Study) -> list[str]:
    """One line per step: id, what it runs, what it needs (for `study run --dry-run` and the docs)."""
    return [f"{s.id}: biobench {' '.join(s.argv)}" + (f"  (after {', '.join(s.needs)})" if s.needs else "")
            for s in order(study)]


def legacy_study(folder: Path) -> bool:
    """A study folder a biobench before the ownership marker made: `.study/study.json` names its study file, or
    (a demo's, which never wrote that record) a pretraining's settings file `.study/pretrain/NAME.toml` begins
    with the line study files are written with."""
    if isinstance(_read_record(folder / ".study" / "study.json").get("study"), str):
        return True
    for path in sorted((folder / ".study" / "pretrain").glob("*.toml"))[:8]:
        try:
            with path.open(encoding="utf-8") as handle:
                if handle.readline(200).startswith("# written by biobench study from "):
                    return True
        except (OSError, UnicodeDecodeError):
            continue
    return False


def check_nothing_conflicts(study: Study) -> None:
    """A study whose folder holds another study's steps under the same names would mix their outputs; a folder
    of the user's (not empty, no marker, no `.study/` of an earlier biobench) is refused (runtime.ownership)."""
    check_output_folder(study.out, "study out", "study", legacy=legacy_study)
    marker = _records(study) / "study.json"
    known = _read_record(marker)
    source = str(study.path.resolve())
    if known.get("study") and known["study"] != source and Path(known["study"]).exists():
        raise ConfigError(f"{study.out} is the folder of another study ({known['study']}); give this one its own out")
    _write_record(marker, {"study": source})


# ------------------------------------------------------------------------------------------------ Python API
class StudyHandle:
    """A study file read and checked (`biobench.study(path)`): its plan, and what `biobench study run | status |
    report` do, from Python. Each call reads the outputs again, so a handle stays right while steps run elsewhere."""

    def __init__(self, study: Study, retry: str) -> None:
        self.study = study
        self._retry = retry  # the command that reruns a failed step, shown by status()

    @property
    def out(self) -> Path:
        return self.study.out

    def plan(self) -> list[dict[str, Any]]:
        """The steps in the order they run: id, kind (pretrain | eval | analysis), analysis (its kind), the
        biobench command line (`argv`, without `biobench`), needs (step ids) and done (read from its outputs)."""
        return [{"id": s.id, "kind": s.kind, "analysis": s.analysis, "argv": list(s.argv), "needs": list(s.needs),
                 "done": is_done(self.study, s)} for s in order(self.study)]

    def run(self, jobs: int = 1, threads: int | None = None, steps: list[str] | None = None,
            show: Callable[[str], None] | None = None) -> dict[str, str]:
        """Every step not done, here, each in a child process after the steps it needs (`jobs` at once, `threads`
        CPU threads each); `steps`: only these ids. Returns each step's outcome: done | ran | failed | not run."""
        if jobs < 1 or threads is not None and threads < 1:
            raise ConfigError("jobs and threads take a positive number")
        known = {s.id for s in self.study.steps}
        unknown = [s for s in steps or [] if s not in known]
        if unknown:
            raise ConfigError(f"steps {', '.join(unknown)}: no such step in {self.study.path} "
                              f"(steps: {', '.join(known)})")
        check_inputs(self.study, f"biobench.study({str(self.study.path)!r}).run()")
        check_nothing_conflicts(self.study)
        kwargs = {"show": show} if show is not None else {}
        return run_local(self.study, jobs, threads, only=set(steps) if steps else None, **kwargs)

    def submit(self, settings: SlurmSettings, steps: list[str] | None = None) -> list[tuple[str, str, list[str]]]:
        """Every step not done (`steps`: only these ids) as a SLURM job with afterok dependencies, none submitted
        twice while queued: (step id, job id, what it waits on)."""
        check_inputs(self.study, f"biobench.study({str(self.study.path)!r}).submit(...)")
        known = {s.id for s in self.study.steps}
        unknown = [s for s in steps or [] if s not in known]
        if unknown:
            raise ConfigError(f"steps {', '.join(unknown)}: no such step in {self.study.path} "
                              f"(steps: {', '.join(known)})")
        check_nothing_conflicts(self.study)
        return [(step.id, job, waits) for step, job, waits in
                submit_slurm(self.study, settings, only=set(steps) if steps else None)]

    def status(self) -> list[StepState]:
        """Each step's state (done | running | waiting | failed | partly done | to run), detail and retry."""
        return study_status(self.study, self._retry)

    def report(self) -> dict[str, Any]:
        """The [[compare]] tables and probes as <out>/report/report.{md,tex,csv,json} (+ figures); the numbers."""
        if not self.study.compares and not any(s.analysis == "probe" for s in self.study.steps):
            raise ConfigError(f"{self.study.path}: no [[compare]] table and no probe: nothing to report")
        return write_report(self.study)

    def __repr__(self) -> str:
        return f"<study {self.study.path.name}: {len(self.study.steps)} steps, out {self.study.out}>"
