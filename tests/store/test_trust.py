"""Scores a reader can trust (biobench.store.trust): degenerate test predictions on the three kinds with their
likely reason from the run's budget, and smoke runs told apart by their recorded overrides (or, in older
files, their subset limits)."""

from __future__ import annotations

import pytest
from biobench.store import Result
from biobench.store.trust import (
    budget_reason,
    degenerate,
    degenerate_note,
    degenerate_text,
    describe_overrides,
    find_degenerate,
    is_smoke,
    overrides,
    protocol_label,
)


def result(kind: str, head: dict | None = None, **details) -> Result:
    return Result({"id": "m"}, {"id": "t", "kind": kind, "lang": "fr"}, 42, details.pop("protocol", {}), {},
                  {"test": {"macro_f1": 0.0}}, {"head": head or {}, **details})


@pytest.mark.parametrize(("kind", "predictions", "finding"), [
    ("ner", [[], [], []], "no entity predicted in any of the 3 test examples"),
    ("multilabel", [[], [], [], []], "no label predicted for any of the 4 test examples"),
    ("classification", ["neg", "neg", "neg"], "the same class (neg) for every one of the 3 test examples"),
    ("relation", ["none", "none"], "the same class (none) for every one of the 2 test examples"),
])
def test_degenerate_predictions_are_found_on_each_kind(kind, predictions, finding):
    assert find_degenerate(kind, predictions) == finding


def test_a_near_empty_prediction_is_degenerate_against_the_gold_count():
    gold = [[[0, 4, "CHEM"], [6, 9, "DISO"]]] * 189 + [[]] * 11
    assert find_degenerate("ner", [[[0, 4, "CHEM"]]] + [[]] * 199, gold) == (
        "only 1 entity predicted against 378 gold ones in 200 test examples")
    assert find_degenerate("ner", [[[0, 4, "CHEM"]]] * 4 + [[]] * 196, gold) is None  # 4 of 378: above 1%
    assert find_degenerate("multilabel", [["a"]] + [[]] * 299, [["a", "b"]] * 300) == (
        "only 1 label predicted against 600 gold ones in 300 test examples")
    run = result("ner", {"name": "span", "threshold": 0.5}, budget={"steps": 13, "protocol_steps": 5700})
    assert degenerate_note(run, [[[0, 4, "CHEM"]]] + [[]] * 199, gold)["reason"] == (
        "almost no span above the 0.5 threshold: the budget (13 steps) is far below the protocol's 5,700 steps")


@pytest.mark.parametrize(("kind", "predictions"), [
    ("ner", [[], [[0, 4, "CHEM"]], []]),  # one entity anywhere is a prediction
    ("multilabel", [[], ["C01"]]),
    ("classification", ["neg", "pos", "neg"]),
    ("classification", ["neg"]),  # a single example cannot vary
    ("ner", []),
])
def test_sound_predictions_are_not_degenerate(kind, predictions):
    assert find_degenerate(kind, predictions) is None


def test_the_reason_compares_the_steps_run_with_the_protocols():
    run = result("ner", {"name": "span", "threshold": 0.5}, budget={"steps": 60, "protocol_steps": 4000,
                                                                    "protocol_train": 706},
                 overrides={"max_steps": {"run": 60, "protocol": 4000}})
    note = degenerate_note(run, [[], []])
    assert note == {"finding": "no entity predicted in any of the 2 test examples",
                    "reason": "no span above the 0.5 threshold: the budget (60 steps) is far below the "
                              "protocol's 4,000 steps"}
    assert degenerate_text(note) == ("degenerate: no entity predicted in any of the 2 test examples (likely: no span "
                                     "above the 0.5 threshold: the budget (60 steps) is far below the protocol's "
                                     "4,000 steps)")
    tagger = result("ner", {"name": "hf-token"}, budget={"steps": 3000, "protocol_steps": 4000})
    assert degenerate_note(tagger, [[]] * 2)["reason"] == ("every token tagged O: the budget (3,000 steps) is below "
                                                          "the protocol's 4,000 steps")
    labels = result("multilabel", {"name": "linear", "threshold": 0.5}, budget={"steps": 50, "protocol_steps": 50})
    assert degenerate_note(labels, [[], []])["reason"] == ("no label above the 0.5 threshold: at the protocol's "
                                                          "budget: look at the data and the head")


