"""What one visitor costs the leaderboard server as models grow (issue 51 item 2): the Compare tab's default pair
and a page view, on a synthetic French board of MODELS x 8 tasks x SEEDS results with real predictions
(`leaderboard_scale.generate`).

Arms, each timed in this process on the same board: "all pairs" is the default pair as it was worked out before
(`same_protocol`, i.e. `compare_entries` with its prediction alignment, over all N(N-1)/2 measured pairs; only
up to --all-pairs-max models, as it grows quadratically: 578 s at 300 models); "default pair" is
`leaderboard.app.default_pair` on a fresh board (its settings read once per row, `entry_pairs.default_measured_pair`)
and "cached" the same call again (`Board.memo`: what every later page load, language change and refresh of an
unchanged board pays); "page view" runs every function the app runs on a page load (gradio's `load` events)
with the page's initial values, on a board whose memo is empty, as the first visitor after a rescan pays it;
"refresh" is one `on_refresh` (the Refresh button and the anonymous `POST /gradio_api/call/on_refresh`),
rescan included. Medians over --repeats. The last line is all pairs / default pair at the largest size both ran.

    .venv/bin/python -m biobench.perf.compare_default_pair --models 10,50,300
"""

from __future__ import annotations

import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.perf.leaderboard_scale import benchmark_tasks, generate
from biobench.perf.perf_common import base_parser, finish, print_table, script
from biobench.standings.aggregate import build_board
from biobench.standings.entry_pairs import same_protocol


def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--models", default="10,25,50,100,300", help="board sizes, comma-separated")
    parser.add_argument("--seeds", type=int, default=1)
    parser.add_argument("--examples", type=int, default=100, help="test examples per task")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--all-pairs-max", type=int, default=50, help="time the old all-pairs default only up "
                        "to this many models (it grows with N(N-1)/2)")
    return parser.parse_args(argv)


def all_pairs_default(board: Any, lang: str) -> tuple[str, str] | None:
    """The default pair as it was chosen before (the baseline): `same_protocol` for every pair of measured rows."""
    measured = [e for e in board.lang_entries(lang) if e.source == "measured"]

    def shared(a, b) -> int:
        return len(set(a.cells) & set(b.cells))

    pairs = [(bool(shared(a, b)) and same_protocol(board, lang, a.key, b.key), shared(a, b), -i, -j, a.key, b.key)
             for i, a in enumerate(measured) for j, b in enumerate(measured) if i < j]
    best = max(pairs, default=None)
    return (best[4], best[5]) if best is not None and best[1] else None


def page_view(app: Any) -> dict[str, float]:
    """Run every function a page load runs (the app's `load` events) with the page's initial values; seconds
    per function name. Inputs given as a set reach the function as one dict, as gradio passes them."""
    spent: dict[str, float] = {}
    for dep in app.fns.values():
        if not any(event == "load" for _, event in dep.targets) or dep.fn is None:
            continue
        values = [getattr(c, "value", None) for c in dep.inputs]
        started = time.perf_counter()
        if dep.inputs_as_dict:
            dep.fn(dict(zip(dep.inputs, values, strict=True)))
        else:
            dep.fn(*values)
        spent[dep.name] = spent.get(dep.name, 0.0) + time.perf_counter() - started
    return spent


def synthetic_board(root: Path, models: int, seeds: int, examples: int) -> Any:
    """A results folder of `models` x the 8 French tasks, scanned into a board (no significance groups: they
    run in the background, apart from any request)."""
    generate(root, models, benchmark_tasks(8), seeds, examples)
    return rescan(root)


def rescan(root: Path) -> Any:
    return build_board([root], significance=False, cache_dir=root.parent / "cache")


def measure(models: int, seeds: int, examples: int, repeats: int, all_pairs: bool) -> dict[str, Any]:
    # lazy: loads gradio, pandas
    from biobench.leaderboard.app import build_app, default_pair

    with tempfile.TemporaryDirectory(prefix="biobench-pair-") as tmp:
        root = Path(tmp) / "results"
        root.mkdir()
        board = synthetic_board(root, models, seeds, examples)
        row: dict[str, Any] = {"models": models, "pairs": models * (models - 1) // 2}
        times: dict[str, list[float]] = {"default": [], "cached": [], "page": [], "refresh": [], "all": []}
        for _ in range(repeats):
            board.memo.clear()
            started = time.perf_counter()
            pair = default_pair(board, "fr")
            times["default"].append(time.perf_counter() - started)
            started = time.perf_counter()
            default_pair(board, "fr")
            times["cached"].append(time.perf_counter() - started)
            if all_pairs:
                started = time.perf_counter()
                before = all_pairs_default(board, "fr")
                times["all"].append(time.perf_counter() - started)
                row["same_pair"] = before == pair
        app = build_app(board, rebuild=lambda: rescan(root))
        refresh = next(d for d in app.fns.values() if d.name == "on_refresh")
        assert refresh.fn is not None  # gradio types a block function's fn Optional; on_refresh has one
        for _ in range(repeats):
            board.memo.clear()
            times["page"].append(sum(page_view(app).values()))
            inputs = {c: getattr(c, "value", None) for c in refresh.inputs}
            started = time.perf_counter()
            refresh.fn(inputs)
            times["refresh"].append(time.perf_counter() - started)
        for name, values in times.items():
            if values:
                row[f"{name}_s"] = round(statistics.median(values), 4)
        return row


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sizes = [int(n) for n in args.models.split(",")]
    rows = [measure(n, args.seeds, args.examples, args.repeats, n <= args.all_pairs_max) for n in sizes]
    print_table(rows, [("models", "models", ""), ("pairs", "pairs", ","), ("all_s", "all pairs s", ".3f"),
                       ("default_s", "default pair s", ".4f"), ("cached_s", "cached s", ".5f"),
                       ("page_s", "page view s", ".3f"), ("refresh_s", "refresh s", ".3f")])
    both = [r for r in rows if "all_s" in r]
    ratio = both[-1]["all_s"] / both[-1]["default_s"] if both and both[-1]["default_s"] else None
    return finish({"rows": rows, "seeds": args.seeds, "examples": args.examples}, args.out, ratio)


if __name__ == "__main__":
    script(main)
