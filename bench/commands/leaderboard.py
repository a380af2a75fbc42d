"""`biobench leaderboard`: the Gradio app over results folders, or `--export` of the aggregated table."""

from __future__ import annotations

import argparse
import contextlib
import importlib
import sys
from pathlib import Path
from typing import Literal

from biobench.errors import ConfigError
from biobench.ranges import finite_number
from biobench.service.submission import PublicPolicy, RateLimit, trust_proxies
from biobench.standings.cache import default_dir


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser(
        "leaderboard",
        description="Leaderboard over results folders plus the paper's published rows (marked 'reported').",
    )
    p.add_argument("--results", nargs="+", action="extend", default=[], metavar="DIR",
                   help="results folder(s) written by `biobench eval` (repeatable), or a results dataset: "
                   "hf://datasets/ORG/NAME (from `biobench results push`) or a local copy of one (a folder holding "
                   "results.parquet)")
    p.add_argument("--no-reference", action="store_true", help="hide the paper's reported rows")
    p.add_argument("--host", default="127.0.0.1", help="address to serve on (default 127.0.0.1)")
    p.add_argument("--port", type=int, default=None, help="port (default: Gradio's, 7860 or the next free one)")
    p.add_argument("--export", metavar="FILE", help="write the aggregated table to FILE.csv or FILE.json, or one row "
                   "per (model, task, seed) with run keys and results to FILE.parquet (loadable with "
                   "datasets.load_dataset('parquet', ...)), and exit")
    p.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates for significance (default 1000)")
    p.add_argument("--no-cache", action="store_true", help="recompute the significance groups instead of reading "
                   "them from the cache ($BIOBENCH_CACHE/leaderboard, default ~/.cache/biobench/leaderboard)")
    p.add_argument("--queue", metavar="Q", help="request queue (a folder or hf://datasets/ORG/NAME) the Submit tab "
                   "writes to and the Queue view shows (default: none; the tab shows the `biobench submit` command)")
    p.add_argument("--allow-local-models", nargs="+", action="extend", default=[], metavar="DIR",
                   help="let the Submit form accept model folders under DIR (repeatable; default: hub ids pinned to a "
                   "commit only — a public form must not point the worker at the server's files)")
    p.add_argument("--max-pending", type=int, default=3, metavar="N", help="requests one visitor of the Submit form "
                   "may have waiting (0: no limit)")
    p.add_argument("--max-queued", type=int, default=100, metavar="N", help="requests the whole queue may have "
                   "waiting before the Submit form refuses more (0: no limit; default 100)")
    p.add_argument("--max-submissions-per-minute", type=int, default=30, metavar="N", help="submissions the form "
                   "accepts per minute from all visitors together, refused ones not counted (0: no limit; default 30)")
    p.add_argument("--max-visitor-submissions-per-minute", type=int, default=5, metavar="N", help="submissions one "
                   "visitor may make per minute, refused ones included (0: no limit; default 5)")
    p.add_argument("--trusted-proxy", action="append", default=[], metavar="ADDR", help="an address or network "
                   "(10.0.0.0/8) of a reverse proxy in front of this server whose X-Forwarded-For names the visitor "
                   "(repeatable; default none: the connection's address is the visitor's, whatever headers say)")
    p.add_argument("--refresh-minutes", type=float, default=0, help="rescan the results this often while serving "
                   "(default: 0, only with the Refresh button)")
    p.add_argument("--print", dest="print_table", action="store_true", help="print the table to the terminal and exit")
    smoke = p.add_mutually_exclusive_group()
    smoke.add_argument("--include-smoke", action="store_true", help="with --print: show smoke runs (protocol "
                       "overrides, ⚑) where a model has no protocol result for the task (the default, as the page)")
    smoke.add_argument("--hide-smoke", action="store_true", help="with --print: the protocol's results only")
    p.set_defaults(func=run)


