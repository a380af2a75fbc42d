"""Evaluation requests: the record `biobench submit` writes, and the lease a worker holds while it runs one.

Layout of a queue (a folder or a hub dataset, biobench.service.queue_storage):
    requests/<id>.json          the request: what to run, its status and history (written by its lease holder)
    leases/<id>/<generation>.json  one file per claim; the highest generation is the current lease

Why leases by generation (biobench.runtime.leases, the one lease mechanism, which eval's run claims share):
claiming is "create the next generation's file, only if it does not exist" — one atomic step on a folder
(link(2)) and on the hub (a commit on the revision that was read), so two workers never both claim. A worker renews its lease while it runs; a killed worker stops renewing, the lease expires, and the
next claim (generation + 1) resumes the request. The resumed eval skips every finished (model, task, seed) by its
run key, so no result is computed twice or lost. A worker that finds a higher generation than its own has lost
the lease and stops.

Why every field is checked where a request is read: a public queue holds files from strangers (docs/RELIABILITY.md). A
request id becomes a log file name, tasks and overrides become an eval command line, seeds become result
names. A request that is not one biobench writes is refused with one reason: the worker marks it `failed`
(or, when it cannot even be rewritten, reports it as a problem) and goes on to the next; a lease that is not
one biobench writes counts as expired. Nothing a stranger writes stops the queue.
"""

from __future__ import annotations

import getpass
import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import MISSING, asdict, dataclass, field
from typing import Any

from biobench.errors import BiobenchError, ConfigError, ResultsError
from biobench.protocols import check_override
from biobench.ranges import MAX_SEEDS, SEED_MAX
from biobench.runtime import leases
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json
from biobench.runtime.paths import LANG_CODE, UNSAFE_TEXT, UnsafePathError, check_text, hide_paths, safe_name
from biobench.service.queue_storage import Storage
from biobench.store.metadata import check_metadata

REQUESTS = "requests"
LEASES = "leases"
REVIEWS = "reviews"  # reviews/<id>.json: the one decision on a pending-review request (`review`)
SETTINGS_FILE = "queue.json"  # the operator's settings of this queue (review, per-submitter limit)
# pending-review waits for `biobench queue approve`; rejected is the operator's no
STATUSES = ("pending-review", "pending", "running", "finished", "failed", "rejected")
ACTIVE = ("pending-review", "pending", "running", "finished")  # a new equal request is refused; failed may retry
MAX_REQUEST_BYTES = 64 * 1024  # what one request may weigh when submitted (a 256-seed request is ~3 KiB)
MAX_TASKS = 64
MAX_GENERATION = leases.MAX_GENERATION  # also the bound of a request's attempts
MAX_LEASE_S = leases.MAX_LEASE_S
_TEXT_LIMITS = {"model": 500, "revision": 200, "precision": 20, "protocol_hash": 128, "key": 128, "submitter": 100,
                "submitted_at": 40, "name": 200, "started_at": 40, "finished_at": 40, "worker": 200, "results": 500}
_OPTIONAL = {"lang", "seeds", "name", "started_at", "finished_at", "worker", "results"}


def now_iso(clock: float | None = None) -> str:
    return leases.now_iso(time.time() if clock is None else clock)


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
    # model metadata the submitter states (params, license, ...): checked by store.metadata.check_metadata, the
    # grid file's validator; the worker passes it to eval, whose results record it as `model.metadata.stated`.
    # Not part of `key`: stating a license does not change what is computed.
    metadata: dict[str, Any] = field(default_factory=dict)

    def to_json(self) -> bytes:
        return (json.dumps(asdict(self), indent=1, sort_keys=True) + "\n").encode()

    @classmethod
    def from_json(cls, data: bytes, where: str, stem: str | None = None) -> Request:
        """A request read from a queue file, every field checked (`check_fields`); `stem`: the file's name
        without .json, which the id must equal (so a copy of a request under another name never runs twice).
        ResultsError naming `where` otherwise."""
        try:
            raw = parse_json(data, where)
            if not isinstance(raw, dict):
                raise ValueError(f"a JSON {type(raw).__name__}, not an object")
            values = check_fields(raw)
            if stem is not None and values["id"] != stem:
                raise ValueError(f"its id {values['id']!r} is not its file name {stem}.json (a copy of another "
                                 "request?)")
        except UnsafeJSONError as err:
            raise ResultsError(f"{where}: not a biobench request ({err.reason}); remove it or resubmit") from None
        except (ValueError, BiobenchError) as err:
            raise ResultsError(f"{where}: not a biobench request ({err}); remove it or resubmit") from None
        return cls(**values)


