"""Seeds in parallel: up to N runs of a grid at once on one device, each in its own process (`--parallel N`).

Why: the paper's protocol is 5-9 seeds x 8-11 tasks per model, most of them small data sets that leave a
large GPU mostly idle at batch 4-16. The authors' harness runs several seeds at once on one GPU, one spawned
process per seed (`parallel_seeds` in tabib's src/tabib/comparison/benchmark.py). Here, likewise:
- each run trains in a spawned process (spawn, never fork: CUDA and tokenizers' thread pools do not survive a
  fork) that loads the model once and then takes runs one at a time from the parent, so a process trains
  exactly what a sequential grid would, seeded by its run's seed alone: the predictions are byte-identical to
  a sequential run of the same seeds (CPU, same threads per run) whichever process ran which seed;
- the parent plans (skips, conflicts) as before and hands out only pending runs, each child writes the same
  result files through the same writer (atomic), so resume and skip rules are the sequential grid's;
- the CPU threads are shared: each process gets threads // N (at least 1);
- one line per finished run, printed by the parent; children die with the parent (runtime.children) and are
  stopped, all of them, on Ctrl-C, SIGTERM or the first failed run.
- `--parallel auto` (or `--parallel` alone): on a GPU, the first run trains alone, its peak memory is measured,
  and as many runs as fit beside it in the free memory (with a margin) are started — how `--batch-size auto`
  finds micro-batches, at the level of runs. On a CPU there is no device memory to share: one at a time.
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import queue
import signal
import sys
import threading
import traceback
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from biobench.errors import BiobenchError, ConfigError
from biobench.eval.claims import RunClaims
from biobench.eval.runner import (
    Execution,
    GridPlan,
    PlannedRun,
    RunSession,
    execute,
    finished_elsewhere,
    finished_message,
    held_line,
    stopped,
    with_stop_request,
)
from biobench.runtime.children import become_child
from biobench.runtime.device import resolve_device
from biobench.runtime.interrupts import Abandoned, StopRequest
from biobench.runtime.progress import finished_line, quiet_library_bars

AUTO = "auto"
MAX_PARALLEL = 64  # above this a typo (--parallel 500), not a plan: each run holds a model copy
MEMORY_MARGIN = 0.2  # the other tasks of a grid may peak above the first run's (longer inputs)
CONTEXT_BYTES = 768 * 2**20  # what a process's CUDA context and library workspaces hold outside torch's allocator
POLL_S = 0.5
STOP_WAIT_S = 10.0


def parallel_value(text: str) -> int | str:
    """argparse type of --parallel: 'auto' or an integer 1..MAX_PARALLEL (bounded at parse time; argparse
    prints the message as the usage error)."""
    if str(text).strip().lower() == AUTO:
        return AUTO
    try:
        value = int(str(text).strip())
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_PARALLEL:
        raise argparse.ArgumentTypeError(f"expected a number of runs at once, 1-{MAX_PARALLEL}, or 'auto' (as many "
                                         f"as fit the GPU), got {text!r}")
    return value


def check_parallel(value: Any, where: str) -> int | str:
    """A `parallel` value from a grid file (an integer or "auto"), or a ConfigError naming the file."""
    if isinstance(value, bool) or not isinstance(value, int | str):
        raise ConfigError(f"{where}: parallel must be a number of runs 1-{MAX_PARALLEL} or \"auto\", not {value!r}")
    try:
        return parallel_value(str(value))
    except argparse.ArgumentTypeError as err:
        raise ConfigError(f"{where}: parallel: {err}") from None


@dataclass(frozen=True)
class Memory:
    """Device memory seen by the first run: bytes free when it started (its own CUDA context aside), and the
    most it held (torch's reserved peak)."""

    free: int
    peak: int


Probe = Callable[[Memory | None], Memory | None]  # the first run's figures (None off a GPU) -> those to fit with


def runs_that_fit(memory: Memory, margin: float = MEMORY_MARGIN, context: int = CONTEXT_BYTES,
                  cap: int = MAX_PARALLEL) -> int:
    """How many runs of `memory.peak` fit in `memory.free` at once (at least 1, at most `cap`): each takes its
    peak plus `margin`, and each one beyond the first also its own CUDA context."""
    per_run = memory.peak * (1 + margin) + context
    return max(1, min(cap, int((memory.free + context) // per_run) if per_run > 0 else cap))


def thread_share(total: int, n: int) -> int:
    """The CPU threads of each of n runs sharing `total`."""
    return max(1, total // max(1, n))


# ---------------------------------------------------------------- the child process
def _free_memory(device: str) -> int | None:
    import torch

    if not device.startswith("cuda"):
        return None
    free, _total = torch.cuda.mem_get_info(torch.device(device))
    return int(free)


def _peak_memory(device: str) -> int | None:
    import torch

    if not device.startswith("cuda"):
        return None
    peak = int(torch.cuda.max_memory_reserved(torch.device(device)))
    torch.cuda.reset_peak_memory_stats(torch.device(device))
    return peak


def _picklable(err: BaseException) -> BaseException | None:
    try:
        pickle.loads(pickle.dumps(err))
        return err
    except Exception:
        return None


def _child_main(slot: int, plan: GridPlan, execution: Execution, inbox: Any, outbox: Any, parent_pid: int) -> None:
    """One process of a parallel grid: load the model once, then train the runs the parent sends (by index in
    plan.runs) until told to stop; every outcome goes back as a message, never as an exit code."""
    become_child(parent_pid)
    import torch

    quiet_library_bars()
    index = None
    # the parent stops a child with SIGTERM: a run in training is abandoned at once, a result being written is
    # finished first (the run's claim, held by the parent, is released once the child is gone)
    stop, busy = StopRequest(), [False]

    def on_term(signum: int, frame: Any) -> None:
        stop.signal_name = "SIGTERM"
        if stop._abandonable or not busy[0]:  # training, or waiting for work: nothing to finish
            raise Abandoned("SIGTERM")

    signal.signal(signal.SIGTERM, on_term)
    try:
        session = RunSession(plan, execution, log=lambda msg: print(msg, file=sys.stderr, flush=True))
        outbox.put(("ready", slot, _free_memory(session.device)))
        while not stop.requested:
            message = inbox.get()
            if message[0] == "stop":
                return
            _, index, threads = message
            torch.set_num_threads(threads)
            run = plan.runs[index]
            busy[0] = True
            train_s = session.run(run, progress=False, stop=stop)
            busy[0] = False
            outbox.put(("done", slot, index, run.macro_f1, train_s, _peak_memory(session.device)))
            index = None
    except Abandoned:
        return
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which stops the grid
        outbox.put(("failed", slot, index, _picklable(err), f"{type(err).__name__}: {err}",
                    traceback.format_exc()))


# ---------------------------------------------------------------- the parent
@dataclass
class _Child:
    slot: int
    process: Any
    inbox: Any
    index: int | None = None  # the run it trains now
    stopping: bool = False


class _Pool:
    """The children of one parallel grid and the runs still to hand out."""

    def __init__(self, plan: GridPlan, execution: Execution, pending: list[int], share: int,
                 claims: RunClaims | None = None):
        self.plan, self.execution, self.share, self.claims = plan, execution, share, claims
        self.todo = deque(pending)
        self.context = multiprocessing.get_context("spawn")
        self.outbox = self.context.Queue()
        self.children: list[_Child] = []

    def start(self, count: int) -> None:
        for _ in range(count):
            slot = len(self.children)
            inbox = self.context.Queue()
            process = self.context.Process(target=_child_main, name=f"biobench-run-{slot}", daemon=True,
                                           args=(slot, self.plan, self.execution, inbox, self.outbox, os.getpid()))
            with _sigint_ignored():  # inherited through exec: a Ctrl-C while the child imports is the parent's
                process.start()
            self.children.append(_Child(slot, process, inbox))

    def next_run(self) -> int | None:
        """The next pending run this process may train: with claims, the next one it manages to claim (runs
        held by other processes are marked 'held', runs they finished meanwhile 'skipped')."""
        while self.todo:
            index = self.todo.popleft()
            run = self.plan.runs[index]
            if self.claims is None:
                return index
            if not self.claims.claim(run.path):
                run.status = "held"
                continue
            if finished_elsewhere(self.plan, run):
                self.claims.release(run.path, finished=True)
                continue
            return index
        return None

    def assign(self, child: _Child) -> None:
        """The next pending run to an idle child, or stop it when none is left."""
        index = self.next_run()
        if index is not None:
            child.index = index
            child.inbox.put(("run", child.index, self.share))
        else:
            child.index, child.stopping = None, True
            child.inbox.put(("stop",))

    def finished(self, index: int) -> None:
        """A child wrote this run's result: its claim goes (result first, then release)."""
        if self.claims is not None:
            self.claims.release(self.plan.runs[index].path, finished=True)

    def release_in_flight(self) -> None:
        """After the children are gone: the claims of the runs they were training, released; a run whose result
        was written before its child stopped counts as finished (its result is kept, never redone)."""
        if self.claims is None:
            return
        for child in self.children:
            if child.index is not None:
                run = self.plan.runs[child.index]
                done = finished_elsewhere(self.plan, run)
                if done:
                    run.status = "done"
                self.claims.release(run.path, finished=done)
                child.index = None

    def live(self) -> list[_Child]:
        return [c for c in self.children if not (c.stopping and not c.process.is_alive())]

    def check_alive(self) -> None:
        """A child that died without a word (killed by the OOM killer, a segfault) stops the grid."""
        for child in self.children:
            if not child.stopping and not child.process.is_alive() and child.process.exitcode is not None:
                what = self._what(child.index)
                raise BiobenchError(f"a parallel run process died (exit code {child.process.exitcode}){what}; "
                                    "finished results are kept: rerun the same command to resume")

    def _what(self, index: int | None) -> str:
        if index is None:
            return ""
        run = self.plan.runs[index]
        return f" while training {run.task.id} seed {run.seed}"

    def stop(self, at_once: bool) -> None:
        """End every child: after its current run when the grid finished, at once (SIGTERM, then SIGKILL) when
        it failed or was interrupted — the result files are atomic, so a run cut short leaves nothing."""
        for child in self.children:
            if child.process.is_alive() and at_once:
                child.process.terminate()
        for child in self.children:
            child.process.join(STOP_WAIT_S)
            if child.process.is_alive():
                child.process.kill()
                child.process.join()


class _sigint_ignored:
    def __enter__(self) -> None:
        self.main = threading.current_thread() is threading.main_thread()
        if self.main:
            self.previous = signal.signal(signal.SIGINT, signal.SIG_IGN)

    def __exit__(self, *exc: Any) -> None:
        if self.main:
            signal.signal(signal.SIGINT, self.previous)


def _raise_failure(plan: GridPlan, index: int | None, err: BaseException | None, line: str, trace: str,
                   log: Callable[[str], None]) -> None:
    where = f"{plan.runs[index].task.id} seed {plan.runs[index].seed}: " if index is not None else ""
    if isinstance(err, BiobenchError | KeyboardInterrupt):
        raise err
    log(trace.rstrip())
    raise BiobenchError(f"{where}{line} (its traceback is above; finished results are kept)")


def execute_parallel(plan: GridPlan, parallel: int | str, execution: Execution, threads: int | None = None,
                     log: Callable[[str], None] | None = None, progress: bool = True,
                     probe: Probe | None = None, claims: RunClaims | None = None,
                     stop: StopRequest | None = None) -> list[PlannedRun]:
    """Train the pending runs of `plan` up to `parallel` at once ("auto": as many as fit the device); the
    same result files, lines and resume rules as runner.execute, which runs them when one at a time is all
    there is to do (`progress`: its bars). `probe` replaces the first run's measured memory (tests simulate a
    GPU with it). `claims` and `stop` as in runner.execute: this process claims each run before a child trains
    it and holds (renews) the claims of all its children; a stop signal stops the children at once, releases
    their claims, requeues the SLURM job and raises StoppedError."""
    say = log or (lambda msg: print(msg, file=sys.stderr))
    return with_stop_request(plan, claims, stop, say, lambda request: _execute_parallel(
        plan, parallel, execution, threads, say, progress, probe, claims, request))


def _execute_parallel(plan: GridPlan, parallel: int | str, execution: Execution, threads: int | None,
                      log: Callable[[str], None], progress: bool, probe: Probe | None, claims: RunClaims | None,
                      stop: StopRequest) -> list[PlannedRun]:
    import torch

    pending = [i for i, r in enumerate(plan.runs) if r.status == "pending"]
    device = resolve_device(execution.device)
    auto = parallel == AUTO
    if auto and not device.startswith("cuda") and probe is None:
        log(f"--parallel auto on {device}: one run at a time (no device memory to share)")
        auto, parallel = False, 1
    target = 1 if auto else min(int(parallel), len(pending))
    if not auto and target <= 1:
        return execute(plan, device=execution.device, progress=progress, trust_remote_code=execution.trust_remote_code,
                       log=log, compile_encoder=execution.compile_encoder, report_to=execution.report_to,
                       micro_batch=execution.micro_batch, claims=claims, stop=stop)
    total_threads = threads or torch.get_num_threads()
    for name, reason in plan.unavailable.items():
        log(f"skipping task {name}: {reason}")
    pool = _Pool(plan, execution, pending, thread_share(total_threads, 1 if auto else target), claims)
    if auto:
        log(f"--parallel auto: the first run trains alone on {device} to measure its peak memory")
    else:
        log(f"{target} runs at once on {device}, {pool.share} CPU thread(s) each")
    first_free: int | None = None
    finished = 0
    failed = True
    try:
        pool.start(1 if auto else target)
        while pool.live() and not stop.requested:
            try:
                message = pool.outbox.get(timeout=POLL_S)
            except queue.Empty:
                pool.check_alive()
                continue
            kind, slot = message[0], message[1]
            child = pool.children[slot]
            if kind == "failed":
                failed_run, error, line, trace = message[2:]
                _raise_failure(plan, failed_run, error, line, trace, log)
            if kind == "ready":
                first_free = message[2] if first_free is None else first_free
                pool.assign(child)
                continue
            index, macro_f1, train_s, peak = message[2:]
            run = plan.runs[index]
            run.status, run.macro_f1 = "done", macro_f1
            child.index = None
            pool.finished(index)
            finished += 1
            finished_line(finished_message(plan, run, finished, len(pending), train_s))
            if auto:
                auto = False
                target = _decide(probe, first_free, peak, device, log)
                pool.share = thread_share(total_threads, target)
                pool.start(min(target - 1, len(pool.todo)))
            pool.assign(child)
        failed = stop.requested
    finally:
        pool.stop(at_once=failed)
        pool.release_in_flight()
    if stop.requested:
        raise stopped(plan, stop, log)
    if (line := held_line(plan, claims)) is not None:
        log(line)
    return plan.runs


def _decide(probe: Probe | None, free: int | None, peak: int | None, device: str, log: Callable[[str], None]) -> int:
    """--parallel auto: how many runs at once, from the first run's memory (or the probe's figures)."""
    measured = Memory(free, peak) if free is not None and peak is not None else None
    memory = probe(measured) if probe else measured
    if memory is None:
        log(f"--parallel auto: no device memory figures on {device}; one run at a time")
        return 1
    n = runs_that_fit(memory)
    log(f"--parallel auto: one run peaks at {memory.peak / 2**30:.2f} GiB of {memory.free / 2**30:.2f} GiB free "
        f"({MEMORY_MARGIN:.0%} margin): {n} run(s) at once")
    return n
