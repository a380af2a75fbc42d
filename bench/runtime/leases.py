"""Leases: a process holds a piece of work for a while, renews the hold while it works, and loses it when it stops
renewing. The one lease mechanism of biobench: the request queue's leases (bench/service/queue.py, a request
held by a worker) and eval's run claims (bench/eval/claims.py, a (model, task, seed) run held by an eval process
or a SLURM array element) are both this.

Layout: a lease is a folder of generations, `<folder>/000001.json`, `000002.json`, ...; the highest generation is
the current one. Why generations:
- claiming is "create the next generation's file, only if it does not exist" — one atomic step on a folder
  (runtime.files.create_new: link(2), which fails when the name exists, also on NFS/Lustre) and on a hub dataset
  (a commit on the revision that was read). Two processes that both saw generation N expired both try to
  create N+1: exactly one wins. Taking over an expired lease is the same step as a first claim, so there is no
  separate takeover to get wrong, and no process ever deletes or rewrites another's file.
- nothing relies on process ids across hosts: a lease is free when its `expires` (the holder's wall clock plus
  the lease length) has passed on the reader's clock. Keep leases minutes long, so clock skew between nodes
  (seconds under NTP) does not matter. The holder's host, pid and SLURM ids are recorded for people. Two
  shortcuts, each certain: a holder on this very machine (same boot id and pid namespace) whose process is gone
  (no such pid, or a pid reused by a process started at another time) is dead, so a rerun after `kill -9` on
  a workstation does not wait for the expiry; and a holder with this process's SLURM job id but another
  SLURM_RESTART_COUNT is an earlier life of this requeued job (SLURM runs one instance of a job at a time).
- a holder renews (rewrites its own generation with a later expiry) and checks first that no later generation
  exists: a holder that stalled past its expiry finds it has been taken over and must stop.
- releasing is creating generation N+1 marked released (it fails, harmlessly, when someone took over first).

A lease file is untrusted input (a shared cluster file system, a public hub queue): read bounded (4 KiB, a
regular file: a FIFO or device is refused without blocking), parsed with the depth check, every field
validated. A file that is not one biobench writes — not JSON, wrong types, an expiry that is not a finite
time within MAX_LEASE_S — counts as expired; `LeaseState.problem` says why in one line for the caller to warn.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import re
import shutil
import socket
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from biobench.errors import BiobenchError, ConfigError
from biobench.runtime.files import atomic_write, create_new
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json, read_bytes

MAX_GENERATION = 999_999  # generation names have six digits
MAX_LEASE_S = 7 * 24 * 3600.0  # a lease further ahead than a week is not one biobench wrote: expired
MAX_LEASE_BYTES = 4096  # a lease is ~300 bytes
# A holder writes its expiry as its clock plus its lease length, renewed every fraction of it: a lease expiring more
# than this many of the reader's lease lengths ahead is not one a holder of the same settings wrote (a planted claim
# expiring in 6.9 days parked its run for a week, issue 58 item 3); clock skew under NTP is seconds.
PERIODS_AHEAD = 3
_GENERATION = re.compile(r"(\d{6})\.json")
_TEXT = re.compile(r"[^\x00-\x1f\x7f]{0,200}")  # holder texts: short, no control characters
SLURM_FIELDS = {"slurm_job_id": "SLURM_JOB_ID", "slurm_array_job_id": "SLURM_ARRAY_JOB_ID",
                "slurm_array_task_id": "SLURM_ARRAY_TASK_ID", "slurm_restart_count": "SLURM_RESTART_COUNT"}


class LeaseFiles(Protocol):
    """Where leases live: the five calls of the queue's Storage (bench/service/queue_storage.py) minus nothing.
    Paths are relative, '/'-separated."""

    label: str

    def list(self, prefix: str) -> list[str]: ...

    def read(self, path: str, max_bytes: int = ...) -> bytes | None: ...

    def write(self, path: str, data: bytes) -> None: ...

    def create(self, path: str, data: bytes) -> bool: ...


def now_iso(clock: float) -> str:
    return datetime.fromtimestamp(clock, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass(frozen=True)
class Holder:
    """Who holds a lease: a label (`worker`), the host, the pid and, inside a SLURM job, its ids. Recorded so
    that a person (and `eval --dry-run`) can see who holds what; never used to decide whether a lease is free."""

    worker: str
    host: str = ""
    pid: int = 0
    slurm_job_id: str | None = None
    slurm_array_job_id: str | None = None
    slurm_array_task_id: str | None = None
    slurm_restart_count: str | None = None
    machine: str | None = None  # boot id + pid namespace (Linux): whether a pid means the same process here
    started: int | None = None  # the process's start time (clock ticks since boot): a reused pid differs

    @classmethod
    def here(cls, worker: str | None = None) -> Holder:
        """This process: host, pid and the SLURM job it runs in (from the environment SLURM sets)."""
        host = socket.gethostname()[:200]
        env = {name: os.environ.get(var) for name, var in SLURM_FIELDS.items()}
        env = {k: v[:200] if v and _TEXT.fullmatch(v) else None for k, v in env.items()}
        return cls(worker or f"{host}:{os.getpid()}", host, os.getpid(), **env, machine=_machine(),
                   started=_start_time(os.getpid()))

    def gone(self, other: Holder) -> bool:
        """Whether `other` is a process of this machine that no longer runs (certain: same boot and pid
        namespace, and its pid is free or now belongs to a process started at another time)."""
        if not self.machine or other.machine != self.machine or not other.pid or other.started is None:
            return False
        return _start_time(other.pid) != other.started

    def describe(self) -> str:
        """'host pid 123 (SLURM job 456, array 455_7)' — what a progress listing shows."""
        where = f"{self.host or '?'} pid {self.pid}"
        job = []
        if self.slurm_job_id:
            job.append(f"SLURM job {self.slurm_job_id}")
        if self.slurm_array_job_id:
            job.append(f"array {self.slurm_array_job_id}_{self.slurm_array_task_id or '?'}")
        if self.slurm_restart_count and self.slurm_restart_count != "0":
            job.append(f"restart {self.slurm_restart_count}")
        return where + (f" ({', '.join(job)})" if job else "")

    def same_slurm_job(self, other: Holder) -> bool:
        """Whether `other` is an earlier life of this process's SLURM job (same job id, another restart):
        SLURM runs one instance of a job id at a time, so that holder is gone — its lease can be taken at once."""
        return (self.slurm_job_id is not None and self.slurm_job_id == other.slurm_job_id
                and (self.slurm_restart_count or "0") != (other.slurm_restart_count or "0"))


def _machine() -> str | None:
    try:
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}/{os.readlink('/proc/self/ns/pid')}"[:200]
    except OSError:
        return None


def _start_time(pid: int) -> int | None:
    """A process's start time in clock ticks after boot (/proc/<pid>/stat field 22); None when there is none."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return int(stat.rsplit(")", 1)[1].split()[19])
    except (OSError, ValueError, IndexError):
        return None


