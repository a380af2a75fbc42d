"""Run claims: which eval process trains which (model, task, seed) run, so that any number of processes on one
grid — a SLURM array, two terminals, `--parallel` — do every run exactly once (`eval`'s default).

Why claims instead of a fixed slice (`--shard I/N`): runs are unequal (a 4,000-step NER run next to 200-step
classification runs), so a static split leaves one array element working hours after the others; a process
that claims the next unfinished run is never idle while work is left. A claim is a lease (runtime.leases, the
one lease mechanism, which the request queue also uses) in `seed-<n>.claim/` next to the run's result
(store.claim_path: claims follow results wherever they live, and work on a shared cluster file system).

The rules, in the order a run goes through them:
1. a run whose result exists is done: never claimed (a leftover claim folder of a done run, from a process killed
   between writing the result and releasing, is removed);
2. the process creates the next generation of the claim (atomic): when another process holds it, or created
   that generation first, the run is left to it;
3. once claimed, the result is looked for again (another process may have finished it since the plan was made):
   found, the claim is released and the run counted as done elsewhere;
4. while the run trains, a heartbeat thread renews the claim; a process killed with `kill -9` stops renewing and
   its claim expires (`lease_s`, default 5 minutes), after which the next process to pass takes the run over;
5. the result is written first and the claim released after (the claim folder removed), so a finished result is
   never lost, and a run given up (a stop signal, an error) releases its claim without writing anything.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from biobench.errors import BiobenchError
from biobench.runtime import leases
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json
from biobench.runtime.leases import FolderLeases, Holder, Lease, LeaseState
from biobench.store import claim_path

DEFAULT_CLAIM_S = 300.0  # a killed process's run is redone after at most this long
WALL_CLOCK = "wall clock"  # a released claim's `abandoned` reason: the job's time ran out while the run trained
# After this many wall-clock abandons a run is said to be too long for its job's life (in the log and --dry-run)
# and tried after every other run: issue 48 §4, a 45-60 s run in a job warned every minute was retried for ever.
ABANDON_LIMIT = 3
HISTORY = 64  # the claim generations read to count abandons (a claim that lived longer is said to, as 64+)
MIN_CLAIM_S = 1.0
HEARTBEATS_PER_CLAIM = 5  # renewed every lease_s / 5: four renewals may fail before the claim expires


@dataclass(frozen=True)
class ClaimInfo:
    """What `eval --dry-run` shows of a run's claim: held (by whom, until when) or free."""

    held: bool
    holder: Holder | None
    expires: float
    problem: str | None = None
    abandoned: int = 0  # how many times the run was abandoned at the wall clock

    def note(self) -> str | None:
        """What `--dry-run` says beside the run: the claim's problem, or that it is too long for its job."""
        if self.abandoned >= ABANDON_LIMIT:
            return too_long(self.abandoned)
        return self.problem


def too_long(count: int) -> str:
    return (f"abandoned {count}{'+' if count >= HISTORY else ''} times at the wall clock: raise --time or lower "
            "the run's length")


def _files(result: Path) -> tuple[FolderLeases, str]:
    folder = claim_path(result)
    return FolderLeases(folder.parent), folder.name


def not_a_claim(result: Path) -> str | None:
    """What is at the run's claim path when it is not a claim folder (a file, FIFO, device, symlink), in words;
    None when there is nothing or a real folder. Such a thing made the run 'held by other processes' for ever
    (issue 51 item 8)."""
    path = claim_path(result)
    if path.is_symlink():
        return "a symlink"
    if not path.exists():
        return None
    return None if path.is_dir() else ("a file" if path.is_file() else "a FIFO, socket or device")


def abandoned_count(result: str | Path) -> int:
    """How many times the run was abandoned at the wall clock: the released generations of its claim marked
    so (the last HISTORY of them), read bounded like every lease file."""
    result = Path(result)
    if not claim_path(result).is_dir():
        return 0
    files, folder = _files(result)
    count = 0
    try:
        for generation in leases.generations(files, folder)[-HISTORY:]:
            data = files.read(f"{folder}/{generation:06d}.json", leases.MAX_LEASE_BYTES)
            try:
                raw = parse_json(data, folder, max_depth=4) if data else None
            except UnsafeJSONError:
                continue
            count += isinstance(raw, dict) and raw.get("released") is True and raw.get("abandoned") == WALL_CLOCK
    except (BiobenchError, UnsafeJSONError):
        return count
    return count


def read_claim(result: str | Path, now: float | None = None) -> ClaimInfo | None:
    """The claim of the run whose result goes to `result`; None when there is no claim folder. A live-looking
    claim whose holder is certainly gone (a process of this machine that no longer runs: leases.dead) reads
    as free, with that said in `problem`; so does a thing at the claim path that is not a claim folder."""
    result = Path(result)
    if (what := not_a_claim(result)) is not None:
        return ClaimInfo(False, None, 0.0, f"{claim_path(result)} is {what}, not a claim folder; eval removes it "
                                           "and takes the run (or remove it yourself)")
    if not claim_path(result).is_dir():
        return None
    files, folder = _files(result)
    try:
        state = leases.read_state(files, folder, now)
    except BiobenchError as err:
        return ClaimInfo(False, None, 0.0, str(err))
    held, problem = not state.free(now), state.problem
    if held and state.holder is not None and leases.dead(Holder.here(), state):
        held, problem = False, f"its holder ({state.holder.describe()}) is gone; the next eval takes the run at once"
    return ClaimInfo(held, state.holder, state.expires, problem, abandoned_count(result))


