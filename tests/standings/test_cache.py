"""The significance cache: the same groups and problems as computing them, a warm start reads every task from
disk, a changed predictions file invalidates only its task, a corrupt cache file is recomputed; the scale
script's synthetic folder makes a working board."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
from biobench.standings import process_pool
from biobench.standings.aggregate import build_board
from biobench.standings.cache import cached_groups
from biobench.standings.significance import compute_groups

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def test_cache_gives_the_computed_groups_and_invalidates_one_task(tmp_path):
    results, cache = tmp_path / "results", tmp_path / "cache"
    shutil.copytree(FIXTURES, results)
    fresh = build_board([results], significance=False)
    compute_groups(fresh, n_boot=200)
    assert fresh.groups and any("predictions" in p.path for p in fresh.problems)

    lines: list[str] = []
    cold = build_board([results], n_boot=200, cache_dir=cache, log=lines.append)
    assert cold.groups == fresh.groups and cold.problems == fresh.problems
    assert lines[-1].startswith("significance groups: 9 tasks (0 from the cache, 9 computed)")
    warm_board = build_board([results], significance=False)
    warm = cached_groups(warm_board, n_boot=200, cache_dir=cache)
    assert warm == {"tasks": 9, "cached": 9, "computed": 0}
    assert warm_board.groups == fresh.groups and warm_board.problems == fresh.problems  # problems replayed
    assert warm_board.ranks == cold.ranks == fresh.ranks

    other = build_board([results], significance=False)
    assert cached_groups(other, n_boot=100, cache_dir=cache)["computed"] == 9  # other bootstrap settings

    pred = results / "local__tiny-mlm" / "diamed" / "seed-42.predictions.jsonl"
    pred.write_text(pred.read_text())
    os.utime(pred, ns=(pred.stat().st_atime_ns, pred.stat().st_mtime_ns + 10**9))
    changed = build_board([results], significance=False)
    assert cached_groups(changed, n_boot=200, cache_dir=cache) == {"tasks": 9, "cached": 8, "computed": 1}

    for path in cache.rglob("*"):  # the groups, their replicates, the runs' facts and the models' scores
        if path.is_file():
            path.write_bytes(b"\x80 truncated")
    broken = build_board([results], significance=False)
    assert cached_groups(broken, n_boot=200, cache_dir=cache)["computed"] == 9 and broken.groups == fresh.groups
    assert broken.ranks == fresh.ranks and fresh.ranks


def test_scale_script_folder_builds_a_board(tmp_path):
    from biobench.perf import leaderboard_scale as scale

    args = scale.parse_args(["--quick"])
    assert (args.models, args.tasks, args.seeds, args.examples) == (10, 4, 3, 100)
    tasks = scale.benchmark_tasks(3)
    assert [lang for lang, _ in tasks] == ["fr"] * 3
    assert scale.generate(tmp_path / "r", 3, tasks, 2, 40) == 18
    out = scale.start_up(str(tmp_path / "r"), str(tmp_path / "c"), 50, app=False)
    assert (out["entries"], out["groups"], out["problems"]) == (3, 3, 0)
    board = build_board([tmp_path / "r"], significance=False)
    means = [board.entry(f"synthetic__model-{m:03d}", "fr").cells[tasks[0][1]].mean for m in range(3)]
    assert means[0] > means[1] > means[2]  # error rates 10%, 30%, 50%


def test_scan_index_gives_the_same_board_and_rereads_only_a_changed_file(tmp_path, monkeypatch):
    from biobench.leaderboard.tables.html import render_html
    from biobench.standings import scan as R

    results, cache = tmp_path / "results", tmp_path / "cache"
    shutil.copytree(FIXTURES, results)
    fresh = build_board([results], significance=False)
    cold = build_board([results], significance=False, cache_dir=cache)
    (index_file,) = cache.glob("results-*.arrow")
    assert index_file.read_bytes().startswith(b"biobench-results-index 7 ")  # Arrow behind a checksum, not a pickle
    reads: list[Path] = []
    real = R.read_row
    monkeypatch.setattr(R, "read_row", lambda path: reads.append(path) or real(path))
    warm = build_board([results], significance=False, cache_dir=cache)
    invalid = sorted({Path(p.path) for p in fresh.problems if Path(p.path).name.startswith("seed-")})
    assert invalid and sorted(reads) == invalid  # all came from the index but the files that are not valid results
    unparsable = invalid
    for lang in ("fr", "en"):
        assert render_html(fresh, lang) == render_html(cold, lang) == render_html(warm, lang)
    assert warm.problems == fresh.problems and warm.analyses == fresh.analyses

    seed_file = next(p for p in sorted(results.rglob("seed-*.json")) if p.stat().st_size > 0 and '"macro_f1": 0.' in p.read_text())
    text = seed_file.read_text()
    old = text.split('"macro_f1": ', 1)[1].split(",", 1)[0].split("\n", 1)[0]
    seed_file.write_text(text.replace(f'"macro_f1": {old}', '"macro_f1": 0.123456', 1))
    os.utime(seed_file, ns=(seed_file.stat().st_atime_ns, seed_file.stat().st_mtime_ns + 10**9))
    reads.clear()
    changed = build_board([results], significance=False, cache_dir=cache)
    assert sorted(reads) == sorted([seed_file, *unparsable])  # only the changed file is read again
    run = next(r for e in changed.entries for runs in e.runs.values() for r in runs if r.path == seed_file)
    assert run.score == 0.123456


def _app_function(app, name: str):
    return next(f.fn for f in app.fns.values() if f.name == name)


def test_background_groups_serve_the_tables_first_then_arrive_identical(tmp_path, monkeypatch):
    """significance="background": the board and the app are ready before any group is computed; the app's poll
    shows the progress, then re-renders the tables with the top-group marks; the groups equal computed ones."""
    import threading

    from biobench.leaderboard.app import build_app
    from biobench.standings import cache

    results = tmp_path / "results"
    shutil.copytree(FIXTURES, results)
    fresh = build_board([results], significance=False)
    compute_groups(fresh, n_boot=200)

    gate, real = threading.Event(), cache._compute
    monkeypatch.setattr(process_pool, "ENABLED", False)  # the patched _compute runs in this process only
    monkeypatch.setattr(cache, "_compute", lambda *a: (gate.wait(60), real(*a))[1])
    board = build_board([results], n_boot=200, significance="background", cache_dir=tmp_path / "cache")
    progress = board.significance
    assert board.groups == {} and not progress.finished.is_set()
    app = build_app(board)  # served while nothing is computed yet
    poll = next(d for d in app.fns.values() if d.name == "on_poll")
    by_label = {c.label or c.elem_id: c for c in poll.inputs}  # the controls, by component (gradio passes a dict)
    values = {c: [] for c in poll.inputs} | {by_label["Rows"]: ["measured", "reported"], by_label["Sort by"]: "Avg",
                                             by_label["Size"]: sorted({e.size for e in board.entries}),
                                             by_label["Context"]: sorted({str(e.context) for e in board.entries}),
                                             by_label["Recipe"]: sorted({e.recipe for e in board.entries})}
    by_id = {c.elem_id: c for c in app.blocks.values() if getattr(c, "elem_id", None)}
    french, status = by_id["lb-fr"], by_id["lb-significance"]
    assert 'class="top"' not in _app_function(app, "refresh")(values)[french]  # no marks before the groups
    waiting = poll.fn(values)
    assert waiting == {status: "Significance groups: computing in the background (0/9 tasks); the top-group marks "
                               "appear when they are done."}  # nothing else changes while they are computed

    gate.set()
    assert progress.wait(120)
    done = poll.fn(values)
    assert done[status] == ""  # the cache counts are the server log's, not the visitors'
    assert 'class="top"' in done[french]  # the French table now shades the top group
    assert [o.active for o in done.values() if type(o).__name__ == "Timer"] == [False]  # the polling stops
    assert done[by_id["lb-other-tasks"]].startswith('<div id="lb-other"')
    assert any(isinstance(v, str) and v.startswith("# biobench leaderboard") for v in done.values())
    assert board.groups == fresh.groups and progress.done == progress.total == 9


def test_a_served_board_saves_its_index_and_starts_its_groups_once_its_app_is_built(tmp_path, monkeypatch):
    """significance="deferred" (what `biobench leaderboard` and a Space serve): build_board neither saves the
    results index nor starts the groups (both compete with building the first page for the process's GIL and the
    cores); build_app starts them when the app is built, the index saved first; the same groups, and an index a
    warm start reads every row from."""
    from biobench.leaderboard import app as app_module
    from biobench.standings import cache
    from biobench.store.index import ResultsIndex

    results, cache_dir = tmp_path / "results", tmp_path / "cache"
    shutil.copytree(FIXTURES, results)
    fresh = build_board([results], significance=False)
    compute_groups(fresh, n_boot=200)

    events: list[str] = []
    real_groups, real_save, real_tab = cache.cached_groups, ResultsIndex.save, app_module._problems_tab
    monkeypatch.setattr(process_pool, "ENABLED", False)
    monkeypatch.setattr(cache, "cached_groups", lambda *a, **k: (events.append("groups"), real_groups(*a, **k))[1])
    monkeypatch.setattr(ResultsIndex, "save", lambda self, present, **kw: (events.append("index"),
                                                                          real_save(self, present, **kw))[1])
    monkeypatch.setattr(app_module, "_problems_tab", lambda *a: (events.append("app"), real_tab(*a))[1])

    board = build_board([results], n_boot=200, significance="deferred", cache_dir=cache_dir)
    assert events == [] and not board.significance.started and not list(cache_dir.glob("results-*.arrow"))
    app_module.build_app(board)
    assert board.significance.wait(120) and board.significance.error is None
    assert events == ["app", "index", "groups"]
    assert board.groups == fresh.groups and board.ranks == fresh.ranks
    board.significance.start()  # a second start does nothing
    assert events == ["app", "index", "groups"]

    events.clear()
    warm = build_board([results], n_boot=200, significance="background", cache_dir=cache_dir)
    assert warm.significance.wait(120) and warm.groups == fresh.groups
    assert events == ["index", "groups"]  # "background": saved by build_board, groups at once
    index = ResultsIndex(results, cache_dir)
    assert index.loaded == sum(len(r) for e in warm.entries for r in e.runs.values()) > 0


def test_the_callers_work_runs_while_the_scan_reads_the_result_files(tmp_path, monkeypatch):
    """build_board(meanwhile=...): the caller's work (`biobench leaderboard` loads the app's modules) runs in a
    thread once the folder is walked, while its result files are read (by workers on a cold start, this process
    waiting for them): it has begun before the reading ends, not after the board; the board is the same."""
    import threading

    from biobench.perf import leaderboard_scale as scale
    from biobench.standings import scan

    results = tmp_path / "results"
    scale.generate(results, 2, scale.benchmark_tasks(2), 2, 20)
    plain = build_board([results], significance=False)
    walks: list[object] = []
    began, walked, during = threading.Event(), [], []
    real_read, real_listing = scan._read_in_workers, scan.Listing

    def reading(paths):
        during.append(began.wait(60))  # the caller's work has begun while the files are read
        return real_read(paths)

    monkeypatch.setattr(scan, "PARALLEL_READ_FILES", 1)
    monkeypatch.setattr(scan, "_read_in_workers", reading)
    monkeypatch.setattr(scan, "Listing", lambda root: walks.append(root) or real_listing(root))
    board = build_board([results], significance=False, cache_dir=tmp_path / "cache",
                        meanwhile=lambda: (walked.append(len(walks)), began.set()))
    assert during == [True] and walked == [1]  # after the walk, during the reading, once
    assert _board_digests(board)["tables"] == _board_digests(plain)["tables"]


def test_background_groups_failure_is_a_status_line_not_a_crash(tmp_path, monkeypatch):
    from biobench.standings import cache

    def boom(*_):
        raise RuntimeError("predictions unreadable")

    monkeypatch.setattr(process_pool, "ENABLED", False)  # the patched _compute runs in this process only
    monkeypatch.setattr(cache, "_compute", boom)
    lines: list[str] = []
    board = build_board([FIXTURES], n_boot=50, significance="background", log=lines.append)
    assert board.significance.wait(60)
    assert board.significance.status.startswith("Significance groups failed (RuntimeError: predictions unreadable)")
    assert board.groups == {} and board.entries and "Traceback" in lines[-1]


def test_groups_computed_in_the_worker_process_equal_the_ones_computed_here(tmp_path):
    """The background groups' worker (`python -c`, pickles over its pipes) gives the groups and problems that
    computing in this process gives; a worker that cannot start leaves the work to this process."""

    here, there = build_board([FIXTURES], significance=False), build_board([FIXTURES], significance=False)
    cached_groups(here, n_boot=100)
    assert cached_groups(there, n_boot=100, process=True)["computed"] > 1
    assert there.groups == here.groups and there.problems == here.problems
    broken = build_board([FIXTURES], significance=False)
    real = process_pool._WORKER
    try:
        process_pool._WORKER = "import sys; sys.exit(3)"
        cached_groups(broken, n_boot=100, process=True)
    finally:
        process_pool._WORKER = real
    assert broken.groups == here.groups


def test_groups_from_several_workers_come_back_in_task_order(tmp_path, monkeypatch):
    """Task i goes to worker i mod n; the parent reads them back in task order, so each task gets its own
    groups whatever the number of workers (one per core, at most MAX_WORKERS, never more than the tasks)."""
    from biobench.perf import leaderboard_scale as scale

    scale.generate(tmp_path, 3, scale.benchmark_tasks(5), 2, 30)
    here = build_board([tmp_path], significance=False)
    cached_groups(here, n_boot=100)
    groups = list(here.groups.values())
    assert len(groups) == 5 and all(a != b for i, a in enumerate(groups) for b in groups[i + 1:])  # a mix-up shows
    monkeypatch.setattr(process_pool.os, "cpu_count", lambda: 64)
    assert process_pool.worker_count(2) == 2 and process_pool.worker_count(100) == process_pool.MAX_WORKERS
    monkeypatch.setattr(process_pool, "MAX_WORKERS", 3)
    started = []
    real_popen = process_pool.subprocess.Popen
    monkeypatch.setattr(process_pool.subprocess, "Popen", lambda *a, **k: started.append(a) or real_popen(*a, **k))
    there = build_board([tmp_path], significance=False)
    assert cached_groups(there, n_boot=100, process=True)["computed"] == 5
    assert len(started) == 3 and there.groups == here.groups and there.problems == here.problems
    monkeypatch.setattr(process_pool.os, "cpu_count", lambda: None)
    assert process_pool.worker_count(5) == 1


def _board_digests(board) -> dict[str, str]:
    """sha256 (16 digits) of what a board shows: each language's table as the JSON route serves it, the terminal
    table, the task list, every task's top group with its bootstraps, every rank interval, the problems."""
    import hashlib
    import json

    from biobench.leaderboard.json_routes import leaderboard_json, tasks_json
    from biobench.leaderboard.tables.text import render_text

    tables = json.dumps({lang: leaderboard_json(board, lang) for lang in board.langs}, sort_keys=True, default=str)
    tables += render_text(board) + json.dumps(tasks_json(board), sort_keys=True, default=str)
    groups = repr(sorted((k, g.best, sorted(g.top), sorted((m, tuple(vars(b).values())) for m, b in g.vs_best.items()))
                         for k, g in board.groups.items()))
    ranks = repr(sorted((str(k), sorted((m, r.rank, r.low, r.high) for m, r in v.items())) for k, v in board.ranks.items()))
    problems = repr(sorted((p.path, p.reason) for p in board.public_problems()))
    return {name: hashlib.sha256(text.encode()).hexdigest()[:16]
            for name, text in (("tables", tables), ("groups", groups), ("ranks", ranks), ("problems", problems))}