@dataclass
class Lease:
    """A lease this process holds: generation `generation` of the lease folder `folder`."""

    folder: str
    generation: int
    holder: Holder
    expires: float

    @property
    def path(self) -> str:
        return f"{self.folder}/{self.generation:06d}.json"


@dataclass(frozen=True)
class LeaseState:
    """The current generation of a lease folder as read: 0 when never claimed; `expires` 0.0 when it is free
    (released, or a file that is not a lease: `problem` says why in one line)."""

    generation: int
    holder: Holder | None = None
    expires: float = 0.0
    released: bool = False
    problem: str | None = None
    # a generation no holder could have written (beyond the folder's history): the folder is junk, to be cleared
    junk: bool = False

    def free(self, now: float | None = None) -> bool:
        return self.expires <= (time.time() if now is None else now)


def encode(holder: Holder, expires: float, released: bool = False, abandoned: str | None = None) -> bytes:
    """A lease file's bytes. `worker` and `expires` are what the queue's leases always held (older workers read
    them); the rest describes the holder. `abandoned`: why a released lease's work was given up (eval counts
    the runs abandoned at the wall clock in a claim's history)."""
    record: dict[str, Any] = {"worker": holder.worker, "expires": expires, "expires_at": now_iso(expires),
                              "host": holder.host, "pid": holder.pid}
    record.update({k: getattr(holder, k) for k in (*SLURM_FIELDS, "machine", "started")
                   if getattr(holder, k) is not None})
    if released:
        record["released"] = True
    if abandoned:
        record["abandoned"] = abandoned
    return json.dumps(record).encode()


