"""`biobench compare`: paired bootstrap between two models' saved predictions, and its error messages."""

from __future__ import annotations

import json
import random

import pytest
from biobench import cli
from biobench.errors import ConfigError, ResultsError
from biobench.metrics import score
from biobench.standings.folder_pairs import compare
from biobench.store import Result, result_path, run_key, write_result


def write_model(root, slug: str, accuracy: float, seeds=(1, 2, 3), task="t", n=80, gold_shift=0, lang="en",
                protocol=None, overrides=None):
    gold = [("a", "b", "c")[(i + gold_shift) % 3] for i in range(n)]
    for seed in seeds:
        rng = random.Random(f"{slug}{seed}")
        pred = [g if rng.random() < accuracy else rng.choice("abc") for g in gold]
        metrics = score("classification", gold, pred)
        rows = [{"id": str(i), "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, pred, strict=True))]
        write_result(result_path(root, slug, task, seed), Result(
            model={"id": slug, "slug": slug}, task={"id": task, "lang": lang, "kind": "classification"},
            seed=seed, protocol=protocol or {"hash": "p"}, key=run_key("r", "d", "p", seed), metrics={"test": metrics},
            details={"overrides": overrides} if overrides else {}), rows)


def test_better_model_wins_significantly(tmp_path):
    write_model(tmp_path, "good", 0.95)
    write_model(tmp_path, "bad", 0.4)
    report = compare(tmp_path, "good", "bad", n_boot=300)
    row = report["tasks"][0]
    assert row["task"] == "t" and row["seeds_a"] == [1, 2, 3] and row["n_test"] == 80
    assert row["diff"] == pytest.approx(row["mean_a"] - row["mean_b"]) and row["diff"] > 0.3
    assert row["ci_low"] > 0 and row["p_value"] < 0.05
    same = compare(tmp_path, "good", "good", n_boot=100)["tasks"][0]
    assert same["diff"] == 0.0 and same["ci_low"] <= 0.0 <= same["ci_high"] and same["p_value"] > 0.5


def test_compare_cli_table_and_json(tmp_path, capsys):
    write_model(tmp_path, "good", 0.95)
    write_model(tmp_path, "bad", 0.4, seeds=(1, 2))
    assert cli.main(["compare", "good", "bad", "--results", str(tmp_path), "--n-boot", "200", "--json"]) == 0
    row = json.loads(capsys.readouterr().out)["tasks"][0]
    assert row["seeds_b"] == [1, 2] and row["n_boot"] == 200
    assert cli.main(["compare", "good", "bad", "--results", str(tmp_path), "--n-boot", "200", "--lang", "en"]) == 0
    assert "A - B" in capsys.readouterr().out


def test_compare_resolves_aliases_to_slugs(tmp_path):
    write_model(tmp_path, "sentence-transformers__all-MiniLM-L6-v2", 0.9)
    write_model(tmp_path, "other", 0.5)
    assert compare(tmp_path, "all-minilm-l6-v2", "other", n_boot=50)["a"] == "sentence-transformers__all-MiniLM-L6-v2"


def test_compare_errors(tmp_path):
    write_model(tmp_path, "a", 0.9)
    write_model(tmp_path, "b", 0.9, gold_shift=1)
    write_model(tmp_path, "c", 0.9, task="other")
    with pytest.raises(ConfigError, match=r"no results for model 'zzz' in .*; models there: a, b, c"):
        compare(tmp_path, "a", "zzz")
    with pytest.raises(ResultsError, match=r"its test examples \(ids/gold\) differ from .*seed-1.json"):
        compare(tmp_path, "a", "b", n_boot=10)
    with pytest.raises(ConfigError, match=r"a and c have no task in common"):
        compare(tmp_path, "a", "c")
    with pytest.raises(ConfigError, match=r"task\(s\) other lack results for both models"):
        compare(tmp_path, "a", "c", tasks=["other"])


def test_average_over_tasks_both_models_have(tmp_path, capsys):
    for task, acc_a, acc_b in (("t1", 0.9, 0.5), ("t2", 0.6, 0.55), ("t3", 0.7, 0.7)):
        write_model(tmp_path, "a", acc_a, task=task)
        write_model(tmp_path, "b", acc_b, task=task)
    write_model(tmp_path, "a", 0.9, task="only-a")  # not in the average: B lacks it
    write_model(tmp_path, "a", 0.9, task="fr-task", lang="fr")
    write_model(tmp_path, "b", 0.1, task="fr-task", lang="fr")
    report = compare(tmp_path, "a", "b", n_boot=300, average=True)
    en = report["averages"]["en"]
    rows = {r["task"]: r for r in report["tasks"]}
    assert en["tasks"] == ["t1", "t2", "t3"] and report["averages"]["fr"]["tasks"] == ["fr-task"]
    assert en["diff"] == pytest.approx(sum(rows[t]["diff"] for t in ("t1", "t2", "t3")) / 3)
    assert en["mean_a"] == pytest.approx(sum(rows[t]["mean_a"] for t in ("t1", "t2", "t3")) / 3)
    assert en["ci_low"] < en["diff"] < en["ci_high"] and en["p_value"] < 0.05
    assert cli.main(["compare", "a", "b", "--results", str(tmp_path), "--average", "--n-boot", "100", "--json"]) == 0
    assert set(json.loads(capsys.readouterr().out)["averages"]) == {"en", "fr"}
    assert cli.main(["compare", "a", "b", "--results", str(tmp_path), "--average", "--n-boot", "100"]) == 0
    out = capsys.readouterr().out
    assert "average en" in out and "3 tasks" in out


def test_models_given_as_absolute_model_folders(tmp_path):
    from biobench.models import resolve_model

    models = tmp_path / "runs"
    for name in ("detour", "mlm"):
        (models / name / "final").mkdir(parents=True)
        (models / name / "final" / "config.json").write_text("{}")
    results = tmp_path / "results"
    slugs = [resolve_model(str(models / n / "final")).legacy_slug for n in ("detour", "mlm")]  # the old layout
    write_model(results, slugs[0], 0.9)
    write_model(results, slugs[1], 0.5)
    report = compare(results, str(models / "detour" / "final"), str(models / "mlm" / "final"), n_boot=100)
    assert (report["a"], report["b"]) == tuple(slugs) and report["tasks"][0]["diff"] > 0


def test_different_protocols_get_no_test_unless_asked(tmp_path, capsys):
    """Issue 39: epochs 2 / lr 5e-5 against epochs 3 / lr 1e-3 got p = 0.002 without a word. Now the settings
    that differ are listed, the task gets its difference but no interval or p-value, and is out of the average;
    --allow-different-protocols tests it anyway and still says so."""
    write_model(tmp_path, "good", 0.95, protocol={"hash": "p1", "epochs": 2, "lr": 5e-5, "max_length": 128})
    write_model(tmp_path, "bad", 0.4, protocol={"hash": "p2", "epochs": 3, "lr": 1e-3, "max_length": 128})
    report = compare(tmp_path, "good", "bad", n_boot=200, average=True)
    row = report["tasks"][0]
    assert report["same_protocol"] is False and report["refused"] == ["t"]
    assert report["differences"] == {"t": ["epochs 2 vs 3", "lr 5e-05 vs 0.001"]} == {"t": row["differences"]}
    assert row["diff"] > 0.3 and row["p_value"] != row["p_value"] and row["method"] == "no test: different protocols"
    assert report["averages"] == {}
    assert report["warning"] == (
        "A and B were run with different settings (t: epochs 2 vs 3; lr 5e-05 vs 0.001); no significance test on "
        "1 task(s), since the difference may come from the settings, not the models. Rerun one with the other's "
        "settings, or pass --allow-different-protocols to test anyway.")
    allowed = compare(tmp_path, "good", "bad", n_boot=200, average=True, allow_different_protocols=True)
    assert allowed["tasks"][0]["p_value"] < 0.05 and allowed["refused"] == [] and allowed["averages"]["en"]["tasks"] == ["t"]
    assert allowed["warning"].endswith("the tests were run anyway, as asked: a difference may come from the "
                                       "settings, not the models.")
    assert cli.main(["compare", "good", "bad", "--results", str(tmp_path), "--n-boot", "50"]) == 0
    out, err = capsys.readouterr()
    assert "t ≠" in out and "no test" in out
    assert "bold: p < 0.05" not in err  # no test ran: no legend for one (issue 52 item 4)
    assert "≠ A and B were run with different settings (t: epochs 2 vs 3; lr 5e-05 vs 0.001)" in err
    assert cli.main(["compare", "good", "bad", "--results", str(tmp_path), "--n-boot", "50",
                     "--allow-different-protocols", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["tasks"][0]["p_value"] < 0.05


def test_a_smoke_run_against_a_protocol_run_differs_in_its_overrides(tmp_path):
    same = {"hash": "p", "epochs": 15, "lr": 2e-5}
    write_model(tmp_path, "a", 0.9, protocol=same)
    write_model(tmp_path, "b", 0.5, protocol=same)
    assert compare(tmp_path, "a", "b", n_boot=50)["same_protocol"] is True
    write_model(tmp_path, "c", 0.5, protocol={"hash": "q", "epochs": 1, "lr": 2e-5},
                overrides={"epochs": {"run": 1, "protocol": 15}})
    report = compare(tmp_path, "a", "c", n_boot=50)
    assert report["differences"]["t"] == ["epochs 15 vs 1", "smoke overrides none vs epochs 1"]


def test_two_quick_runs_at_different_model_contexts_share_their_settings(tmp_path):
    """Issue 52 item 4: the same `--quick` command on a 512- and a 1,024-token model ran both at 128 tokens;
    the overrides' protocol values (the max length capped by each context) differ, what ran does not."""
    ran = {"hash": "q", "epochs": 20, "max_steps": 150, "max_length": 128, "batch_size": 8, "head": "token"}
    quick = {"max_steps": {"run": 150, "protocol": None}, "head": {"run": "token", "protocol": "span"}}
    write_model(tmp_path, "minilm", 0.6, protocol=ran, overrides={**quick, "max_length": {"run": 128, "protocol": 512}})
    write_model(tmp_path, "tiny", 0.5, protocol=ran, overrides={**quick, "max_length": {"run": 128, "protocol": 1024}})
    report = compare(tmp_path, "minilm", "tiny", n_boot=50)
    assert report["same_protocol"] is True and report["refused"] == [] and report["warning"] == ""


def test_protocol_differences_in_the_library():
    """The function the Compare tab calls: per setting, each side's values; a setting one side lacks (older
    files) is no difference; several seeds with one value each are one value."""
    from biobench.store.comparison import TaskRuns, compare_pair, protocol_differences, run_settings

    a = [run_settings({"epochs": 2, "head": "span", "head_config": {"max_width": 10}}, "", "abc")] * 2
    b = [run_settings({"epochs": 2, "head": "hf-token"}, "", "abd")]
    assert [d.text() for d in protocol_differences(a, b)] == [
        "head span vs hf-token", "test data (checksum; e.g. another sample unit) abc vs abd"]
    assert protocol_differences(a, a) == [] and protocol_differences(a, []) == []
    pair = compare_pair([TaskRuns("x", [0.5, 0.6], [0.4, 0.45], a, b)], n_boot=10)
    assert pair.refused == ("x",) and not pair.same_protocol and pair.tasks[0].comparison.tested is False