# What main at 19675f2 (before issue 62 item 7's reading paths; after items 3-4, which changed the tables' column
# order and smoke rows: d4d234c gave tables abe12ea0379c2b86, the other three the same) shows of the board below:
# tables, groups, rank intervals and problems, to the last digit of every number (the bootstrap's float32
# products are exact).
BEFORE_ISSUE_62_ITEM_7 = {"tables": "0b04f6d85295a7b7", "groups": "5d0a83b770d74783", "ranks": "2a70bd8409edc6e6",
                          "problems": "08c94903d1b4ca34"}


def test_a_cold_board_through_workers_shows_what_it_showed_before_the_faster_reading(tmp_path, monkeypatch):
    """A synthetic board (the scale script's: 4 models x the 8 French tasks x 2 seeds, one damaged predictions file)
    built cold with its result files read by workers (as past PARALLEL_READ_FILES) and its groups computed in
    workers: the same tables, groups, rank intervals and problems as the code before the batched JSONL reading,
    the confined open without resolving and the slimmer groups jobs."""
    from biobench.perf import leaderboard_scale as scale
    from biobench.standings import scan

    results = tmp_path / "results"
    scale.generate(results, 4, scale.benchmark_tasks(8), 2, 30)
    damaged = results / "synthetic__model-002" / "diamed" / "seed-43.predictions.jsonl"
    damaged.write_text(damaged.read_text().replace('"gold"', '"gold', 1))
    monkeypatch.setattr(scan, "PARALLEL_READ_FILES", 1)
    monkeypatch.setattr(scan, "READ_CHUNK", 16)
    board = build_board([results], cache_dir=tmp_path / "cache", significance=False)
    assert cached_groups(board, n_boot=200, cache_dir=tmp_path / "cache", process=True)["computed"] == 8
    assert len(board.groups) == 8 and (("fr", None) in board.ranks) and len(board.problems) == 1
    assert _board_digests(board) == BEFORE_ISSUE_62_ITEM_7
    warm = build_board([results], cache_dir=tmp_path / "cache", significance=False)  # the index and the groups
    cached_groups(warm, n_boot=200, cache_dir=tmp_path / "cache")  # cache written cold read back the same board
    assert _board_digests(warm) == BEFORE_ISSUE_62_ITEM_7


