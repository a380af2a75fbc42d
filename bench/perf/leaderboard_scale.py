"""Leaderboard start-up as results grow: cold (empty scan index and significance cache) and warm (both filled
by the cold start) on a synthetic results folder of MODELS x TASKS x SEEDS result files with real predictions.

Each model's predictions are the gold labels with a model-specific share flipped, perturbed per seed, so the
paired bootstraps have real work to do. Tasks are the benchmark's own ids (French first, then English), scored
as single-label classification. Every start runs in a fresh spawned process, as `biobench leaderboard` starts:
build_board (scan, aggregate; significance groups in the background through bench/standings/cache.py) and, unless
--no-app, build_app (the Gradio blocks). "served" is when the app could answer (tables without top-group marks
if the groups are still being computed); "groups" is when the significance groups are all there. The "gradio
floor" row is what any Gradio app costs here (`import gradio` + a Blocks with one HTML table, fresh process):
biobench's own share of a start is served minus that floor. The ratio printed last is cold / warm served.
Each arm also reports its process's peak memory (max RSS). `--baseline DIR` times another checkout of biobench
(DIR holds its bench/, tasks/, heads/, training/ and leaderboard/, e.g. `git archive main | tar -x -C DIR`) on
the same folder in the same run, cold and warm, each arm with its own cache: the before/after of a change side
by side under the same load. `--groups-timeout S` stops waiting for the groups after S seconds and reports how
many tasks were done (a slow baseline then gives a lower bound instead of holding the run). `--dir` with
`--reuse` keeps a folder generated earlier with the same sizes (writing 100,000 files takes minutes).
Goals: warm under 5 s at 80 x 19 x 9 on a 2-core machine, cold linear in the number of files;
first page under 10 s and groups under 20 s cold, under 1 GB (docs/performance.md).

    .venv/bin/python -m biobench.perf.leaderboard_scale --quick
    .venv/bin/python -m biobench.perf.leaderboard_scale --models 80 --tasks 19 --seeds 9 --out scale.json
    .venv/bin/python -m biobench.perf.leaderboard_scale --baseline /tmp/main --groups-timeout 600
"""

from __future__ import annotations

import datetime as dt
import importlib
import json
import os
import platform
import random
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.metrics import score
from biobench.perf.perf_common import arm_flag, base_parser, finish, print_table, run_isolated, script
from biobench.runtime.files import disk_full_guard
from biobench.runtime.ownership import check_output_folder, mark_created, remove_inside, remove_owned
from biobench.standings.scan import load_reference, task_order

LABELS = [f"label-{i}" for i in range(8)]


def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--models", type=int, default=80)
    parser.add_argument("--tasks", type=int, default=19, help="first N benchmark tasks (8 French, then English)")
    parser.add_argument("--seeds", type=int, default=9)
    parser.add_argument("--examples", type=int, default=200, help="test examples per task")
    parser.add_argument("--n-boot", type=int, default=1000)
    parser.add_argument("--dir", type=Path, default=None, help="generate here and keep it (default: a temp dir)")
    parser.add_argument("--no-app", action="store_true", help="time build_board only, not the Gradio app")
    parser.add_argument("--repeats", type=int, default=3, help="warm starts and Gradio floors to run, alternating; "
                        "their medians are reported (default 3)")
    parser.add_argument("--reuse", action="store_true", help="with --dir: keep the results generated there by an "
                        "earlier run with the same sizes and seed")
    parser.add_argument("--baseline", type=Path, default=None, help="another biobench checkout to time on the same "
                        "folder in the same run (cold and warm arms marked 'baseline')")
    parser.add_argument("--add-model", action="store_true", help="after the warm starts, add one model to the "
                        "folder and time a start on a copy of each warm cache ('+1 model' arms); removed after")
    parser.add_argument("--groups-timeout", type=float, default=None, help="seconds to wait for the groups of a "
                        "start before reporting the tasks done so far")
    args = parser.parse_args(argv)
    if args.quick:
        args.models, args.tasks, args.seeds, args.examples, args.n_boot, args.repeats = 10, 4, 3, 100, 200, 1
    if min(args.models, args.tasks, args.seeds, args.examples) < 1:
        parser.error("--models, --tasks, --seeds and --examples must be >= 1")
    if args.reuse and args.dir is None:
        parser.error("--reuse needs --dir (the folder to keep)")
    if args.baseline is not None and not any((args.baseline / "bench" / d).is_dir() for d in ("standings", "board")):
        parser.error(f"--baseline {args.baseline}: not a biobench checkout (no bench/standings/ there)")
    if args.groups_timeout is not None and not 0 < args.groups_timeout < 1e6:
        parser.error("--groups-timeout must be a number of seconds in (0, 1e6)")
    return args


