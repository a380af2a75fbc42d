"""The evaluation worker: claim the oldest request, run `biobench eval` for it, publish, record the outcome.

Why eval runs in a child process: the worker must keep renewing its lease while a run takes hours, capture the
log whose last lines go into a failed request, and stop the run at once when the lease is lost. The child dies
with the worker (PR_SET_PDEATHSIG on Linux), so a `kill -9` of the worker leaves no orphan training on; the next
worker resumes the request and the eval skips what is finished by its run keys.

Why the worker survives anything in a request: the queue may be public. A request is checked
field by field when it is read (biobench.service.queue), the worker checks that it can publish before it
claims anything, and whatever goes wrong with one claimed request — its results folder, its log, the child,
the publishing — ends that request as `failed` with one line, never `running` with the worker gone.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import stat
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from biobench.errors import BiobenchError, ConfigError, DiskFullError
from biobench.models import check_memory, model_config
from biobench.protocols import OVERRIDES
from biobench.runtime.children import die_with_parent
from biobench.runtime.files import cache_home, disk_full_guard
from biobench.runtime.memory import device_without_torch
from biobench.runtime.paths import HF_DATASETS, hide_paths, safe_name
from biobench.service import queue
from biobench.service.queue_storage import Storage
from biobench.standings import dataset
from biobench.standings.aggregate import build_board
from biobench.store.layout import results_of_revision
from biobench.store.summary import task_scores
from biobench.store.trust import (
    DEGENERATE_MARK,
    SMOKE_MARK,
    degenerate,
    degenerate_text,
    describe_overrides,
    overrides,
)


@dataclass
class WorkerConfig:
    results: str  # a folder, or hf://datasets/ORG/NAME
    data_dir: str | None = None
    lease_s: float = 600.0
    renew_s: float = 60.0
    poll_s: float = 30.0
    once: bool = False
    max_hours: float | None = None  # the worker's own life: it stops claiming after this
    request_hours: float = 48.0  # one request's wall-clock: past it, its eval is stopped and the request failed
    results_dry_run: Path | None = None  # hub results: write the dataset folder here instead of pushing
    device: str | None = None
    parallel: int | str | None = None  # eval's --parallel: runs of a request at once on the device
    python: str = sys.executable
    worker_id: str = ""
    log_dir: Path = field(default_factory=lambda: cache_home("worker") / "logs")
    max_model_gb: float | None = None  # --max-model-gb (else $BIOBENCH_MAX_MODEL_GB): the largest model it runs


def eval_arguments(request: queue.Request, results_dir: Path, config: WorkerConfig) -> list[str]:
    """The `biobench eval` command line of a request (protocol overrides as their CLI flags). Values from the
    request are joined to their flag (`--model=X`), so a value starting with `-` is never read as a flag."""
    args = ["eval", f"--model={request.model}", "--results", str(results_dir), "--no-progress",
            f"--tasks={','.join(request.tasks)}"]
    if request.seeds:
        args += [f"--seeds={','.join(str(s) for s in request.seeds)}"]
    if request.name:
        args += [f"--name={request.name}"]
    if config.data_dir:
        args += ["--data-dir", config.data_dir]
    if config.device:
        args += ["--device", config.device]
    if config.parallel is not None:
        args += ["--parallel", str(config.parallel)]
    if config.max_model_gb is not None:
        args += ["--max-model-gb", f"{config.max_model_gb:g}"]
    flags = {dest: flag for flag, (dest, _, _) in OVERRIDES.items()}
    for dest, value in sorted(request.overrides.items()):
        args += [f"{flags[dest]}={value}"]
    if request.metadata:  # checked when the request was read; eval checks it again (store.metadata)
        args += [f"--metadata={json.dumps(request.metadata, sort_keys=True)}"]
    return args


def hub_results(config: WorkerConfig) -> bool:
    return config.results.startswith(HF_DATASETS)


def results_repo(config: WorkerConfig) -> str:
    """ORG/NAME of hub results (hf://datasets/ORG/NAME): parsed here only; `check_publishable` vets it."""
    return config.results.removeprefix(HF_DATASETS).strip("/")


def working_results(config: WorkerConfig) -> Path:
    """Where eval writes. A folder: the results folder itself. A hub dataset: a local folder seeded with the
    dataset's current results (so the push that follows carries everything, and finished runs are skipped)."""
    if not hub_results(config):
        return Path(config.results)

    repo = results_repo(config)
    local = cache_home("worker") / repo.replace("/", "--")
    local.mkdir(parents=True, exist_ok=True)
    source = (config.results_dry_run / dataset.PARQUET) if config.results_dry_run else None
    if source is None or source.is_file():
        published = dataset.resolve_sources([source or config.results])[0]
        for path in published.rglob("*"):
            target = local / path.relative_to(published)
            if path.is_file() and not target.exists() and not path.name.startswith("."):
                target.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(path, target)
    return local


def publish(config: WorkerConfig, local: Path) -> str:
    """Make the request's results public: nothing to do for a folder; for a hub dataset, push the whole
    working folder as results.parquet + card (or write it to the dry-run folder)."""
    if not hub_results(config):
        return str(local)

    repo = results_repo(config)
    runs = dataset.board_runs(build_board([local], reference=False, significance=False))
    if config.results_dry_run:
        dataset.build_folder(runs, config.results_dry_run, repo)
        return f"{config.results} (dry run: {config.results_dry_run})"
    dataset.push(runs, repo, message="biobench worker results")
    return config.results


Command = Callable[[queue.Request, Path], Sequence[str]]


def check_publishable(config: WorkerConfig) -> None:
    """Refuse to start (ConfigError, one line) when the results cannot be published: a hub dataset with the
    hub switched off or no token, a results "folder" that is a file, FIFO or device or cannot be created.
    Checked before any claim, so no request is stranded `running` by a worker that could never finish it."""
    if hub_results(config):
        repo = results_repo(config)
        if repo.count("/") != 1 or not all(part and part == part.strip() for part in repo.split("/")):
            raise ConfigError(f"--results {config.results[:120]}: expected hf://datasets/ORG/NAME")
        if config.results_dry_run:
            return
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
            raise ConfigError(f"--results {config.results}: the hub is switched off here (HF_HUB_OFFLINE); the worker "
                              "could not publish, so it claims nothing (or use --dry-run DIR)")
        from huggingface_hub import get_token

        if not get_token():
            raise ConfigError(f"--results {config.results}: no Hugging Face token here (set HF_TOKEN); the worker "
                              "could not publish, so it claims nothing")
        return
    folder = Path(config.results)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"--results {folder} is not a folder (a file, FIFO or device); give a results folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ConfigError(f"--results {folder}: cannot create it ({err.strerror or err}); give a folder this user "
                          "may write") from None
    if not os.access(folder, os.W_OK):
        raise ConfigError(f"--results {folder} is not writable by this user; give a folder it may write")


