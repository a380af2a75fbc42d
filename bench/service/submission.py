"""What `biobench submit` resolves before it writes a request: the model's id and revision, the tasks and each
task's protocol hash — so that two requests for the same computation are recognised as one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from biobench.errors import BiobenchError
from biobench.service import queue
from biobench.service.storage import open_storage


def resolve_revision(model: str, revision: str | None) -> tuple[str, str, str | None]:
    """(model as the worker will load it, revision, a note when it could not be resolved). An alias or hub id is
    kept as given (the worker resolves it again, and the board names the row by it: an alias's offline package
    folder would otherwise become a second name for the same weights); a local folder is passed on as an
    absolute path and identified by the sha256 of its weights (as results are)."""
    from biobench.models import inspect_model, resolve_model

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


def submit_request(model: str, queue_location: str, *, revision: str | None = None, tasks: str | None = None,
                   lang: str | None = None, seeds: str | None = None, overrides: dict[str, Any] | None = None,
                   name: str | None = None, submitter: str | None = None,
                   dry_run: str | None = None) -> tuple[queue.Request, str | None]:
    from biobench.protocols import resolve_task_protocol
    from biobench.ranges import parse_ranges
    from biobench.tasks.registry import get_spec, list_specs

    specs = ([get_spec(t.strip()) for t in tasks.split(",") if t.strip()] if tasks
             else list_specs(lang=lang))
    overrides = dict(overrides or {})
    task_protocols = {spec.id: resolve_task_protocol(spec, overrides).hash for spec in specs}
    target, resolved, note = resolve_revision(model, revision)
    storage = open_storage(queue_location, dry_run=dry_run)
    request = queue.submit(
        storage, model=target, revision=resolved, lang=lang, tasks=[s.id for s in specs],
        seeds=parse_ranges(seeds, "--seeds", minimum=None) if seeds else None, overrides=overrides,
        task_protocols=task_protocols, name=name, submitter=submitter)
    return request, note


def task_protocols(lang: str | None = None) -> list[dict[str, Any]]:
    """What a request for each of the paper's tasks gets (the protocol `submit` hashes into it): kind, head,
    headline and dev metrics, steps, batch, learning rates, max length and seeds; the leaderboard's About tab
    shows them (it imports neither the protocols nor the task registry itself)."""
    from biobench.protocols import resolve_task_protocol, task_seeds
    from biobench.tasks.registry import list_specs

    rows = []
    for spec in list_specs(lang=lang):
        if not spec.paper_task:
            continue
        p = resolve_task_protocol(spec)
        seeds = task_seeds(spec)
        rows.append({"task": spec.id, "lang": spec.lang, "kind": spec.kind, "head": p.head,
                     "metric": p.metric, "dev_metric": p.dev_metric, "epochs": p.epochs, "max_steps": p.max_steps,
                     "eval_every": p.eval_every, "batch_size": p.batch_size, "lr": p.lr, "head_lr": p.head_lr,
                     "max_length": p.max_length, "seeds": f"{min(seeds)}-{max(seeds)} ({len(seeds)})" if seeds else "",
                     "description": spec.description})
    return rows
