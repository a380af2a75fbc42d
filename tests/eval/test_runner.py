"""The evaluation grid: seeds/shards parsing, results written per FORMATS.md, skip without touching files,
resume after an interrupted grid, --overwrite reproducibility, and every bad-input message."""

from __future__ import annotations

import json
from types import SimpleNamespace

import biobench.eval.finetune
import pytest
from biobench import cli
from biobench.errors import ConfigError, DataError, ResultsError
from biobench.eval import runner
from biobench.store import read_predictions, read_result
from biobench.tasks.schema import ClassificationExample, TaskData

from tests.support import DATA, OVERRIDES, WORDS, spec, toy_data

SPECS = [spec("t1"), spec("t2", "fr", seeds=(1, 2, 3))]


def plan(model_dir, results, **kw):
    kw.setdefault("overrides", OVERRIDES)
    return runner.plan_grid(str(model_dir), kw.pop("specs", SPECS), kw.pop("loader", lambda s: DATA[s.id]), results, **kw)


def snapshot(root):
    return {p: (p.stat().st_mtime_ns, p.read_bytes()) for p in sorted(root.rglob("*")) if p.is_file()}


def test_parse_shard():
    assert runner.parse_shard(None) == (0, 1) and runner.parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "1", "-1/2", "0/0"):
        with pytest.raises(ConfigError, match=r"bad --shard value .*use i/n with 0 <= i < n"):
            runner.parse_shard(bad)


def test_shards_partition_the_grid(tiny_mlm_dir, tmp_path):
    whole = plan(tiny_mlm_dir, tmp_path)
    assert [(r.task.id, r.seed) for r in whole.runs] == [("t1", 1), ("t1", 2), ("t2", 1), ("t2", 2), ("t2", 3)]
    parts = [plan(tiny_mlm_dir, tmp_path, shard=(i, 2)).runs for i in range(2)]
    got = [(r.task.id, r.seed) for part in parts for r in part]
    assert sorted(got) == sorted((r.task.id, r.seed) for r in whole.runs) and len(got) == len(set(got))
    smoke = plan(tiny_mlm_dir, tmp_path, seeds=[7]).runs[0]  # OVERRIDES: a smoke run, named by its protocol hash
    assert smoke.path.name == f"seed-7.smoke-{smoke.protocol.hash[:12]}.json"


@pytest.fixture(scope="module")
def finished(tiny_mlm_dir, tmp_path_factory):
    """One finished grid (2 tasks, 5 runs) shared by the tests below, each of which checks one behaviour."""
    results = tmp_path_factory.mktemp("grid")
    first = plan(tiny_mlm_dir, results)
    runner.execute(first, device="cpu", progress=False)
    return first, results


def test_grid_runs_every_planned_run(finished):
    first, _ = finished
    assert [r.status for r in first.runs] == ["done"] * 5


def test_a_result_reads_back_byte_identical_in_the_documented_field_order(finished):
    path = finished[0].runs[0].path
    assert read_result(path).to_json() == path.read_text()  # read and written again: byte-identical
    assert list(read_result(path).to_dict()) == [
        "schema", "model", "task", "seed", "protocol", "key", "head", "metrics", "dev_metric", "dev_score",
        "best_epoch", "best_step", "history", "budget", "overrides", "degenerate",
        "timings", "versions", "device", "created", "predictions"]


def test_a_result_records_the_model_task_and_protocol(finished):
    first, _ = finished
    result = read_result(first.runs[0].path).to_dict()
    assert result["model"]["slug"] == first.model.slug and result["model"]["params"] > 0
    assert result["task"] | {"source": None} == {
        "id": "t1", "lang": "en", "kind": "classification", "data_checksum": "sha256:t1", "source": None,
        "data_version": "", "n_train": 12, "n_dev": 6, "n_test": 6, "unseen_test_labels": [],
        "labels": ["cardio", "neuro", "pneumo"]}
    assert result["protocol"]["epochs"] == 2 and result["key"]["protocol_hash"] == result["protocol"]["hash"]