def _text(value: Any, what: str, limit: int) -> str:
    if not isinstance(value, str) or len(value) > limit or UNSAFE_TEXT.search(value):
        raise ValueError(f"{what} must be a text of at most {limit} characters without control or bidi characters, "
                         f"not {str(value)[:40]!r}")
    return value


def check_fields(raw: dict[str, Any]) -> dict[str, Any]:
    """The fields of a request as values the worker can use safely, or ValueError with the first bad one:
    the id a plain name (it names files), tasks plain names, seeds bounded integers, overrides known flags with
    finite values, texts short and without control characters. Unknown fields are ignored (a newer biobench)."""

    known = Request.__dataclass_fields__
    missing = [f for f, spec in known.items() if f not in raw and spec.default is spec.default_factory is MISSING]
    if missing:
        raise ValueError(f"missing {', '.join(missing)}")
    values = {k: raw[k] for k in known if k in raw}
    try:
        values["id"] = safe_name(values["id"], "id")
    except UnsafePathError as err:
        raise ValueError(str(err)) from None
    for name, limit in _TEXT_LIMITS.items():
        if name in values and not (name in _OPTIONAL and values[name] is None):
            _text(values[name], name, limit)
    if values["lang"] is not None and not (isinstance(values["lang"], str) and LANG_CODE.fullmatch(values["lang"])):
        raise ValueError(f"lang {str(values['lang'])[:20]!r} is not a language code")
    tasks = values["tasks"]
    if not isinstance(tasks, list) or len(tasks) > MAX_TASKS:
        raise ValueError(f"tasks must be a list of at most {MAX_TASKS} task ids")
    for task in tasks:
        try:
            safe_name(task, "task")
        except UnsafePathError as err:
            raise ValueError(str(err)) from None
    seeds = values["seeds"]
    if seeds is not None:
        if (not isinstance(seeds, list) or len(seeds) > MAX_SEEDS
                or any(isinstance(s, bool) or not isinstance(s, int) or not 0 <= s <= SEED_MAX for s in seeds)):
            raise ValueError(f"seeds must be a list of at most {MAX_SEEDS} integers from 0 to {SEED_MAX}")
    if not isinstance(values["overrides"], dict):
        raise ValueError("overrides must be an object of protocol flags")
    try:
        values["overrides"] = {k: check_override(k, v) for k, v in values["overrides"].items()}
    except ConfigError as err:
        raise ValueError(f"overrides: {err}") from None
    try:
        values["metadata"] = check_metadata(values.get("metadata"), "request")
    except ConfigError as err:
        raise ValueError(str(err).removeprefix("request: ")) from None
    if values.get("status", "pending") not in STATUSES:
        raise ValueError(f"unknown status {str(values.get('status'))[:40]!r}; expected one of {', '.join(STATUSES)}")
    attempts = values.get("attempts", 0)
    if isinstance(attempts, bool) or not isinstance(attempts, int) or not 0 <= attempts <= MAX_GENERATION:
        raise ValueError(f"attempts must be a whole number from 0 to {MAX_GENERATION}, not {str(attempts)[:20]!r}")
    tail = values.get("log_tail", [])
    if not isinstance(tail, list) or len(tail) > 50 or not all(isinstance(line, str) for line in tail):
        raise ValueError("log_tail must be a list of at most 50 texts")
    values["log_tail"] = [line[:500] for line in tail]
    return values


def request_key(model_id: str, revision: str, protocol_hash: str) -> str:
    return hashlib.sha256(f"{model_id}\n{revision}\n{protocol_hash}".encode()).hexdigest()


def protocol_hash(task_protocols: dict[str, str], seeds: list[int] | None) -> str:
    """One hash for what a request runs: every task's resolved protocol hash and the seeds."""
    canonical = json.dumps({"tasks": dict(sorted(task_protocols.items())), "seeds": seeds}, sort_keys=True)
    return hashlib.sha256(canonical.encode()).hexdigest()


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")[:40] or "model"


@dataclass(frozen=True)
class QueueProblem:
    """A queue file that is not what biobench writes: `path` relative to the queue (never a server path),
    `reason` one line; `stem` is set when the file may be rewritten as a failed request of that id."""

    path: str
    reason: str
    stem: str | None = None

    def line(self) -> str:
        return f"{self.path}: {self.reason}"


