"""The results index (bench/store/index.py): what the board reads through it equals what it reads from the files,
on a board with smoke, degenerate and malformed results; a damaged, foreign or altered index is one Problems line
and is rebuilt; a changed, added or removed result file is picked up on its own."""

from __future__ import annotations

import hashlib
import io
import json
import os
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.ipc
import pytest
from biobench import store
from biobench.errors import ResultsError
from biobench.standings import scan as R
from biobench.standings.scan import scan_results
from biobench.store import index as store_index

FIXTURES = Path(__file__).parents[1] / "fixtures" / "results"


def _write(root: Path, model: str, seed: int, f1: float, **extra) -> Path:
    path = store.result_path(root, model, "demo-cls", seed, extra.pop("smoke", None))
    rows = [{"id": str(i), "gold": "ab"[i % 2], "pred": extra.pop("pred", None) or "ab"[(i + seed) % 3 % 2]}
            for i in range(20)]
    data = {"schema": store.SCHEMA, "model": {"id": model, "slug": model, "params": 1000, "lineage": None},
            "task": {"id": "demo-cls", "lang": "fr", "kind": "classification", "labels": ["a", "b"]},
            "seed": seed, "protocol": {"name": "fr", "hash": "p"}, "key": store.run_key("sha256:w", "sha256:d", "p", seed),
            "metrics": {"test": {"macro_f1": f1, "per_label": {"a": {"f1": 0.75}, "b": 0.25}}},
            "timings": {"tokens_per_s": 10.0}, **extra}
    store.write_result(path, store.Result.from_dict(data), rows)
    return path


def _board(tmp_path: Path) -> Path:
    """The fixtures plus a smoke run, a degenerate run, a task without a language and malformed results."""
    root = tmp_path / "results"
    shutil.copytree(FIXTURES, root)
    _write(root, "idx-a", 42, 0.6)
    _write(root, "idx-a", 43, 0.5, smoke="ab" * 32, overrides={"epochs": {"run": 1, "protocol": 15}})
    _write(root, "idx-b", 42, 0.33, pred="a",
           degenerate={"finding": "one class for every example", "reason": "a constant head"})
    bad = root / "idx-c" / "demo-cls"
    bad.mkdir(parents=True)
    (bad / "seed-42.json").write_text('{"schema": "biobench.result/1", "seed": 42')  # truncated
    (bad / "seed-43.json").write_text(json.dumps({"schema": store.SCHEMA, "seed": 43}))  # fields missing
    (bad / "seed-44.json").write_text(json.dumps({**json.loads((root / "idx-a/demo-cls/seed-42.json").read_text()),
                                                  "metrics": {"test": {"macro_f1": 3.0}}}))  # not a fraction
    return root


def _same(a, b) -> None:
    assert a.runs == b.runs and a.problems == b.problems and a.analyses == b.analyses
    # equal dicts could still differ in order (a tooltip lists timings in the file's order)
    assert [(list(r.details), list(r.per_label), list(r.model_meta)) for r in a.runs] == [
        (list(r.details), list(r.per_label), list(r.model_meta)) for r in b.runs]