def memory_refusal(request: queue.Request, config: WorkerConfig) -> str | None:
    """Why this worker cannot run the request's model (one line), or None: its config.json implies more than
    the operator's --max-model-gb or the device's memory (biobench.runtime.memory). Asked before the request is
    marked running, so a model too big fails its request at once and the queue goes on. The device's memory is
    read without torch (nvidia-smi's total for a GPU; available RAM otherwise): a CUDA context in the worker
    would take memory from its eval child. A model that cannot be read here is eval's to report, not refused."""

    try:
        model_config(request.model)
    except BiobenchError:
        return None
    try:
        check_memory(request.model, device_without_torch(config.device), training=True, limit_gb=config.max_model_gb,
                     use_torch=False)
    except BiobenchError as err:
        return _one_line(err)
    except Exception:  # noqa: BLE001 — an unforeseen error here must not strand a held request: eval decides
        return None
    return None


def _one_line(err: BaseException) -> str:
    text = " ".join(str(err).split()) or type(err).__name__
    return hide_paths(text if isinstance(err, BiobenchError) else f"{type(err).__name__}: {text}")[:400]


def run_request(storage: Storage, lease: queue.HeldRequest, config: WorkerConfig, log: Callable[[str], None],
                command: Command | None = None) -> str:
    """Run one claimed request to its end; returns its final status ('finished', 'failed' or 'lost'). Any
    error on the way fails the request with one line (a full disk also stops the worker: DiskFullError)."""
    request = lease.request
    try:
        return _run(storage, lease, config, log, command)
    except DiskFullError as err:
        _finish_quietly(storage, lease, [f"worker stopped: {_one_line(err)}"])
        raise
    except Exception as err:  # noqa: BLE001 — whatever it is, the request must not stay running
        line = _one_line(err)
        _finish_quietly(storage, lease, [f"worker error: {line}"])
        log(f"{request.id}: failed: {line}")
        return "failed"