def benchmark_tasks(n: int) -> list[tuple[str, str]]:
    """(lang, task) of the first n benchmark tasks in the paper's order, French then English."""
    order = task_order(load_reference())
    tasks = [(lang, t) for lang in ("fr", "en") for t in order.get(lang, [])]
    if n > len(tasks):
        raise SystemExit(f"--tasks {n}: the benchmark has {len(tasks)} tasks")
    return tasks[:n]


def generate(root: Path, models: int, tasks: list[tuple[str, str]], seeds: int, examples: int, seed: int = 0,
             only: int | None = None) -> int:
    """Write the synthetic results folder (`only`: just model number `only`, e.g. one more model, models - 1 being
    the spread's last); returns the number of result files."""
    n = 0
    for ti, (lang, task) in enumerate(tasks):
        rng = random.Random(seed * 1000 + ti)
        gold = [rng.choice(LABELS) for _ in range(examples)]
        for m in range(models) if only is None else [only]:
            slug = f"synthetic__model-{m:03d}"
            error = 0.1 + 0.4 * m / max(models - 1, 1)  # models spread from 90% to 50% accuracy
            folder = root / slug / task
            folder.mkdir(parents=True, exist_ok=True)
            for s in range(42, 42 + seeds):
                r = random.Random(hash((seed, ti, m, s)) & 0xFFFFFFFF)
                pred = [g if r.random() > error else r.choice(LABELS) for g in gold]
                (folder / f"seed-{s}.predictions.jsonl").write_text(
                    "".join(json.dumps({"id": f"{task}-{i}", "gold": g, "pred": p}) + "\n"
                            for i, (g, p) in enumerate(zip(gold, pred, strict=True))))
                result = {
                    "schema": "biobench.result/1",
                    "model": {"id": f"synthetic/model-{m:03d}", "slug": slug, "name": f"model-{m:03d}",
                              "revision": f"sha256:{m:064x}", "params": 149_000_000, "context": 8192, "lineage": None},
                    "task": {"id": task, "lang": lang, "kind": "classification", "data_checksum": f"sha256:{ti:064x}"},
                    "seed": s, "protocol": {"name": lang, "hash": "sha256:" + "2" * 64},
                    "key": {"model_revision": f"sha256:{m:064x}", "data_checksum": f"sha256:{ti:064x}",
                            "protocol_hash": "sha256:" + "2" * 64, "seed": s},
                    "metrics": {"test": {"macro_f1": score("classification", gold, pred)["macro_f1"]}, "dev": {}},
                    "timings": {"train_s": 60.0, "total_s": 65.0}, "device": "cuda",
                    "predictions": f"seed-{s}.predictions.jsonl",
                }
                (folder / f"seed-{s}.json").write_text(json.dumps(result))
                n += 1
    return n


def _peak_mb() -> float:
    """This process's peak resident memory so far, MiB (Linux reports ru_maxrss in KiB, macOS in bytes)."""
    import resource

    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return round(peak / (2**20 if sys.platform == "darwin" else 2**10), 1)


