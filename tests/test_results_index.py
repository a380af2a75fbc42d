"""The results index (bench/store/index.py): what the board reads through it equals what it reads from the files,
a damaged or altered index is one Problems line and is rebuilt, and a changed, added or removed result file is
picked up on its own."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

from biobench import store
from biobench.board.scan import scan_results
from biobench.store import index as store_index

FIXTURES = Path(__file__).parent / "fixtures" / "results"


def _write(root: Path, model: str, seed: int, f1: float, **extra) -> Path:
    path = store.result_path(root, model, "demo-cls", seed, extra.pop("smoke", None))
    rows = [{"id": str(i), "gold": "ab"[i % 2], "pred": extra.pop("pred", None) or "ab"[(i + seed) % 3 % 2]}
            for i in range(20)]
    data = {"schema": store.SCHEMA, "model": {"id": model, "slug": model, "params": 1000, "lineage": None},
            "task": {"id": "demo-cls", "lang": "fr", "kind": "classification", "labels": ["a", "b"]},
            "seed": seed, "protocol": {"name": "fr", "hash": "p"}, "key": store.run_key("sha256:w", "sha256:d", "p", seed),
            "metrics": {"test": {"macro_f1": f1}}, "timings": {"tokens_per_s": 10.0}, **extra}
    store.write_result(path, store.Result.from_dict(data), rows)
    return path


def _board(tmp_path: Path) -> Path:
    """The fixtures plus a smoke run, a degenerate run and malformed results."""
    root = tmp_path / "results"
    shutil.copytree(FIXTURES, root)
    _write(root, "idx-a", 42, 0.6)
    _write(root, "idx-a", 43, 0.5, smoke="ab" * 32, overrides={"epochs": 1})
    _write(root, "idx-b", 42, 0.33, pred="a", degenerate={"finding": "one class for every example", "reason": "a constant head"})
    bad = root / "idx-c" / "demo-cls"
    bad.mkdir(parents=True)
    (bad / "seed-42.json").write_text('{"schema": "biobench.result/1", "seed": 42')  # truncated
    (bad / "seed-43.json").write_text(json.dumps({"schema": store.SCHEMA, "seed": 43}))  # fields missing
    (bad / "seed-44.json").write_text(json.dumps({**json.loads((root / "idx-a/demo-cls/seed-42.json").read_text()),
                                                  "metrics": {"test": {"macro_f1": 3.0}}}))  # not a fraction
    return root


def _same(a, b) -> None:
    assert a.runs == b.runs and a.problems == b.problems and a.analyses == b.analyses


def test_the_index_reads_what_the_files_say(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    assert any(r.smoke for r in files.runs) and any(r.degenerate for r in files.runs)
    assert sum("idx-c" in p.path for p in files.problems) == 3
    cold = scan_results([root], cache_dir=cache)
    (index,) = cache.glob("scan-*.arrow")
    warm = scan_results([root], cache_dir=cache)
    _same(files, cold)
    _same(files, warm)
    import pyarrow as pa

    table = pa.ipc.open_file(pa.py_buffer(index.read_bytes())).read_all()
    scores = dict(zip(table.column("rel").to_pylist(), table.column("score").to_pylist(), strict=True))
    assert scores[os.path.join("idx-a", "demo-cls", "seed-42.json")] == 0.6  # the score column


def test_the_json_fallback_without_pyarrow_reads_the_same(tmp_path, monkeypatch):
    monkeypatch.setattr(store_index, "_arrow", lambda: None)
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    cold = scan_results([root], cache_dir=cache)
    (index,) = cache.glob("scan-*.json")
    _same(files, cold)
    _same(files, scan_results([root], cache_dir=cache))
    index.write_text('{"v": 3, "rows": [[1, 2]]}')
    damaged = scan_results([root], cache_dir=cache)
    assert damaged.runs == files.runs and damaged.problems == [*files.problems, damaged.problems[-1]]
    assert damaged.problems[-1].path == str(index)


def test_a_damaged_or_altered_index_is_one_problem_and_rebuilt(tmp_path):
    root, cache = _board(tmp_path), tmp_path / "cache"
    files = scan_results([root])
    scan_results([root], cache_dir=cache)
    (index,) = cache.glob("scan-*.arrow")
    good = index.read_bytes()
    flipped = good.replace(b'"tokens_per_s"', b'"tokens_per_x"', 1)  # valid Arrow, a row that is not as written
    altered = good.replace(b'"macro_f1": 0.6', b'"macro_f1": 9.6')  # refused by the store's validation
    for wrong in (b"", b"\0" * 100, good[:-40], flipped, altered):
        assert wrong != good
        index.write_bytes(wrong)
        scan = scan_results([root], cache_dir=cache)
        assert scan.runs == files.runs
        extra = [p for p in scan.problems if p not in files.problems]
        assert len(extra) == 1 and extra[0].path == str(index) and "rebuilt" in extra[0].reason
        assert index.read_bytes() == good  # rewritten from the files
        _same(files, scan_results([root], cache_dir=cache))


def test_a_changed_added_or_removed_file_is_picked_up_on_its_own(tmp_path, monkeypatch):
    root, cache = _board(tmp_path), tmp_path / "cache"
    scan_results([root], cache_dir=cache)
    reads: list[Path] = []
    real = store_index.board_fields
    monkeypatch.setattr(store_index, "board_fields", lambda path: reads.append(path) or real(path))
    scan_results([root], cache_dir=cache)
    always = sorted(reads)  # files that are not valid results are read at every start (their Problem is fresh)
    assert always and all("idx-a" not in str(p) for p in always)
    changed = root / "idx-a" / "demo-cls" / "seed-42.json"
    changed.write_text(changed.read_text().replace('"macro_f1": 0.6', '"macro_f1": 0.7'))
    os.utime(changed, ns=(changed.stat().st_atime_ns, changed.stat().st_mtime_ns + 10**9))
    added = _write(root, "idx-d", 42, 0.4)
    removed = root / "idx-b" / "demo-cls" / "seed-42.json"
    removed.unlink()
    reads.clear()
    scan = scan_results([root], cache_dir=cache)
    assert sorted(reads) == sorted([*(p for p in always if p != removed), changed, added])
    _same(scan, scan_results([root]))
    assert {r.path: r.score for r in scan.runs}[changed] == 0.7 and removed not in {r.path for r in scan.runs}
    reads.clear()
    _same(scan_results([root], cache_dir=cache), scan)
    assert sorted(reads) == [p for p in always if p != removed]