def _finish_quietly(storage: Storage, lease: queue.HeldRequest, tail: list[str]) -> None:
    try:
        queue.finish(storage, lease, "failed", tail)
    except BiobenchError:
        pass  # the queue itself is unwritable: the lease expires and the next claim retries


PROBE = ".space-check"  # the small file the worker writes (and removes) in its log folder before each claim


def _write_synced(path: Path, text: str, mode: str) -> None:
    """Write `text` to `path` and fsync it: a full disk shows here (ENOSPC), not later in a silent child."""
    with path.open(mode, encoding="utf-8") as handle:
        handle.write(text)
        handle.flush()
        os.fsync(handle.fileno())


def log_tail(path: Path, lines: int = 20, max_bytes: int = 64 * 1024) -> list[str]:
    """The last `lines` lines of a log, reading at most its last `max_bytes`; [] for anything but a regular file
    (a log replaced by a device must not be read without end)."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return []
        os.lseek(fd, max(0, info.st_size - max_bytes), os.SEEK_SET)
        data = os.read(fd, max_bytes)
    finally:
        os.close(fd)
    return data.decode("utf-8", errors="replace").splitlines()[-lines:]


def check_log_space(log_dir: Path) -> None:
    """DiskFullError (one `disk full writing to ...` line) when the log folder cannot take a small write. Why:
    with the log disk full, every eval child died without a line and the worker went on claiming, failing
    each request with an empty log tail; it now stops claiming instead."""
    log_dir.mkdir(parents=True, exist_ok=True)
    probe = log_dir / PROBE
    try:
        with disk_full_guard(log_dir, 4096, lambda: "no request was claimed"):
            _write_synced(probe, " " * 4096, "w")
    finally:
        probe.unlink(missing_ok=True)


def _run(storage: Storage, lease: queue.HeldRequest, config: WorkerConfig, log: Callable[[str], None],
         command: Command | None) -> str:
    request = lease.request
    local = working_results(config)
    log_path = config.log_dir / f"{safe_name(request.id, 'request id')}.{lease.generation}.log"
    log_path.parent.mkdir(parents=True, exist_ok=True)
    argv = (list(command(request, local)) if command
            else [config.python, "-m", "biobench.cli", *eval_arguments(request, local, config)])
    log(f"{request.id}: running {request.model} on {len(request.tasks)} task(s) (claim {lease.generation}, "
        f"log {log_path})")
    safe = lambda: "the queue and earlier results are safe"  # noqa: E731
    limit_s = config.request_hours * 3600
    with disk_full_guard(config.log_dir, 0, safe), log_path.open("w", encoding="utf-8") as out:
        child = subprocess.Popen(argv, stdout=out, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                 preexec_fn=die_with_parent, env={**os.environ, "PYTHONUNBUFFERED": "1"})
        try:
            started = time.time()
            next_renewal = started + config.renew_s
            while child.poll() is None:
                time.sleep(min(1.0, config.renew_s))
                if time.time() - started > limit_s:
                    child.kill()
                    child.wait()
                    line = (f"stopped after {config.request_hours:g} hour(s), the limit of one request on this "
                            "worker (--request-hours); finished runs are kept")
                    queue.finish(storage, lease, "failed", [line])
                    log(f"{request.id}: failed: {line}")
                    return "failed"
                if time.time() >= next_renewal:
                    if not queue.renew(storage, lease, config.lease_s):
                        log(f"{request.id}: lease taken over by another worker; stopped")
                        return "lost"
                    next_renewal = time.time() + config.renew_s
        finally:
            if child.poll() is None:
                child.kill()
                child.wait()
    tail = [hide_paths(line) for line in log_tail(log_path)]
    if child.returncode != 0:  # a child that died for want of space says nothing: the worker's own write tells
        with disk_full_guard(config.log_dir, 0, safe):
            _write_synced(log_path, f"biobench worker: eval exited with {child.returncode}\n", "a")
        queue.finish(storage, lease, "failed", tail)
        log(f"{request.id}: failed (exit {child.returncode}); last line: {tail[-1] if tail else '(no output)'}")
        return "failed"
    try:
        where = publish(config, local)
    except Exception as err:  # the results are safe in the working folder; the next claim publishes them
        queue.finish(storage, lease, "failed", [*tail, f"publishing failed: {_one_line(err)}"])
        log(f"{request.id}: results computed but not published: {err}")
        return "failed"
    queue.finish(storage, lease, "finished", tail, results=where)
    log(f"{request.id}: finished; results in {where}")
    for line in score_lines(request, local):
        log(f"{request.id}: {line}")
    return "finished"


def request_results(request: queue.Request, results_dir: Path) -> list:
    """The results of this request in a results folder: its weights (revision), tasks and seeds, made with its
    overrides (a smoke request's runs, not the protocol runs of the same seeds, and the other way round)."""

    wanted = {k: str(v) for k, v in request.overrides.items()}
    return [r for r in results_of_revision(results_dir, request.revision)
            if r.task_id in request.tasks and (not request.seeds or r.seed in request.seeds)
            and {k: str(v.get("run")) for k, v in overrides(r).items()} == wanted]


def score_lines(request: queue.Request, results_dir: Path) -> list[str]:
    """What a finished request scored, one line per task (test headline metric in percent, mean over its
    seeds) with the marks every view uses (store.trust: ⚑ smoke with its overrides, ⚠ degenerate with the
    command that fixes it), so `worker --once` says what came out, not only where."""

    results = request_results(request, results_dir)
    if not results:
        return ["no result of this request found in the results folder (see its log)"]
    lines = []
    for task, scores in task_scores((None, r) for r in results).items():
        runs = [r for r in results if r.task_id == task]
        seeds = ", ".join(str(seed) for seed in sorted(scores.scores))
        line = f"{task}: {scores.metric} {scores.summary(100.0).mean:.2f} (seed{'s' if len(scores.scores) > 1 else ''} {seeds})"
        found = overrides(runs[0])
        if found:
            line += f" {SMOKE_MARK} smoke run ({describe_overrides(found)}): not the protocol's score"
        lines.append(line)
        for run in sorted(runs, key=lambda r: r.seed):
            note = degenerate(run)
            if note is not None:
                lines.append(f"{DEGENERATE_MARK} {task} seed {run.seed}: {degenerate_text(note)}")
    return lines


def run_worker(storage: Storage, config: WorkerConfig, log: Callable[[str], None] = print,
               command: Command | None = None) -> int:
    """Process requests, polling an empty queue every `poll_s`, until --max-hours has passed (--once: one
    request, or none, then return). Returns the number of requests run. Each malformed request file is
    reported once as a `problem:` line (and failed where it can be rewritten)."""
    check_publishable(config)
    worker = config.worker_id or f"{socket.gethostname()}-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    deadline = time.time() + config.max_hours * 3600 if config.max_hours else None
    done = 0
    reported: set[tuple[str, str]] = set()
    while deadline is None or time.time() < deadline:
        check_log_space(config.log_dir)  # a full log disk stops the worker before it claims anything
        problems: list[queue.QueueProblem] = []
        lease = queue.claim_next(storage, worker, config.lease_s, problems=problems,
                                 admit=lambda request: memory_refusal(request, config))
        for problem in problems:
            if (problem.path, problem.reason) not in reported:
                reported.add((problem.path, problem.reason))
                log(f"problem: {problem.line()}" + (" (marked failed)" if problem.stem else " (skipped)"))
        if lease is None:
            if config.once:
                log(f"worker {worker}: no pending request in {storage.label}")
                return done
            time.sleep(config.poll_s)
            continue
        run_request(storage, lease, config, log, command)
        done += 1
        if config.once:
            return done
    return done
