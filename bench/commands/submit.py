"""`biobench submit`: request an evaluation; a `biobench worker` runs it and publishes the results."""

from __future__ import annotations

import argparse

from biobench.eval.protocols import add_protocol_arguments

EPILOG = """examples:
  biobench submit ModernCamemBERT-bio --lang fr --queue queue/
  biobench submit my-org/my-encoder --revision 3f2a9c1 --lang en --seeds 42-44 --queue hf://datasets/my-org/requests
  biobench worker --queue queue/ --results results/ --once      # run it"""


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "submit", help="request an evaluation in a queue (a folder or hf://datasets/ORG/NAME)",
        description="Write one evaluation request (model, revision, tasks, seeds, protocol hash, submitter, time; "
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
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    from biobench.eval.protocols import overrides_from_args
    from biobench.service.submission import submit_request

    request, note = submit_request(args.model, args.queue, revision=args.revision, tasks=args.tasks, lang=args.lang,
                                   seeds=args.seeds, overrides=overrides_from_args(args), name=args.name,
                                   submitter=args.submitter, dry_run=args.dry_run)
    if note:
        print(f"note: {note}")
    print(f"submitted {request.id}: {request.model} @ {request.revision[:12]}, {len(request.tasks)} task(s), "
          f"seeds {request.seeds or 'protocol'} -> {args.queue}")
    return 0