def scan_requests(storage: Storage) -> tuple[list[Request], list[QueueProblem]]:
    """Every readable request (oldest first) and a problem for each request file that is not one: a request
    never vanishes silently, and one bad file never hides the others."""
    out: dict[str, Request] = {}
    problems = []
    for path in storage.list(REQUESTS):
        if not path.endswith(".json"):
            continue
        stem = path[len(REQUESTS) + 1:-len(".json")]
        try:
            safe_name(stem, "request file name")
            data = storage.read(path, MAX_REQUEST_BYTES)
            if data is None:
                continue  # removed since it was listed
            request = Request.from_json(data, path, stem)
        except UnsafeJSONError as err:  # not a regular file, too large: reported, never rewritten
            problems.append(QueueProblem(path, err.reason))
            continue
        except UnsafePathError as err:
            problems.append(QueueProblem(path, str(err)))
            continue
        except ConfigError as err:  # a symlink, an unreadable file: reported, never rewritten
            problems.append(QueueProblem(path, hide_paths(str(err).replace(f"queue {storage.label}: ", ""))))
            continue
        except ResultsError as err:
            problems.append(QueueProblem(path, hide_paths(str(err).removeprefix(f"{path}: ")), stem))
            continue
        out.setdefault(request.id, request)
    return sorted(out.values(), key=lambda r: (r.submitted_at, r.id)), problems


def list_requests(storage: Storage) -> list[Request]:
    """Every readable request, oldest first (`scan_requests` also says which files are not requests)."""
    return scan_requests(storage)[0]


def read_request(storage: Storage, request_id: str) -> Request:
    """One request by id (checked as a plain name first); ConfigError when there is none."""
    try:
        request_id = safe_name(request_id, "request id")
    except UnsafePathError as err:
        raise ConfigError(str(err)) from None
    path = f"{REQUESTS}/{request_id}.json"
    try:
        data = storage.read(path, MAX_REQUEST_BYTES)
    except UnsafeJSONError as err:
        raise ResultsError(f"{storage.label}/{path}: {err.reason}") from None
    if data is None:
        raise ConfigError(f"no request {request_id} in {storage.label}; `biobench queue list --queue Q` lists them")
    return Request.from_json(data, f"{storage.label}/{path}", request_id)


def fail_problem(storage: Storage, problem: QueueProblem, clock: float | None = None) -> bool:
    """Rewrite a malformed request file as a `failed` request of its file name's id, the reason as its one
    log line (what the Queue view shows); False when it cannot be (no usable name, not writable)."""
    if problem.stem is None:
        return False
    stamp = now_iso(clock)
    stub = Request(id=problem.stem, model="(unreadable request)", revision="", precision="auto", lang=None, tasks=[],
                   seeds=None, overrides={}, protocol_hash="", key="", submitter="(unknown)", submitted_at=stamp,
                   status="failed", finished_at=stamp, log_tail=[f"refused: {hide_paths(problem.reason)[:400]}"])
    try:
        storage.write(problem.path, stub.to_json())
    except BiobenchError:
        return False
    return True


@dataclass
class Settings:
    """An operator's settings of a queue (`queue.json` at its root, `biobench queue configure`): `review`
    makes new requests wait in pending-review for `biobench queue approve`; `max_pending` bounds how many
    requests one submitter may have waiting (0: no limit)."""

    review: bool = False
    max_pending: int = 0
    max_queued: int = 0  # requests waiting in the whole queue (0: no limit)


def read_settings(storage: Storage) -> Settings:
    try:
        data = storage.read(SETTINGS_FILE, 4096)
        raw = parse_json(data, SETTINGS_FILE) if data else {}
    except UnsafeJSONError as err:
        raise ConfigError(f"{storage.label}/{SETTINGS_FILE}: {err.reason}; rewrite it with `biobench queue configure`") from None
    if not isinstance(raw, dict):
        raw = {"review": None}
    review, limits = raw.get("review", False), (raw.get("max_pending", 0), raw.get("max_queued", 0))
    if not isinstance(review, bool) or any(isinstance(n, bool) or not isinstance(n, int) or n < 0 for n in limits):
        raise ConfigError(f"{storage.label}/{SETTINGS_FILE}: expected {{\"review\": true|false, \"max_pending\": N, "
                          "\"max_queued\": N}; rewrite it with `biobench queue configure`")
    return Settings(review, *limits)


def write_settings(storage: Storage, settings: Settings) -> None:
    storage.write(SETTINGS_FILE, (json.dumps(asdict(settings), indent=1) + "\n").encode())