def _text(raw: dict[str, Any], name: str, optional: bool = True) -> str | None:
    value = raw.get(name)
    if value is None and optional:
        return None
    if not isinstance(value, str) or not _TEXT.fullmatch(value):
        raise ValueError(f"{name} is not a short text without control characters")
    return value


def decode(data: bytes, now: float, source: str = "lease", ahead_s: float = MAX_LEASE_S) -> tuple[Holder, float, bool]:
    """(holder, expires, released) of a lease file's bytes; ValueError with the reason when it is not a lease
    biobench writes (the caller treats it as expired), an expiry more than `ahead_s` ahead included."""
    try:
        raw = parse_json(data, source, max_depth=4)
    except UnsafeJSONError as err:
        raise ValueError(err.reason) from None
    if not isinstance(raw, dict):
        raise ValueError(f"a JSON {type(raw).__name__}, not an object")
    expires = raw.get("expires")
    if isinstance(expires, bool) or not isinstance(expires, int | float):
        raise ValueError("expires is not a number")
    try:
        expires = float(expires)
    except OverflowError:
        raise ValueError("expires is not a finite time") from None
    if not math.isfinite(expires) or expires < 0:
        raise ValueError("expires is not a finite time")
    if expires > now + ahead_s:
        raise ValueError(f"expires {expires - now:,.0f} s ahead, more than a holder writes ({ahead_s:,.0f} s)")
    pid = raw.get("pid", 0)
    if isinstance(pid, bool) or not isinstance(pid, int) or not 0 <= pid < 2**32:
        raise ValueError("pid is not a process id")
    released = raw.get("released", False)
    if not isinstance(released, bool):
        raise ValueError("released is not true or false")
    started = raw.get("started")
    if started is not None and (isinstance(started, bool) or not isinstance(started, int) or not 0 <= started < 2**63):
        raise ValueError("started is not a process start time")
    holder = Holder(_text(raw, "worker", optional=False) or "", _text(raw, "host") or "", pid,
                    **{k: _text(raw, k) for k in SLURM_FIELDS}, machine=_text(raw, "machine"), started=started)
    return holder, expires, released


def generations(files: LeaseFiles, folder: str) -> list[int]:
    prefix = f"{folder}/"
    found = []
    for path in files.list(folder):
        match = _GENERATION.fullmatch(path[len(prefix):]) if path.startswith(prefix) else None
        if match:
            found.append(int(match[1]))
    return sorted(found)


def read_state(files: LeaseFiles, folder: str, now: float | None = None, lease_s: float | None = None) -> LeaseState:
    """The current generation of `folder` and whether it is held; a file that is not a lease reads as expired,
    with the reason in `problem`. Bounded by what a real holder could have written: generations are created one by
    one and never removed, so the latest is at most the number of them (a planted `999999.json` is `junk`: the
    folder is to be cleared); with `lease_s` (the reader's lease length), an expiry more than PERIODS_AHEAD of
    them ahead reads as expired (else MAX_LEASE_S)."""
    now = time.time() if now is None else now
    found = generations(files, folder)
    if not found:
        return LeaseState(0)
    latest = found[-1]
    path = f"{folder}/{latest:06d}.json"
    if latest > len(found):
        return LeaseState(latest, problem=f"{path}: generation {latest:,} in a folder of {len(found):,} generation(s), "
                                          "not one a holder wrote (they are created one by one)", junk=True)
    ahead = MAX_LEASE_S if lease_s is None else min(MAX_LEASE_S, PERIODS_AHEAD * lease_s)
    try:
        data = files.read(path, MAX_LEASE_BYTES)
        if data is None:  # released and removed since it was listed
            return LeaseState(latest)
        holder, expires, released = decode(data, now, path, ahead)
    except UnsafeJSONError as err:  # a FIFO, a device, over the size limit
        return LeaseState(latest, problem=f"{path}: {err.reason}; treated as expired")
    except ValueError as err:
        return LeaseState(latest, problem=f"{path}: not a lease biobench writes ({err}); treated as expired")
    return LeaseState(latest, holder, 0.0 if released else expires, released)