def test_en_classification_uses_the_hf_head_selected_on_dev_weighted_f1(finished):
    """BioClinical-ModernBERT's protocol: the model's own HF head, the checkpoint best on dev weighted-F1."""
    result = read_result(finished[0].runs[0].path).to_dict()
    assert result["head"] == {"name": "hf-sequence", **result["protocol"]["head_config"]}
    assert result["protocol"]["head"] == "hf-sequence" and result["dev_metric"] == "weighted_f1"
    assert set(result["metrics"]) == {"test", "dev"} and result["dev_score"] == result["metrics"]["dev"]["weighted_f1"]
    assert {"macro_f1", "micro_f1", "weighted_f1", "per_label"} <= set(result["metrics"]["test"])


def test_a_result_records_timings_and_the_tokens_trained_on(finished):
    result = read_result(finished[0].runs[0].path).to_dict()
    timings = result["timings"]
    assert set(timings) == {"train_s", "eval_s", "total_s", "train_tokens", "tokens_per_s"} and result["versions"]["torch"]
    assert timings["train_tokens"] > 12 * 3 and timings["train_tokens"] % 2 == 0  # 12 examples x 2 whole epochs
    assert timings["tokens_per_s"] == pytest.approx(timings["train_tokens"] / timings["train_s"], rel=0.01)


def test_predictions_follow_the_test_split(finished):
    rows = read_predictions(finished[0].runs[0].path)
    assert [r["id"] for r in rows] == [f"t1{i}" for i in range(6)] and all("pred" in r for r in rows)


def test_a_finished_grid_is_skipped_without_loading_the_model_or_touching_files(finished, tiny_mlm_dir, monkeypatch):
    first, results = finished
    before = snapshot(results)
    monkeypatch.setattr(runner, "load_encoder", lambda *a, **k: pytest.fail("model loaded for a skip"))
    again = plan(tiny_mlm_dir, results)
    runner.execute(again, progress=False)
    assert [r.status for r in again.runs] == ["skipped"] * 5
    assert [r.macro_f1 for r in again.runs] == [r.macro_f1 for r in first.runs]
    assert snapshot(results) == before


def test_the_summary_gives_seed_statistics_and_the_detectable_difference(finished, tiny_mlm_dir):
    first, results = finished
    summary = runner.summarize(plan(tiny_mlm_dir, results))
    t2 = next(t for t in summary["tasks"] if t["task"] == "t2")
    scores = [read_result(r.path).macro_f1 for r in first.runs[2:]]
    assert t2["n"] == 3 and t2["mean"] == pytest.approx(sum(scores) / 3)
    assert t2["ci_low"] <= t2["mean"] <= t2["ci_high"]
    assert summary["languages"]["fr"]["mean"] == pytest.approx(t2["mean"])
    # minimum detectable difference from these seeds' predictions (2.80 = z_0.975 + z_0.80)
    assert t2["mdd"] == pytest.approx(2.8016 * (2 * (t2["std"] ** 2 / 3 + t2["test_se"] ** 2)) ** 0.5, rel=1e-3)
    assert t2["mdd"] >= t2["mdd_many_seeds"] > 0


def test_a_run_of_another_protocol_gets_its_own_file_and_both_stay(finished, tiny_mlm_dir):
    """Issue 39: a check then another protocol for the same seed used to stop with "holds a result of another
    run ... pass --overwrite". Runs of different protocols never collide; both files stay."""
    first, results = finished
    before = snapshot(results)
    other = plan(tiny_mlm_dir, results, overrides=dict(OVERRIDES, epochs=1), specs=[spec("t1", seeds=(1,))])
    (run,) = other.runs
    assert run.decision == "new" and run.path.parent == first.runs[0].path.parent and run.path != first.runs[0].path
    runner.execute(other, progress=False)
    assert all(snapshot(results)[p] == before[p] for p in before)  # nothing finished was touched
    assert read_result(run.path).protocol["epochs"] == 1 and read_result(first.runs[0].path).protocol["epochs"] == 2