class TreeMemory:
    """Peak of this process's RSS plus its children's (the groups' worker), sampled every `interval` s: what the
    start costs the machine. ru_maxrss of the children would be the largest child ever waited for, not the sum."""

    def __init__(self, interval: float = 0.2):
        import threading

        import psutil

        self.peak_mb, self._proc, self._stop = 0.0, psutil.Process(), threading.Event()
        self._thread = threading.Thread(target=self._sample, args=(interval,), daemon=True)
        self._thread.start()

    def _sample(self, interval: float) -> None:
        import psutil

        while not self._stop.wait(interval):
            try:
                rss = self._proc.memory_info().rss + sum(c.memory_info().rss for c in self._proc.children(recursive=True))
            except psutil.Error:
                continue
            self.peak_mb = max(self.peak_mb, rss / 2**20)

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return round(self.peak_mb, 1)


def _board_builder() -> Any:
    """build_board of the biobench imported: bench/standings/aggregate.py, or bench/board/board.py in a baseline
    checkout from before issue 47 renamed the board model (so that a before/after of the rename can be timed)."""
    # looked up by name: the module is the imported checkout's, which this checkout's imports cannot name
    try:
        return importlib.import_module("biobench.standings.aggregate").build_board
    except ModuleNotFoundError:  # the baseline arm's checkout, from before the rename
        return importlib.import_module("biobench.board.board").build_board


def _deferred_groups() -> bool:
    """Whether the imported biobench starts a served board's groups once its app is built
    (`build_board(significance="deferred")`); a baseline checkout from before starts them with the board."""
    try:
        cache = importlib.import_module("biobench.standings.cache")
    except ModuleNotFoundError:  # the baseline arm's checkout, from before the rename
        return False
    return hasattr(cache.BackgroundGroups, "started")


def start_up(results: str, cache_dir: str, n_boot: int, app: bool, timeout: float | None = None) -> dict[str, Any]:
    """One leaderboard start in this (fresh) process, as `biobench leaderboard` starts: seconds until the board and
    the app are built (served), and until the background significance groups are all computed (None when not
    within `timeout`); the groups start once the app is built (with --no-app: once the board is)."""
    memory = TreeMemory()
    t0 = time.perf_counter()
    build_board = _board_builder()
    deferred = _deferred_groups()
    # as the command does: the app's modules loaded while the scan's workers read (a checkout that has it)
    load_app = getattr(importlib.import_module("biobench.commands.leaderboard"), "load_app", None) if app else None
    board = build_board([results], n_boot=n_boot, cache_dir=cache_dir,
                        significance="deferred" if deferred else "background",
                        **({} if load_app is None else {"meanwhile": load_app}))
    t1 = time.perf_counter()
    if app:
        # lazy: loads gradio, pandas
        from biobench.leaderboard.app import build_app

        build_app(board)  # starts a deferred board's groups
    elif deferred:
        board.significance.start()
    t2 = time.perf_counter()
    done = board.significance.wait(None if timeout is None else max(0.0, timeout - (t2 - t0)))
    t3 = time.perf_counter()
    return {"board_s": round(t1 - t0, 3), "app_s": round(t2 - t1, 3), "total_s": round(t2 - t0, 3),
            "groups_s": round(t3 - t0, 3) if done else None, "groups": len(board.groups),
            "tasks_done": board.significance.done, "peak_mb": _peak_mb(), "tree_peak_mb": memory.stop(),
            "entries": sum(e.source == "measured" for e in board.entries), "problems": len(board.problems)}


