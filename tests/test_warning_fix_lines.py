"""Issue 52, the first hour round three: a ⚠ line's fix is the user's own command (their model as typed, their
--data-dir and --results) with only what changes, and it runs when pasted; the public board keeps the form that
hides server paths."""

from __future__ import annotations

import json
import re
import shlex
from pathlib import Path
from types import SimpleNamespace

import pytest
from biobench import cli
from biobench.commands.eval import own_fix


def run(task: str = "quaero-emea", seed: int = 42, **details):
    return SimpleNamespace(task_id=task, seed=seed, details=details, protocol={}, model={}, key={})


SMOKE = {"overrides": {"epochs": {"run": 1, "protocol": 20}}}


def test_the_readme_example_gets_its_own_command_back_with_quick_instead_of_its_overrides():
    typed = "eval --model runs/tiny/final --data-dir data/ --tasks quaero-emea --seeds 42 --epochs 1"
    fix = own_fix(shlex.split(typed))
    assert fix(run(**SMOKE)) == ("biobench eval --model runs/tiny/final --data-dir data/ --tasks quaero-emea "
                                 "--seeds 42 --quick")
    # a --quick run that is degenerate: the protocol's budget, i.e. the same command without --quick
    quick = own_fix(shlex.split("eval --model ./m --lang fr --quick --results out/ --threads 1"))
    assert quick(run("cas-pos", 43, quick=True, **SMOKE)) == ("biobench eval --model ./m --results out/ --threads 1 "
                                                             "--tasks cas-pos --seeds 43")


def test_the_fix_keeps_what_the_user_typed_and_drops_only_the_budget():
    fix = own_fix(["eval", "--model=/srv/ckpt", "--name", "my model", "--batch-size", "8", "--lr=1e-3",
                   "--max-steps", "60", "--no-progress", "--results", "r", "--seeds", "1-3"])
    line = fix(run("gad", 2, **SMOKE))
    assert shlex.split(line) == ["biobench", "eval", "--model=/srv/ckpt", "--name", "my model", "--no-progress",
                                 "--results", "r", "--tasks", "gad", "--seeds", "2", "--quick"]
    auto = own_fix(["eval", "--model", "m", "--batch-size", "auto", "--tasks", "gad"])
    assert "--batch-size auto" in auto(run("gad", **SMOKE))  # an execution choice, not an override


def test_a_protocol_runs_fix_checks_the_users_data_folder_then_another_head():
    fix = own_fix(["eval", "--model", "m", "--data-dir", "/data/bio", "--tasks", "gad,hoc"])
    assert fix(run("hoc", 42)) == ("biobench data status --data-dir /data/bio (is hoc's data whole?), then biobench "
                                   "eval --model m --data-dir /data/bio --tasks hoc --seeds 42 --head <another head>")


def test_a_custom_tasks_fix_asks_data_status_about_its_task_file_which_lists_it(tmp_path, monkeypatch, capsys):
    """Issue 62 item 5: the fix of a protocol run of the user's own task said `biobench data status`, which neither
    listed custom tasks nor took --task-file. Now the fix keeps the user's --task-file and --data-dir, and the
    pasted `data status` lists that task (found, with where)."""
    from tests.support import readme_fenced as fenced

    fix = own_fix(["eval", "--model", "m", "--data-dir", "/data/bio", "--task-file", "spec/my-specialty.json",
                   "--task-file=more.toml", "--tasks", "my-specialty"])
    status = fix(run("my-specialty", 42)).split(" (is ")[0]
    assert status == ("biobench data status --data-dir /data/bio --task-file spec/my-specialty.json "
                      "--task-file=more.toml")
    monkeypatch.chdir(tmp_path)
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec/my-specialty.json").write_text(fenced("json")[0], encoding="utf-8")
    for split in ("train", "dev", "test"):
        (tmp_path / f"spec/{split}.tsv").write_text(fenced("text")[0], encoding="utf-8")
    pasted = own_fix(["eval", "--model", "m", "--task-file", "spec/my-specialty.json"])(run("my-specialty", 1))
    assert cli.main(shlex.split(pasted.split(" (is ")[0])[1:]) == 0
    out = capsys.readouterr().out
    assert re.search(r"^my-specialty\s+found\s+\S*spec", out, flags=re.M), out
    assert "diamed" not in out  # the file's tasks, what the fix asks about


