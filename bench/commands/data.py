"""`biobench data fetch|add|status`: get a task's data into the documented layout in one command.

Parsing and dispatch only; the work is in biobench.tasks.fetch.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from biobench.errors import BiobenchError, ConfigError
from biobench.ranges import finite_number
from biobench.runtime.files import output_folder
from biobench.tasks.archives import Limits
from biobench.tasks.fetch import add_task, fetch_task, task_status
from biobench.tasks.loading import resolve_data_dir
from biobench.tasks.registry import TaskCatalogue, builtin_catalogue, get_spec, list_specs


def _data_dir(args: argparse.Namespace, create: bool = False) -> Path:
    """The data folder; `create` (fetch, add): it must be a folder this user can make (not a file)."""

    data_dir = resolve_data_dir(args.data_dir)
    if data_dir is None:
        raise ConfigError("no data folder: pass --data-dir DIR or set BIOBENCH_DATA")
    if getattr(args, "max_ratio", None) is not None:

        finite_number(args.max_ratio, "--max-ratio", positive=True)
    return output_folder(data_dir, "--data-dir") if create else data_dir


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "data", description="Put task data into the documented layout (tasks/DATA_LAYOUT.md): `fetch` downloads open "
        "data from its original source and verifies it, `add` installs a file you downloaded yourself "
        "(credentialed or gated data, never downloaded by biobench), `status` shows what is there.",
    )
    sub = parser.add_subparsers(dest="data_command", metavar="ACTION", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", metavar="DIR", default=None,
                       help="the data folder (default: $BIOBENCH_DATA)")

    def limits(p: argparse.ArgumentParser) -> None:
        p.add_argument("--max-ratio", type=float, default=None, metavar="R",
                       help="refuse archives whose members expand more than R times their compressed size "
                       "(default 100, or $BIOBENCH_MAX_EXPAND_RATIO; files under 32 MB are not checked)")
        p.add_argument("--max-bytes", type=int, default=None, metavar="N",
                       help="refuse archives that expand to more than N bytes, per member and in all "
                       "(default 4 GiB per member, 16 GiB in all, or $BIOBENCH_MAX_EXPAND_BYTES)")


    fetchable = [s.id for s in list_specs(include_extra=True)
                 if s.fetch and not s.fetch.get("gated") and s.fetch.get("convert") and s.fetch.get("files")]
    fetch = sub.add_parser(
        "fetch", help="download open data, verify, convert",
        description="Download each task's open data from its original source, check its sha256 where one is "
        "pinned, convert it into the documented layout under --data-dir and print where it went. Nothing "
        "half-downloaded lands in the data folder. Fetchable tasks: " + ", ".join(fetchable) + ". Credentialed "
        "data (phenotyping, deid) is never downloaded: use `biobench data add`.")
    fetch.add_argument("tasks", nargs="+", metavar="TASK", help="task id(s) to fetch (see the list above)")
    fetch.add_argument("--timeout", type=float, default=60.0, help="seconds per network read (default 60)")
    fetch.add_argument("--force", action="store_true", help="download again data that is already present "
                       "(default: a task whose files are found and match their pinned checksums is skipped)")
    common(fetch)
    limits(fetch)
    fetch.set_defaults(func=run_fetch)

    add = sub.add_parser(
        "add", help="install data you downloaded (archive(s) as distributed)",
        description="Install credentialed or gated data you downloaded yourself (the archive as distributed) "
        "into the documented layout; a wrong file is named with what is missing from it.")
    add.add_argument("task", metavar="TASK", help="task id (e.g. deid, phenotyping)")
    add.add_argument("files", nargs="+", metavar="FILE", help="the archive(s) or file(s) as distributed")
    common(add)
    limits(add)
    add.set_defaults(func=run_add)

    status = sub.add_parser("status", help="per task: found / missing / checksum mismatch, and the fix",
                            description="Per task: found, missing or checksum mismatch, and the one command "
                            "that fixes it.")
    status.add_argument("--all", action="store_true", help="also extra tasks")
    status.add_argument("--json", action="store_true", help="machine-readable output")
    status.add_argument("--task-file", metavar="SPEC", action="append", default=[], help="your own task spec "
                        "(.json/.toml, as `eval --task-file`): its tasks are listed instead of the built-ins; repeatable")
    common(status)
    status.set_defaults(func=run_status)


def run_fetch(args: argparse.Namespace, catalogue: TaskCatalogue | None = None) -> int:
    """`data fetch`: the named tasks of `catalogue` (the built-ins; a test gives its own) fetched one by one."""
    data_dir = _data_dir(args, create=True)
    tasks = catalogue or builtin_catalogue()
    specs = [tasks.get(t) for t in dict.fromkeys(args.tasks)]  # unknown ids fail before any download
    limits = Limits.from_env(args.max_ratio, args.max_bytes)
    failed = []
    for spec in specs:  # every task is tried: one that fails (offline, gated, a bad archive) stops no other
        status = task_status(spec, data_dir)
        if status.state == "found" and not args.force:
            print(f"{spec.id}: already present ({status.detail}); --force downloads it again")
            continue
        print(f"{spec.id}: fetching into {data_dir}")
        try:
            fetch_task(spec, data_dir, timeout=args.timeout, limits=limits)
        except BiobenchError as err:
            failed.append(spec.id)
            print(f"{spec.id}: failed: {err}", file=sys.stderr)
            continue
        print(f"{spec.id}: done (`biobench tasks --data-dir {data_dir}` shows it)")
    if failed:
        print(f"{len(failed)} of {len(specs)} task(s) not fetched: {', '.join(failed)}", file=sys.stderr)
        return 2
    return 0


def run_add(args: argparse.Namespace) -> int:
    data_dir = _data_dir(args, create=True)
    spec = get_spec(args.task)
    print(f"{spec.id}: adding {', '.join(args.files)} into {data_dir}")
    add_task(spec, data_dir, args.files, limits=Limits.from_env(args.max_ratio, args.max_bytes))
    print(f"{spec.id}: done")
    return 0


def run_status(args: argparse.Namespace) -> int:
    specs = list_specs(include_extra=args.all)
    if args.task_file:  # the user's own tasks, what a ⚠ line's fix for one of them asks about (issue 62 item 5)
        specs = TaskCatalogue.build(args.task_file).own()
    # a task file's paths may be its own (relative to the spec): no data folder needed then
    data_dir = resolve_data_dir(args.data_dir) if args.task_file else _data_dir(args)
    rows = [task_status(spec, data_dir) for spec in specs]
    if args.json:
        print(json.dumps([r.__dict__ for r in rows], indent=2))
        return 0
    width = max(len(r.task_id) for r in rows)
    print(f"data folder: {data_dir or 'none'}" + (f"; the tasks of {', '.join(args.task_file)} (the built-ins: "
                                                   "without --task-file)" if args.task_file else ""))
    for r in rows:
        print(f"{r.task_id:<{width}}  {r.state:<17}  {r.detail}")
        if r.fix:
            print(f"{'':<{width}}  {'fix:':<17}  {r.fix}")
    return 0
