"""`biobench tasks`: which tasks exist, and where (or why not) their data was found; split sizes on request.

Why two speeds: reading every data set takes a minute (NER corpora, the BioCreative rebuild of ChemProt), so
the listing comes from the specs and file checks alone; `--counts` reads the data for the split sizes and
keeps them in a small cache keyed by the data files' fingerprint (tasks.loading.source_fingerprint), so the
second call is quick again. Only local and generated data is counted: the hub fallback is named but not
contacted, so the listing works offline.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Sequence
from typing import Any

from biobench.api.catalog import task_rows
from biobench.protocols import PROTOCOL_FIELDS, protocol_markdown, protocol_row, sources_markdown
from biobench.runtime.console import console as terminal_console
from biobench.tasks.loading import resolve_data_dir, without_data_dir_hints
from biobench.tasks.registry import TaskCatalogue, add_task_arguments


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "tasks",
        description="List the benchmark's tasks (by default the paper's 19) with language, kind, max length, "
        "protocol, head, where the data was found (or what is missing) and split sizes; --json adds the "
        "headline and dev-selection metrics and the label inventory. The listing checks files only (instant); "
        "--counts reads the data for split sizes and caches them until the data files change.",
    )
    parser.add_argument("--lang", choices=["fr", "en"], help="only tasks in this language")
    parser.add_argument("--all", action="store_true", help="also list extra tasks (demo, cantemist-es, e3c-fr)")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of a table")
    parser.add_argument("--protocol", action="store_true", help="per task, everything that decides its score (sample "
                        "unit, max length, steps, batch, lrs, warmup, weight decay, head, loss, decision rule, metric, "
                        "dev selection, seeds), each with its source (paper section or harness file); with --json as "
                        "JSON, with --markdown as docs/PROTOCOL.md's tables")
    parser.add_argument("--markdown", action="store_true", help="with --protocol: the Markdown tables of "
                        "docs/PROTOCOL.md (values, then sources)")
    parser.add_argument("--counts", action="store_true", help="read the data for split sizes and the labels found "
                        "(cached in $BIOBENCH_CACHE/tasks, default ~/.cache/biobench/tasks, until the files change); "
                        "with --task-file, of the file's tasks only")
    add_task_arguments(parser)
    parser.set_defaults(func=run)


def _short_source(row: dict[str, Any], data_dir: Any) -> str:
    if row["available"]:
        src = str(row["source"])
        return src.removeprefix(f"{data_dir}/") if data_dir else src
    if row["credentialed"]:
        return "[red]credentialed, missing[/red]"
    return "[red]missing[/red]" + (" (hub fallback)" if "hub fallback" in (row["reason"] or "") else "")


def _table(rows: list[dict[str, Any]], data_dir: Any, counted: bool, others: Sequence[dict[str, Any]] = ()) -> None:
    """The listing; `others` (the built-in tasks, when only the user's own are listed) is one summary line."""
    from rich.table import Table

    console = terminal_console()
    table = Table(title=f"biobench tasks (data dir: {data_dir or 'none'})")
    for col in ("id", "lang", "kind", "max len", "proto", "head", "data", *(("train", "dev", "test") if counted else ())):
        numeric = col in ("max len", "train", "dev", "test")
        table.add_column(col, justify="right" if numeric else "left", no_wrap=col != "data", overflow="fold",
                         min_width=16 if col == "data" else len(col))
    for r in rows:
        sizes = [str(r["splits"][s]) if r["splits"] else "-" for s in ("train", "dev", "test")] if counted else []
        table.add_row(r["id"], r["lang"], r["kind"], str(r["max_length"]), r["protocol"], r["head"],
                      _short_source(r, data_dir), *sizes)
    console.print(table)
    missing = [r for r in rows if not r["available"]]
    checked = "" if counted else " (files checked; --counts reads them for split sizes)"
    console.print(f"{len(rows) - len(missing)}/{len(rows)} tasks have data{checked}." + (" Missing:" if missing else ""))
    if missing and data_dir is None:  # said once here, not in every task's line
        console.print("No data folder given: pass --data-dir DIR, set BIOBENCH_DATA, or create ./data here (the "
                      "default when it exists); the layouts below are relative to it.", highlight=False, markup=False)
    for r in missing:
        reason = r["reason"] if data_dir is not None else without_data_dir_hints(r["reason"])
        console.print(f"- {reason}", highlight=False, markup=False)
    if others:
        have = sum(r["available"] for r in others)
        console.print(f"Also {len(others)} built-in tasks ({have} with data found without a data folder), not "
                      f"listed: pass --data-dir DIR (or set BIOBENCH_DATA) to list them and what each is missing.",
                      highlight=False, markup=False)


def _protocol(specs: list[Any], as_json: bool, markdown: bool) -> int:
    rows = [protocol_row(s) for s in specs]
    if as_json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
    elif markdown:
        print(protocol_markdown(rows) + "\n\n" + sources_markdown(rows))
    else:
        width = max(len(label) for _, label in PROTOCOL_FIELDS)
        for row in rows:
            print(f"{row['task']} ({row['lang']}, {row['kind']}{'' if row['paper_task'] else ', extra'})")
            for key, label in PROTOCOL_FIELDS:
                setting = row["settings"][key]
                print(f"  {label:<{width}}  {setting['value']}  [{setting['source']}]")
    return 0


def run(args: argparse.Namespace) -> int:
    data_dir = resolve_data_dir(args.data_dir)
    catalogue = TaskCatalogue.build(args.task_file)
    if args.protocol:
        return _protocol(catalogue.tasks(args.lang, include_extra=args.all), args.json, args.markdown)
    mine = {s.id for s in catalogue.own(args.lang)}
    # with --task-file, the file's tasks are what was asked about: only theirs are read for split sizes
    rows = task_rows(args.lang, data_dir, catalogue, include_extra=args.all,
                     counts=(mine if args.task_file else True) if args.counts else False)
    if args.json:
        print(json.dumps(rows, indent=2, ensure_ascii=False))
        return 0
    if args.task_file and data_dir is None:  # the user's own tasks first; the built-ins' missing data is noise here
        _table([r for r in rows if r["id"] in mine], data_dir, args.counts, [r for r in rows if r["id"] not in mine])
    else:
        _table(rows, data_dir, args.counts)
        if args.counts and args.task_file:
            print("split sizes of the --task-file tasks only; the built-ins': biobench tasks --counts without "
                  "--task-file")
    return 0