def test_tasks_counts_with_a_task_file_reads_only_that_files_tasks(tmp_path, monkeypatch, capsys):
    """Issue 62 item 5: `tasks --task-file my-task.json --counts` read every built-in task's data (67 s) for the
    sizes of one small task. Now only the file's tasks are read (counted by the reads, not by a clock)."""
    from biobench.api import catalog

    from tests.support import readme_fenced as fenced

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec/my-specialty.json").write_text(fenced("json")[0], encoding="utf-8")
    for split in ("train", "dev", "test"):
        (tmp_path / f"spec/{split}.tsv").write_text(fenced("text")[0], encoding="utf-8")
    read: list[str] = []
    real = catalog._counts
    monkeypatch.setattr(catalog, "_counts", lambda spec, data_dir: read.append(spec.id) or real(spec, data_dir))
    # --all: the generated demo tasks have data everywhere, so the built-ins would be read too
    assert cli.main(["tasks", "--all", "--task-file", "spec/my-specialty.json", "--counts", "--json"]) == 0
    rows = {row["id"]: row for row in json.loads(capsys.readouterr().out)}
    assert read == ["my-specialty"] and rows["my-specialty"]["splits"]["train"] == len(fenced("text")[0].splitlines()) - 1  # its header
    assert rows["demo-cls"]["available"] and rows["demo-cls"]["splits"] is None
    read.clear()
    assert cli.main(["tasks", "--all", "--counts", "--json"]) == 0  # without --task-file: every task, as before
    assert "demo-cls" in read


def test_a_grid_models_fix_names_its_model_data_and_results():
    fix = own_fix(None, {"model": "runs/a/final", "--name": "detour a", "--data-dir": "data", "--results": "res",
                         "--task-file": ["t.json"]})
    assert shlex.split(fix(run("t", 1, **SMOKE))) == [
        "biobench", "eval", "--model", "runs/a/final", "--name", "detour a", "--data-dir", "data", "--results", "res",
        "--task-file", "t.json", "--tasks", "t", "--seeds", "1", "--quick"]
    assert own_fix(None) is None and own_fix(["tasks"]) is None  # no command line: the public fix_command


