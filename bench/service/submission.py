"""What `biobench submit` (and the leaderboard's Submit form) resolves before it writes a request: the model's
id and revision, the tasks and each task's protocol hash — so that two requests for the same computation are
recognised as one.

Why a separate public policy (`PublicPolicy`, `vet_public_model`): the form is open to strangers. A public
leaderboard accepts what the EuroEval volunteer workers and the Open LLM Leaderboard accept: a hub model id
pinned to a commit, safetensors weights, no custom code. Local folders are the operator's choice
(`--allow-local-models DIR`), and then only under the folders listed; a refused name gets one answer whatever
the server holds, so the form cannot be used to probe the server's files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import BiobenchError, ConfigError
from biobench.models import find_alias, inspect_model, resolve_model
from biobench.protocols import check_override, protocol_row, resolve_task_protocol
from biobench.protocols import protocol_markdown as table
from biobench.ranges import optional_seeds
from biobench.runtime.paths import is_hub_id
from biobench.service import queue
from biobench.service.queue_storage import open_storage
from biobench.store.metadata import check_metadata
from biobench.tasks.registry import get_spec, list_specs

COMMIT = re.compile(r"[0-9a-f]{40}")


def resolve_revision(model: str, revision: str | None) -> tuple[str, str, str | None]:
    """(model as the worker will load it, revision, a note when it could not be resolved). An alias or hub id is
    kept as given (the worker resolves it again, and the board names the row by it: an alias's offline package
    folder would otherwise become a second name for the same weights); a local folder is passed on as an
    absolute path and identified by the sha256 of its weights (as results are)."""
    ref = resolve_model(model)
    target = str(Path(ref.path).resolve()) if ref.path and not (ref.alias or ref.hub_id) else model
    if revision:
        return target, revision, None
    try:
        info = inspect_model(ref)
    except BiobenchError as err:
        return target, "unresolved", f"revision not resolved here ({str(err).splitlines()[0][:120]}); the " \
                                     "worker records the revision it evaluates in every result"
    return target, info.revision, None


def task_ids(tasks: str | None, lang: str | None) -> list[str] | None:
    """The task ids of `--tasks` (None: every task of `lang`); a list that names no task is refused."""
    if tasks is None:
        return None
    ids = [t.strip() for t in tasks.split(",") if t.strip()]
    if not ids:
        raise ConfigError(f"--tasks {tasks!r} names no task; give task ids (`biobench tasks`) or --lang fr|en")
    if len(ids) > queue.MAX_TASKS:
        raise ConfigError(f"--tasks names {len(ids)} tasks, over the limit of {queue.MAX_TASKS}")
    return ids


def submit_request(model: str, queue_location: str, *, revision: str | None = None, tasks: str | None = None,
                   lang: str | None = None, seeds: str | None = None, overrides: dict[str, Any] | None = None,
                   name: str | None = None, submitter: str | None = None, dry_run: str | None = None,
                   max_pending: int | None = None, max_queued: int | None = None,
                   resolve: bool = True, metadata: dict[str, Any] | None = None) -> tuple[queue.Request, str | None]:
    """Check everything a request holds (tasks, bounded seeds, finite overrides, the stated model `metadata` by
    the grid file's validator) before anything is resolved or written, then write it. `resolve=False` (the public form, after `vet_public_model`): the model and
    revision are queued as given, without looking at this machine's files."""
    ids = task_ids(tasks, lang)
    seed_list = optional_seeds(seeds)  # bounded before anything is resolved
    overrides = {k: check_override(k, v) for k, v in (overrides or {}).items()}
    metadata = check_metadata(metadata, "the request")
    storage = open_storage(queue_location, dry_run=dry_run)
    specs = [get_spec(t) for t in ids] if ids is not None else list_specs(lang=lang)
    task_protocols = {spec.id: resolve_task_protocol(spec, overrides).hash for spec in specs}
    target, resolved, note = resolve_revision(model, revision) if resolve else (model, revision or "unresolved", None)
    request = queue.submit(
        storage, model=target, revision=resolved, lang=lang, tasks=[s.id for s in specs], seeds=seed_list,
        overrides=overrides, task_protocols=task_protocols, name=name, submitter=submitter, max_pending=max_pending,
        max_queued=max_queued, metadata=metadata)
    return request, note


def task_protocols(lang: str | None = None) -> list[dict[str, Any]]:
    """What a request for each of the paper's tasks gets (the protocol `submit` hashes into it): per task the rows
    of biobench.protocols.protocol_row (every setting with its source) and the task's description; the
    leaderboard's About tab shows them (it imports neither the protocols nor the task registry itself)."""

    return [{**protocol_row(spec), "description": spec.description} for spec in list_specs(lang=lang) if spec.paper_task]


def protocol_markdown(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of task_protocols rows: the one table docs/PROTOCOL.md and `biobench tasks --protocol
    --markdown` show too (biobench.protocols.protocol_markdown)."""
    return table(rows)


class RateLimit:
    """How many form submissions a minute (a sliding 60 s window) the app takes, shared by every thread: at most
    `per_visitor` tries of one visitor, refused ones included (a refused form costs its visitor), and at most
    `per_minute` accepted submissions from all visitors together (0: no limit for either). Why both: the global
    cap used to count every try before the form was checked, so ten junk submissions from one address refused
    every other visitor for a minute (issue 58 item 1); it now counts only what reaches the queue, and is far
    above one visitor's. It stays because a visitor is an address, and a stranger with many addresses (or a
    botnet) is many visitors: it bounds what the whole form can add to the queue per minute."""

    MAX_TRACKED = 10_000  # visitors remembered at once: beyond it, those idle for a minute are forgotten first

    def __init__(self, per_minute: int, per_visitor: int = 0) -> None:
        import collections
        import threading

        self.per_minute, self.per_visitor = per_minute, per_visitor
        self._accepted: collections.deque[float] = collections.deque()
        self._tries: dict[str, collections.deque[float]] = {}
        self._lock = threading.Lock()

    @staticmethod
    def _expire(times: Any, now: float) -> None:
        while times and times[0] <= now - 60:
            times.popleft()

    def allow(self, visitor: str = "", now: float | None = None) -> tuple[str | None, float]:
        """(why one more submission of `visitor` is refused, or None; its time). Counts the visitor's try and,
        when it fits, holds a place of the global cap: give it back with `refund(time)` when the form is refused."""
        import collections
        import time

        now = time.monotonic() if now is None else now
        with self._lock:
            if self.per_visitor > 0:
                if len(self._tries) >= self.MAX_TRACKED:
                    for key in [k for k, times in self._tries.items() if not times or times[-1] <= now - 60]:
                        del self._tries[key]
                tries = self._tries.setdefault(visitor, collections.deque())
                self._expire(tries, now)
                if len(tries) >= self.per_visitor:
                    return (f"this leaderboard takes {self.per_visitor} submissions a minute from one visitor; try "
                            "again in a minute"), now
                tries.append(now)
            if self.per_minute > 0:
                self._expire(self._accepted, now)
                if len(self._accepted) >= self.per_minute:
                    return ("this leaderboard takes a few submissions a minute from all visitors together; try again "
                            "in a minute"), now
                self._accepted.append(now)
            return None, now

    def refund(self, when: float) -> None:
        """The submission made at `when` was refused: its place of the global cap is free again (the visitor's
        try still counts)."""
        with self._lock:
            try:
                self._accepted.remove(when)
            except ValueError:  # already out of the window
                pass


def trust_proxies(proxies: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Make the server believe `X-Forwarded-For` only from these addresses or networks (the operator's
    `--trusted-proxy`; none: the connection's own address is the visitor's). Why: uvicorn, which serves Gradio,
    rewrites the client address from `X-Forwarded-For` for any request from 127.0.0.1 by default, so a client
    that sent a new header each time was a new visitor each time (286 requests in 30 s against a limit of 3).
    Its trusted list is FORWARDED_ALLOW_IPS, read when the server starts: set here, before launching."""
    import os

    checked = check_proxies(proxies)
    os.environ["FORWARDED_ALLOW_IPS"] = ",".join(checked)  # "" trusts no one
    return checked


def check_proxies(proxies: list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """Each --trusted-proxy value as a network ('127.0.0.1' -> '127.0.0.1/32'); one ConfigError line otherwise."""
    import ipaddress

    checked = []
    for proxy in proxies:
        try:
            checked.append(str(ipaddress.ip_network(proxy.strip(), strict=False)))
        except ValueError:
            raise ConfigError(f"--trusted-proxy {proxy[:60]!r}: expected an IP address or network (10.0.0.0/8)") from None
    return tuple(checked)


@dataclass(frozen=True)
class PublicPolicy:
    """What the public form accepts. `local_roots`: folders under which local model folders are accepted
    (empty: hub ids only); `max_pending`: requests one visitor may have waiting; `max_queued`: requests the
    whole queue may have waiting (0: no limit); `limiter`: submissions per minute, per visitor (refused ones
    included) and accepted from all visitors together."""

    local_roots: tuple[Path, ...] = ()
    max_pending: int = 3
    max_queued: int = 100
    limiter: RateLimit = field(default_factory=lambda: RateLimit(30, 5), compare=False)

    def refusal(self) -> str:
        local = " or a model folder under the folders this leaderboard accepts" if self.local_roots else ""
        return (f"not accepted here: give a hub model id ORG/NAME with its 40-character commit{local} "
                "(safetensors weights, no custom code)")


def _hub_metadata(model: str, revision: str | None, api: Any) -> tuple[str, list[str], dict[str, Any]] | None:
    """(commit, file names, config) of a hub model, None when the hub cannot be asked from here."""
    import os

    if api is None:
        if os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
            return None
        try:
            from huggingface_hub import HfApi
        except ImportError:
            return None
        api = HfApi()
    try:
        info = api.model_info(model, revision=revision)
    except Exception:  # noqa: BLE001 — unreachable, unknown or private: the caller says one line
        return None
    files = [s.rfilename for s in (getattr(info, "siblings", None) or [])]
    return str(getattr(info, "sha", "") or ""), files, dict(getattr(info, "config", None) or {})


def vet_public_model(model: str, revision: str | None, policy: PublicPolicy, api: Any = None) -> tuple[str, str | None]:
    """(model, revision) the public form may queue, or ConfigError with one line that says nothing about the
    server's files. A hub id needs a commit: given (40 hex digits), or resolved from the hub at submit. When
    the hub answers, the files must include safetensors weights and no Python code (`trust_remote_code` is
    never passed by the worker either); when it cannot be asked, the commit given is queued and the worker's
    loader refuses pickled weights and custom code."""
    model, revision = model.strip(), (revision or "").strip() or None
    if revision is not None and not COMMIT.fullmatch(revision):
        raise ConfigError("the revision must be a full commit id (40 hex digits) of the model's hub repository")

    alias = find_alias(model)
    if alias is not None and alias.hub_id:
        model = alias.hub_id
    if is_hub_id(model):
        meta = _hub_metadata(model, revision, api)
        if meta is None:
            if revision is None:
                raise ConfigError(f"{model}: the hub cannot be asked from here; give the commit to evaluate "
                                  "(40 hex digits)")
            return model, revision
        commit, files, config = meta
        if not any(f.endswith(".safetensors") for f in files):
            raise ConfigError(f"{model}: no safetensors weights at this commit; only safetensors models are accepted")
        if any(f.endswith(".py") for f in files) or config.get("auto_map"):
            raise ConfigError(f"{model}: needs custom code (trust_remote_code), which this leaderboard never runs")
        return model, revision or commit or None
    if policy.local_roots and model.startswith("/") and "\0" not in model:
        path = Path(model)
        try:
            resolved = path.resolve()
            if (any(resolved == root.resolve() or root.resolve() in resolved.parents for root in policy.local_roots)
                    and (resolved / "config.json").is_file()):
                return str(resolved), revision
        except (OSError, RuntimeError):
            pass
    raise ConfigError(policy.refusal())