def test_a_result_of_another_run_on_the_same_path_stops_the_plan_and_stays(finished, tiny_mlm_dir):
    """Same protocol, other data (another checksum): the same run's file holds another run's result, which only
    --overwrite replaces."""
    _, results = finished
    before = snapshot(results)
    changed = toy_data("t1", n=15)
    with pytest.raises(ResultsError, match=r"holds a result of another run \(data_checksum sha256:t1 -> sha256:t1x\); "
                       r"not overwriting it: pass --overwrite"):
        plan(tiny_mlm_dir, results, specs=[spec("t1")],
             loader=lambda s: TaskData(s.id, changed.kind, changed.splits, changed.labels, changed.source, "sha256:t1x"))
    assert snapshot(results) == before


def test_overwrite_same_seed_reproduces_the_score(tiny_mlm_dir, tmp_path):
    one = [spec("t1", seeds=(5,))]
    first = plan(tiny_mlm_dir, tmp_path, specs=one)
    runner.execute(first, progress=False)
    redo = plan(tiny_mlm_dir, tmp_path, specs=one, overwrite=True)
    assert redo.runs[0].decision == "overwrite"
    runner.execute(redo, progress=False)
    assert redo.runs[0].macro_f1 == first.runs[0].macro_f1
    assert read_predictions(redo.runs[0].path) == read_predictions(first.runs[0].path)


def test_interrupted_grid_resumes_losing_only_the_run_in_flight(tiny_mlm_dir, tmp_path, monkeypatch):
    real = biobench.eval.finetune.finetune
    calls = []

    def dies_on_third(*args, **kwargs):
        calls.append(args[4])
        if len(calls) == 3:
            raise KeyboardInterrupt
        return real(*args, **kwargs)

    monkeypatch.setattr(biobench.eval.finetune, "finetune", dies_on_third)
    with pytest.raises(KeyboardInterrupt):
        runner.execute(plan(tiny_mlm_dir, tmp_path), progress=False)
    written = sorted(p.relative_to(tmp_path).as_posix() for p in tmp_path.rglob("seed-*.json"))
    slug, smoke = written[0].split("/")[0], written[0].split(".")[1]
    assert written == [f"{slug}/t1/seed-1.{smoke}.json", f"{slug}/t1/seed-2.{smoke}.json"]
    assert not list(tmp_path.rglob("*.tmp"))
    monkeypatch.setattr(biobench.eval.finetune, "finetune", real)
    resumed = plan(tiny_mlm_dir, tmp_path)
    runner.execute(resumed, progress=False)
    assert [r.status for r in resumed.runs] == ["skipped", "skipped", "done", "done", "done"]


def test_empty_dev_split_is_a_clear_error(tiny_mlm_dir, tmp_path):
    data = {"nodev": toy_data("nodev", dev=False)}
    p = plan(tiny_mlm_dir, tmp_path, specs=[spec("nodev", seeds=(1,))], loader=lambda s: data[s.id])
    with pytest.raises(DataError) as err:
        runner.execute(p, progress=False)
    assert str(err.value) == ("task 'nodev': the dev split is empty (toy:nodev); checkpoints are chosen on dev, "
                              "so a dev split is required: add one to the data (or carve it out of train "
                              "in the task spec)")
    assert not list(tmp_path.rglob("*.json"))


def test_test_label_unseen_in_train_counts_as_a_miss(tiny_mlm_dir, tmp_path):
    rare = ClassificationExample("r0", "Patient: rein dialyse.", "nephro")
    data = toy_data("rare", test_extra=[rare])
    data.labels = [*sorted(WORDS), "nephro"]
    logs = []
    p = plan(tiny_mlm_dir, tmp_path, specs=[spec("rare", seeds=(1,))], loader=lambda s: data)
    runner.execute(p, progress=False, log=logs.append)
    result = read_result(p.runs[0].path)
    assert result.task["unseen_test_labels"] == ["nephro"]
    assert result.metrics["test"]["per_label"]["nephro"]["f1"] == 0.0
    assert logs == ["rare: test labels never seen in train ['nephro'] cannot be predicted; they count as misses "
                    "in the metrics"]