class RunClaims:
    """The claims of one eval process: take, renew (a heartbeat thread), release. `lease_s`: how long a claim
    lives without renewal; `warn`: where the one line about a malformed claim file goes."""

    def __init__(self, lease_s: float = DEFAULT_CLAIM_S, holder: Holder | None = None,
                 warn: Callable[[str], None] | None = None) -> None:
        self.lease_s = lease_s
        self.holder = holder or Holder.here()
        self.warn = leases.Warnings(warn or (lambda line: print(line, file=sys.stderr, flush=True)))
        self.held: dict[Path, Lease] = {}
        self.roots: dict[int, FolderLeases] = {}
        self.heartbeat = leases.Heartbeat(lambda lease: self.roots[id(lease)], lease_s,
                                          lease_s / HEARTBEATS_PER_CLAIM, on_lost=self._lost, on_error=self._error)

    def _lost(self, lease: Lease) -> None:
        self.warn(f"warning: the claim {lease.folder} was taken over by another process (this one could not "
                  f"renew it for {self.lease_s:.0f} s); that process redoes the run")

    def _error(self, lease: Lease, err: BaseException) -> None:
        self.warn(f"warning: cannot renew the claim {lease.folder} ({err}); retrying")

    def _state(self, files: FolderLeases, folder: str) -> LeaseState:
        state = leases.read_state(files, folder, lease_s=self.lease_s)
        if state.junk:
            # a generation no holder wrote (a planted 999999.json made eval wait, then exit 0 with the run never
            # done): said once, the folder removed (only this claim's folder), the run claimed afresh
            self.warn(f"warning: {files.label}/{state.problem}; removed so the run can be claimed")
            files.remove(folder)
            state = leases.read_state(files, folder, lease_s=self.lease_s)
        if state.problem:
            self.warn(f"warning: {files.label}/{state.problem}")
        return state

    def claim(self, result: Path) -> bool:
        """Claim the run whose result goes to `result`; False when another process holds it (or won the race).
        A claim folder that cannot be used (a symlink, unwritable) is one warning line and False."""
        files, folder = _files(result)
        if (what := not_a_claim(result)) is not None:
            # Not a claim biobench writes (junk in the claim namespace): said once, removed (unlink removes the
            # name only, never what a symlink points at), and the run taken.
            self.warn(f"warning: {claim_path(result)} is {what}, not a claim folder; removed so the run can be "
                      "claimed")
            try:
                claim_path(result).unlink()
            except OSError as err:
                self.warn(f"warning: cannot remove {claim_path(result)} ({err.strerror or err}); remove it by "
                          "hand, the run cannot be claimed until then")
                return False
        try:
            lease = leases.acquire(files, folder, self.holder, self.lease_s, state=self._state(files, folder))
        except BiobenchError as err:
            self.warn(f"warning: cannot claim {result}: {err}")
            return False
        if lease is None:
            return False
        self.held[result] = lease
        self.roots[id(lease)] = files
        self.heartbeat.add(lease)
        return True

    def lost(self, result: Path) -> bool:
        """Whether the claim of this run was taken over while this process held it."""
        lease = self.held.get(result)
        return lease is not None and self.heartbeat.is_lost(lease)

    def release(self, result: Path, finished: bool, abandoned: str | None = None) -> None:
        """Give the claim up: after the result was written (`finished`) the claim folder is removed (nothing is
        left to guard); a run given up leaves a released generation, free at once for the next process, marked
        with why it was abandoned (`abandoned`, e.g. WALL_CLOCK: counted by abandoned_count).
        Never raises: a claim that cannot be released expires."""
        lease = self.held.pop(result, None)
        if lease is None:
            return
        self.heartbeat.remove(lease)
        files = self.roots.pop(id(lease))
        try:
            if finished:
                files.remove(lease.folder)
            else:
                leases.release(files, lease, abandoned=abandoned)
        except BiobenchError as err:
            self.warn(f"warning: cannot release the claim of {result} ({err}); it expires in {self.lease_s:.0f} s")

    def tidy(self, result: Path) -> None:
        """Remove the leftover claim folder of a finished run (a process killed between its result and its
        release), once the claim is free; a live one (its holder is about to release it) is left alone."""
        folder = claim_path(result)
        if not folder.is_dir():
            return
        files, name = _files(result)
        try:
            if self._state(files, name).free():
                files.remove(name)
        except BiobenchError:
            pass

    def close(self) -> None:
        """Release every claim still held (runs given up) and stop the heartbeat."""
        for result in list(self.held):
            self.release(result, finished=False)
        self.heartbeat.stop()