def refresh_after_adding(results: str, cache_dir: str, n_boot: int, app: bool, timeout: float | None,
                         grow: dict[str, Any]) -> dict[str, Any]:
    """The Refresh of a running leaderboard after one model was added (what the app's Refresh button and a
    Space's periodic rescan do: `build_board` again, in a process that has served for a while). Untimed: the
    start (board and app, warm) and writing the new model's results (`generate(**grow)`); timed: the rebuild
    (board_s, "served" = the tables of the new board) and its groups."""
    build_board = _board_builder()

    memory = TreeMemory()
    board = build_board([results], n_boot=n_boot, cache_dir=cache_dir, significance="background")
    if app:
        # lazy: loads gradio, pandas
        from biobench.leaderboard.app import build_app

        build_app(board)
    board.significance.wait(timeout)
    generate(Path(results), **grow)
    t0 = time.perf_counter()
    board = build_board([results], n_boot=n_boot, cache_dir=cache_dir, significance="background")
    t1 = time.perf_counter()
    done = board.significance.wait(timeout)
    t2 = time.perf_counter()
    return {"board_s": round(t1 - t0, 3), "app_s": 0.0, "total_s": round(t1 - t0, 3),
            "groups_s": round(t2 - t0, 3) if done else None, "groups": len(board.groups),
            "tasks_done": board.significance.done, "peak_mb": _peak_mb(), "tree_peak_mb": memory.stop(),
            "entries": sum(e.source == "measured" for e in board.entries), "problems": len(board.problems)}


def start_up_of(checkout: str, *args: Any, arm: str = "start_up") -> dict[str, Any]:
    """`start_up` (or `refresh_after_adding`, `arm`) with the biobench of another checkout (bench/, tasks/,
    heads/, training/, leaderboard/), in this fresh process: a folder of links laid out as the installed package
    is put first on sys.path and the biobench modules imported so far (this script's) are forgotten, so every
    import below is the checkout's."""
    src = Path(checkout).resolve()
    shadow = Path(tempfile.mkdtemp(prefix="biobench-baseline-")) / "biobench"
    shadow.mkdir()
    for item in (src / "bench").iterdir():
        (shadow / item.name).symlink_to(item)
    for sub in ("tasks", "heads", "training", "leaderboard"):
        if not (shadow / sub).exists():
            (shadow / sub).symlink_to(src / sub)
    for name in [m for m in sys.modules if m == "biobench" or m.startswith("biobench.")]:
        del sys.modules[name]
    sys.path.insert(0, str(shadow.parent))
    out = (refresh_after_adding if arm == "refresh" else start_up)(*args)
    out["code"] = str(Path(str(sys.modules[_board_builder().__module__].__file__)).resolve().parent.parent)
    return out


def gradio_floor() -> dict[str, Any]:
    """What any Gradio app costs in a fresh process on this machine: import gradio, one Blocks with an HTML table."""
    t0 = time.perf_counter()
    import gradio as gr

    t1 = time.perf_counter()
    with gr.Blocks() as demo:
        gr.HTML("<table><tr><td>1</td></tr></table>")
    t2 = time.perf_counter()
    assert demo is not None
    return {"board_s": 0.0, "app_s": round(t2 - t0, 3), "total_s": round(t2 - t0, 3), "import_s": round(t1 - t0, 3)}


def _read_all(folder: Path) -> None:
    """Read every file under `folder` once, so the first arm does not pay the disk for the others."""
    for path in folder.rglob("*"):
        if path.is_file():
            path.read_bytes()


def _seed_groups(cache: Path, baseline_cache: Path) -> None:
    """Copy the groups the cold start computed into the baseline's cache where its own cold start ran out of time
    (same file names and format, `bench/standings/cache.py` VERSION 2; the groups are the same to the last bit,
    tests/test_stats.py), so its warm start is a warm start and not the rest of its cold one."""
    copied = 0
    for path in cache.glob("groups-*.json"):
        if not (baseline_cache / path.name).exists():
            shutil.copyfile(path, baseline_cache / path.name)
            copied += 1
    print(f"warm (baseline): {copied} task groups copied from the cold start's cache (its own ran out of time)",
          flush=True)


