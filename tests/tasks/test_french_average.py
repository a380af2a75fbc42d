"""`--lang fr` reports the paper's French average only over all eight French tasks: with generated stand-ins for
the eight (each of its task's kind, under its task's id and protocol) the average is printed; with seven, the
summary names the missing task and prints no average (a mean of 7 of the 8 is not the paper's figure)."""

from __future__ import annotations

import pytest
from biobench.errors import DataError
from biobench.eval import runner
from biobench.tasks import synthetic
from biobench.tasks.loading import _example_labels as example_labels
from biobench.tasks.loading import checksum
from biobench.tasks.registry import list_specs
from biobench.tasks.schema import TaskData

GENERATOR = {"classification": "demo-cls", "multilabel": "demo-multilabel", "ner": "demo-ner"}
OVERRIDES = {"epochs": 1, "batch_size": 8, "max_length": 48, "lr": 3e-3}


def stand_in(spec) -> TaskData:
    """Generated examples of the task's kind, small, under the task's id."""
    splits = synthetic.generate_task(GENERATOR[spec.kind], seed=len(spec.id), n_train=16, n_dev=8, n_test=8)
    labels = sorted({lab for exs in splits.values() for ex in exs for lab in example_labels(ex)})
    task = TaskData(spec.id, spec.kind, splits, labels, f"generated stand-in for {spec.id}", data_version="stand-in")
    task.checksum = checksum(task)
    return task


def test_french_average_needs_all_eight_tasks(tiny_mlm_dir, tmp_path, capsys):
    from biobench.commands.eval import print_summary

    french = list_specs("fr")
    assert len(french) == 8
    plan = runner.plan_grid(str(tiny_mlm_dir), french, stand_in, tmp_path, seeds=[42], overrides=OVERRIDES,
                            skip_unavailable=True)
    runner.execute(plan, progress=False, log=lambda _: None)
    summary = runner.summarize(plan)
    fr = summary["languages"]["fr"]
    means = {t["task"]: t["mean"] for t in summary["tasks"]}
    assert list(means) == [s.id for s in french] and fr["missing"] == [] and fr["benchmark"] is True
    assert fr["mean"] == pytest.approx(sum(means.values()) / 8) and fr["n_tasks"] == fr["tasks_expected"] == 8
    print_summary(summary)
    out = capsys.readouterr().out
    assert f"{100 * fr['mean']:.2f}" in out and "8/8 tasks" in out and "no French average" not in out

    def seven(spec):  # MedDialog-FR's data is not there: the other seven are (their results are reused)
        if spec.id == "meddialog-fr":
            raise DataError("task 'meddialog-fr': data not found")
        return stand_in(spec)

    plan = runner.plan_grid(str(tiny_mlm_dir), french, seven, tmp_path, seeds=[42], overrides=OVERRIDES,
                            skip_unavailable=True)
    assert all(r.status == "skipped" for r in plan.runs) and plan.unavailable == {"meddialog-fr": "task 'meddialog-fr': data not found"}
    summary = runner.summarize(plan)
    assert summary["languages"]["fr"] == {"mean": None, "n_tasks": 7, "tasks_expected": 8, "benchmark": True,
                                          "missing": ["meddialog-fr"]}
    print_summary(summary)
    out = capsys.readouterr().out
    assert "7/8 tasks" in out and f"{100 * fr['mean']:.2f}" not in out
    assert "no French average: the paper's average is over its 8 French tasks; missing: meddialog-fr" in " ".join(out.split())
    assert "not run meddialog-fr" in " ".join(out.split())