def load_app() -> None:
    """Import the app's modules (gradio and pandas: ~2.5 s of CPU) where it costs the page nothing: build_board runs
    this while a cold scan's workers read the result files, this process waiting for them (docs/performance.md).
    A failure is left to the import that needs the app, which raises it with its own message."""
    with contextlib.suppress(Exception):
        importlib.import_module("biobench.leaderboard.app")


def run(args: argparse.Namespace) -> int:
    # lazy: loads pandas
    from biobench.leaderboard.tables.export import write_export

    # lazy: loads pandas
    from biobench.leaderboard.tables.text import render_text

    # lazy: loads pandas
    from biobench.standings.aggregate import build_board

    if args.port is not None and not 1 <= args.port <= 65535:
        raise ConfigError(f"--port {args.port}: a port is a number from 1 to 65535")
    finite_number(args.refresh_minutes, "--refresh-minutes", minimum=0)
    if args.n_boot < 1:
        raise ConfigError(f"--n-boot {args.n_boot}: give at least 1 bootstrap replicate (the paper uses 1000)")
    for flag, value in (("--max-pending", args.max_pending), ("--max-queued", args.max_queued),
                        ("--max-submissions-per-minute", args.max_submissions_per_minute),
                        ("--max-visitor-submissions-per-minute", args.max_visitor_submissions_per_minute)):
        if value < 0:
            raise ConfigError(f"{flag} {value}: give 0 (no limit) or more")
    roots = tuple(Path(r) for r in args.allow_local_models)
    odd = next((r for r in roots if not r.is_dir()), None)
    if odd is not None:
        raise ConfigError(f"--allow-local-models {odd}: not a folder")
    policy = PublicPolicy(local_roots=roots, max_pending=args.max_pending, max_queued=args.max_queued,
                          limiter=RateLimit(args.max_submissions_per_minute,
                                            args.max_visitor_submissions_per_minute))
    trust_proxies(args.trusted_proxy)
    missing = [r for r in args.results if not str(r).startswith("hf://") and not Path(r).exists()]
    if missing:
        raise ConfigError(f"--results {missing[0]}: no such folder or file; pass a folder written by `biobench eval "
                          "--results DIR`, a results.parquet or hf://datasets/ORG/NAME")
    quick = bool(args.export or args.print_table)
    # serving: the tables at once, the significance groups in the background (the app shows their progress),
    # started once the app is built; a refresh's while the page already serves
    def scan(significance: bool | Literal["background", "deferred"]):
        return build_board(args.results, reference=not args.no_reference, significance=significance,
                           n_boot=args.n_boot, cache_dir=None if args.no_cache else default_dir(),
                           log=None if quick else lambda line: print(line, file=sys.stderr, flush=True),
                           meanwhile=None if quick else load_app)

    # --export writes the rank intervals, so it waits for the significance (through the cache); --print-table not
    board = scan(bool(args.export) if quick else "deferred")
    for problem in board.problems:
        print(f"warning: {problem.path}: {problem.reason}")
    if args.print_table:
        print(render_text(board, include_smoke=False if args.hide_smoke else None))
    if args.export:
        left_out: list[tuple[str, str]] = []
        path = write_export(board, args.export, left_out)
        listed = {problem.path for problem in board.problems}
        for where, reason in left_out:  # the board lists those it read for the significance already
            if where not in listed:
                print(f"warning: {where}: {reason} (its predictions left out)")
        rows = (sum(len(r) for e in board.entries for r in e.runs.values()) if path.suffix.lower() == ".parquet"
                else len(board.entries))
        print(f"wrote {path} ({rows} rows)")
    if quick:
        return 0
    # lazy: loads gradio, pandas
    from biobench.leaderboard.app import launch

    launch(board, host=args.host, port=args.port, queue=args.queue, rebuild=lambda: scan("background"),
           refresh_minutes=args.refresh_minutes, submit_policy=policy)
    return 0