def test_result_records_data_version_and_the_specs_extra_metrics(tiny_mlm_dir, tmp_path):
    from biobench.metrics import micro_f1_excluding

    data = toy_data("ver")
    data.data_version = "blue-reconstructed"
    task = SimpleNamespace(**vars(spec("ver", seeds=(1,))), extra_metrics=("blue_micro_f1",))
    p = plan(tiny_mlm_dir, tmp_path, specs=[task], loader=lambda s: data)
    runner.execute(p, progress=False)
    result = read_result(p.runs[0].path)
    rows = read_predictions(p.runs[0].path)
    assert result.task["data_version"] == "blue-reconstructed"
    assert result.metrics["test"]["blue_micro_f1"] == pytest.approx(
        micro_f1_excluding([r["gold"] for r in rows], [r["pred"] for r in rows], ("false",)))
    bad = SimpleNamespace(**vars(spec("ver", seeds=(1,))), extra_metrics=("bleu",))
    with pytest.raises(ConfigError, match=r"task 'ver': unknown extra_metrics \['bleu'\]"):
        plan(tiny_mlm_dir, tmp_path / "other", specs=[bad], loader=lambda s: data)


def test_unavailable_tasks_are_listed_for_a_language_selection(tiny_mlm_dir, tmp_path):
    def loader(s):
        if s.id == "t2":
            raise DataError("task 't2' is credentialed: put the files in X")
        return DATA[s.id]

    p = plan(tiny_mlm_dir, tmp_path, loader=loader, skip_unavailable=True)
    assert p.unavailable == {"t2": "task 't2' is credentialed: put the files in X"}
    assert {r.task.id for r in p.runs} == {"t1"}
    with pytest.raises(DataError, match="credentialed"):
        plan(tiny_mlm_dir, tmp_path, loader=loader)


def test_eval_cli_end_to_end_on_generated_task(tiny_mlm_dir, tmp_path, capsys):
    args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1,2", "--epochs", "1",
            "--limit-train", "40", "--max-length", "32", "--results", str(tmp_path), "--no-progress", "--json"]
    assert cli.main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in summary["runs"]] == ["done", "done"]
    task = summary["tasks"][0]
    assert task["task"] == "demo-cls" and task["n"] == 2 and 0.0 <= task["mean"] <= 1.0
    assert summary["languages"]["fr"]["n_tasks"] == 1
    assert cli.main(args[:-1]) == 0  # the rich table, every run skipped
    captured = capsys.readouterr()
    assert "2 already done" in captured.err and "demo-cls" in captured.out and "average fr" in captured.out
    assert "MDD" in captured.out and task["mdd"] > 0


def test_limit_eval_scores_a_recorded_subset_and_marks_the_smoke_run(tiny_mlm_dir, tmp_path, capsys):
    from biobench.store import iter_results, read_predictions
    from biobench.store.trust import is_smoke, overrides

    args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--epochs", "1",
            "--limit-train", "40", "--limit-eval", "15", "--max-length", "32", "--results", str(tmp_path)]
    assert cli.main(args) == 0
    captured = capsys.readouterr()
    assert "[smoke run: " in captured.err and "limit_eval 15" in captured.err  # the run's console line
    assert "⚑ smoke run demo-cls: protocol overrides " in captured.out and "demo-cls ⚑" in captured.out
    [(path, result)] = list(iter_results(tmp_path))
    assert result.protocol["limit_eval"] == 15 and result.task["n_dev"] == 15 and result.task["n_test"] == 15
    assert len(read_predictions(path)) == 15
    assert result.details["overrides"]["limit_eval"] == {"run": 15, "protocol": None}
    assert result.details["overrides"]["epochs"]["run"] == 1 and is_smoke(result)
    assert set(overrides(result)) >= {"epochs", "limit_train", "limit_eval", "max_length"}
    budget = result.details["budget"]
    assert budget["steps"] == 10 and budget["protocol_train"] > 40 and budget["protocol_steps"] > budget["steps"]


