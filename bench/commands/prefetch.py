"""`biobench prefetch`: a grid's models and data into the caches its runs read, for offline compute nodes.

  biobench prefetch --config examples/grids/paper-fr.toml --data-dir $SCRATCH/biobench-data
  biobench prefetch --model ModernBERT-bio --lang en
  HF_HUB_OFFLINE=1 biobench eval --config examples/grids/paper-fr.toml ...   # then, on the compute nodes
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.eval.grid import grid_specs, read_grid_file
from biobench.eval.prefetch import prefetch_model, prefetch_task
from biobench.tasks.loading import resolve_data_dir
from biobench.tasks.registry import TaskCatalogue

# (this module parses and prints; the work is in biobench.eval.prefetch)


def add_parser(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "prefetch", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--config", metavar="GRID.toml", help="every model and task of a grid file")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME",
                        help="with --config: only the grid(s) of this name (repeatable)")
    parser.add_argument("--model", action="append", default=[], metavar="M",
                        help="an alias, hub id or local folder (repeatable)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--lang", choices=["fr", "en"], help="every paper task of a language")
    which.add_argument("--tasks", help="comma-separated task ids")
    parser.add_argument("--task-file", action="append", default=[], type=Path, metavar="SPEC.json",
                        help="a task spec file (repeatable)")
    parser.add_argument("--data-dir", metavar="DIR", help="the data folder the runs read (default: the grid "
                        "file's data_dir, else $BIOBENCH_DATA)")
    parser.set_defaults(func=run)


def _selection(args: argparse.Namespace) -> tuple[list[str], list[tuple[Any, Path | None]]]:
    """(models, [(task spec, data folder)]) named by the grid file or by --model/--lang/--tasks."""
    data_dir = resolve_data_dir(args.data_dir)
    if args.config:
        if args.model or args.lang or args.tasks:
            raise ConfigError("with --config, models and tasks come from the grid file; drop --model/--lang/--tasks")
        grids = read_grid_file(args.config)
        unknown = sorted(set(args.grid) - {g.name for g in grids})
        if unknown:
            raise ConfigError(f"{args.config}: no grid named {', '.join(unknown)}")
        grids = [g for g in grids if not args.grid or g.name in args.grid]
        catalogue = TaskCatalogue.build(args.task_file)
        models = [entry.model for grid in grids for entry in grid.models]
        tasks = [(spec, grid.data_dir or data_dir) for grid in grids for spec in grid_specs(grid, catalogue)]
        return models, tasks
    if not args.model and not args.lang and not args.tasks:
        raise ConfigError("biobench prefetch needs --config GRID.toml, or --model M and/or --lang fr|en / --tasks")
    if args.tasks:
        ids = [t.strip() for t in args.tasks.split(",") if t.strip()]
        specs = [TaskCatalogue.build(args.task_file).get(t) for t in ids]
    else:
        specs = TaskCatalogue.build(args.task_file).tasks(lang=args.lang) if args.lang else []
    return args.model, [(spec, data_dir) for spec in specs]


def run(args: argparse.Namespace) -> int:
    models, tasks = _selection(args)
    log = print
    items = [prefetch_model(m, log) for m in dict.fromkeys(models)]
    done: set[tuple[str, Path | None]] = set()
    for spec, data_dir in tasks:
        if (spec.id, data_dir) not in done:
            done.add((spec.id, data_dir))
            items.append(prefetch_task(spec, data_dir, log))
    width = max((len(i.name) for i in items), default=0)
    for item in items:
        print(f"{item.kind:5}  {item.name:{width}}  {item.state:7}  {item.detail}")
    missing = [i for i in items if i.state == "missing"]
    if not missing:
        print(f"nothing missing: {len(items)} model(s) and task(s) are where a run with HF_HUB_OFFLINE=1 reads them")
        return 0
    print(f"a run with HF_HUB_OFFLINE=1 will still miss {len(missing)}:", file=sys.stderr)
    for item in missing:
        print(f"  {item.kind} {item.name}: {item.fix or item.detail}", file=sys.stderr)
    return 2