def test_a_train_limit_is_named_in_the_reason():
    run = result("classification", budget={"steps": 13, "protocol_steps": 11250, "protocol_train": 3000},
                 overrides={"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 200, "protocol": None}})
    assert budget_reason(run) == ("the budget (13 steps) is far below the protocol's 11,250 steps; trained on 200 of "
                                  "3,000 examples (--limit-train)")


def test_the_recorded_note_is_read_back_and_a_sound_run_has_none():
    assert degenerate(result("ner", degenerate={"finding": "x", "reason": "y"})) == {
        "finding": "x", "reason": "y",
        "fix": "biobench data status (is t's data whole?), then biobench eval --model m --tasks t --seeds 42 --head "
               "<another head>"}
    assert degenerate(result("ner")) is None
    assert degenerate(result("ner", degenerate="garbage")) is None  # another writer's field is not trusted blindly


def test_smoke_runs_by_recorded_overrides_and_by_the_subset_limits_of_older_files():
    recorded = result("ner", overrides={"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 200,
                                                                                          "protocol": None}})
    assert is_smoke(recorded) and protocol_label(describe_overrides(overrides(recorded))) == "smoke: epochs 1 (protocol 15), limit_train 200"
    older = result("classification", protocol={"name": "fr", "epochs": 1, "limit_train": 200, "limit_eval": None})
    assert overrides(older) == {"limit_train": {"run": 200, "protocol": None}} and is_smoke(older)
    plain = result("classification", protocol={"name": "fr", "epochs": 15, "limit_train": None})
    assert not is_smoke(plain) and protocol_label(describe_overrides(overrides(plain))) == "protocol" and describe_overrides({}) == ""


def test_the_console_line_and_evals_summary_say_smoke_and_degenerate(capsys):
    from biobench.commands.eval import print_summary
    from biobench.eval.runner import run_line

    note = {"finding": "no entity predicted in any of the 2 test examples",
            "reason": "no span above the 0.5 threshold: the budget (60 steps) is far below the protocol's 4,000 steps"}
    run = result("ner", overrides={"max_steps": {"run": 60, "protocol": 4000}}, degenerate=note)
    assert run_line(run) == (" [smoke run: max_steps 60 (protocol 4,000)] — degenerate: no entity predicted in any of "
                             "the 2 test examples (likely: no span above the 0.5 threshold: the budget (60 steps) is "
                             "far below the protocol's 4,000 steps); run: biobench eval --model m --tasks t --seeds 42 "
                             "--quick")
    assert run_line(result("ner")) == ""
    print_summary({"model": {"name": "m"}, "unavailable": {}, "languages": {},
                   "tasks": [{"task": "quaero-emea", "lang": "fr", "kind": "ner", "n": 1, "seeds_expected": 1,
                              "mean": 0.0, "overrides": "max_steps 60 (protocol 4,000)",
                              "degenerate": {42: degenerate_text(note)}}]})
    out = " ".join(capsys.readouterr().out.split())
    assert "quaero-emea ⚑ ⚠" in out
    assert "⚑ smoke run quaero-emea: protocol overrides max_steps 60 (protocol 4,000); not the protocol's score" in out
    assert "⚠ quaero-emea seed 42: degenerate: no entity predicted in any of the 2 test examples (likely: no span" in out


def test_every_degenerate_line_ends_with_the_command_that_would_fix_it():
    """Issue 39: the ⚠ line explained the cause but not what to run. A smoke run below the quick budget: --quick;
    a --quick run: the protocol's own budget; a protocol run: the data, then another head."""
    from biobench.store.trust import fix_command

    note = {"finding": "f", "reason": "r"}
    smoke = result("ner", overrides={"epochs": {"run": 1, "protocol": 20}}, degenerate=note)
    assert degenerate_text(degenerate(smoke)).endswith("; run: biobench eval --model m --tasks t --seeds 42 --quick")
    quick = result("ner", overrides={"max_steps": {"run": 300, "protocol": 4000}}, degenerate=note, quick=True)
    assert fix_command(quick) == "biobench eval --model m --tasks t --seeds 42"
    named = result("ner", overrides={"epochs": {"run": 1, "protocol": 20}})
    named.model["alias"] = "my model"
    assert fix_command(named) == 'biobench eval --model "my model" --tasks t --seeds 42 --quick'


def test_a_zero_score_with_varied_predictions_is_degenerate_too():
    """Issue 39: a user task at --epochs 1 scored 0.00 with no ⚠ (its predictions varied, none was right)."""
    from biobench.store.trust import degenerate_note

    run = result("classification", overrides={"epochs": {"run": 1, "protocol": 10}})
    run.metrics["test"]["macro_f1"] = 0.0
    note = degenerate_note(run, ["a", "b", "a"], ["b", "a", "b"])
    assert note is not None and note["finding"] == "a test macro_f1 of 0.00: none of the 3 test predictions is right"
    run.metrics["test"]["macro_f1"] = 0.4
    assert degenerate_note(run, ["a", "b", "a"], ["b", "b", "a"]) is None


def test_the_fix_command_of_a_local_model_names_no_server_path():
    """The ⚠ line's command is shown on the public board: a local model folder appears by its last part only."""
    from biobench.store.trust import fix_command

    run = Result(model={"id": "/srv/models/detour/final", "slug": "detour_tiny--1234abcd"},
                 task={"id": "demo-ner", "lang": "fr", "kind": "ner"}, seed=42, protocol={"hash": "h"},
                 key={}, metrics={"test": {"macro_f1": 0.0}}, details={"overrides": {"epochs": {"run": 1}}})
    command = fix_command(run)
    assert "/srv" not in command and command.startswith("biobench eval --model path/to/final --tasks demo-ner")