def test_a_groups_job_carries_what_the_bootstrap_reads_of_each_run(tmp_path):
    """The parent makes and pickles every missed task's runs for the groups workers while the app is built beside
    it: a job's runs keep their predictions, kind, labels and metric, not their details, model metadata or
    per-label scores, as plain tuples of strings (no Path, Entry or Run object to pickle: issue 62 item 7), and the
    entries the worker rebuilds from them give the same groups and rank intervals."""
    import pickle

    from biobench.perf import leaderboard_scale as scale
    from biobench.standings.cache import _entries_of, _job_entries

    scale.generate(tmp_path, 3, scale.benchmark_tasks(1), 2, 30)
    board = build_board([tmp_path], significance=False)
    task = scale.benchmark_tasks(1)[0][1]
    entries = [e for e in board.entries if e.source == "measured"]
    job = _job_entries(task, entries)
    sent = pickle.dumps(job)
    assert b"pathlib" not in sent and b"Entry" not in sent and b"Run" not in sent and b"IndexRow" not in sent
    slim = _entries_of(task, pickle.loads(sent))
    runs = [r for e in slim for r in e.runs[task]]
    assert len(runs) == 6 and all(r.details == {"protocol": {"metric": "macro_f1"}} for r in runs)
    assert all(not r.model_meta and not r.per_label for r in runs)
    assert [(e.key, e.lang) for e in slim] == [(e.key, e.lang) for e in entries]
    assert [(r.path, r.lang, r.predictions, r.kind, r.labels, r.metric, r.seed, r.model, r.task) for r in runs] == [
        (r.path, r.lang, r.predictions, r.kind, r.labels, r.metric, r.seed, r.model, r.task)
        for e in entries for r in e.runs[task]]
    assert len(sent) < len(pickle.dumps([e.runs[task] for e in entries])) / 2
    compute_groups(board, n_boot=100)
    there = build_board([tmp_path], significance=False)
    cached_groups(there, n_boot=100, process=True)
    assert there.groups == board.groups and there.ranks == board.ranks


