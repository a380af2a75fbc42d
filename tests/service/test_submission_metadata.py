"""Model metadata stated in a request (issue #41): `biobench submit`'s options and the Submit form's fields are
checked by the grid file's validator (biobench.store.metadata), kept in the request, passed by the worker to
eval (`--metadata JSON`) and recorded in every result as `model.metadata.stated`, which the JSON board and the
Model tab show; hostile metadata in a request file, an option or the form is refused in one line."""

from __future__ import annotations

import json
import shlex

import pytest
from biobench import store
from biobench.cli import build_parser, main
from biobench.commands.eval import metadata_option
from biobench.errors import ConfigError
from biobench.service import queue
from biobench.service.queue_storage import FolderStorage
from biobench.service.worker import WorkerConfig, eval_arguments, run_worker
from biobench.standings.aggregate import build_board
from biobench.store.metadata import metadata_from_fields

from tests import hostile_corpus as hc

STATED = {"params": 110_000_000, "context": 8192, "license": "mit", "base_model": "almanach/camembert-base",
          "training_data": ["pubmed", "e3c"], "open_weights": True}


def test_a_request_keeps_its_metadata_and_the_worker_passes_it_to_eval(tmp_path):
    storage = FolderStorage(tmp_path / "q")
    request = queue.submit(storage, model="org/enc", revision="a" * 40, lang=None, tasks=["demo-cls"], seeds=[1],
                           overrides={}, task_protocols={"demo-cls": "p"}, submitter="ada", metadata=STATED)
    stored = json.loads((tmp_path / "q" / "requests" / f"{request.id}.json").read_text())
    assert stored["metadata"] == STATED
    lease = queue.claim_next(storage, "w", 60)
    assert lease is not None and lease.request.metadata == STATED
    argv = eval_arguments(lease.request, tmp_path / "results", WorkerConfig(results=str(tmp_path / "results")))
    args = build_parser().parse_args(argv)  # the eval command line the worker runs, read by eval's own parser
    assert metadata_option(args.metadata) == STATED
    # a request without metadata (one written before the field existed) still reads, and passes no option
    old = hc.good_request("old-1")
    assert "metadata" not in old
    plain = queue.Request(**queue.check_fields(old))
    assert plain.metadata == {} and not any(a.startswith("--metadata") for a in eval_arguments(
        plain, tmp_path, WorkerConfig(results=str(tmp_path))))


HOSTILE = [
    ({"licence": "mit"}, "unknown metadata field(s) licence"),
    ({"license": "x" * 10_000}, "is not a known license id"),
    ({"params": 1e30}, "metadata params must be a whole number"),
    ({"params": True}, "metadata params must be a whole number"),
    ({"base_model": "a\nb"}, "single-line text"),
    ({"base_model": "<script>" * 40}, "single-line text of 1 to 200 characters"),
    ({"training_data": ["x"] * 1000}, "1 to 50 names"),
    ({"open_weights": "yes"}, "open_weights must be true or false"),
    ("mit", "metadata must be a table"),
]


@pytest.mark.parametrize("metadata, phrase", HOSTILE)
def test_hostile_metadata_in_a_request_file_fails_it_in_one_line_and_the_next_runs(tmp_path, metadata, phrase):
    root = tmp_path / "q"
    (root / "requests").mkdir(parents=True)
    (root / "requests" / "bad.json").write_text(json.dumps(hc.good_request("bad", "2025-01-01T00:00:00Z",
                                                                           metadata=metadata)))
    (root / "requests" / "good-1.json").write_text(json.dumps(hc.good_request("good-1", metadata={"license": "mit"})))
    ran = tmp_path / "ran.txt"
    command = lambda request, results: ["python3", "-c", f"open({str(ran)!r}, 'a').write({request.id!r})"]  # noqa: E731
    lines: list[str] = []
    config = WorkerConfig(results=str(tmp_path / "r"), once=True, log_dir=tmp_path / "logs")
    assert run_worker(FolderStorage(root), config, log=lines.append, command=command) == 1
    assert ran.read_text() == "good-1"
    status = {r.id: r for r in queue.list_requests(FolderStorage(root))}
    assert status["good-1"].status == "finished" and status["bad"].status == "failed"
    (reason,) = status["bad"].log_tail
    assert phrase in reason and "\n" not in reason and len(reason) < 500, reason
    assert any(line.startswith("problem: requests/bad.json:") for line in lines)