def test_the_printed_fix_runs_when_pasted(tmp_path, monkeypatch, capsys, tiny_mlm_dir):
    """A degenerate one-epoch run of the README's own task, in a folder of the user's: the ⚠ line's command,
    pasted as printed, runs (the public form, `--model path/to/<folder>` without --data-dir, failed twice)."""
    from tests.support import readme_fenced as fenced

    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "spec").mkdir()
    (tmp_path / "spec/my-specialty.json").write_text(fenced("json")[0], encoding="utf-8")
    rows = fenced("text")[0].splitlines()
    for split in ("train", "dev", "test"):
        # one class only in train: the classifier predicts it for every test example (degenerate)
        lines = rows[:2] if split == "train" else rows
        (tmp_path / f"spec/{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "model").symlink_to(tiny_mlm_dir)
    typed = ["eval", "--model", "model", "--task-file", "spec/my-specialty.json", "--tasks", "my-specialty",
             "--seeds", "1", "--epochs", "1", "--results", "my-results", "--no-progress"]
    assert cli.main(typed) == 0
    out = capsys.readouterr()
    text = out.out + out.err
    fixes = re.findall(r"; run: (biobench eval [^\n]*)", text)
    assert fixes, text
    assert fixes[0] == ("biobench eval --model model --task-file spec/my-specialty.json --results my-results "
                        "--no-progress --tasks my-specialty --seeds 1 --quick")
    assert cli.main(shlex.split(fixes[0])[1:]) == 0  # pasted: it runs, into the same results folder
    assert len(list((tmp_path / "my-results").glob("*/my-specialty/seed-1.smoke-*.json"))) == 2


def test_data_is_the_default_data_folder_when_it_exists_and_no_folder_is_said_once(tmp_path, monkeypatch, capsys):
    """Issue 52 item 7: every README example uses ./data, and bare `biobench tasks` said "no data dir" in each of
    its 19 lines (twice in one)."""
    from biobench.tasks.loading import resolve_data_dir

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("BIOBENCH_DATA", raising=False)
    assert resolve_data_dir(None) is None
    assert cli.main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert out.count("No data folder given") == 1 and "pass --data-dir DIR or set BIOBENCH_DATA" not in out
    assert "no data dir" not in out and out.count("- task '") == 19
    (tmp_path / "data").mkdir()
    assert resolve_data_dir(None) == Path("data") and resolve_data_dir("elsewhere") == Path("elsewhere")
    assert cli.main(["tasks"]) == 0
    out = capsys.readouterr().out
    assert "(data dir: data)" in out and "No data folder given" not in out
    assert "Expected layout under data:" in " ".join(out.split())


def test_evaluate_takes_quick_as_eval_does(tmp_path, tiny_mlm_dir):
    """docs/API.md: evaluate's options are eval's; `quick=True` was refused as an unknown protocol override."""
    import biobench

    results = biobench.evaluate(str(tiny_mlm_dir), tasks=["demo-cls"], seeds=[1], results=tmp_path, quick=True,
                                max_steps=4, limit_eval=8, progress=False)
    (record,) = results.records
    assert record.details.get("quick") is True and record.protocol["limit_train"] == 1000  # QUICK's
    assert record.protocol["max_steps"] == 4 and record.protocol["limit_eval"] == 8  # overrides given as well win


@pytest.mark.slow
def test_the_default_pair_and_a_page_view_at_300_models_do_bounded_work(tmp_path, monkeypatch):
    """Issue 51 item 2: the Compare tab's default pair ran `same_protocol` (prediction alignment) over all
    N(N-1)/2 pairs on every page load: 578 s of CPU at 300 models. What the default pair may cost, counted at
    300 models x 8 French tasks (its time is bench/perf/compare_default_pair.py's, docs/performance.md; issue 61
    item 1: no test bounds elapsed time): each run's settings read once, no prediction aligned; nothing at all on
    a repeat; when no two rows share their settings, still each run's settings once (every pair compared on
    them, no file read); a page view aligns the predictions of one pair, the default one."""
    from biobench.leaderboard.app import build_app, default_pair
    from biobench.perf.compare_default_pair import page_view, synthetic_board
    from biobench.standings import entry_pairs

    root = tmp_path / "results"
    root.mkdir()
    board = synthetic_board(root, 300, 1, 20)
    measured = [e for e in board.lang_entries("fr") if e.source == "measured"]
    assert len(measured) == 300
    runs = sum(len(rs) for e in measured for rs in e.runs.values())
    assert runs == 300 * 8
    reads = {"settings": 0, "alignments": 0}

    def counted(name, real):
        def wrapper(*args, **kwargs):
            reads[name] += 1
            return real(*args, **kwargs)
        return wrapper

    monkeypatch.setattr(entry_pairs, "run_settings", counted("settings", entry_pairs.run_settings))
    monkeypatch.setattr(entry_pairs, "_fractions", counted("alignments", entry_pairs._fractions))
    pair = default_pair(board, "fr")
    assert None not in pair and reads == {"settings": runs, "alignments": 0}
    assert default_pair(board, "fr") == pair and reads == {"settings": runs, "alignments": 0}  # memoised per board
    # no two rows share their settings: every pair is compared, on settings read once per run
    for i, entry in enumerate(measured):
        for task_runs in entry.runs.values():
            for r in task_runs:
                r.details["protocol"] = {**(r.details.get("protocol") or {}), "lr": 1e-5 * (i + 1)}
    board.memo.clear()
    reads.update(settings=0, alignments=0)
    assert None not in default_pair(board, "fr")
    assert reads == {"settings": runs, "alignments": 0}
    app = build_app(board)
    board.memo.clear()
    reads.update(settings=0, alignments=0)
    spent = page_view(app)
    assert "on_lang" in spent  # the Compare tab's load handler ran
    tasks_of_the_pair = 8
    assert reads["alignments"] == 2 * tasks_of_the_pair, reads  # the default pair's runs, each task of both rows


def test_the_page_the_json_and_their_counts_agree_on_a_smoke_only_board(tmp_path):
    """Issue 52 item 3: on the demo's board (smoke runs only) the page showed them and the JSON hid them, and the
    header, the toggle and the JSON each counted something else. One default, one count (`tables.rows.row_counts`)."""
    from biobench.leaderboard.app import header_text
    from biobench.leaderboard.json_routes import leaderboard_json
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.html import render_html
    from biobench.standings.aggregate import build_board
    from biobench.store import Result, result_path, run_key, write_result

    smoke = {"overrides": {"epochs": {"run": 1, "protocol": 15}}}
    for slug, task in (("a--1", "diamed"), ("b--2", "diamed"), ("c--3", "demo-cls")):
        write_result(result_path(tmp_path, slug, task, 42, "5" * 12), Result(
            model={"id": slug, "slug": slug, "name": slug.split("--")[0]},
            task={"id": task, "lang": "fr", "kind": "classification"}, seed=42, protocol={"hash": "5" * 12, "epochs": 1},
            key=run_key("r", "d", "5" * 12, 42), metrics={"test": {"macro_f1": 0.5}}, details=smoke),
            [{"id": 1, "gold": "a", "pred": "a"}, {"id": 2, "gold": "b", "pred": "b"}])
    board = build_board([tmp_path], reference=False, significance=False)
    body = leaderboard_json(board, "fr")
    assert body["include_smoke"] is True and body["smoke_rows_hidden"] == 0  # as the page opens: shown
    assert body["counts"] == {"include_smoke": True, "rows": 3, "measured": 3, "table": 2, "other_only": ["c--3"],
                              "smoke_hidden": 0, "smoke_hidden_models": 0}
    assert len(body["rows"]) == 3
    assert "3 measured model rows (French 3, 1 of them under Other tasks only);" in header_text(board)
    table = render_html(board, "fr", Filters(include_smoke=True))
    assert table.count('<tr class="measured"') == body["counts"]["table"]
    hidden = leaderboard_json(board, "fr", include_smoke=False)
    assert hidden["smoke_rows_hidden"] == 3 and hidden["rows"] == []
    assert (hidden["counts"]["smoke_hidden"], hidden["counts"]["smoke_hidden_models"]) == (3, 3)


def test_a_degenerate_run_shows_where_its_models_scores_are_and_another_subset_is_no_problem(tmp_path):
    """Issue 52 item 5: the README's degenerate one-epoch run (a second smoke run of the model, under its --quick
    one) appeared nowhere on the page but an off-screen column; and its other test subset was listed twice as a
    Problem. Now its model's cell carries ⚠ with the finding in its hover; Problems stays empty."""
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.html import render_html
    from biobench.standings.aggregate import build_board
    from biobench.standings.entry_pairs import compare_entries
    from biobench.store import Result, result_path, run_key, write_result

    def write(slug, seed, smoke_hash, overrides, score, n, degenerate=None):
        details = {"overrides": overrides, **({"degenerate": degenerate} if degenerate else {})}
        write_result(result_path(tmp_path, slug, "diamed", seed, smoke_hash), Result(
            model={"id": slug, "slug": slug, "name": slug.split("--")[0]},
            task={"id": "diamed", "lang": "fr", "kind": "classification"}, seed=seed,
            protocol={"hash": smoke_hash, "epochs": 1}, key=run_key("r", "d", smoke_hash, seed),
            metrics={"test": {"macro_f1": score}}, details=details),
            [{"id": i, "gold": "ab"[i % 2], "pred": "a" if degenerate else "ab"[i % 2]} for i in range(n)])

    quick = {"max_steps": {"run": 150, "protocol": None}}
    for seed in (42, 43):
        write("tiny--1", seed, "a" * 12, quick, 0.6, 8)
        write("minilm--2", seed, "a" * 12, quick, 0.7, 8)
    finding = {"finding": "the same class (a) for every one of the 4 test examples", "reason": "1 epoch"}
    write("tiny--1", 42, "b" * 12, {"epochs": {"run": 1, "protocol": 15}}, 0.0, 4, finding)  # a 4-example subset
    board = build_board([tmp_path], reference=False, significance=True)
    html = render_html(board, "fr", Filters(include_smoke=True))
    tiny = next(row for row in html.split("<tr") if "tiny" in row and 'class="measured"' in row)
    assert '<span class="degenerate">⚠</span>' in tiny and "the same class (a) for every one of the 4" in tiny
    smoke = [e for e in board.lang_entries("fr") if e.smoke]
    minilm = next(e.key for e in smoke if e.name.startswith("minilm"))
    one_epoch = next(e.key for e in smoke if "epochs" in e.smoke)
    assert compare_entries(board, "fr", minilm, one_epoch, n_boot=20) is not None
    assert board.problems == []  # another test subset is not damaged input
    # two smoke rows of one model told apart by a short tag (issue 52 item 6), the full overrides kept in `smoke`
    names = sorted(e.name for e in smoke if e.name.startswith("tiny"))
    assert names == ["tiny ⚑ smoke (epochs 1)", "tiny ⚑ smoke (max_steps 150)"]


def test_a_smoke_rows_short_tag():
    from biobench.standings.aggregate import short_smoke

    quick = ("batch_size 8 (protocol 16), dev_metric micro_f1 (protocol sampled_span_f1), head hf-token (protocol "
             "span), max_length 128 (protocol 1,024), max_steps 150 (protocol none)")
    assert short_smoke(quick) == "batch_size 8 +4" and short_smoke("epochs 1 (protocol 15)") == "epochs 1"
    assert short_smoke("") == ""


def test_pretraining_says_and_records_how_often_it_repeats_a_small_corpus(tmp_path, capsys):
    """Issue 52 item 7: 10,711 tokens of corpus and `--tokens 100K` read it ~10 times, silently."""
    import json

    corpus = tmp_path / "corpus.txt"
    corpus.write_text("\n\n".join(f"Le patient {i} présente une toux sèche et de la fièvre depuis {i % 7} jours."
                                  for i in range(40)) + "\n", encoding="utf-8")
    assert cli.main(["pretrain", "--model", "preset:tiny", "--corpus", str(corpus), "--tokens", "4K", "--seq-len",
                     "64", "--batch-size", "4", "--no-progress", "--save-minutes", "0", "--threads", "1",
                     "--cache-dir", str(tmp_path / "cache"), "--out", str(tmp_path / "out")]) == 0
    out = capsys.readouterr().out
    said = re.search(r"this run reads it ([0-9.]+) times", out)
    assert said and float(said.group(1)) > 1, out
    (meta,) = (tmp_path / "out" / "final").glob("biobench_pretrain.json")
    passes = json.loads(meta.read_text())["corpus_passes"]
    assert round(passes["planned"], 1) == float(said.group(1)) and passes["done"] >= passes["planned"] - 0.01
    assert passes["corpus_sequences"] * 64 >= passes["corpus_tokens"] > 0


@pytest.mark.slow
def test_the_boards_the_clis_and_the_apis_comparison_are_one_answer(tmp_path, capsys):
    """Issue 52 item 4: on the demo's results the board's Compare used 2 tasks where `biobench compare` and the API
    used 3: the demo's NER ran with other overrides (its own smoke entry), left out of the pair of smoke entries.
    The Compare tab now lists one row per model, as the tables and the CLI take a results folder."""
    import json
    import random

    import biobench
    from biobench.leaderboard.app import compare_rows, default_pair
    from biobench.standings.aggregate import build_board
    from biobench.standings.entry_pairs import compare_entries
    from biobench.store import Result, result_path, run_key, write_result

    def write(slug, task, kind, seed, overrides, accuracy):
        smoke = ("a" if "epochs" in overrides else "b") * 12
        rng = random.Random(f"{slug}{task}{seed}")
        gold = [["x", "y", "z"][i % 3] for i in range(30)]
        pred = [g if rng.random() < accuracy else "x" for g in gold]
        f1 = sum(p == g for p, g in zip(pred, gold, strict=True)) / len(gold)
        write_result(result_path(tmp_path, slug, task, seed, smoke), Result(
            model={"id": slug, "slug": slug, "name": slug.split("--")[0]},
            task={"id": task, "lang": "fr", "kind": kind}, seed=seed, protocol={"hash": smoke, "epochs": 1},
            key=run_key("r", f"d-{task}", smoke, seed), metrics={"test": {"macro_f1": f1}},
            details={"overrides": overrides}),
            [{"id": str(i), "gold": g, "pred": p} for i, (g, p) in enumerate(zip(gold, pred, strict=True))])

    for slug, accuracy in (("detour--11111111", 0.8), ("mlm--22222222", 0.6)):
        for seed in (42, 43):
            for task in ("demo-cls", "demo-ml"):
                write(slug, task, "classification", seed, {"epochs": {"run": 1, "protocol": 15}}, accuracy)
            write(slug, "demo-ner", "classification", seed, {"max_steps": {"run": 60, "protocol": 4000}}, accuracy)
    board = build_board([tmp_path], reference=False, significance=False)
    assert set(default_pair(board, "fr")) == {"detour--11111111", "mlm--22222222"}  # one row per model
    rows = compare_rows(board, "fr")
    on_board = compare_entries(board, "fr", "detour--11111111", "mlm--22222222", n_boot=200, rows=rows)
    assert main_compare(tmp_path) == 0
    cli = json.loads(capsys.readouterr().out)
    api = biobench.compare("detour", "mlm", tmp_path, n_boot=200)
    for report in (cli, api):
        assert [t["task"] for t in report["tasks"]] == [t.task for t in on_board.tasks]  # 3 tasks, all of them
        for row, compared in zip(report["tasks"], on_board.tasks, strict=True):
            c = compared.comparison
            assert row["diff"] == pytest.approx(c.diff) and row["method"] == c.method
            assert row["p_value"] == pytest.approx(c.p_value) and row["ci_low"] == pytest.approx(c.ci_low)
    assert len(on_board.tasks) == 3


def main_compare(results) -> int:
    return cli.main(["compare", "detour", "mlm", "--results", str(results), "--n-boot", "200", "--json"])


def test_a_legend_label_is_cut_in_the_middle():
    from biobench.leaderboard.plots import LEGEND_CHARS, legend_label

    long = "CLM detour (Large, 25B) = ModernCamemBERT-bio-large (reported)"
    assert len(legend_label(long)) == LEGEND_CHARS and legend_label(long).endswith("(reported)")
    assert legend_label("all-MiniLM-L6-v2 ⚑ smoke (batch_size 8 +9)") == "all-MiniLM-L6-v2 ⚑ smoke (batch_size 8 +9)"


def test_leaderboard_print_opens_as_the_page_and_include_smoke_shows_the_smoke_runs(tmp_path, capsys):
    from biobench.store import Result, result_path, run_key, write_result

    def write(task, smoke_hash, details):
        write_result(result_path(tmp_path, "a--1", task, 42, smoke_hash), Result(
            model={"id": "a--1", "slug": "a--1", "name": "a"}, task={"id": task, "lang": "fr", "kind": "classification"},
            seed=42, protocol={"hash": smoke_hash or "p"}, key=run_key("r", "d", smoke_hash or "p", 42),
            metrics={"test": {"macro_f1": 0.5}}, details=details), [{"id": 1, "gold": "a", "pred": "a"}])

    write("diamed", None, {})
    write("fracco-30", "c" * 12, {"overrides": {"epochs": {"run": 1, "protocol": 15}}})
    assert cli.main(["leaderboard", "--print", "--no-reference", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out  # as the page opens: a's smoke cell where a has no protocol result is shown
    assert "⚑ a · fracco-30: protocol overrides epochs 1 (protocol 15)" in out and "hidden" not in out
    assert cli.main(["leaderboard", "--print", "--include-smoke", "--no-reference", "--results", str(tmp_path)]) == 0
    assert capsys.readouterr().out == out
    assert cli.main(["leaderboard", "--print", "--hide-smoke", "--no-reference", "--results", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "⚑ a · fracco-30" not in out and "⚑ 1 smoke result of 1 model hidden (drop --hide-smoke to show them)" in out


def test_a_protocol_result_hides_only_its_own_models_smoke_run_and_every_count_says_the_same(tmp_path, capsys):
    """Issue 62 item 4: one protocol result (a's) hid every smoke result of the language (b's, c's), and the page
    counted them three ways ("⚑ 14 results of 5 models", "Smoke runs ... of 3 model(s) are hidden", JSON
    `smoke_hidden: 5`) under a header with a doubled parenthesis. Now a smoke cell shows wherever its model has
    no protocol result on the task; unticked, the toggle's label, the table's note, the JSON and `--print` give
    one count in one wording."""
    from biobench.leaderboard.app import header_text, smoke_toggle_label
    from biobench.leaderboard.json_routes import leaderboard_json
    from biobench.leaderboard.tables.filters import Filters
    from biobench.leaderboard.tables.html import render_html
    from biobench.standings.aggregate import build_board
    from biobench.store import Result, result_path, run_key, write_result

    def write(slug, task, smoke_hash, score):
        details = {"overrides": {"epochs": {"run": 1, "protocol": 15}}} if smoke_hash else {}
        write_result(result_path(tmp_path, slug, task, 42, smoke_hash), Result(
            model={"id": slug, "slug": slug, "name": slug.split("--")[0]},
            task={"id": task, "lang": "fr", "kind": "classification"}, seed=42,
            protocol={"hash": smoke_hash or "p"}, key=run_key("r", "d", smoke_hash or "p", 42),
            metrics={"test": {"macro_f1": score}}, details=details),
            [{"id": 1, "gold": "a", "pred": "a"}, {"id": 2, "gold": "b", "pred": "b"}])

    write("a--1", "diamed", None, 0.61)          # a's protocol result
    write("a--1", "diamed", "c" * 12, 0.11)      # a's smoke run under it: a's protocol cell wins
    write("b--2", "diamed", "c" * 12, 0.22)      # b and c have smoke runs only
    write("b--2", "fracco-30", "c" * 12, 0.33)
    write("c--3", "demo-cls", "c" * 12, 0.44)
    board = build_board([tmp_path], reference=False, significance=False)
    page = render_html(board, "fr", Filters()) + render_html(board, "fr", Filters(), "other")
    assert "61.0" in page and "22.0" in page and "33.0" in page and "44.0" in page and "11.0</" not in page
    assert "scored 11.0, not shown" in page and "hidden" not in page  # a's smoke run: named in a's cell's hover
    body = leaderboard_json(board, "fr")
    assert body["include_smoke"] is True and len(body["rows"]) == 3 and body["counts"]["smoke_hidden"] == 0
    assert "3 measured model rows (French 3, 1 of them under Other tasks only);" in header_text(board)

    said = "⚑ 3 smoke results of 2 models"  # b's two cells and c's one: what "Show smoke runs" governs
    assert smoke_toggle_label(board) == f"Show smoke runs ({said})"
    unticked = Filters(include_smoke=False)
    paper, other = render_html(board, "fr", unticked), render_html(board, "fr", unticked, "other")
    assert f"{said} hidden (protocol overrides)" in paper and "hidden (protocol" not in other  # said once
    assert "22.0" not in paper + other and "61.0" in paper
    hidden = leaderboard_json(board, "fr", include_smoke=False)
    assert (hidden["counts"]["smoke_hidden"], hidden["counts"]["smoke_hidden_models"]) == (3, 2)
    assert hidden["smoke_rows_hidden"] == 2 and [r["key"] for r in hidden["rows"]] == ["a--1"]
    assert cli.main(["leaderboard", "--print", "--hide-smoke", "--no-reference", "--results", str(tmp_path)]) == 0
    assert f"{said} hidden (drop --hide-smoke to show them)" in capsys.readouterr().out