def submit(storage: Storage, *, model: str, revision: str, lang: str | None, tasks: list[str],
           seeds: list[int] | None, overrides: dict[str, Any], task_protocols: dict[str, str],
           name: str | None = None, submitter: str | None = None, precision: str = "auto",
           clock: float | None = None, max_pending: int | None = None, max_queued: int | None = None,
           metadata: dict[str, Any] | None = None) -> Request:
    """Write a request (pending, or pending-review when the queue's settings ask for review); the same
    model + revision + protocol already waiting, running or finished is refused in one line naming the
    existing request, and so is a submitter over the pending limit (`max_pending`, else the queue's) and a
    queue over its cap of waiting requests (the lower of `max_queued` and the queue's, 0 being no limit)."""
    if not tasks:
        raise ConfigError("no task to run: give --tasks ID[,ID...] or --lang fr|en")
    settings = read_settings(storage)
    limit = settings.max_pending if max_pending is None else max_pending
    phash = protocol_hash(task_protocols, seeds)
    key = request_key(model, revision, phash)
    who = submitter or getpass.getuser()
    existing = list_requests(storage)
    for other in existing:
        if other.key == key and other.status in ACTIVE:
            raise ConfigError(f"{hide_paths(model)} @ {revision[:12]} with this protocol is already {other.status} as "
                              f"request {other.id} in {storage.label}; nothing submitted")
    waiting = sum(r.submitter == who and r.status in ("pending-review", "pending") for r in existing)
    if limit and waiting >= limit:
        raise ConfigError(f"{who} already has {waiting} request(s) waiting in {storage.label} (the limit is "
                          f"{limit}); submit again when one has run")
    cap = min((n for n in (settings.max_queued, max_queued or 0) if n), default=0)
    queued = sum(r.status in ("pending-review", "pending") for r in existing)
    if cap and queued >= cap:
        raise ConfigError(f"the queue {storage.label} already has {queued} request(s) waiting (the limit is {cap}); "
                          "submit again when some have run")
    stamp = now_iso(clock)
    request = Request(
        id=f"{stamp.replace('-', '').replace(':', '')}-{_slug(name or model.rsplit('/', 1)[-1])}-{key[:8]}",
        model=model, revision=revision, precision=precision, lang=lang, tasks=list(tasks), seeds=seeds,
        overrides=dict(overrides), protocol_hash=phash, key=key, submitter=who, submitted_at=stamp, name=name,
        status="pending-review" if settings.review else "pending", metadata=dict(metadata or {}))
    data = request.to_json()
    try:
        Request.from_json(data, "the new request", request.id)  # what a worker will accept
    except ResultsError as err:
        raise ConfigError(str(err).replace("not a biobench request", "refused").replace("; remove it or resubmit", "")) from None
    if len(data) > MAX_REQUEST_BYTES:
        raise ConfigError(f"the request would take {len(data):,} bytes, over the {MAX_REQUEST_BYTES:,}-byte limit; "
                          "ask for fewer tasks or seeds")
    if not storage.create(f"{REQUESTS}/{request.id}.json", data):
        raise ConfigError(f"request {request.id} already exists in {storage.label}; submit again in a second")
    return request


def review(storage: Storage, request_id: str, approve: bool, reason: str = "", clock: float | None = None) -> Request:
    """The operator's decision on a request waiting in pending-review: approve -> pending (workers take it),
    reject -> rejected with `reason` as its log line.

    Why a decision file: two operators (or one, twice) may approve and reject at once; each would read the
    request, edit it and rewrite it, and both would report success (a rejected request could then run). The
    decision is first created as `reviews/<id>.json` with the queue's one atomic step (`Storage.create`, what a
    lease claim uses): exactly one review creates it and rewrites the request; the other is told in one line.
    A reason with a control or bidi character is refused (it is shown in the public Queue tab, issue 51 §11)."""
    reason = check_text(reason, "--reason", 300) if reason else ""
    request = read_request(storage, request_id)
    if request.status != "pending-review":
        raise ConfigError(f"request {request.id} is {request.status}, not pending-review; nothing changed")
    decision = {"decision": "approve" if approve else "reject", "reason": reason[:300], "at": now_iso(clock)}
    if not storage.create(f"{REVIEWS}/{request.id}.json", json.dumps(decision).encode()):
        try:
            earlier = parse_json(storage.read(f"{REVIEWS}/{request.id}.json", 4096) or b"{}", "review")
            said = earlier.get("decision") if isinstance(earlier, dict) else None
        except UnsafeJSONError:
            said = None
        done = {"approve": "approved", "reject": "rejected"}.get(str(said), "decided")
        raise ConfigError(f"request {request.id} was already {done} by another review ({REVIEWS}/{request.id}.json); "
                          "nothing changed")
    if approve:
        request.status = "pending"
    else:
        request.status, request.finished_at = "rejected", now_iso(clock)
        request.log_tail = [f"rejected by the operator{': ' + reason[:300] if reason else ''}"]
    storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())
    return request