def test_the_index_reads_what_the_files_say(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    assert any(r.smoke for r in files.runs) and any(r.degenerate for r in files.runs)
    assert any(r.per_label for r in files.runs) and all(r.predictions for r in files.runs if "idx-" in str(r.path))
    assert sum("idx-c" in p.path for p in files.problems) == 3
    cold = scan_results([root], cache_dir=cache)
    (index,) = cache.glob("results-*.arrow")
    warm = scan_results([root], cache_dir=cache)
    _same(files, cold)
    _same(files, warm)
    body = index.read_bytes().partition(b"\n")[2]
    table = pyarrow.ipc.open_stream(pa.py_buffer(body)).read_all()
    scores = dict(zip(table.column("rel").to_pylist(), table.column("score").to_pylist(), strict=True))
    assert scores[os.path.join("idx-a", "demo-cls", "seed-42.json")] == 0.6  # typed columns: a float score
    assert table.schema.field("seed").type == pa.int64() and pa.types.is_dictionary(table.schema.field("model").type)
    assert not any("idx-c" in rel for rel in scores)  # an invalid file has no row: it is read and reported each start


def _rewrite(index: Path, change) -> None:
    """The index with `change(columns)` applied to its rows, re-encoded with a valid checksum: an index whose
    bytes are intact but whose content was altered (a hostile cache folder)."""
    body = index.read_bytes().partition(b"\n")[2]
    table = pyarrow.ipc.open_stream(pa.py_buffer(body)).read_all()
    columns = {name: table.column(name).to_pylist() for name in table.schema.names}
    change(columns)
    arrays = [pa.array(columns[f.name], type=f.type.value_type).dictionary_encode() if pa.types.is_dictionary(f.type)
              else pa.array(columns[f.name], type=f.type) for f in table.schema]
    sink = io.BytesIO()
    with pyarrow.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(pa.Table.from_arrays(arrays, schema=table.schema))
    body = sink.getvalue()
    head = b" ".join([store_index.MAGIC, str(store_index.VERSION).encode(), hashlib.sha256(body).hexdigest().encode()])
    index.write_bytes(head + b"\n" + body)


def _set(column: str, value, row: int = 0):
    def change(columns):
        columns[column][row] = value
    return change


@pytest.mark.parametrize("hostile", [
    _set("score", float("nan")), _set("score", 9.6), _set("seed", None), _set("task", "../../etc"),
    _set("predictions", "../secret.jsonl"), _set("lang", "<script>"), _set("details", "[1, 2]"),
    _set("details", '{"timings": {"train_s": NaN}}'), _set("model_meta", "{" * 100_000), _set("rel", None),
    _set("per_label", '{"a": "x"}'), _set("size", -1),
    lambda columns: columns["rel"].__setitem__(1, columns["rel"][0]),  # one file listed twice
])
def test_a_hostile_index_is_one_problem_and_rebuilt(tmp_path, hostile):
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    scan_results([root], cache_dir=cache)
    (index,) = cache.glob("results-*.arrow")
    good = index.read_bytes()
    _rewrite(index, hostile)
    assert index.read_bytes() != good
    scan = scan_results([root], cache_dir=cache)
    assert scan.runs == files.runs
    extra = [p for p in scan.problems if p not in files.problems]
    assert len(extra) == 1 and extra[0].path == str(index) and extra[0].reason.endswith(
        "ignored and rebuilt from the result files") and "results index unreadable or altered" in extra[0].reason
    assert index.read_bytes() == good  # rewritten from the files
    _same(files, scan_results([root], cache_dir=cache))


def test_a_damaged_or_foreign_index_is_one_problem_and_rebuilt(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    scan_results([root], cache_dir=cache)
    (index,) = cache.glob("results-*.arrow")
    good = index.read_bytes()
    flipped = good.replace(b"tokens_per_s", b"tokens_per_x", 1)  # valid Arrow, but not the bytes written
    for wrong, why in ((b"", "no index header"), (b"\0" * 100, "no index header"), (good[:-40], "checksum"),
                       (flipped, "checksum"), (good.replace(good.partition(b"\n")[2][:8], b"\xff" * 8), "checksum")):
        assert wrong != good
        index.write_bytes(wrong)
        scan = scan_results([root], cache_dir=cache)
        assert scan.runs == files.runs
        extra = [p for p in scan.problems if p not in files.problems]
        assert len(extra) == 1 and extra[0].path == str(index) and why in extra[0].reason
        assert index.read_bytes() == good
    older = f"index {store_index.VERSION - 1} ".encode()  # another version: an upgrade, a quiet miss
    index.write_bytes(good.replace(f"index {store_index.VERSION} ".encode(), older, 1))
    scan = scan_results([root], cache_dir=cache)
    assert scan.problems == files.problems and index.read_bytes() == good


def test_a_changed_added_or_removed_file_is_picked_up_on_its_own(tmp_path, monkeypatch):
    root, cache = _board(tmp_path), tmp_path / "cache"
    scan_results([root], cache_dir=cache)
    reads: list[Path] = []
    real = R.read_row
    monkeypatch.setattr(R, "read_row", lambda path: reads.append(path) or real(path))
    scan_results([root], cache_dir=cache)
    always = sorted(reads)  # files that are not valid results are read at every start (their Problem is fresh)
    invalid = {Path(p.path) for p in scan_results([root]).problems}
    assert len([p for p in always if "idx-c" in str(p)]) == 3 and set(always) <= invalid
    changed = root / "idx-a" / "demo-cls" / "seed-42.json"
    changed.write_text(changed.read_text().replace('"macro_f1": 0.6', '"macro_f1": 0.7'))
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    added = _write(root, "idx-d", 42, 0.4)
    removed = root / "idx-b" / "demo-cls" / "seed-42.json"
    removed.unlink()
    reads.clear()
    scan = scan_results([root], cache_dir=cache)
    assert sorted(reads) == sorted([*always, changed, added])
    _same(scan, scan_results([root]))
    assert {r.path: r.score for r in scan.runs}[changed] == 0.7 and removed not in {r.path for r in scan.runs}
    reads.clear()
    _same(scan_results([root], cache_dir=cache), scan)
    assert sorted(reads) == always


def test_a_predictions_file_removed_after_indexing_is_seen(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    scan_results([root], cache_dir=cache)
    store.predictions_path(root / "idx-a" / "demo-cls" / "seed-42.json").unlink()
    scan = scan_results([root], cache_dir=cache)
    _same(scan, scan_results([root]))
    assert {str(r.path): r.predictions for r in scan.runs}[str(root / "idx-a" / "demo-cls" / "seed-42.json")] is None


def test_a_cache_folder_that_cannot_be_written_costs_only_speed(tmp_path):
    root, blocker = _board(tmp_path), tmp_path / "a-file"
    blocker.write_text("not a folder")
    cache = blocker / "cache"  # every write under it fails (NotADirectoryError), even for root
    _same(scan_results([root], cache_dir=cache), scan_results([root]))
    assert not cache.exists()


def test_the_walk_lists_files_in_the_order_of_their_path_parts(tmp_path):
    """Listing sorts each folder's entries instead of all paths at the end: the same order, tricky names included
    (a folder 'a' sorts before 'a-b' and 'a.json', its files come as one block), links to folders not followed."""
    root = tmp_path / "r"
    for rel in ("a/seed-1.json", "a/b/seed-2.json", "a-b/seed-3.json", "a.json", "ab/x/train_log.jsonl",
                "a/b.json", "Z/seed-4.json", "a/b/c/d/seed-5.json", "a/seed-10.json", "a/seed-9.json"):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text("{}")
    (root / "link").symlink_to(root / "a", target_is_directory=True)
    (root / "dangling.json").symlink_to(root / "missing.json")
    expected = sorted((str(p) for p in root.rglob("*") if p.name.endswith(".json") or p.name == "train_log.jsonl"
                       if not str(p).startswith(str(root / "link") + os.sep)), key=lambda p: p.split(os.sep))
    listing = R.Listing(root)
    assert listing.wanted() == expected and str(root / "link") not in listing.files
    assert listing.stamp(root / "a.json") == (2, (root / "a.json").stat().st_mtime_ns)
    assert listing.stamp(root / "dangling.json") is None and listing.has(root / "dangling.json")


def test_the_json_scan_index_it_replaces_is_removed(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    cache.mkdir()
    digest = hashlib.sha256(str(root.resolve()).encode()).hexdigest()[:16]
    old, other = cache / f"scan-{digest}.json", cache / "scan-0123456789abcdef.json"  # another folder's: kept
    old.write_text('{"v": 2, "files": {}}')
    other.write_text('{"v": 2, "files": {}}')
    _same(scan_results([root], cache_dir=cache), scan_results([root]))
    assert not old.exists() and other.exists() and len(list(cache.glob("results-*.arrow"))) == 1


def test_a_folder_nested_past_the_recursion_limit_is_walked(tmp_path):
    import sys

    root = tmp_path / "r"
    deep = root.joinpath(*["d"] * 40)
    deep.mkdir(parents=True)
    (deep / "seed-1.json").write_text("{}")
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(30 + len(__import__("inspect").stack()))  # fewer frames than the folder is deep
    try:
        listing = R.Listing(root)
    finally:
        sys.setrecursionlimit(limit)
    assert listing.wanted() == [str(deep / "seed-1.json")]


def test_a_large_cold_scan_read_in_worker_processes_equals_one_read_here(tmp_path, monkeypatch):
    """Past PARALLEL_READ_FILES unread results, the scan reads them in `python -c` workers by chunks: the same
    runs, the same Problems lines (the reader's messages), the same index; a worker that fails leaves its
    chunks to this process."""
    from biobench.standings import process_pool

    root = _board(tmp_path)
    here = scan_results([root])
    monkeypatch.setattr(R, "PARALLEL_READ_FILES", 1)
    monkeypatch.setattr(R, "READ_CHUNK", 3)
    started = []
    real_popen = process_pool.subprocess.Popen
    monkeypatch.setattr(process_pool.subprocess, "Popen", lambda *a, **k: started.append(a) or real_popen(*a, **k))
    monkeypatch.setattr(process_pool.os, "cpu_count", lambda: 2)
    there = scan_results([root], cache_dir=tmp_path / "cache")
    assert len(started) == 2
    _same(here, there)
    assert any("idx-c" in p.path and "not a fraction" in p.reason for p in there.problems)
    _same(here, scan_results([root], cache_dir=tmp_path / "cache"))  # the index written from the workers' rows
    monkeypatch.setattr(process_pool, "_WORKER", "import sys; sys.exit(3)")
    _same(here, scan_results([root], cache_dir=tmp_path / "other-cache"))


def _opened_results(monkeypatch, root: Path) -> list[str]:
    """Every result file (`seed-<n>.json`) of `root` opened from now on, by any reader."""
    opened: list[str] = []
    real_open = os.open

    def counting(path, *args, **kwargs):
        text = os.fspath(path)
        if text.endswith(".json") and "seed-" in text and text.startswith(str(root)):
            opened.append(text)
        return real_open(path, *args, **kwargs)

    monkeypatch.setattr(os, "open", counting)
    return opened


def test_a_warm_start_opens_no_result_file_whose_stamp_holds(tmp_path, monkeypatch):
    """Issue 62 item 7: the index's stamp is (size, mtime_ns, inode, ctime_ns) and its rows record the digest their
    seal was made from, so a warm start opens only the files that are not valid results (version 6 opened every
    one to check its seal). A file rewritten with its size and mtime put back has another ctime: read again. A
    row forged with the project's encoder still fails its seal, without reading its file to find out."""
    monkeypatch.setattr(store_index, "RACY_NS", 0)  # files written just now are not racy in this test
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    invalid = sorted({p.path for p in files.problems if store.SEED_FILE.fullmatch(os.path.basename(p.path))})
    assert sum("idx-c" in p for p in invalid) == 3 and len(invalid) < len(files.runs)
    scan_results([root], cache_dir=cache)
    opened = _opened_results(monkeypatch, root)
    _same(files, scan_results([root], cache_dir=cache))
    assert sorted(opened) == invalid  # on version 6: every result file, 3 + the valid ones
    changed = root / "idx-a" / "demo-cls" / "seed-42.json"
    before = changed.stat()
    changed.write_text(changed.read_text().replace('"macro_f1": 0.6', '"macro_f1": 0.7'))
    os.utime(changed, ns=(before.st_atime_ns, before.st_mtime_ns))  # size and mtime as they were
    assert (changed.stat().st_size, changed.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    opened.clear()
    scan = scan_results([root], cache_dir=cache)
    assert sorted(opened) == sorted([*invalid, str(changed)])
    assert {r.path: r.score for r in scan.runs}[changed] == 0.7
    index = store_index.ResultsIndex(root, cache)  # forged: every row's score 0.999, the encoder's own checksum
    for rel, kept in list(index._rows.items()):
        index._rows[rel] = (*kept[:2], kept[2]._replace(score=0.999), *kept[3:])  # type: ignore[assignment]
    index.changed = True
    index.save(set(index._rows))
    opened.clear()
    forged = scan_results([root], cache_dir=cache)
    assert 0.999 not in {r.score for r in forged.runs} and len(opened) == len(index._rows) + len(invalid)
    assert any("do not match their result files" in p.reason for p in forged.problems)


def test_a_racy_file_is_checked_by_its_bytes(tmp_path, monkeypatch):
    """A file changed within RACY_NS of the index's writing may have been rewritten in the clock tick of its read
    (same size, same stamp): its bytes are read and compared with the row's digest, and other bytes under the
    same stamp are read again as a changed file is."""
    root, cache = _board(tmp_path), tmp_path / "cache"
    scan_results([root], cache_dir=cache)
    changed = root / "idx-a" / "demo-cls" / "seed-42.json"
    old = R.Listing.index_stamp
    stamps = {str(p): old(R.Listing(root), str(p)) for p in root.rglob("seed-*.json")}
    changed.write_text(changed.read_text().replace('"macro_f1": 0.6', '"macro_f1": 0.7'))
    monkeypatch.setattr(R.Listing, "index_stamp", lambda self, path: stamps.get(path))  # the stamps as they were
    scan = scan_results([root], cache_dir=cache)
    assert {r.path: r.score for r in scan.runs}[changed] == 0.7
    index = store_index.ResultsIndex(root, cache)
    assert index.row(os.path.relpath(changed, root), stamps[str(changed)], changed) is not None
    assert index.racy_reads == 1
    monkeypatch.setattr(store_index, "RACY_NS", 0)
    index = store_index.ResultsIndex(root, cache)
    index.row(os.path.relpath(changed, root), stamps[str(changed)], changed)
    assert index.racy_reads == 0  # older than RACY_NS: the stamp stands for the bytes


def _python_calls(work, counted=lambda frame: True) -> int:
    """How many Python function calls (whose frame `counted` accepts) `work()` makes, by the interpreter's profile
    hook."""
    import sys

    calls = [0]

    def hook(frame, event, _arg):
        if event == "call" and counted(frame):
            calls[0] += 1

    sys.setprofile(hook)
    try:
        work()
    finally:
        sys.setprofile(None)
    return calls[0]


def test_a_workers_chunk_parses_one_path_per_folder(tmp_path):
    """`read_rows` (a cold scan worker's job) makes each file's Path a child of its folder's, parsed once per folder,
    and the store's reader keeps the Path it is given: both parsed every path (12% of a worker's CPU at 300
    models, docs/performance.md). The rows and the refusals are the same as one file at a time."""
    import pathlib

    root = tmp_path / "results"
    paths = [str(_write(root, "idx-a", seed, 0.5)) for seed in range(42, 51)]  # one folder
    (root / "idx-a" / "demo-cls" / "seed-51.json").write_text("{")
    paths += [str(root / "idx-a" / "demo-cls" / "seed-51.json"), str(tmp_path / "gone" / "seed-1.json")]
    rows: list = []
    readers = (R.__file__, store.result_files.__file__)  # the scan's and the store's reading (not display names)
    made = _python_calls(lambda: rows.extend(R.read_rows(paths)), lambda frame: (
        frame.f_code.co_name == "__new__" and frame.f_code.co_filename == pathlib.__file__
        and frame.f_back.f_code.co_filename in readers))
    assert made == 2  # the two folders' Paths, not two per file (22 before)
    one_by_one = []
    for path in paths:
        try:
            one_by_one.append(R.read_row(Path(path)))
        except ResultsError as err:
            one_by_one.append(str(err))
    assert rows == one_by_one and isinstance(rows[0], store_index.SealedRow) and "seed-51.json" in rows[-2]


def test_sealing_a_row_makes_no_call_per_value(tmp_path):
    """A cold scan's workers seal each row they read (`sealed_row`): the digests of its values are made in one
    loop, not two calls per value (a quarter of the sealing); the seal is the one the index checks its rows by."""
    row = R.read_row(_write(tmp_path, "idx-a", 42, 0.5)).row
    calls = _python_calls(lambda: store_index._row_values(row))
    assert calls < 2 * len(row)  # the loop and json.dumps of the 4 JSON columns (14); 2 calls per value: 58
    expected = b"".join(store_index._value_digest(store_index._text(item, column))
                        for column, item in zip(store_index.IndexRow._fields, row, strict=True))
    assert store_index._row_values(row) == expected


def test_an_index_saved_after_its_scan_is_dated_to_the_scan(tmp_path, monkeypatch):
    """scan_results(save_index=False) leaves the save to its caller (a served board saves once its app is built):
    nothing is written by the scan; the index written later is dated to the scan's end, which is what the racy rule
    measures a file's change against (a file rewritten in the tick it was read in stays racy however long the app
    took), and a warm start reads from it what a saved-at-once index gives."""
    from types import SimpleNamespace

    root, cache = _board(tmp_path), tmp_path / "cache"
    scanned = os.stat(root).st_mtime_ns - 60 * 10**9  # a scan that ended a minute before its index was saved
    monkeypatch.setattr(R, "time", SimpleNamespace(time_ns=lambda: scanned))
    cold = scan_results([root], cache_dir=cache, save_index=False)
    assert not list(cache.glob("results-*.arrow")) and len(cold.saves) == 1
    cold.saves[0]()
    [written] = cache.glob("results-*.arrow")
    assert written.stat().st_mtime_ns == scanned
    warm = scan_results([root], cache_dir=cache)
    _same(cold, warm)
    index = store_index.ResultsIndex(root, cache)
    assert index.loaded == len(warm.runs) and scan_results([root], cache_dir=cache).runs == warm.runs
