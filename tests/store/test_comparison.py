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


def _protocol_fields():
    from dataclasses import fields

    from biobench.protocols import Protocol

    return [f.name for f in fields(Protocol)]


@pytest.mark.parametrize("setting", [*_protocol_fields(), "a_setting_added_later"])
def test_every_setting_a_result_records_is_compared(setting):
    """Issue 57 item 3: comparison.py kept its own list of setting names, so two runs differing in a setting
    missing from it (the protocol's `name`, or the next setting added to the protocol table) got
    `protocol_differences == []` and were tested across the difference. Every field of the protocol table
    (`biobench.protocols.Protocol`, the hash's inputs) and any other setting a result records is compared."""
    from biobench.protocols import resolve_protocol
    from biobench.store.comparison import (
        DIFFERENT_PROTOCOLS,
        TaskRuns,
        compare_pair,
        protocol_differences,
        run_settings,
    )

    base = resolve_protocol("fr", "classification", 512).to_dict()
    other = dict(base)
    value = base.get(setting)
    other[setting] = ({"dropout": 0.3} if isinstance(value, dict) else "x" if isinstance(value, str) else
                      (value or 0) + 7)
    if setting == "a_setting_added_later":
        base[setting] = 0
    a, b = run_settings(base), run_settings(other)
    diffs = protocol_differences([a], [b])
    assert [d.setting for d in diffs] == [setting]
    assert diffs[0].text().startswith("protocol " if setting == "name" else setting.replace("_", " ") + " ")
    pair = compare_pair([TaskRuns("t", [0.5, 0.6], [0.4, 0.5], [a, a], [b, b])])
    assert pair.refused == ("t",) and pair.tasks[0].comparison.method == DIFFERENT_PROTOCOLS
    assert protocol_differences([a], [run_settings(dict(base))]) == []  # the same record: the same protocol


def test_the_tasks_metric_is_the_score_compared_ranked_and_averaged(tmp_path):
    """Issue 57 item 3: a task whose spec says `metric = "micro_f1"` recorded it and picked the dev checkpoint by
    it, yet the board ranked by macro-F1 and `compare` compared macro-F1. Two models whose micro- and macro-F1
    disagree: the board, compare and `load_results` all give the micro-F1 order."""
    import biobench
    from biobench.standings.aggregate import build_board

    gold = ["a"] * 8 + ["b"] * 2
    preds = {"all-a": ["a"] * 10,  # micro 0.80, macro 0.44
             "mixed": ["a"] * 4 + ["b"] * 6}  # micro 0.60, macro 0.58
    expected = {}
    for slug, pred in preds.items():
        metrics = score("classification", gold, pred)
        expected[slug] = metrics["micro_f1"]
        for seed in (1, 2):
            write_result(result_path(tmp_path, slug, "t", seed), Result(
                model={"id": slug, "slug": slug, "name": slug},
                task={"id": "t", "lang": "en", "kind": "classification", "labels": ["a", "b"]}, seed=seed,
                protocol={"hash": "p", "metric": "micro_f1"}, key=run_key("r", "d", "p", seed),
                metrics={"test": metrics}),
                [{"id": str(i), "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, pred, strict=True))])
    assert expected == {"all-a": pytest.approx(0.8), "mixed": pytest.approx(0.6)}

    row = compare(tmp_path, "all-a", "mixed", n_boot=200)["tasks"][0]
    assert row["mean_a"] == pytest.approx(0.8) and row["mean_b"] == pytest.approx(0.6)
    assert row["diff"] == pytest.approx(0.2)  # the paired bootstrap on micro-F1 too

    board = build_board([tmp_path], reference=False, significance=False)
    cells = {e.key: e.cells["t"].mean for e in board.entries}
    assert cells == {"all-a": pytest.approx(80.0), "mixed": pytest.approx(60.0)}

    summary = biobench.load_results(tmp_path).summary(mdd=False)
    assert dict(zip(summary["slug"], summary["mean"], strict=True)) == {"all-a": pytest.approx(0.8),
                                                                         "mixed": pytest.approx(0.6)}


def test_a_result_without_a_fraction_for_its_metric_is_refused(tmp_path):
    """The score that ranks is the task's metric: a result naming a metric it does not hold is refused in one
    line, never ranked by another score."""
    from biobench.store import read_result

    path = result_path(tmp_path, "m", "t", 1)
    write_result(path, Result(model={"id": "m", "slug": "m"}, task={"id": "t", "lang": "en", "kind": "classification"},
                              seed=1, protocol={"hash": "p", "metric": "micro_f1"}, key=run_key("r", "d", "p", 1),
                              metrics={"test": {"macro_f1": 0.5}}), [{"id": "0", "gold": "a", "pred": "a"}])
    with pytest.raises(ResultsError, match="test 'micro_f1' .*not a fraction"):
        read_result(path)
