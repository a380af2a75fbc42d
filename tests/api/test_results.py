"""api.results: `Results`, what `biobench.load_results` hands a user: the records with their files, the refused
files as problems (never fatal), filters by model, task and language, and the trust flags per run."""

from pathlib import Path

from biobench import store
from biobench.api.results import RefusedFile, Results


def _write(root: Path, slug: str, task: str, lang: str, seed: int, f1: float, details: dict | None = None) -> Path:
    path = store.result_path(root, slug, task, seed)
    record = store.Result(model={"id": slug, "slug": slug, "name": slug.upper()},
                          task={"id": task, "lang": lang, "kind": "classification", "labels": ["a", "b"]},
                          seed=seed, protocol={"hash": "p"}, key=store.run_key("rev", "data", "p", seed),
                          metrics={"test": {"macro_f1": f1}}, details=details or {})
    store.write_result(path, record, [{"id": str(i), "gold": g, "pred": g} for i, g in enumerate("abab")])
    return path


def test_files_are_read_and_a_refused_one_is_a_problem_not_an_error(tmp_path):
    good = [_write(tmp_path, "m1", "gad", "en", 42, 0.6), _write(tmp_path, "m2", "diamed", "fr", 42, 0.5,
                                                                  {"contamination": {"splits": {"test": {"share": 0.2}}}})]
    bad = tmp_path / "m3" / "gad" / "seed-1.json"
    bad.parent.mkdir(parents=True)
    bad.write_text("{not json")
    results = Results.from_files([*good, bad])
    assert len(results) == 2 and results.models == ["M1", "M2"] and list(results) == results.records
    assert results.problems == [RefusedFile(str(bad), results.problems[0].reason)]
    assert "corrupt result file" in results.problems[0].reason
    assert repr(results) == "Results(2 run(s): 2 model(s) ['M1', 'M2'], 2 task(s), 1 unreadable file(s))"


def test_filters_keep_each_record_with_its_file_and_the_problems(tmp_path):
    paths = [_write(tmp_path, "m1", "gad", "en", 42, 0.6), _write(tmp_path, "m2", "diamed", "fr", 42, 0.5)]
    results = Results.from_files(paths)
    results.problems.append(RefusedFile("x.json", "corrupt"))
    french = results.filter(lang="fr")
    assert french.models == ["M2"] and french.paths == [paths[1]] and french.problems == results.problems
    assert results.filter(model="m1").models == ["M1"] == results.filter(model="M1").models  # folder or name
    assert len(results.filter(task="gad", lang="fr")) == 0


def test_each_run_carries_its_contamination_share_when_measured(tmp_path):
    results = Results.from_files([_write(tmp_path, "m1", "gad", "en", 42, 0.6),
                                  _write(tmp_path, "m1", "gad", "en", 43, 0.8,
                                         {"contamination": {"splits": {"test": {"share": 0.25}}}})])
    assert [r["contamination"] for r in results.runs()] == [None, 0.25]
    [row] = results.summary_rows(mdd=False)
    assert (row["seeds"], row["n"], row["contamination"]) == ([42, 43], 2, 0.25)
    assert abs(row["mean"] - 0.7) < 1e-9 and row["mdd"] is None