def test_a_worker_runs_its_products_in_one_thread_unless_told(monkeypatch):
    """One groups worker per core: each one's BLAS in as many threads as cores made the cores' threads wait on one
    another; a number the user set is kept."""
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    monkeypatch.setenv("MKL_NUM_THREADS", "3")
    env = process_pool.worker_env()
    assert env["OMP_NUM_THREADS"] == env["OPENBLAS_NUM_THREADS"] == "1" and env["MKL_NUM_THREADS"] == "3"


def test_the_examples_digest_is_computed_once_per_distinct_test_set_of_texts(monkeypatch):
    """A task's 2,700 predictions files share their test examples: the digest of (ids, gold) is worked out once per
    distinct pair of text columns; values whose equality is not their JSON's (1, 1.0, True) are digested each."""
    from biobench.standings import significance
    from biobench.store import PredictionColumns

    digests = []
    real = significance.hashlib.sha256
    monkeypatch.setattr(significance.hashlib, "sha256", lambda data: digests.append(data) or real(data))
    monkeypatch.setattr(significance, "_DIGESTS", {})
    rows = [{"id": f"x-{i}", "gold": "ab"[i % 2], "pred": "a"} for i in range(5)]
    first = significance.run_facts(PredictionColumns.of(rows))
    again = significance.run_facts(PredictionColumns.of([{**r, "pred": "b"} for r in rows]))
    assert len(digests) == 1 and first.examples == again.examples and first.labels == ("a", "b")
    other = significance.run_facts(PredictionColumns.of([{**r, "gold": "b"} for r in rows]))
    assert len(digests) == 2 and other.examples != first.examples
    ones = [significance.run_facts(PredictionColumns((1,), (g,), (g,))).examples for g in (1, 1.0, True)]
    assert len(set(ones)) == 3 and len(digests) == 5