def _results_folder(args, tasks: list[tuple[str, str]], results: Path) -> tuple[int, float]:
    """Generate the synthetic results folder (or, with --reuse, keep the one generated there with the same
    sizes): (result files, seconds taken)."""
    marker = results.parent / "generated.json"
    sizes = {"models": args.models, "tasks": [t for _, t in tasks], "seeds": args.seeds, "examples": args.examples,
             "seed": args.seed}
    if args.reuse and marker.is_file():
        try:
            kept = json.loads(marker.read_text())
        except ValueError:
            kept = None
        if isinstance(kept, dict) and kept.get("sizes") == sizes:
            print(f"reusing {kept['files']} result files under {results}", flush=True)
            return kept["files"], 0.0
    remove_inside(results, results.parent)  # main() checked the folder: made here, or by an earlier run
    t0 = time.perf_counter()
    needed = args.models * len(tasks) * args.seeds * (50 * args.examples + 1000)  # about: predictions + result
    with disk_full_guard(results, needed, lambda: "no results were written",
                         cleanup=lambda: remove_inside(results, results.parent)):
        files = generate(results, args.models, tasks, args.seeds, args.examples, args.seed)
    generated_s = time.perf_counter() - t0
    marker.write_text(json.dumps({"sizes": sizes, "files": files}))
    print(f"generated {files} result files ({args.models} models x {len(tasks)} tasks x {args.seeds} seeds, "
          f"{args.examples} test examples) in {generated_s:.1f} s under {results}", flush=True)
    return files, generated_s


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    tasks = benchmark_tasks(args.tasks)
    # --dir: new, or a folder an earlier run made (its generated.json); its results/ and caches are replaced
    root = check_output_folder(args.dir, "--dir", "leaderboard scale benchmark", legacy=lambda folder: (
        folder / "generated.json").is_file()) if args.dir else mark_created(tempfile.mkdtemp(prefix="biobench-scale-"),
                                                                            "leaderboard scale benchmark")
    results, cache = root / "results", root / "cache"
    files, generated_s = _results_folder(args, tasks, results)
    for folder in (cache, root / "cache-baseline"):
        remove_inside(folder, root)
    runs: dict[str, list[dict[str, Any]]] = {}
    warm = ["warm", *(["warm (baseline)"] if args.baseline else []), *([] if args.no_app else ["gradio floor"])]
    rounds = [warm if r % 2 == 0 else [warm[1], warm[0], *warm[2:]] if args.baseline else warm
              for r in range(max(1, args.repeats))]  # the baseline first every other round: load drifts
    arms = ["cold", *(["cold (baseline)"] if args.baseline else [])] + [arm for r in rounds for arm in r]
    _read_all(results)  # "cold" is an empty scan index and groups cache, not a cold OS page cache
    grow = ["+1 model, refresh", *(["+1 model, refresh (baseline)"] if args.baseline else []),
            "+1 model", *(["+1 model (baseline)"] if args.baseline else [])] if args.add_model else []
    added = results / f"synthetic__model-{args.models:03d}"
    for arm in arms + grow:
        refresh = arm.startswith("+1 model, refresh")
        grown = {"models": args.models, "tasks": tasks, "seeds": args.seeds, "examples": args.examples,
                 "seed": args.seed, "only": args.models}
        if refresh:  # the arm adds the model itself, after its untimed start; the next arm starts without it
            remove_inside(added, root)
        elif arm.startswith("+1 model") and not added.exists():  # one more model on the warm board, then a start
            generate(results, args.models, tasks, args.seeds, args.examples, args.seed, only=args.models)
            _read_all(added)
        if arm.startswith("+1 model"):  # on a copy of the warm caches: the next run's warm starts stay warm
            own = root / ("cache-baseline" if arm.endswith("(baseline)") else "cache")
            remove_inside(own.with_name(own.name + "-grown"), root)
            shutil.copytree(own, own.with_name(own.name + "-grown"))
        if arm == "warm (baseline)" and runs["cold (baseline)"][0]["groups_s"] is None and arm not in runs:
            _seed_groups(cache, root / "cache-baseline")
        timeout = args.groups_timeout
        start = (results, cache, args.n_boot, not args.no_app, timeout)
        if arm == "gradio floor":
            out = run_isolated(gradio_floor, arm_name=arm)
        elif refresh and arm.endswith("(baseline)"):
            out = run_isolated(start_up_of, str(args.baseline), results, str(root / "cache-baseline-grown"),
                               *start[2:], grown, arm="refresh", arm_name=arm)
        elif refresh:
            out = run_isolated(refresh_after_adding, str(results), str(root / "cache-grown"), *start[2:], grown,
                               arm_name=arm)
        elif arm.endswith("(baseline)"):
            baseline_cache = root / ("cache-baseline-grown" if arm.startswith("+1") else "cache-baseline")
            out = run_isolated(start_up_of, str(args.baseline), results, str(baseline_cache), *start[2:],
                               arm_name=arm)
        else:
            own_cache = root / "cache-grown" if arm.startswith("+1") else cache
            out = run_isolated(start_up, str(results), str(own_cache), *start[2:], arm_name=arm)
        runs.setdefault(arm, []).append(out)
        groups = out.get("groups_s", "floor")
        print(f"{arm}: served in {out['total_s']:.2f} s, groups "
              + ("-" if groups == "floor" else f"in {groups:.2f} s" if groups is not None
                 else f"not done in {args.groups_timeout:g} s ({out['tasks_done']}/{len(tasks)} tasks)")
              + (f", peak {out['peak_mb']:.0f} MiB (with the worker {out['tree_peak_mb']:.0f})" if "peak_mb" in out else "")
              + f", load {' '.join(f'{x:.2f}' for x in os.getloadavg())} {arm_flag(out)}".rstrip(), flush=True)
    remove_inside(added, root)  # the folder stays the one --reuse expects
    for grown_cache in ("cache-grown", "cache-baseline-grown"):
        remove_inside(root / grown_cache, root)
    rows = []
    for arm, outs in runs.items():  # the median run of each arm (by served time)
        out = sorted(outs, key=lambda o: o["total_s"])[len(outs) // 2]
        groups_s = out.get("groups_s", out["total_s"])
        rows.append({"arm": arm, "groups": 0, "peak_mb": None, "tree_peak_mb": None, **out, "groups_s": groups_s, "runs": len(outs),
                     "served_s_all": [o["total_s"] for o in outs],
                     # CPU of the start and its workers (this process's and its children's): what a loaded machine
                     # distorts far less than wall time
                     "cpu_s": (out.get("cpu") or {}).get("own_cpu_s"),
                     "disturbed": f"{sum(bool(o['cpu']['disturbed']) for o in outs)}/{len(outs)}",
                     "per_file_ms": None if groups_s is None else round(1000 * groups_s / files, 3)})
    print_table(rows, [("arm", "start", "s"), ("board_s", "board s", ".2f"), ("app_s", "app s", ".2f"),
                       ("total_s", "served s", ".2f"), ("groups_s", "groups s", ".2f"), ("cpu_s", "CPU s", ".1f"),
                       ("per_file_ms", "groups ms/file", ".2f"), ("groups", "tasks", "d"),
                       ("peak_mb", "peak MiB", ".0f"), ("tree_peak_mb", "+worker MiB", ".0f"), ("runs", "runs", "d"),
                       ("disturbed", "disturbed", "")])
    report = {"config": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}, "files": files,
              "generated_s": round(generated_s, 1), "arms": rows,
              "environment": {"created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                              "python": platform.python_version(), "cpu_count": os.cpu_count(),
                              "loadavg": [round(x, 2) for x in os.getloadavg()], "argv": sys.argv}}
    if args.dir is None:
        remove_owned(root)
    served = {row["arm"]: row["total_s"] for row in rows}
    cold, warm = served["cold"], served["warm"]
    return finish(report, args.out, cold / warm if warm else None)


if __name__ == "__main__":
    raise SystemExit(script(main))