@pytest.mark.parametrize("options, phrase", [
    (["--license", "wtfpl"], "metadata license 'wtfpl' is not a known license id"),
    (["--params", "lots"], "metadata params must be a whole number (e.g. 110000000, 110M or 1.5B)"),
    (["--params", "9" * 80], "metadata params must be a whole number"),
    (["--context-length", "-5"], "metadata context must be a whole number"),
    (["--base-model", "a\u0007b"], "metadata base_model must be a single-line text"),
    (["--training-data", ",".join(["c"] * 51)], "training_data must be a corpus name or a list of 1 to 50 names"),
])
def test_submit_refuses_bad_metadata_options_in_one_line(tmp_path, capsys, options, phrase):
    code = main(["submit", "org/enc", "--revision", "a" * 40, "--tasks", "demo-cls", *options,
                 "--queue", str(tmp_path / "q")])
    err = capsys.readouterr().err.strip()
    assert code == 2 and phrase in err and len(err.splitlines()) == 1, err
    assert not (tmp_path / "q" / "requests").exists() or not list((tmp_path / "q" / "requests").iterdir())


def test_submit_options_and_the_forms_command_state_the_same_metadata(tmp_path, capsys):
    from biobench.leaderboard.service_views import submit_command

    options = ["--params", "110M", "--context-length", "8192", "--license", "mit", "--base-model",
               "almanach/camembert-base", "--training-data", "pubmed, e3c", "--open-weights", "yes"]
    assert main(["submit", "org/enc", "--revision", "a" * 40, "--tasks", "demo-cls", *options,
                 "--queue", str(tmp_path / "q")]) == 0
    assert "stated: base_model, context, license, open_weights, params, training_data" in capsys.readouterr().out
    (request,) = queue.list_requests(FolderStorage(tmp_path / "q"))
    assert request.metadata == STATED
    # where the app cannot write, the form shows the command: it states the same metadata
    command = submit_command("org/enc", "a" * 40, "fr", "demo-cls", "", None, {}, STATED)
    args = build_parser().parse_args(shlex.split(command)[1:])
    from biobench.commands.submit import metadata_from_args

    assert metadata_from_args(args) == STATED


def test_the_form_refuses_hostile_metadata_in_one_line_and_queues_good_metadata(tmp_path):
    from biobench.leaderboard.service_views import form_submit
    from biobench.service.submission import PublicPolicy, RateLimit

    policy, q = PublicPolicy(limiter=RateLimit(0)), str(tmp_path / "q")
    for fields, phrase in (({"license": "<img src=x onerror=alert(1)>"}, "is not a known license id"),
                           ({"params": "1" * 10_000}, "metadata params must be a whole number"),
                           ({"base_model": "x" * 100_000}, "single-line text of 1 to 200 characters"),
                           ({"open_weights": "maybe"}, "open_weights must be yes or no"),
                           ({"training_data": "a\nb"}, "single-line text"),
                           ({"context": "1e400"}, "metadata context must be a whole number")):
        answer = form_submit(q, policy, "org/enc", "a" * 40, "fr", "demo-cls", "", {}, "v1", fields)
        shown = answer.replace("\\", "")  # the answer is Markdown, its _ escaped
        assert answer.startswith("error: the form: ") and phrase in shown and "\n" not in answer and len(answer) < 1200, answer
        assert "<img" not in answer
    assert not (tmp_path / "q" / "requests").exists() or not list((tmp_path / "q" / "requests").iterdir())
    fields = {"params": "110M", "context": "8192", "license": "mit", "base_model": "almanach/camembert-base",
              "training_data": "pubmed, e3c", "open_weights": "yes"}
    answer = form_submit(q, policy, "org/enc", "a" * 40, "fr", "demo-cls", "", {}, "v1", fields)
    assert answer.startswith("submitted "), answer
    assert queue.list_requests(FolderStorage(tmp_path / "q"))[0].metadata == STATED