def test_the_groups_workers_start_before_their_jobs_are_made(tmp_path, monkeypatch):
    """issue 62 item 7: making every groups job first (the runs of 51,300 results, ~1 s of CPU at 300 models, in
    the parent while the app is built) kept both workers from starting; each job is now made when it is sent,
    after the workers started, and the groups are the same. A job that cannot be made is the caller's error,
    raised in its thread (no worker waits for it)."""
    from biobench.perf import leaderboard_scale as scale
    from biobench.standings import cache

    scale.generate(tmp_path, 3, scale.benchmark_tasks(4), 2, 30)
    here = build_board([tmp_path], significance=False)
    cached_groups(here, n_boot=100)
    monkeypatch.setattr(process_pool.os, "cpu_count", lambda: 2)
    started: list[tuple] = []
    real_popen = process_pool.subprocess.Popen
    monkeypatch.setattr(process_pool.subprocess, "Popen", lambda *a, **k: started.append(a) or real_popen(*a, **k))
    made: list[int] = []
    real_jobs = cache._job_entries
    monkeypatch.setattr(cache, "_job_entries", lambda task, entries: made.append(len(started)) or real_jobs(task, entries))
    there = build_board([tmp_path], significance=False)
    assert cached_groups(there, n_boot=100, process=True)["computed"] == 4
    assert len(made) == 4 and min(made) >= 1  # main: [0, 0, 0, 0], every job made before a worker started
    assert there.groups == here.groups and there.ranks == here.ranks and there.problems == here.problems

    def unmakeable(task, entries):
        raise RuntimeError(f"cannot make the job of {task}")

    monkeypatch.setattr(cache, "_job_entries", unmakeable)
    with pytest.raises(RuntimeError, match="cannot make the job of"):
        cached_groups(build_board([tmp_path], significance=False), n_boot=100, process=True)


