"""The one validating reader of result files (biobench.store over biobench.runtime.jsonfile), on files a
fixture generates: a FIFO and a /dev/zero link named seed-N.json, an oversized file, JSON nested 200,000 deep,
non-finite or out-of-range numbers, non-integer seeds, caches of the wrong shape. Each is refused in one line
naming the file, within a bounded time and memory, by every reader: the board (one Problems line per file, with
and without the scan cache), eval's check of an existing result, compare, card and `results push`."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import pytest
from biobench import cli, store
from biobench.errors import ResultsError
from biobench.runtime.jsonfile import UnsafeJSONError, iter_jsonl, parse_json, read_bytes, too_deep
from biobench.standings import cache as groups_cache
from biobench.standings.aggregate import build_board
from biobench.store.summary import model_summaries

DEEP = "[" * 200_000 + "]" * 200_000


def result_dict(seed: int = 42, f1: float = 0.5, model: str = "m", **extra) -> dict:
    return {"schema": store.SCHEMA, "model": {"id": model, "slug": model, "params": 1000, "lineage": None},
            "task": {"id": "demo-cls", "lang": "fr", "kind": "classification", "labels": ["a", "b"]},
            "seed": seed, "protocol": {"name": "fr", "hash": "p"},
            "key": store.run_key("sha256:w", "sha256:d", "p", seed),
            "metrics": {"test": {"macro_f1": f1}}, "timings": {"tokens_per_s": 10.0}, **extra}


def write_good(root: Path, model: str, seed: int, f1: float) -> Path:
    path = store.result_path(root, model, "demo-cls", seed)
    rows = [{"id": str(i), "gold": "ab"[i % 2], "pred": "ab"[(i + seed) % 3 % 2]} for i in range(20)]
    store.write_result(path, store.Result.from_dict(result_dict(seed, f1, model)), rows)
    return path


def _text(data) -> str:
    return json.dumps(data)  # allow_nan: writes NaN / Infinity as Python's json does


def _deep_lineage(value):
    data = result_dict()
    data["model"]["lineage"] = {"recipe": "detour", "tokens": {"seen": value}}
    return data


# name -> (writer into a path, the reason the reader gives)
def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _huge(path: Path) -> None:
    with open(path, "wb") as fh:  # sparse: 9 MiB on paper, nothing on disk
        fh.truncate(store.result_files.MAX_RESULT_BYTES + 2**20)


HOSTILE = {
    "fifo": (_fifo, "not a regular file"),
    "dev-zero": (_dev_zero, "leads outside its folder"),  # issue 51: no link out of a results folder
    "huge": (_huge, "over the 8 MiB limit"),
    "deep": (lambda p: p.write_text(DEEP), "nested too deeply (over 64 levels)"),
    "seed-infinity": (lambda p: p.write_text(_text(result_dict(seed=float("inf")))), "seed inf is not an integer"),
    "seed-fraction": (lambda p: p.write_text(_text(result_dict(seed=42.5))), "seed 42.5 is not an integer"),
    "tokens-nan": (lambda p: p.write_text(_text(_deep_lineage(float("nan")))),
                   "model.lineage.tokens.seen is nan, not a finite number"),
    "params-huge": (lambda p: p.write_text(json.dumps(result_dict()).replace('"params": 1000', '"params": 1' + "0" * 400)),
                    "model.params is 100000000000... (401 digits), not a finite number in range"),
    "tokens-per-s-inf": (lambda p: p.write_text(_text({**result_dict(), "timings": {"tokens_per_s": float("inf")}})),
                         "timings.tokens_per_s is inf, not a finite number"),
}


@pytest.fixture
def alarm():
    """Fail instead of hanging: a FIFO read that blocks would otherwise stop the suite."""
    def timeout(*_):
        raise TimeoutError("the reader blocked")

    previous = signal.signal(signal.SIGALRM, timeout)
    signal.alarm(20)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, previous)


@pytest.fixture
def hostile(tmp_path) -> dict[str, Path]:
    """A results folder with two good models and one hostile seed file per case (model `bad-<case>`)."""
    root = tmp_path / "results"
    for model, f1 in (("good-a", 0.6), ("good-b", 0.4)):
        for seed in (42, 43):
            write_good(root, model, seed, f1 + seed / 1000)
    paths = {}
    for name, (make, _) in HOSTILE.items():
        path = store.result_path(root, f"bad-{name}", "demo-cls", 42)
        path.parent.mkdir(parents=True)
        make(path)
        paths[name] = path
    return paths


@pytest.mark.parametrize("case", HOSTILE)
def test_the_reader_refuses_each_hostile_file_in_one_line(hostile, alarm, case):
    with pytest.raises(ResultsError) as err:
        store.read_result(hostile[case])
    message = str(err.value)
    assert message.startswith(f"{hostile[case]}: ") and "\n" not in message
    assert HOSTILE[case][1] in message


@pytest.mark.parametrize("case", HOSTILE)
def test_evals_check_of_an_existing_result_names_the_file_and_the_fix(hostile, alarm, case):
    with pytest.raises(ResultsError, match=r"fix or delete it, or pass --overwrite"):
        store.decide(hostile[case], store.run_key("sha256:w", "sha256:d", "p", 42))
    assert store.decide(hostile[case], {}, overwrite=True) == "overwrite"


def test_the_board_lists_each_rejected_file_once_in_problems(hostile, alarm, tmp_path):
    root = hostile["fifo"].parents[2]
    for cache_dir in (None, tmp_path / "cache", tmp_path / "cache"):  # no cache, cold scan index, warm
        board = build_board([root], reference=False, significance=False, cache_dir=cache_dir)
        problems = {p.path: p.reason for p in board.problems}
        assert problems.keys() == {str(p) for p in hostile.values()}
        for case, path in hostile.items():
            assert HOSTILE[case][1] in problems[str(path)]
        assert sorted(e.key for e in board.entries) == ["good-a", "good-b"]


def test_results_push_leaves_rejected_files_out_with_one_warning_each(hostile, alarm, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    root = hostile["fifo"].parents[2]
    assert cli.main(["results", "push", "acme/x", "--results", str(root), "--dry-run", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    assert sum(line.startswith("warning: ") for line in out.splitlines()) == len(HOSTILE)
    assert "(4 rows)" in out


def test_compare_and_card_stop_on_a_rejected_file_with_one_line(hostile, alarm, tmp_path, capsys):
    root = hostile["fifo"].parents[2]
    (root / "bad-deep" / "demo-cls" / "seed-43.json").write_text("{}")
    assert cli.main(["compare", "good-a", "bad-deep", "--results", str(root), "--n-boot", "50"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: ") and "nested too deeply (over 64 levels)" in err and "\n" not in err
    with pytest.raises(ResultsError, match="nested too deeply"):
        model_summaries((r for _, r in store.iter_results(root, "bad-deep")), "bad-deep")


def test_compare_of_two_good_models_still_works(hostile, capsys):
    root = hostile["fifo"].parents[2]
    assert cli.main(["compare", "good-a", "good-b", "--results", str(root), "--n-boot", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tasks"][0]["mean_a"] == pytest.approx(0.6425)


def test_a_significance_cache_file_of_the_wrong_shape_is_a_miss_and_rewritten(tmp_path):
    root = tmp_path / "results"
    for model, f1 in (("good-a", 0.6), ("good-b", 0.4)):
        for seed in (42, 43):
            write_good(root, model, seed, f1)
    board = build_board([root], reference=False, significance=False)
    cache_dir = tmp_path / "cache"
    assert groups_cache.cached_groups(board, n_boot=50, cache_dir=cache_dir)["computed"] == 1
    (path,) = cache_dir.glob("groups-*.json")
    good = path.read_text()
    for wrong in ("[]", '{"v": 2, "groups": [], "problems": []}', '{"v": 2, "groups": null, "problems": [1]}',
                  '{"v": 2, "groups": {"best": 1}, "problems": []}', DEEP):
        path.write_text(wrong)
        board = build_board([root], reference=False, significance=False)
        assert groups_cache.cached_groups(board, n_boot=50, cache_dir=cache_dir) == {"tasks": 1, "cached": 0,
                                                                                     "computed": 1}
        assert path.read_text() == good  # rewritten


def test_depth_is_counted_without_recursion_and_strings_do_not_count():
    assert too_deep(DEEP, 64)
    assert not too_deep('{"a": "[[[[[[[[[[", "b": [[1]], "c": "\\"]]]]"}', 3)
    assert too_deep('{"a": [[[1]]]}', 3)
    with pytest.raises(UnsafeJSONError, match=r"nested too deeply \(over 64"):
        parse_json(DEEP, "x.json")


def test_runtime_reader_limits_and_jsonl(tmp_path):
    path = tmp_path / "a.json"
    path.write_text('{"x": 1}')
    assert read_bytes(path, 8) == b'{"x": 1}'
    with pytest.raises(UnsafeJSONError, match="8 bytes is over the 7 bytes limit"):
        read_bytes(path, 7)
    assert read_bytes(path, 2**30) == b'{"x": 1}'  # a large limit reads the file, not a buffer of the limit


def test_runtime_reader_sees_a_file_that_grows_while_read(tmp_path, monkeypatch):
    import types

    from biobench.runtime import jsonfile

    path = tmp_path / "a.json"
    path.write_text('{"x": 1}')
    real = os.fstat
    # the file's size when it was opened was 2 bytes; it has 8 when read
    monkeypatch.setattr(jsonfile.os, "fstat", lambda fd: types.SimpleNamespace(st_mode=real(fd).st_mode, st_size=2))
    assert read_bytes(path, 8) == b'{"x": 1}'  # all of it, within the limit
    with pytest.raises(UnsafeJSONError, match="over the 7 bytes limit"):
        read_bytes(path, 7)


def test_runtime_jsonl_reader(tmp_path):
    lines = tmp_path / "a.jsonl"
    lines.write_text('{"a": 1}\n\n[2]\n{bad\n')
    seen = []
    with pytest.raises(UnsafeJSONError, match=r"a.jsonl:4: not valid JSON"):
        for lineno, value in iter_jsonl(lines):
            seen.append((lineno, value))
    assert seen == [(1, {"a": 1}), (3, [2])]


def test_jsonl_fast_path_reads_every_line_as_parse_json_does(tmp_path):
    """iter_jsonl scans lines with json.loads' own scanner and skips the depth regexes on shallow lines; values
    and errors must stay parse_json's, line by line: odd whitespace, a BOM, trailing data, Infinity, brackets in
    strings, a deep line, a line separator inside a string, CRLF."""
    lines = ['{"a": [1, {"b": null}]}', " \t[1, 2]\t ", '"x\u2028y"', "-Infinity", '{"s": "' + "[" * 80 + '"}',
             "\x0c", "  ", '{"c": 1}\r']
    path = tmp_path / "ok.jsonl"
    path.write_bytes("\n".join(lines).encode())
    assert list(iter_jsonl(path, 10**6)) == [(i, parse_json(line)) for i, line in enumerate(lines, 1) if line.strip()]
    path.write_bytes("\n".join([*lines, "[" * 70 + "]" * 70]).encode())
    with pytest.raises(UnsafeJSONError, match=r"ok.jsonl:9: JSON nested too deeply"):
        list(iter_jsonl(path, 10**6))
    for bad, reason in (("\x0c{}", "not valid JSON: Expecting value"), ("{} {}", "not valid JSON: Extra data"),
                        ("\ufeff{}", "not valid JSON: Unexpected UTF-8 BOM"), ('{"a": 1', "not valid JSON")):
        path.write_text('{"ok": 1}\n' + bad + "\n", encoding="utf-8")
        with pytest.raises(UnsafeJSONError, match=rf"ok.jsonl:2: {reason}") as got:
            list(iter_jsonl(path, 10**6))
        with pytest.raises(UnsafeJSONError) as direct:
            parse_json(bad + "\n", f"{path}:2")
        assert str(got.value) == str(direct.value)


def test_a_confined_read_of_a_file_that_is_no_link_resolves_no_path(tmp_path, monkeypatch):
    """A file that is not a link lies in its folder, so it is opened at once (O_NOFOLLOW) instead of resolving
    both paths part by part (two `resolve()`s, an lstat a part: 38% of a cold board's scan). A link is still
    resolved: one inside its folder is followed, one leading out refused."""
    from biobench.runtime import jsonfile

    resolved: list[str] = []
    real = jsonfile.inside
    monkeypatch.setattr(jsonfile, "inside", lambda root, path: resolved.append(str(path)) or real(root, path))
    folder = tmp_path / "m" / "demo-cls"
    folder.mkdir(parents=True)
    (folder / "seed-42.json").write_text(json.dumps(result_dict()))
    (folder / "seed-42.predictions.jsonl").write_text('{"id": "1", "gold": "a", "pred": "b"}\n')
    assert store.read_result(folder / "seed-42.json").seed == 42
    assert store.read_predictions(folder / "seed-42.json") == [{"id": "1", "gold": "a", "pred": "b"}]
    assert resolved == []  # the result, the predictions and the result again for the predictions' bound
    (folder / "seed-43.predictions.jsonl").symlink_to("seed-42.predictions.jsonl")  # inside its folder: followed
    assert store.read_predictions(folder / "seed-43.predictions.jsonl") == [{"id": "1", "gold": "a", "pred": "b"}]
    assert str(folder / "seed-43.predictions.jsonl") in resolved  # after resolving it
    (tmp_path / "outside.jsonl").write_text('{"id": "1", "gold": "a", "pred": "b"}\n')
    (folder / "seed-44.predictions.jsonl").symlink_to(tmp_path / "outside.jsonl")
    with pytest.raises(ResultsError, match="leads outside its folder"):
        store.read_predictions(folder / "seed-44.predictions.jsonl")


def test_jsonl_batches_read_every_line_as_reading_line_by_line_does(tmp_path, monkeypatch):
    """Lines are parsed by batches (one `map` per step, in C); a batch with a line the batch cannot take (blank,
    invalid, a duplicate key, trailing data, deep, not UTF-8) is read line by line: the same values, line numbers
    and errors, the lines before an error handed out first, across batch boundaries."""
    from biobench.runtime import jsonfile

    monkeypatch.setattr(jsonfile, "JSONL_BATCH_LINES", 3)
    good = ['{"a": 1}', '[1, {"b": "x\\u00e9"}]', '"s"', " \t{}\t", "null", '{"s": "[[[["}']
    for bad_at in range(0, 9):
        for bad in ("", "{bad", '{"a": 1, "a": 2}', "{} {}", "[" * 70 + "]" * 70, "\ufeff{}"):
            lines = [good[i % len(good)] for i in range(8)]
            lines.insert(bad_at, bad)
            path = tmp_path / "a.jsonl"
            path.write_bytes("\n".join(lines).encode())
            expected, error = [], None
            for lineno, line in enumerate(lines, 1):
                if line.strip():
                    try:
                        expected.append((lineno, parse_json(line, f"{path}:{lineno}")))
                    except UnsafeJSONError as err:
                        error = str(err)
                        break
            seen = []
            try:
                for pair in iter_jsonl(path, 10**6):
                    seen.append(pair)
            except UnsafeJSONError as err:
                assert str(err) == error
            else:
                assert error is None
            assert seen == expected
    rows = [b'{"a": "%s"}' % (b"x" * 3000) for _ in range(9)]
    rows[6] = b'{"e": "\xff"}'
    path.write_bytes(b"\n".join(rows))
    decoded = 0  # the lines a text file hands out before the undecodable one (it decodes 8 KiB at a time)
    with pytest.raises(UnicodeDecodeError), open(path, encoding="utf-8") as fh:
        for _ in fh:
            decoded += 1
    assert 0 < decoded < 7
    seen = []
    with pytest.raises(UnsafeJSONError, match=rf"a.jsonl:{decoded + 1}: not UTF-8 text"):
        for pair in iter_jsonl(path, 10**6):
            seen.append(pair)
    assert [lineno for lineno, _ in seen] == list(range(1, decoded + 1))


def test_a_predictions_file_is_read_without_a_python_call_per_row(tmp_path):
    """What reading a 2,000-row predictions file costs in built-in calls from Python code (strip, count, len,
    append, isinstance: a row's worth of work each, line by line) is counted: a few per batch of lines, not several
    per row. The duplicate-key hook the parser calls for each object is the parse itself, not counted."""
    import sys

    folder = tmp_path / "m" / "demo-cls"
    folder.mkdir(parents=True)
    (folder / "seed-42.json").write_text(json.dumps(result_dict()))
    (folder / "seed-42.predictions.jsonl").write_text(
        "".join(json.dumps({"id": str(i), "gold": "a", "pred": "ab"[i % 2]}) + "\n" for i in range(2000)))
    calls = []
    sys.setprofile(lambda frame, event, arg: calls.append(event) if event == "c_call"
                   and frame.f_code.co_name != "_unique_keys" else None)
    try:
        rows = store.read_predictions(folder / "seed-42.json")
    finally:
        sys.setprofile(None)
    assert len(rows) == 2000 and rows[1] == {"id": "1", "gold": "a", "pred": "b"}
    assert len(calls) < 400  # line by line: over 10,000 (five a row)


def test_a_bad_predictions_row_before_a_bad_line_is_the_one_reported(tmp_path):
    path = tmp_path / "seed-1.predictions.jsonl"
    path.write_text('{"gold": "a", "pred": "b"}\n[1]\n{bad\n')
    with pytest.raises(ResultsError, match=r"seed-1.predictions.jsonl:2: a predictions row needs 'gold' and 'pred'"):
        store.read_predictions(path)
    path.write_text('{"gold": "a", "pred": "b"}\n{bad\n[1]\n')
    with pytest.raises(ResultsError, match=r"seed-1.predictions.jsonl:2: corrupt predictions line"):
        store.read_predictions(path)
