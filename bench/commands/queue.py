"""`biobench queue`: the operator's side of a request queue — list it (with the files that are not requests),
configure review and the per-submitter limit, approve or reject requests waiting in pending-review."""

from __future__ import annotations

import argparse

from biobench.errors import ConfigError
from biobench.service import queue
from biobench.service.queue_storage import open_storage

EPILOG = """examples:
  biobench queue configure --queue queue/ --review on --max-pending 3
  biobench queue list --queue queue/
  biobench queue approve 20261204T031200Z-my-encoder-1a2b3c4d --queue queue/
  biobench queue reject 20261204T031200Z-my-encoder-1a2b3c4d --queue queue/ --reason "pickled weights" """


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "queue", description="The operator's commands for a request queue (a folder or hf://datasets/ORG/NAME). With "
        "review on, `biobench submit` and the Submit form write requests as pending-review; a worker runs "
        "them only once approved.",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("action", choices=["list", "approve", "reject", "configure"], help="what to do")
    p.add_argument("id", nargs="?", metavar="ID", help="request id (approve, reject)")
    p.add_argument("--queue", required=True, metavar="Q", help="queue: a folder or hf://datasets/ORG/NAME")
    p.add_argument("--reason", default="", help="reject: why (shown in the Queue view)")
    p.add_argument("--review", choices=["on", "off"], help="configure: new requests wait for approval (on) or not")
    p.add_argument("--max-pending", type=int, metavar="N", help="configure: requests one submitter may have "
                   "waiting (0: no limit)")
    p.add_argument("--max-queued", type=int, metavar="N", help="configure: requests the whole queue may have "
                   "waiting (0: no limit)")
    p.add_argument("--dry-run", metavar="DIR", help="hub queue only: work in DIR instead of committing")
    p.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    storage = open_storage(args.queue, dry_run=args.dry_run)
    if args.action in ("approve", "reject"):
        if not args.id:
            raise ConfigError(f"queue {args.action} needs the request id (`biobench queue list --queue Q`)")
        request = queue.review(storage, args.id, approve=args.action == "approve", reason=args.reason)
        print(f"{request.id}: {request.status}")
        return 0
    if args.action == "configure":
        settings = queue.read_settings(storage)
        if args.review is not None:
            settings.review = args.review == "on"
        if args.max_pending is not None:
            if args.max_pending < 0:
                raise ConfigError(f"--max-pending {args.max_pending}: give 0 (no limit) or more")
            settings.max_pending = args.max_pending
        if args.max_queued is not None:
            if args.max_queued < 0:
                raise ConfigError(f"--max-queued {args.max_queued}: give 0 (no limit) or more")
            settings.max_queued = args.max_queued
        queue.write_settings(storage, settings)
        print(f"{storage.label}: review {'on' if settings.review else 'off'}, max pending per submitter "
              f"{settings.max_pending or 'unlimited'}, max waiting in the queue {settings.max_queued or 'unlimited'}")
        return 0
    requests, problems = queue.scan_requests(storage)
    for r in requests:
        print(f"{r.status:<15} {r.id}  {r.model} @ {r.revision[:12]}  {len(r.tasks)} task(s)  by {r.submitter}")
    for problem in problems:
        print(f"problem: {problem.line()}")
    print(f"{len(requests)} request(s), {len(problems)} problem(s) in {storage.label}")
    return 0
