"""Board work in worker processes: the significance groups of a cold board (bench/standings/cache.py) and the reading of
a cold scan's result files (bench/standings/scan.py).

Why processes: reading thousands of JSON files is Python work that holds the GIL, so in a thread it slows the app
being built beside it; processes run on the other cores. A worker is `python -c` (not multiprocessing's spawn,
which re-runs the parent's main script: an app.py calling launch() at top level would start a second server),
niced so that on a machine with few cores the app's own pages come first. The pipes carry pickles between this
process and its own children only, and a job names its function (a module-level function of a `biobench.` module,
passed as the function itself and sent as its "module:name"), never code. If a worker
fails, the jobs not yet returned are run here, so the result is the same either way.
"""

from __future__ import annotations

import importlib
import os
import pickle
import subprocess
import sys
import threading
from collections.abc import Callable, Generator, Sequence
from typing import Any, BinaryIO

ENABLED = True  # tests that patch a job's function turn workers off (a patch does not reach another process)
MAX_WORKERS = 4  # worker processes at most

# a worker: sys.path first (this process may import biobench from elsewhere), its stdout kept for the results
_WORKER = ("import os, pickle, sys; out = sys.stdout.buffer; sys.stdout = sys.stderr; "
           "hasattr(os, 'nice') and os.nice(5); sys.path[:0] = pickle.load(sys.stdin.buffer); "
           "from biobench.standings.process_pool import _serve; _serve(sys.stdin.buffer, out)")


def job_name(function: Callable[..., Any]) -> str:
    """"module:name" of a module-level biobench function, what a worker imports it by; ValueError for anything
    a worker could not import by name (a lambda, a nested function, another package's function)."""
    name = f"{function.__module__}:{function.__qualname__}"
    if "<" in name or "." in function.__qualname__ or _function(name) is not function:
        raise ValueError(f"not a module-level biobench function: {name!r}")
    return name


def _function(name: str) -> Callable[..., Any]:
    module, _, attr = name.partition(":")
    if not module.startswith("biobench."):
        raise ValueError(f"not a biobench function: {name!r}")
    return getattr(importlib.import_module(module), attr)


def _serve(inp: BinaryIO, out: BinaryIO) -> None:
    """A worker's loop: the parent's pickled jobs in, one at a time (None ends them), each result out; it ends
    quietly when the parent has gone (its pipes closed). One at a time: a worker that unpickled all its jobs at
    once held half a 300-model board's runs while computing one task."""
    try:
        while (job := pickle.load(inp)) is not None:
            name, args = job
            pickle.dump(_function(name)(*args), out)
            out.flush()
    except (EOFError, BrokenPipeError):
        pass


def _send(child: subprocess.Popen, name: str, jobs: Sequence[tuple], which: range) -> None:
    """Write the jobs `which` of `jobs` to a worker, each its own pickle, then None; in a thread of its own, since
    a pipe holds 64 KB and the worker reads a job only when it is done with the last. Each job is taken from
    `jobs` here, when it is sent: a lazy sequence (the groups' jobs, cache._Jobs) makes it while the workers
    already compute. A worker that died, or a job that could not be made: nothing more sent, and the worker's
    input closed, so it ends after its job and `in_workers` runs the jobs left (a job's own error is then raised
    there, in the caller's thread)."""
    assert child.stdin is not None
    try:
        for i in which:
            pickle.dump((name, jobs[i]), child.stdin)
            child.stdin.flush()
        pickle.dump(None, child.stdin)
        child.stdin.flush()
    except Exception:  # noqa: BLE001 - BrokenPipeError, ValueError (the pipe closed by the parent's cleanup), a job's error
        pass
    finally:
        try:
            child.stdin.close()
        except (OSError, ValueError):
            pass


def worker_count(jobs: int) -> int:
    """Worker processes for `jobs` jobs: one per core (at most MAX_WORKERS), never more than the jobs. Why
    every core, the server's included: once the app is built the server waits on the network, and the workers
    are niced below it (`_WORKER`)."""
    return max(1, min(jobs, os.cpu_count() or 1, MAX_WORKERS))


BLAS_THREADS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def worker_env() -> dict[str, str]:
    """A worker's environment: this process's, with one BLAS thread unless the user chose a number. Why: there is
    one worker per core already (`worker_count`), and each worker's products (the groups' replicate scores) in as
    many threads as cores made every core run several threads that wait on each other (1.3x slower under load,
    docs/performance.md)."""
    env = dict(os.environ)
    for name in BLAS_THREADS:
        env.setdefault(name, "1")
    return env


def in_workers(function: Callable[..., Any], jobs: Sequence[tuple], process: bool = True) -> Generator[Any, None, None]:
    """`function(*job)` for each job, in order (`function`: a module-level function of a biobench module, which a
    worker imports by its `job_name`): job i in worker i mod
    `worker_count` when `process` and there is more than one job, else here; if a worker fails, the jobs not
    yet returned are run here. `jobs[i]` is taken when job i is sent (`_send`) or run here."""
    done = 0
    if process and ENABLED and len(jobs) > 1:
        name = job_name(function)
        n = worker_count(len(jobs))
        children: list[subprocess.Popen] = []
        try:
            for w in range(n):
                child = subprocess.Popen([sys.executable, "-c", _WORKER], stdin=subprocess.PIPE,
                                         stdout=subprocess.PIPE, env=worker_env())
                children.append(child)
                assert child.stdin is not None
                pickle.dump(list(sys.path), child.stdin)
                threading.Thread(target=_send, args=(child, name, jobs, range(w, len(jobs), n)),
                                 name="biobench-board-jobs", daemon=True).start()
            while done < len(jobs):
                out = children[done % n].stdout
                assert out is not None
                result = pickle.load(out)
                done += 1
                yield result
        except (OSError, EOFError, pickle.UnpicklingError):
            pass  # run below
        finally:
            for child in children:
                child.kill()
                child.wait()
                if child.stdout is not None:
                    child.stdout.close()
    for i in range(done, len(jobs)):
        yield function(*jobs[i])