def acquire(files: LeaseFiles, folder: str, holder: Holder, lease_s: float, now: float | None = None,
            state: LeaseState | None = None) -> Lease | None:
    """Take the lease when it is free (never claimed, expired, released, malformed, held by a process of this
    machine that is gone, or by an earlier life of this SLURM job): create the next generation. None when it
    is held, or when another process created that generation first. ConfigError when the folder has run out
    of generations."""
    now = time.time() if now is None else now
    state = read_state(files, folder, now) if state is None else state
    if not state.free(now) and not dead(holder, state):
        return None
    if state.generation >= MAX_GENERATION:
        raise ConfigError(f"{files.label}: {folder} was claimed {state.generation} times; remove the folder")
    lease = Lease(folder, state.generation + 1, holder, now + lease_s)
    return lease if files.create(lease.path, encode(holder, lease.expires)) else None


def dead(me: Holder, state: LeaseState) -> bool:
    """Whether the holder of a live-looking lease is certainly gone (see the module's shortcuts)."""
    return state.holder is not None and (me.gone(state.holder) or me.same_slurm_job(state.holder))


def holds(files: LeaseFiles, lease: Lease) -> bool:
    """Whether no later generation exists (the lease was not taken over after it expired, nor released)."""
    found = generations(files, lease.folder)
    return bool(found) and found[-1] == lease.generation


def renew(files: LeaseFiles, lease: Lease, lease_s: float, now: float | None = None) -> bool:
    """Extend the lease; False when it was lost (a later generation exists): the caller must stop its work."""
    if not holds(files, lease):
        return False
    lease.expires = (time.time() if now is None else now) + lease_s
    files.write(lease.path, encode(lease.holder, lease.expires))
    return True


def release(files: LeaseFiles, lease: Lease, now: float | None = None, abandoned: str | None = None) -> bool:
    """Give the lease up: create the next generation marked released (free at once for the next claim), with
    `abandoned` (why the work was given up) when given. False when it had been taken over already."""
    if not holds(files, lease):
        return False
    return files.create(f"{lease.folder}/{lease.generation + 1:06d}.json",
                        encode(lease.holder, time.time() if now is None else now, released=True, abandoned=abandoned))


