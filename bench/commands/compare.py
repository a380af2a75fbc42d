"""`biobench compare A B`: paired bootstrap of test macro-F1 (A - B) over test examples x seeds, per task."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from biobench.api import compare
from biobench.errors import ConfigError
from biobench.runtime.console import console
from biobench.standings.folder_pairs import model_folder


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "compare", description="Compare two models task by task from their saved test predictions: the difference of "
        "seed-mean macro-F1 (A - B), a 95% bootstrap CI and a two-sided p-value (test examples resampled "
        "jointly for both models, seeds resampled per model).",
    )
    parser.add_argument("model_a", metavar="A", help="display name (as the leaderboard shows it), alias, hub id, "
                        "local model folder, or results sub-folder name")
    parser.add_argument("model_b", metavar="B", nargs="?", help="the model A is compared with (same forms as A; "
                        "omit with --paper)")
    parser.add_argument("--paper", action="store_true", help="compare A with what the paper reports for it (Tables "
                        "1-2): per task and for the average, the measured mean and 95%% CI, the reported value, the "
                        "difference and a verdict: reproduced / differs / no data (docs/PROTOCOL.md)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", help="comma-separated task ids (default: every task both models have)")
    which.add_argument("--lang", choices=["fr", "en"], help="only the tasks of this language")
    parser.add_argument("--results", default="results", metavar="DIR", help="results folder (default: ./results)")
    parser.add_argument("--n-boot", type=int, default=1000, help="bootstrap replicates (default 1000)")
    parser.add_argument("--average", action="store_true",
                        help="also test the task average (per language): test examples resampled within each "
                        "task, seeds per model, the average recomputed over the tasks both models have")
    parser.add_argument("--allow-different-protocols", action="store_true",
                        help="test a task even when A's and B's runs differ in protocol settings (epochs, lr, max "
                        "length, head, smoke overrides, ...); by default such a task gets its difference only, "
                        "since it may come from the settings, not the models")
    parser.add_argument("--json", action="store_true", help="machine-readable output")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.n_boot < 1:  # also checked by the API; before --paper, which does not bootstrap A - B
        raise ConfigError(f"--n-boot {args.n_boot}: give at least 1 bootstrap replicate (the paper uses 1000)")
    if args.paper:
        return run_paper(args)
    if not args.model_b:
        raise ConfigError("compare needs two models (A B), or one model with --paper")
    tasks = [t.strip() for t in args.tasks.split(",") if t.strip()] if args.tasks else None
    report = compare(args.model_a, args.model_b, args.results, tasks=tasks, lang=args.lang, n_boot=args.n_boot,
                     average=args.average, allow_different_protocols=args.allow_different_protocols)
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    from rich.table import Table

    table = Table(title=f"A = {report['a']}   B = {report['b']}   (test macro-F1, %)", title_justify="left")
    for column in ("task", "seeds A/B", "A", "B", "A - B", "95% CI", "p"):
        table.add_column(column, justify="left" if column == "task" else "right")
    for row in report["tasks"]:
        tested = row["p_value"] == row["p_value"]  # NaN: no test (different protocols)
        style = "bold" if tested and row["p_value"] < 0.05 else None
        table.add_row(row["task"] + (" ≠" if row["differences"] else ""), f"{len(row['seeds_a'])}/{len(row['seeds_b'])}",
                      f"{100 * row['mean_a']:.2f}", f"{100 * row['mean_b']:.2f}", f"{100 * row['diff']:+.2f}",
                      f"[{100 * row['ci_low']:+.2f}, {100 * row['ci_high']:+.2f}]" if tested else "–",
                      f"{row['p_value']:.3f}" if tested else "no test", style=style)
    for lang, avg in report.get("averages", {}).items():
        table.add_row(f"average {lang}", f"{len(avg['tasks'])} tasks", f"{100 * avg['mean_a']:.2f}",
                      f"{100 * avg['mean_b']:.2f}", f"{100 * avg['diff']:+.2f}",
                      f"[{100 * avg['ci_low']:+.2f}, {100 * avg['ci_high']:+.2f}]", f"{avg['p_value']:.3f}",
                      style="bold" if avg["p_value"] < 0.05 else None, end_section=False)
    console().print(table)
    if report["warning"]:
        print(f"≠ {report['warning']}", file=sys.stderr)
    methods = {row["method"] for row in report["tasks"] if row["p_value"] == row["p_value"]}
    if report.get("averages"):
        methods.add("paired bootstrap")
    if methods:  # no test ran (different protocols, one seed and no predictions): no legend for a test
        print(f"bold: p < 0.05 ({', '.join(sorted(methods))})", file=sys.stderr)
    if report.get("averages"):
        print("average rows: the mean over those tasks of the seed-mean macro-F1, bootstrapped by resampling test "
              "examples within each task and seeds per model", file=sys.stderr)
    return 0


def run_paper(args: argparse.Namespace) -> int:
    # lazy: loads pandas
    from biobench.standings.aggregate import build_board

    # lazy: loads pandas
    from biobench.standings.reproduction import model_verdicts, verdict_rows

    if args.model_b:
        raise ConfigError("--paper compares one model with the paper's numbers; drop B")
    results = Path(args.results)
    key = model_folder(results, args.model_a).name
    board = build_board([results], reference=True, significance=False)
    by_lang = model_verdicts(board, key, args.lang)
    if not by_lang:
        raise ConfigError(f"no results for {args.model_a} in {results}" + (f" in {args.lang}" if args.lang else ""))
    report: dict[str, list[dict[str, Any]]] = {lang: verdict_rows(rows) for lang, rows in by_lang.items()}
    if args.json:
        print(json.dumps({"model": key, "results_dir": str(results), "languages": report}, indent=2))
        return 0
    from rich.table import Table

    def num(x: float | None, sign: str = "") -> str:
        return "–" if x is None else f"{x:{sign}.2f}"

    clipped, notes = False, []
    for lang, rows in report.items():
        table = Table(title=f"{key} vs the paper ({lang}; test macro-F1, %)", title_justify="left")
        for column in ("task", "seeds", "measured", "interval", "reported", "difference", "verdict"):
            table.add_column(column, justify="left" if column in ("task", "verdict") else "right")
        shown = [row for row in rows if row["measured"] is not None]  # a task without results is one line below
        for row in shown:
            interval = f"[{num(row['low'])}, {num(row['high'])}]" if row["low"] is not None else "–"
            clipped |= bool(row["clipped"])
            notes += [note for note in row["notes"] if note not in notes]  # the smoke note repeats on every row
            table.add_row(row["task"], str(row["seeds"] or "–"), num(row["measured"]) + (f" {row['marks']}" if row["marks"] else ""),
                          interval + ("*" if row["clipped"] else ""), num(row["reported"]),
                          num(row["difference"], "+"), row["verdict"], style="bold" if row["task"] == "average" else None)
        console().print(table)
        missing = [row["task"] for row in rows if row["measured"] is None and row["task"] != "average"]
        if missing:
            print(f"{lang}: {len(missing)} of the paper's tasks not measured ({', '.join(missing)}); the average "
                  "needs all of them", file=sys.stderr)
    for note in notes:
        mark = "⚑" if note.startswith("smoke run:") else "⚠"
        print(f"{mark} {note}", file=sys.stderr)
    if clipped:
        print("*: the interval reached past the score's range and is clipped to [0, 100]", file=sys.stderr)
    print("reproduced: the reported value lies in the interval (95% CI over seeds; with one seed the MDD floor from "
          "the test set); the average needs every paper task measured (docs/PROTOCOL.md)", file=sys.stderr)
    return 0