def test_eval_metadata_option_is_checked_and_not_mixed_with_a_grid(tmp_path, capsys):
    assert metadata_option('{"license": "mit", "params": 5}') == {"license": "mit", "params": 5}
    for text, phrase in (("{", "--metadata: not valid JSON"), ('{"licence": "mit"}', "unknown metadata field(s) licence"),
                         ("[" * 5000 + "]" * 5000, "--metadata:"), ("x" * 20_000, "over the 16,384")):
        with pytest.raises(ConfigError) as caught:
            metadata_option(text)
        assert phrase in str(caught.value) and "\n" not in str(caught.value), str(caught.value)
    grid = tmp_path / "g.toml"
    grid.write_text('[[grid]]\nname = "g"\ntasks = ["demo-cls"]\nmodels = ["m"]\n')
    assert main(["eval", "--config", str(grid), "--metadata", '{"license": "mit"}', "--dry-run"]) == 2
    assert "drop --metadata" in capsys.readouterr().err
    assert metadata_from_fields("x", params=" ", license="", training_data=" , ", open_weights="") == {}


def _write(root, slug, task, seed, f1, metadata, overrides=None):
    record = store.Result(model={"id": "org/enc", "slug": slug, "name": "Enc", "params": 110_000_000,
                                 "metadata": metadata},
                          task={"id": task, "lang": "fr", "kind": "ner"}, seed=seed, protocol={"hash": "p"},
                          key=store.run_key("rev", "data", "p", seed), metrics={"test": {"macro_f1": f1}},
                          details={"overrides": overrides} if overrides else {})
    store.write_result(store.result_path(root, slug, task, seed), record, [{"id": "1", "gold": [], "pred": []}])


def test_the_json_board_has_one_row_per_model_and_the_model_view_shows_stated_metadata(tmp_path):
    from biobench.leaderboard.json_routes import leaderboard_json, model_json, model_row_json
    from biobench.leaderboard.tables.detail import model_panel
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.frames import language_frame

    stated = {"license": "mit", "training_data": ["pubmed"], "open_weights": True, "stated": ["license", "open_weights"]}
    smoke = {"epochs": {"run": 1, "protocol": 15}}
    _write(tmp_path, "enc--aaaa", "quaero-emea", 42, 0.5, stated)
    _write(tmp_path, "enc--aaaa", "quaero-emea", 43, 0.6, stated)
    _write(tmp_path, "enc--aaaa", "quaero-emea", 44, 0.1, stated, smoke)  # smoke + protocol runs of one task
    _write(tmp_path, "enc--aaaa", "fracco-30", 42, 0.3, stated, smoke)  # a task with a smoke run only
    _write(tmp_path, "enc--aaaa", "diamed", 42, 0.4, stated, {"max_length": {"run": 64, "protocol": 512}})
    board = build_board([tmp_path], reference=True, significance=False)
    assert sum(e.slug == "enc--aaaa" for e in board.entries) == 3  # the board keeps protocol and smoke apart
    for include_smoke in (False, True):
        body = leaderboard_json(board, "fr", include_smoke=include_smoke)
        keys = [r["key"] for r in body["rows"]]
        assert keys.count("enc--aaaa") == 1 and len(keys) == len(set(keys))
        table = language_frame(board, "fr", Filters(include_smoke=include_smoke))
        assert len(body["rows"]) == len(table)  # the JSON has the table's rows
    row = next(r for r in leaderboard_json(board, "fr", include_smoke=True)["rows"] if r["key"] == "enc--aaaa")
    assert row["cells"]["quaero-emea"]["mean"] == pytest.approx(55.0) and "smoke" not in row["cells"]["quaero-emea"]
    assert row["cells"]["fracco-30"]["smoke"] == "epochs 1 (protocol 15)"
    assert sorted(row["smoke_tasks"]) == ["diamed", "fracco-30"]
    assert sorted(s["smoke"] for s in row["smoke_runs"]) == ["epochs 1 (protocol 15)", "max_length 64 (protocol 512)"]
    assert row["metadata"] == {"parameters": 110_000_000, "context_length": None, "license": "mit", "base_model": None,
                               "training_data": ["pubmed"], "open_weights": True, "stated": ["license", "open_weights"]}
    hidden = next(r for r in leaderboard_json(board, "fr", include_smoke=False)["rows"] if r["key"] == "enc--aaaa")
    assert list(hidden["cells"]) == ["quaero-emea"] and "smoke_runs" not in hidden
    assert model_json(board, "Enc")["languages"]["fr"] == row == model_row_json(board, "fr", "enc--aaaa")
    text, frame = model_panel(row)
    assert "| license | mit | stated by the submitter |" in text
    assert "| training data | pubmed | model card / config |" in text and "| base model | ? | — |" in text
    runs = {(task, run): score for task, run, score in zip(frame["task"], frame["run"], frame["macro-F1"], strict=True)}
    assert runs[("quaero-emea", "protocol")] == pytest.approx(55.0)
    assert runs[("quaero-emea", "⚑ smoke (not in the table): epochs 1 (protocol 15)")] == pytest.approx(10.0)
    assert runs[("fracco-30", "⚑ smoke: epochs 1 (protocol 15)")] == pytest.approx(30.0)