@dataclass
class HeldRequest:
    """A request this worker holds: its lease is generation `generation` of `leases/<id>/` (runtime.leases)."""

    request: Request
    held: leases.Lease

    @property
    def worker(self) -> str:
        return self.held.holder.worker

    @property
    def generation(self) -> int:
        return self.held.generation

    @property
    def expires(self) -> float:
        return self.held.expires

    @property
    def path(self) -> str:
        return self.held.path


def lease_folder(request_id: str) -> str:
    return f"{LEASES}/{request_id}"


def _fail_unclaimable(storage: Storage, request: Request, reason: str, clock: float | None) -> None:
    request.status, request.finished_at, request.log_tail = "failed", now_iso(clock), [f"refused: {reason}"]
    storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())


def claim_next(storage: Storage, worker: str, lease_s: float, clock: float | None = None,
               problems: list[QueueProblem] | None = None,
               admit: Callable[[Request], str | None] | None = None) -> HeldRequest | None:
    """Claim the oldest request that is pending, or running under an expired lease; None when there is none.
    Malformed request files met on the way are rewritten as failed (`fail_problem`) and appended to `problems`
    (with those that could not be rewritten), so the caller can report them; a request whose leases cannot
    be read or written is failed with the reason, never left running. `admit` (the worker's check that it can
    run a request: its model's memory) is asked once the lease is held and before the request is marked
    running: a reason fails the request with that one line, and the next request is claimed."""
    now = time.time() if clock is None else clock
    check_layout = getattr(storage, "check_layout", None)
    if check_layout is not None:
        check_layout((REQUESTS, LEASES, REVIEWS))  # requests/ or leases/ linked elsewhere: stop, one line
    requests, bad = scan_requests(storage)
    for problem in bad:
        fail_problem(storage, problem, clock)
        if problems is not None:
            problems.append(problem)
    for request in requests:
        if request.status not in ("pending", "running"):
            continue
        try:
            held = leases.acquire(storage, lease_folder(request.id), leases.Holder.here(worker), lease_s, now)
            if held is None:
                continue  # someone holds it, or claimed it first
            claim = HeldRequest(request, held)
        except (ConfigError, ResultsError) as err:  # a lease folder that is a file, a symlink, unwritable
            reason = hide_paths(str(err).replace(storage.label, "the queue"))
            _fail_unclaimable(storage, request, reason, clock)
            if problems is not None:
                problems.append(QueueProblem(f"{REQUESTS}/{request.id}.json", reason))
            continue
        refusal = admit(request) if admit is not None else None
        if refusal:  # held, never marked running: no other worker takes it meanwhile, no eval is started
            finish(storage, claim, "failed", [f"refused: {refusal}"], clock=clock)
            if problems is not None:
                problems.append(QueueProblem(f"{REQUESTS}/{request.id}.json", refusal, request.id))
            continue
        resumed = request.status == "running"
        request.status, request.worker, request.attempts = "running", worker, request.attempts + 1
        request.started_at = request.started_at if resumed else now_iso(now)
        storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())
        return claim
    return None


def holds(storage: Storage, lease: HeldRequest) -> bool:
    """Whether no later claim exists (the lease was not taken over after it expired)."""
    return leases.holds(storage, lease.held)


def renew(storage: Storage, lease: HeldRequest, lease_s: float, clock: float | None = None) -> bool:
    """Extend the lease; False when it was lost (a later generation exists) — the caller must stop."""
    return leases.renew(storage, lease.held, lease_s, clock)


def finish(storage: Storage, lease: HeldRequest, status: str, log_tail: list[str], results: str | None = None,
           clock: float | None = None) -> Request:
    """Record the outcome (finished / failed) if this worker still holds the request; the lease stays as
    history and, being superseded by a final status, is ignored by claims."""
    if status not in ("finished", "failed"):
        raise ValueError(status)
    request = lease.request
    if not holds(storage, lease):
        return request
    request.status, request.finished_at = status, now_iso(clock)
    request.log_tail, request.results = [line[:500] for line in log_tail[-20:]], results
    storage.write(f"{REQUESTS}/{request.id}.json", request.to_json())
    return request