class Heartbeat:
    """A daemon thread that renews every lease registered with it every `every_s` seconds while the work runs
    (a training holds the main thread). A lease found taken over is dropped and reported through `on_lost`;
    a renewal that fails (a file system hiccup) is retried at the next beat and reported through `on_error`."""

    def __init__(self, files_of: Callable[[Lease], LeaseFiles], lease_s: float, every_s: float,
                 on_lost: Callable[[Lease], None] | None = None,
                 on_error: Callable[[Lease, BaseException], None] | None = None) -> None:
        self.files_of, self.lease_s, self.every_s = files_of, lease_s, every_s
        self.on_lost, self.on_error = on_lost, on_error
        self.leases: list[Lease] = []
        self.lost: list[Lease] = []
        self._lock = threading.Lock()
        # held while one lease is renewed: remove() waits for a renewal in flight, so a lease removed and then
        # released (its folder deleted) is never written again by a renewal that checked it before the removal
        # (the finished run's claim folder came back, and the next process waited a claim period for nothing)
        self._renewing = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, lease: Lease) -> None:
        with self._lock:
            self.leases.append(lease)
        if self._thread is None:
            self._thread = threading.Thread(target=self._beat, name="biobench-lease-heartbeat", daemon=True)
            self._thread.start()

    def remove(self, lease: Lease) -> None:
        with self._renewing, self._lock:
            self.leases = [held for held in self.leases if held is not lease]

    def is_lost(self, lease: Lease) -> bool:
        with self._lock:
            return any(gone is lease for gone in self.lost)

    def _beat(self) -> None:
        while not self._stop.wait(self.every_s):
            with self._lock:
                held = list(self.leases)
            for lease in held:
                with self._renewing:
                    with self._lock:
                        if not any(still is lease for still in self.leases):
                            continue  # removed since the copy: its holder released it
                    try:
                        kept: bool | BaseException = renew(self.files_of(lease), lease, self.lease_s)
                    except (BiobenchError, OSError) as err:
                        kept = err
                if isinstance(kept, BaseException):
                    if self.on_error:
                        self.on_error(lease, kept)
                    continue
                if not kept:
                    with self._lock:
                        self.leases = [h for h in self.leases if h is not lease]
                        self.lost.append(lease)
                    if self.on_lost:
                        self.on_lost(lease)

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5)


class FolderLeases:
    """`LeaseFiles` on a local or shared folder, for leases kept next to the work they guard (eval's claims live
    next to a run's result). Paths stay inside `root`; the lease folder may not be a symlink (claims would land
    elsewhere); reads are bounded and refuse FIFOs; an OS error is one ConfigError line."""

    def __init__(self, root: str | Path, label: str | None = None) -> None:
        self.root = Path(root)
        self.label = label or str(self.root)

    def _path(self, path: str) -> Path:
        parts = path.split("/")
        if not parts or any(p in ("", ".", "..") for p in parts):
            raise ConfigError(f"bad lease path {path!r}")
        target = self.root.joinpath(*parts)
        if self.root.joinpath(parts[0]).is_symlink():
            raise ConfigError(f"{self.label}/{parts[0]} is a symlink; a lease folder must be a real folder — "
                              "remove it")
        return target

    @contextlib.contextmanager
    def _os_errors(self, doing: str, path: str) -> Iterator[None]:
        try:
            yield
        except BiobenchError:
            raise
        except OSError as err:
            raise ConfigError(f"{self.label}: cannot {doing} {path} ({err.strerror or err})") from None

    def list(self, prefix: str) -> list[str]:
        with self._os_errors("list", prefix):
            base = self._path(prefix)
            if not base.is_dir():
                return []
            return sorted(f"{prefix}/{entry.name}" for entry in os.scandir(base)
                          if not entry.name.startswith("."))

    def read(self, path: str, max_bytes: int = MAX_LEASE_BYTES) -> bytes | None:
        with self._os_errors("read", path):
            try:
                return read_bytes(self._path(path), max_bytes, confined=True)  # a claim linked out: refused
            except (FileNotFoundError, NotADirectoryError):
                return None

    def write(self, path: str, data: bytes) -> None:
        with self._os_errors("write", path):
            atomic_write(self._path(path), data)

    def create(self, path: str, data: bytes) -> bool:
        with self._os_errors("create", path):
            return create_new(self._path(path), data)

    def remove(self, folder: str) -> None:
        """Delete a whole lease folder (its work is finished: nothing is left to guard)."""
        with self._os_errors("remove", folder):
            target = self._path(folder)
            if target.is_dir():
                shutil.rmtree(target, ignore_errors=True)


@dataclass
class Warnings:
    """Each problem said once per process: a malformed lease is one warning line, not one per poll."""

    say: Callable[[str], None]
    said: set[str] = field(default_factory=set)

    def __call__(self, line: str) -> None:
        if line not in self.said:
            self.said.add(line)
            self.say(line)
