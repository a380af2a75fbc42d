"""`biobench submit`: request an evaluation; a `biobench worker` runs it and publishes the results."""

from __future__ import annotations

import argparse

from biobench.protocols import add_protocol_arguments, overrides_from_args
from biobench.service.submission import submit_request
from biobench.store.metadata import metadata_from_fields
from biobench.store.trust import SMOKE_MARK, describe_overrides

EPILOG = """examples:
  biobench submit ModernCamemBERT-bio --lang fr --queue queue/
  biobench submit my-org/my-encoder --revision 3f2a9c1 --lang en --seeds 42-44 --queue hf://datasets/my-org/requests
  biobench submit my-org/my-encoder --lang fr --license mit --params 110M --training-data pubmed,e3c --queue queue/
  biobench worker --queue queue/ --results results/ --once      # run it"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "submit", description="Write one evaluation request (model, revision, tasks, seeds, protocol hash, submitter, time; "
        "status pending) into a queue that `biobench worker` processes. The same model + revision + protocol "
        "already pending, running or finished is refused.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("model", metavar="MODEL", help="alias, hub id ORG/NAME, or a model folder the worker can read")
    p.add_argument("--revision", help="hub commit to evaluate (default: resolved from the local copy where "
                   "possible; a local folder's revision is the sha256 of its weights)")
    p.add_argument("--name", help="display name on the leaderboard (default: biobench's display name)")
    which = p.add_mutually_exclusive_group(required=True)
    which.add_argument("--tasks", help="comma-separated task ids (`biobench tasks`)")
    which.add_argument("--lang", choices=["fr", "en"], help="every paper task of a language")
    p.add_argument("--seeds", help="e.g. 42-50 or 42,44 (default: each task's protocol seeds)")
    p.add_argument("--queue", required=True, metavar="Q", help="queue: a folder or hf://datasets/ORG/NAME")
    p.add_argument("--submitter", help="who asks (default: the login name)")
    p.add_argument("--dry-run", metavar="DIR", help="hub queue only: write to DIR and record the hub operations "
                   "in DIR/operations.jsonl instead of committing")
    add_protocol_arguments(p)
    add_metadata_arguments(p)
    p.set_defaults(func=run)


def add_metadata_arguments(p: argparse.ArgumentParser) -> None:
    """What a submitter may state about the model (the Submit form's fields, a grid file's `metadata`): recorded
    in the request and, by the worker's eval, in every result, over the model card's and marked as stated."""
    group = p.add_argument_group("model metadata (stated; wins over the model card's, shown as stated)")
    group.add_argument("--params", metavar="N", help="parameter count, e.g. 110000000, 110M or 1.5B")
    group.add_argument("--context-length", metavar="N", help="context length in tokens, e.g. 8192")
    group.add_argument("--license", help="license id as the hub spells it (apache-2.0, mit, cc-by-4.0, other...)")
    group.add_argument("--base-model", metavar="ID", help="the model it was trained from (hub id or name)")
    group.add_argument("--training-data", metavar="NAMES", help="pretraining corpora, comma-separated names")
    group.add_argument("--open-weights", choices=["yes", "no"], help="whether the weights are public")


def metadata_from_args(args: argparse.Namespace) -> dict:
    return metadata_from_fields("submit", params=args.params, context=args.context_length, license=args.license,
                                base_model=args.base_model, training_data=args.training_data,
                                open_weights=args.open_weights)


def run(args: argparse.Namespace) -> int:
    metadata = metadata_from_args(args)  # checked before the model is resolved
    request, note = submit_request(args.model, args.queue, revision=args.revision, tasks=args.tasks, lang=args.lang,
                                   seeds=args.seeds, overrides=overrides_from_args(args), name=args.name,
                                   submitter=args.submitter, dry_run=args.dry_run, metadata=metadata)
    if note:
        print(f"note: {note}")
    print(f"submitted {request.id}: {request.model} @ {request.revision[:12]}, {len(request.tasks)} task(s), "
          f"seeds {request.seeds or 'protocol'} -> {args.queue}"
          + (f"; stated: {', '.join(sorted(request.metadata))}" if request.metadata else ""))
    for line in next_steps(request, args.queue):
        print(line)
    return 0


def next_steps(request, queue_location: str) -> list[str]:
    """What the submitter should know and run next: a request with protocol overrides is a smoke run (its score
    is a check, marked ⚑, not the protocol's), and how the request gets run and watched."""
    lines = []
    if request.overrides:
        shown = describe_overrides({k: {"run": v} for k, v in sorted(request.overrides.items())})
        lines.append(f"{SMOKE_MARK} smoke run: protocol overrides {shown}; its score is a check, not the protocol's "
                     "(marked ⚑ on the board, ranked only with \"Include smoke runs\"); submit without them for the "
                     "protocol's score")
    queue_arg = f"--queue {queue_location}"
    if request.status == "pending-review":
        lines.append(f"next: it waits for review: biobench queue approve {request.id} {queue_arg} (a maintainer)")
    lines.append(f"next: biobench worker {queue_arg} --results results/ --once   (runs it here, then prints its "
                 "scores; a worker already serving the queue takes it by itself)")
    lines.append(f"watch: biobench queue list {queue_arg}   (its status; the leaderboard's Queue tab shows the same)")
    return lines