@pytest.mark.parametrize(("args", "message"), [
    (["--model", "MiniLM", "--tasks", "gad"], "error: unknown model 'MiniLM': did you mean 'all-MiniLM-L6-v2'?"),
    (["--model", "all-MiniLM-L6-v2", "--tasks", "gadd"], "error: unknown task 'gadd': did you mean 'gad'?"),
    (["--model", "all-MiniLM-L6-v2", "--tasks", "gad", "--seeds", "9-1"], "error: bad --seeds value '9-1'"),
])
def test_eval_cli_bad_input_is_one_line(args, message, capsys, tmp_path, minilm_dir):
    assert cli.main(["eval", *args, "--results", str(tmp_path), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(message) and err.count("\n") == 1


def test_full_disk_ends_the_grid_with_one_line_and_the_finished_result_whole(tiny_mlm_dir, tmp_path, fill_disk,
                                                                            capsys, monkeypatch):
    from biobench.errors import DiskFullError

    one = [spec("t1", seeds=(1, 2))]
    p = plan(tiny_mlm_dir, tmp_path, specs=one)
    real_write = runner.write_result
    written = []

    def write_then_fill(path, result, rows):
        if written:  # the second run: the disk is full by now
            fill_disk()
        written.append(path)
        return real_write(path, result, rows)

    monkeypatch.setattr(runner, "write_result", write_then_fill)
    with pytest.raises(DiskFullError) as err:
        runner.execute(p, progress=False)
    first = p.runs[0].path
    assert str(err.value).startswith(f"disk full writing to {first.parent}: ")
    assert f"1 finished result(s) under {tmp_path} are safe" in str(err.value) and "\n" not in str(err.value)
    stem = first.name.removesuffix(".json")
    assert sorted(x.name for x in first.parent.iterdir()) == [f"{stem}.json", f"{stem}.predictions.jsonl"]
    assert read_result(first).to_json() == first.read_text()  # whole


def test_a_check_then_the_protocol_run_of_the_same_seed_both_succeed_and_both_stay(tiny_mlm_dir, tmp_path):
    """"Check, then run for real": the smoke run goes to seed-1.smoke-<hash>.json, the protocol run to
    seed-1.json; a rerun of either is skipped, and the board reads both as separate rows."""
    from biobench.standings.aggregate import build_board

    one = [spec("t1", seeds=(1,))]
    check = plan(tiny_mlm_dir, tmp_path, specs=one)
    runner.execute(check, progress=False)
    real = plan(tiny_mlm_dir, tmp_path, specs=one, overrides={"max_length": 32, "epochs": 2})
    assert real.runs[0].decision == "new"
    runner.execute(real, progress=False)
    protocol = plan(tiny_mlm_dir, tmp_path, specs=one, overrides=None)
    assert protocol.runs[0].path.name == "seed-1.json" and protocol.runs[0].decision == "new"
    runner.execute(protocol, progress=False)
    names = sorted(p.name for p in check.runs[0].path.parent.glob("seed-*.json"))
    assert len(names) == 3 and names[0] == "seed-1.json" and all(n.startswith("seed-1.smoke-") for n in names[1:])
    again = [plan(tiny_mlm_dir, tmp_path, specs=one, overrides=o) for o in (OVERRIDES, None)]
    assert [p.runs[0].decision for p in again] == ["skip", "skip"]
    board = build_board([tmp_path], reference=False, significance=False)
    rows = [e for e in board.lang_entries("en") if "t1" in e.cells]
    assert len(rows) == 3 and sum(not e.smoke for e in rows) == 1 and not board.problems


def test_an_older_folders_smoke_run_at_the_protocol_path_is_read_skipped_and_named(tiny_mlm_dir, tmp_path):
    """Before smoke runs had their own file, a check was written to seed-<n>.json: it still reads, the same
    check is skipped there (not redone), and the protocol run of that seed says how to keep both."""
    import shutil

    from biobench.store import iter_results, predictions_path

    one = [spec("t1", seeds=(1,))]
    check = plan(tiny_mlm_dir, tmp_path, specs=one)
    runner.execute(check, progress=False)
    new = check.runs[0].path
    old = new.with_name("seed-1.json")
    shutil.move(new, old)
    shutil.move(predictions_path(new), predictions_path(old))
    assert [p.name for p, _ in iter_results(tmp_path)] == ["seed-1.json"]
    rerun = plan(tiny_mlm_dir, tmp_path, specs=one)
    assert (rerun.runs[0].path, rerun.runs[0].decision) == (old, "skip")
    with pytest.raises(ResultsError) as err:
        plan(tiny_mlm_dir, tmp_path, specs=one, overrides=None)
    assert str(err.value) == (
        f"{old} holds a smoke run (protocol overrides) written by an older biobench where the protocol run of seed 1 "
        f"now goes; keep both: mv {old} {new} && mv {predictions_path(old)} {predictions_path(new)} (or pass "
        "--overwrite to replace it)")


def test_quick_gives_each_task_kind_its_budget_and_explicit_flags_win(tiny_mlm_dir, tmp_path):
    from biobench.protocols import QUICK

    quick = plan(tiny_mlm_dir, tmp_path, overrides=None, quick=True)
    assert {r.task.id: r.protocol.max_steps for r in quick.runs} == {
        "t1": QUICK[("en", "classification")]["max_steps"], "t2": QUICK[("fr", "classification")]["max_steps"]}
    assert all(r.quick and r.protocol.batch_size == 8 and ".smoke-" in r.path.name for r in quick.runs)
    mine = plan(tiny_mlm_dir, tmp_path, overrides={"max_steps": 7}, quick=True)
    assert {r.protocol.max_steps for r in mine.runs} == {7} and {r.protocol.limit_train for r in mine.runs} == {1000}
    assert QUICK[("fr", "ner")]["head"] == "hf-token"  # the span head predicts nothing for ~200 steps


@pytest.mark.parametrize("held, look", [(1, 2.0), (100, 5.0), (5000, 60.0)])
def test_a_waiter_sees_a_run_finished_elsewhere_within_seconds_and_bounds_its_reads(monkeypatch, tmp_path, held, look):
    """wait_for_held looks every LOOK_S seconds (not once a heartbeat: 60 s with the default 300 s claim, which
    kept a job idle after the grid's last run), reads at most LOOKS_PER_S claim folders a second, and never
    looks less often than a heartbeat."""
    runs = [SimpleNamespace(status="held", path=tmp_path / f"seed-{i}.json") for i in range(held)]
    plan = SimpleNamespace(name="tiny", runs=runs)
    claims = SimpleNamespace(lease_s=300.0, claim=lambda path: False)
    looks: list[int] = []

    def finished_elsewhere(plan, run) -> bool:  # as runner's: a run found finished is marked skipped
        if len(looks) >= 3:
            run.status = "skipped"
        return run.status == "skipped"

    monkeypatch.setattr(runner, "finished_elsewhere", finished_elsewhere)
    sleeps: list[float] = []
    stop = SimpleNamespace(requested=False)
    lines: list[str] = []
    taken = list(runner.wait_for_held(plan, claims, stop, lines.append,
                                      sleep=lambda s: (sleeps.append(s), looks.append(1))))
    assert taken == [] and sleeps == [look] * 3  # seen finished on the fourth look, 3 looks apart
    assert "waiting up to 360 s" in lines[0]


def test_the_token_head_retrained_with_overwrite_learns_the_same_weights(tiny_mlm_dir, tmp_path, capsys):
    """`--overwrite` of a finished run of the token head (hf-token, the English NER head: ncbi-disease's on real data,
    tests/eval/test_real_data.py) trains the same losses, epoch by epoch, and writes the same predictions and score.
    On the tiny model, not on real data: the same code path in seconds instead of a minute of MiniLM."""
    args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-ner", "--seeds", "3", "--epochs", "2",
            "--limit-train", "40", "--max-length", "32", "--head", "hf-token", "--results", str(tmp_path),
            "--no-progress", "--json"]
    assert cli.main(args) == 0
    (first,) = json.loads(capsys.readouterr().out)["runs"]
    (path,) = tmp_path.rglob("seed-3*.json")
    record, predictions = read_result(path), path.with_name(path.name.replace(".json", ".predictions.jsonl"))
    kept = predictions.read_bytes()
    assert cli.main([*args, "--overwrite"]) == 0
    (again,) = json.loads(capsys.readouterr().out)["runs"]
    assert first["status"] == again["status"] == "done" and again["macro_f1"] == first["macro_f1"]
    redone = read_result(path)
    losses = [[h["train_loss"] for h in r.details["history"]] for r in (record, redone)]
    assert len(losses[0]) == 2 and losses[0] == losses[1]  # bit for bit: the same batches, masks and updates
    assert redone.protocol["head"] == "hf-token" and predictions.read_bytes() == kept


@pytest.mark.slow
def test_name_on_weights_already_evaluated_renames_them_and_compare_finds_them(tiny_mlm_dir, tmp_path):
    """Issue 57 item 9: `eval --model M --name "my model"` after an unnamed run of the same weights said "1 of 1
    run(s) done" and `compare "my model" ...` then said "no results for model 'my model'". Real processes: the
    unnamed run, the named one (which renames the results, skips the finished run and says so in one line),
    then `compare "my model"`, which finds them; the result file records the new name and folder."""
    import os
    import subprocess
    import sys

    results = tmp_path / "results"
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "BIOBENCH_CACHE": str(tmp_path / "cache")}

    def biobench(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, "-m", "biobench.cli", *args], env=env, capture_output=True, text=True,
                              timeout=600, check=False)

    run = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "1", "--results", str(results),
           "--epochs", "1", "--limit-train", "16", "--max-length", "32", "--device", "cpu", "--no-progress"]
    first = biobench(*run)
    assert first.returncode == 0, first.stderr
    [old] = [p.name for p in results.iterdir() if p.is_dir()]  # beside the folder's ownership marker
    digits = old.rsplit("--", 1)[1]
    before = next((results / old).rglob("seed-1*.json")).read_bytes()

    named = biobench(*run, "--name", "my model")
    assert named.returncode == 0, named.stderr
    lines = [line for line in named.stderr.splitlines() if "renamed" in line]
    assert lines == [f"--name 'my model': these weights' results were under another name; renamed {old} -> "
                     f"my_model--{digits}"], named.stderr
    assert "1 already done" in named.stderr  # the finished run is skipped, not redone
    assert [p.name for p in results.iterdir() if p.is_dir()] == [f"my_model--{digits}"]
    result = json.loads(next(results.rglob("seed-1*.json")).read_text())
    assert result["model"]["name"] == "my model" and result["model"]["slug"] == f"my_model--{digits}"
    old_result = json.loads(before)
    assert {k: v for k, v in result.items() if k != "model"} == {k: v for k, v in old_result.items() if k != "model"}

    compared = biobench("compare", "my model", "my model", "--results", str(results), "--json")
    assert compared.returncode == 0, compared.stderr
    report = json.loads(compared.stdout)
    assert report["a"] == "my model" and report["folder_a"] == f"my_model--{digits}"
    assert [t["task"] for t in report["tasks"]] == ["demo-cls"]
