"""Evaluation requests: the record `biobench submit` writes, and the lease a worker holds while it runs one.

Layout of a queue (a folder or a hub dataset, biobench.service.storage):
    requests/<id>.json          the request: what to run, its status and history (written by its lease holder)
    leases/<id>/<generation>.json  one file per claim; the highest generation is the current lease

Why leases by generation: claiming is "create the next generation's file, only if it does not exist" — one
atomic step on a folder (O_EXCL) and on the hub (a commit on the revision that was read), so two workers never
both claim. A worker renews its lease while it runs; a killed worker stops renewing, the lease expires, and the
next claim (generation + 1) resumes the request. The resumed eval skips every finished (model, task, seed) by its
run key, so no result is computed twice or lost. A worker that finds a higher generation than its own has lost
the lease and stops.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import re
import time
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import Any

from biobench.errors import ConfigError, ResultsError
from biobench.service.storage import Storage

REQUESTS = "requests"
LEASES = "leases"
ACTIVE = ("pending", "running", "finished")  # a new request equal to one of these is refused; `failed` may retry
STATUSES = ("pending", "running", "finished", "failed")


def now_iso(clock: float | None = None) -> str:
    return datetime.fromtimestamp(time.time() if clock is None else clock, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Request:
    """One evaluation request. `key` identifies model + revision + protocol (tasks, seeds, each task's
    protocol hash): two requests with one key would compute the same results."""

    id: str
    model: str
    revision: str
    precision: str
    lang: str | None
    tasks: list[str]
    seeds: list[int] | None
    overrides: dict[str, Any]
    protocol_hash: str
    key: str
    submitter: str
    submitted_at: str
    status: str = "pending"
    name: str | None = None
    started_at: str | None = None
    finished_at: str | None = None
    worker: str | None = None
    attempts: int = 0
    log_tail: list[str] = field(default_factory=list)
    results: str | None = None

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str) -> Request:
        try:
            raw = json.loads(data)
            known = {f for f in cls.__dataclass_fields__}
            request = cls(**{k: v for k, v in raw.items() if k in known})
        except (ValueError, TypeError) as err:
            raise ResultsError(f"{where}: not a biobench request ({err}); remove it or resubmit") from None
        if request.status not in STATUSES:
            raise ResultsError(f"{where}: unknown status {request.status!r}; expected one of {', '.join(STATUSES)}")
        return request


def request_key(model_id: str, revision: str, protocol_hash: str) -> str:
    return hashlib.sha256(f"{model_id}\n{revision}\n{protocol_hash}".encode()).hexdigest()


def protocol_hash(task_protocols: dict[str, str], seeds: list[int] | None) -> str:
    """One hash for what a request runs: every task's resolved protocol hash and the seeds."""
    canonical = json.dumps({"tasks": dict(sorted(task_protocols.items())), "seeds": seeds}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "model"


def list_requests(storage: Storage) -> list[Request]:
    """Every request, oldest first; an unreadable request file is an error naming it (never silently skipped,
    so a request cannot vanish from the queue)."""
    out = []
    for path in storage.list(REQUESTS):
        if path.endswith(".json"):
            out.append(Request.from_json(storage.read(path) or b"", f"{storage.label}/{path}"))
    return sorted(out, key=lambda r: (r.submitted_at, r.id))


def submit(storage: Storage, *, model: str, revision: str, lang: str | None, tasks: list[str],
           seeds: list[int] | None, overrides: dict[str, Any], task_protocols: dict[str, str],
           name: str | None = None, submitter: str | None = None, precision: str = "auto",
           clock: float | None = None) -> Request:
    """Write a pending request; the same model + revision + protocol already pending, running or finished is
    refused in one line naming the existing request."""
    phash = protocol_hash(task_protocols, seeds)
    key = request_key(model, revision, phash)
    for existing in list_requests(storage):
        if existing.key == key and existing.status in ACTIVE:
            raise ConfigError(f"{model} @ {revision[:12]} with this protocol is already {existing.status} as request "
                              f"{existing.id} in {storage.label}; nothing submitted")
    stamp = now_iso(clock)
    request = Request(
        id=f"{stamp.replace('-', '').replace(':', '')}-{_slug(name or model)}-{key[:8]}", model=model,
        revision=revision, precision=precision, lang=lang, tasks=list(tasks), seeds=seeds, overrides=dict(overrides),
        protocol_hash=phash, key=key, submitter=submitter or getpass.getuser(), submitted_at=stamp, name=name)
    if not storage.create(f"{REQUESTS}/{request.id}.json", request.to_json()):
        raise ConfigError(f"request {request.id} already exists in {storage.label}; submit again in a second")
    return request


@dataclass
class Lease:
    request: Request
    worker: str
    generation: int
    expires: float

    @property
    def path(self) -> str:
        return f"{LEASES}/{self.request.id}/{self.generation:06d}.json"


def _current_lease(storage: Storage, request_id: str) -> tuple[int, dict[str, Any] | None]:
    generations = [p for p in storage.list(f"{LEASES}/{request_id}") if re.search(r"/\d{6}\.json$", p)]
    if not generations:
        return 0, None
    latest = max(generations)
    data = storage.read(latest)
    try:
        return int(latest.rsplit("/", 1)[1][:6]), json.loads(data or b"{}")
    except ValueError:
        return int(latest.rsplit("/", 1)[1][:6]), {"expires": 0}  # a torn lease counts as expired


def _lease_bytes(worker: str, expires: float) -> bytes:
    return json.dumps({"worker": worker, "expires": expires, "expires_at": now_iso(expires)}).encode()


def claim_next(storage: Storage, worker: str, lease_s: float, clock: float | None = None) -> Lease | None:
    """Claim the oldest request that is pending, or running under an expired lease; None when there is none."""
    now = time.time() if clock is None else clock
    for request in list_requests(storage):
        if request.status not in ("pending", "running"):
            continue
        generation, lease = _current_lease(storage, request.id)
        if lease is not None and float(lease.get("expires", 0)) > now:
            continue  # someone holds it
        claim = Lease(request, worker, generation + 1, now + lease_s)
        if not storage.create(claim.path, _lease_bytes(worker, claim.expires)):
            continue  # another worker claimed it first
        resumed = request.status == "running"
        request.status, request.worker, request.attempts = "running", worker, request.attempts + 1
        request.started_at = request.started_at if resumed else now_iso(now)
        storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())
        return claim
    return None


def holds(storage: Storage, lease: Lease) -> bool:
    """Whether no later claim exists (the lease was not taken over after it expired)."""
    generation, _ = _current_lease(storage, lease.request.id)
    return generation == lease.generation


def renew(storage: Storage, lease: Lease, lease_s: float, clock: float | None = None) -> bool:
    """Extend the lease; False when it was lost (a later generation exists) — the caller must stop."""
    if not holds(storage, lease):
        return False
    lease.expires = (time.time() if clock is None else clock) + lease_s
    storage.write(lease.path, _lease_bytes(lease.worker, lease.expires))
    return True


def finish(storage: Storage, lease: Lease, status: str, log_tail: list[str], results: str | None = None,
           clock: float | None = None) -> Request:
    """Record the outcome (finished / failed) if this worker still holds the request; the lease stays as
    history and, being superseded by a final status, is ignored by claims."""
    if status not in ("finished", "failed"):
        raise ValueError(status)
    request = lease.request
    if not holds(storage, lease):
        return request
    request.status, request.finished_at = status, now_iso(clock)
    request.log_tail, request.results = log_tail[-20:], results
    storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())
    return request