def test_a_cache_holding_no_groups_keys_each_task_when_its_groups_come_back(tmp_path, monkeypatch):
    """A cold start (no groups file in the cache folder) has nothing to look up: the tasks' keys (a hash of every
    run) are made as each task's groups come back, not all before the first task is computed (which held the
    workers back by ~1 s at 300 models); the files written are the ones a lookup finds, so a warm start computes
    nothing and gives the same groups."""
    from biobench.standings import cache

    results, cache_dir = tmp_path / "results", tmp_path / "cache"
    shutil.copytree(FIXTURES, results)
    events: list[str] = []
    real_fingerprint, real_compute = cache.fingerprint, cache._compute
    monkeypatch.setattr(cache, "fingerprint", lambda *a, **k: (events.append("key"), real_fingerprint(*a, **k))[1])
    monkeypatch.setattr(cache, "_compute", lambda *a, **k: (events.append("compute"), real_compute(*a, **k))[1])

    cold = build_board([results], significance=False)
    assert cached_groups(cold, n_boot=200, cache_dir=cache_dir) == {"tasks": 9, "cached": 0, "computed": 9}
    assert events[:2] == ["compute", "key"] and events.count("key") == events.count("compute") == 9

    events.clear()
    warm = build_board([results], significance=False)
    assert cached_groups(warm, n_boot=200, cache_dir=cache_dir) == {"tasks": 9, "cached": 9, "computed": 0}
    assert events == ["key"] * 9  # looked up, none computed
    assert warm.groups == cold.groups and warm.ranks == cold.ranks and warm.problems == cold.problems