def test_recorded_metadata_from_a_hostile_result_is_bounded_on_the_board(tmp_path):
    from biobench.leaderboard.json_routes import leaderboard_json
    from biobench.leaderboard.tables.detail import model_panel

    _write(tmp_path, "enc--aaaa", "quaero-emea", 42, 0.5,
           {"license": "<b>x</b>|" * 1000, "training_data": ["a\nb"] * 500 + [{"x": 1}], "open_weights": "yes",
            "base_model": 7, "stated": "all"})
    board = build_board([tmp_path], reference=False, significance=False)
    meta = leaderboard_json(board, "fr")["rows"][0]["metadata"]
    assert len(meta["license"]) == 200 and len(meta["training_data"]) == 50 and meta["training_data"][0] == "a b"
    assert meta["open_weights"] is None and meta["base_model"] is None and meta["stated"] == []
    text, _ = model_panel(leaderboard_json(board, "fr")["rows"][0])
    assert "<b>" not in text and "&lt;b&gt;" in text and "\\|" in text


@pytest.mark.slow
def test_metadata_round_trips_from_submit_through_the_worker_to_the_board(submitted_and_evaluated):
    """A real `biobench submit --license ... --params ...` -> `biobench worker --once` (eval on the tiny model;
    conftest's submitted_and_evaluated, shared with the queue's test) -> the result's `model.metadata.stated` ->
    the JSON board's row and the Model tab."""
    from biobench.leaderboard.json_routes import leaderboard_json, model_row_json
    from biobench.leaderboard.tables.detail import model_panel

    q, results, steps = submitted_and_evaluated.queue, submitted_and_evaluated.results, submitted_and_evaluated.steps
    assert steps.submit[0] == 0 and steps.worker[0] == 0
    (request,) = queue.list_requests(FolderStorage(q))
    assert request.status == "finished", request.log_tail
    result = json.loads(next(results.glob("*/demo-cls/seed-1.smoke-*.json")).read_text())
    meta = result["model"]["metadata"]
    assert (meta["license"], meta["training_data"], meta["open_weights"]) == ("mit", ["pubmed"], False)
    assert result["model"]["params"] == 1_500_000
    assert meta["stated"] == ["license", "open_weights", "params", "training_data"]
    board = build_board([results], reference=False, significance=False)
    (row,) = leaderboard_json(board, "fr", include_smoke=True)["rows"]
    assert row["metadata"]["license"] == "mit" and row["metadata"]["parameters"] == 1_500_000
    assert row["metadata"]["stated"] == ["parameters", "license", "training_data", "open_weights"]
    text, frame = model_panel(model_row_json(board, "fr", row["key"]))
    assert "| license | mit | stated by the submitter |" in text and "| open weights | no | stated by the submitter |" in text
    assert list(frame["task"]) == ["demo-cls"] and frame["run"][0].startswith("⚑ smoke: ")
