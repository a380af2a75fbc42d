"""Study files (bench/api/study.py): validation before anything runs, run references, steps and their order,
`extends`; the Holm correction of the report; the tiny study end to end (slow); the report equal to `compare`."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import pytest
from biobench import cli
from biobench.api.study import load_study, order
from biobench.errors import ConfigError

from tests.support import TINY_STUDY as TINY
from tests.support import TRANSPLANT_PROBES, example_study_clone
from tests.support import study_pretrain as _pretrain

REPO = Path(__file__).resolve().parents[2]


def _api_example() -> str:
    """The Python block of docs/API.md's "A study from Python" section."""
    text = (REPO / "docs" / "API.md").read_text(encoding="utf-8")
    section = text[text.index("## A study from Python"):]
    return section[section.index("```python\n") + 10:section.index("```\n", section.index("```python"))]


def _eval(name: str, models: list[str], tasks: str = '["demo-cls"]', seeds: str = "42") -> str:
    listed = ", ".join(f'{{ model = "{m}" }}' for m in models)
    return f'\n[[eval]]\nname = "{name}"\ntasks = {tasks}\nseeds = "{seeds}"\nmodels = [{listed}]\n'


_CKA = '\n[[analysis]]\nname = "x"\nkind = "cka"\nmodels = ["run:a/final", "run:a/final"]\ntexts = ["t"]\n'


def _write(tmp_path: Path, text: str, name: str = "study.toml") -> Path:
    path = tmp_path / name
    path.write_text(text, encoding="utf-8")
    return path


def _refused(tmp_path: Path, text: str) -> str:
    with pytest.raises(ConfigError) as err:
        load_study(_write(tmp_path, text))
    message = str(err.value)
    assert "\n" not in message and str(tmp_path / "study.toml") in message
    return message


def test_a_study_becomes_steps_in_dependency_order(tmp_path):
    text = (_pretrain("detour") + _pretrain("mlm", "mlm") + _pretrain("decay", "mlm", "run:detour/phase1")
            + _eval("fr", ["run:detour/final", "run:mlm/final", "run:decay/final"])
            + '\n[[analysis]]\nname = "cka-final"\nkind = "cka"\nmodels = ["run:detour/final", "run:mlm/final"]\n'
              'texts = ["demo-cls"]\nn = 8\n'
            + '\n[[compare]]\na = "run:detour/final"\nb = "run:mlm/final"\n')
    study = load_study(_write(tmp_path, text))
    ids = [s.id for s in order(study)]
    assert ids.index("pretrain/detour") < ids.index("pretrain/decay") < ids.index("eval/fr/decay")
    assert study.step("pretrain/decay").needs == ("pretrain/detour",)
    assert study.step("eval/fr/detour").needs == ("pretrain/detour",)
    assert study.step("analysis/cka-final").needs == ("pretrain/detour", "pretrain/mlm")
    argv = study.step("analysis/cka-final").argv
    assert argv[:2] == ("analyze", "cka") and str(study.runs / "detour" / "final") in argv
    assert argv[-2:] == ("--out", str(study.out / "analyses" / "cka-final"))
    assert study.out == (tmp_path / "study").resolve() and study.results == study.out / "results"
    assert [c.name for c in study.compares] == ["detour-vs-mlm"] and study.compares[0].correction == "holm"
    # the decay run starts from detour's phase1 folder; a hub id is never read as a reference
    from biobench.api.study import pretrain_settings_text

    assert f'model = "{study.runs / "detour" / "phase1"}"' in pretrain_settings_text(study, "decay")
    hub = load_study(_write(tmp_path, _eval("hub", ["almanach/moderncamembert-base"]), "hub.toml"))
    assert hub.grids[0].models[0].model == "almanach/moderncamembert-base" and hub.step("eval/hub/moderncamembert-base").needs == ()


def test_a_step_checkpoint_resolves_to_the_folder_the_trainer_writes(tmp_path):
    text = _pretrain("detour", extra='save_every = "2K"') + _eval("fr", ["run:detour/step-4K"])
    study = load_study(_write(tmp_path, text))
    # 4 sequences x 64 tokens = 256 tokens a step: 4,000 is reached at step 16 (4,096 tokens seen)
    assert study.grids[0].models[0].model == str(study.runs / "detour" / "step-4096")


@pytest.mark.parametrize(("text", "expected"), [
    (_pretrain("a", model="run:b/final") + _pretrain("b", model="run:a/final"),
     "form a cycle (a -> b -> a)"),
    (_pretrain("a") + _eval("fr", ["run:nope/final"]), "run:nope/final refers to no [[pretrain]] run (runs: a)"),
    (_pretrain("a") + _pretrain("a", "mlm"), "the name 'a' is used by two [[pretrain]] tables"),
    (_pretrain("a") + _eval("fr", ["run:a/step-500M"]),
     "run 'a' never writes step checkpoints (save_every is unset); add save_every"),
    (_pretrain("a", extra='save_every = "3K"') + _eval("fr", ["run:a/step-4K"]),
     "saves every 3,000 tokens, so it writes no checkpoint at 4,000"),
    (_pretrain("a", extra='save_every = "10K"') + _eval("fr", ["run:a/step-30K"]), "never reaches 30,000"),
    (_pretrain("a") + _eval("fr", ["run:a"]), "'run:a' is not a run reference; write run:NAME/final"),
    (_pretrain("a") + _eval("fr", ["run:a/final", "run:a/final"]), "evaluates run:a/final twice"),
    (_pretrain("a") + _eval("one", ["run:a/final"], '["demo-cls", "demo-ner"]') + _eval("two", ["run:a/final"]),
     "run:a/final on demo-cls with these seeds and overrides is already evaluated by eval/one/a"),
    (_pretrain("a") + '\n[[analysis]]\nname = "x"\nkind = "cka"\nmodels = ["run:a/final", "run:a/final"]\ntexts = ["t"]\n'
     '\n[[analysis]]\nname = "x"\nkind = "cka"\nmodels = ["run:a/final", "run:a/final"]\ntexts = ["t"]\n',
     "analysis 'x' writes too; give it its own name"),
    (_pretrain("a", extra="lrr = 0.1"), "unknown setting 'lrr': did you mean 'lr'?"),
    (_pretrain("a", extra='out = "elsewhere"'), "out is decided by the study"),
    ('bogus = 1\n' + _pretrain("a"), "unknown key(s) bogus"),
    (_pretrain("a") + _eval("fr", ["run:a/final"]) + '\n[[compare]]\na = "run:a/final"\nb = "DrBERT"\n',
     "b = 'DrBERT' is evaluated by no [[eval]] table"),
    (_pretrain("a") + _eval("fr", ["run:a/final", "DrBERT"]) + '\n[[compare]]\na = "run:a/final"\nb = "DrBERT"\n'
     'correction = "fdr"\n', "correction = 'fdr'; give one of holm, bonferroni, none"),
    (_pretrain("a") + _eval("fr", ["run:a/final", "DrBERT"]) + '\n[[compare]]\na = "run:a/final"\nb = "DrBERT"\n'
     'paper_a = "Nope"\n', "'Nope' is not a model row of the paper's tables"),
    ("", "no [[pretrain]], [[eval]] or [[analysis]] table"),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "run:a/final"\n',
     "analysis 'p': a probe needs task = \"TASK\""),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "run:a/final"\ntask = "demo-cls"\n'
     'seeds = "44-42"\n', "range 44-42 is reversed"),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "run:a/final"\ntask = "demo-cls"\n'
     'results = "elsewhere"\n', "results is decided by the study"),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "run:a/final"\ntask = "demo-cls"\n'
     'paper = nan\n', "analysis 'p' paper value 'nan': give a finite number"),
    (_pretrain("a") + _pretrain("b", "mlm") + '\n[[analysis]]\nname = "c"\nkind = "cka"\n'
     'models = ["run:a/final", "run:b/final"]\ntexts = ["t"]\n'
     '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "analysis:c"\ntask = "demo-cls"\n',
     "model = 'analysis:c' is a cka analysis; only a transplant's folder is a model"),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "analysis:t"\ntask = "demo-cls"\n'
     '\n[[analysis]]\nname = "t"\nkind = "transplant"\nfrom = "run:a/final"\ninto = "run:a/init"\nlayers = "0"\n',
     "model = 'analysis:t' names no earlier [[analysis]]"),
    (_pretrain("a") + '\n[[analysis]]\nname = "t"\nkind = "transplant"\nfrom = "run:a/final"\n'
     'into = "run:zz/final"\nlayers = "0"\n', "run:zz/final refers to no [[pretrain]] run"),
    # issue 60 item 1: each analysis kind's options as `biobench analyze` declares them (analysis/options.py)
    (_pretrain("a") + _CKA + 'nn = 500\n', "unknown key 'nn' for kind = 'cka'; did you mean 'n'?"),
    (_pretrain("a") + _CKA + 'devi = "cpu"\n', "unknown key 'devi' for kind = 'cka'"),
    (_pretrain("a") + _CKA + 'device = "cuda"\n', "device is decided by the study"),
    (_pretrain("a") + _CKA + 'n = "500"\n', "analysis 'x' n = '500': give a whole number"),
    (_pretrain("a") + _CKA + 'include_embeddings = "yes"\n', "include_embeddings = 'yes': give true or false"),
    (_pretrain("a") + _CKA.replace('"run:a/final", "run:a/final"', '"run:a/final"'), "give two values"),
    (_pretrain("a") + _CKA.replace('texts = ["t"]\n', ''), "a cka analysis needs texts"),
    (_pretrain("a") + '\n[[analysis]]\nname = "p"\nkind = "probe"\nmodel = "run:a/final"\ntask = "demo-cls"\n'
     'pooling = "max"\n', "pooling = 'max': give one of mean, cls"),
    (_pretrain("a") + '\n[[analysis]]\nname = "t"\nkind = "transplant"\nfrom = "run:a/final"\ninto = "run:a/init"\n'
     'layers = "run:a/final"\n', "a checkpoint is no layers"),
    # a corpus that is another step's output: a checkpoint is no text (b starts from a, a reads b's final)
    (_pretrain("a").replace('corpus = "generated:demo-fr"', 'corpus = "run:b/final"') + _pretrain("b", model="run:a/final"),
     "pretrain 'a': corpus = 'run:b/final' names a study output, not text"),
    ('lives = 0\n' + _pretrain("a"), "lives = 0: give how many times a SLURM job may start"),
    (_pretrain("a", extra="lives = 1000"), "pretrain 'a': lives = 1000"),
    # issue 58 item 8: an [[eval]] name names steps and files: control characters refused, a NUL without a traceback
    (_pretrain("a") + _eval("x\\u001b[31m", ["run:a/final"]), "is not a plain name"),
    (_pretrain("a") + _eval("x\\u202eevil", ["run:a/final"]), "is not a plain name"),
    (_pretrain("a") + _eval("a\\nb", ["run:a/final"]), "is not a plain name"),
    (_pretrain("a") + _eval("a\\u0000b", ["run:a/final"]), "is not a plain name"),
    (_pretrain("a") + '\n[[eval]]\nname = "fr"\ntasks = ["demo-cls"]\nmodels = [{ model = "run:a/final", '
     'name = "x\\u202ey" }]\n', "holds the control or bidirectional character U+202E"),
])
def test_bad_input_is_one_line_before_anything_runs(tmp_path, text, expected):
    assert expected in _refused(tmp_path, text)
    assert not (tmp_path / "study").exists()  # nothing written, nothing run


def test_transplant_and_probe_steps_their_needs_done_markers_and_progress(tmp_path):
    """A transplant after both runs it reads, a probe of it after the transplant; the transplant is done when its
    transplant.json exists, a probe when each of its seeds has a result file (status: partly done, k/n seeds)."""
    import biobench
    from biobench.api.study_run import is_done

    study = biobench.study(_write(tmp_path, _pretrain("detour") + _pretrain("mlm", "mlm") + TRANSPLANT_PROBES))
    plan = {step["id"]: step for step in study.plan()}
    assert plan["analysis/transplant-low"]["needs"] == ["pretrain/detour", "pretrain/mlm"]
    assert plan["analysis/probe-transplant-low"]["needs"] == ["analysis/transplant-low"]
    assert plan["analysis/probe-mlm"]["needs"] == ["pretrain/mlm"]
    out = study.out
    assert plan["analysis/transplant-low"]["argv"] == [
        "analyze", "transplant", "--from", str(out / "runs" / "detour" / "final"), "--into",
        str(out / "runs" / "mlm" / "final"), "--layers", "0-1", "--component", "all", "--out",
        str(out / "analyses" / "transplant-low")]
    probe = plan["analysis/probe-transplant-low"]["argv"]
    assert probe[probe.index("--model") + 1] == str(out / "analyses" / "transplant-low")
    assert probe[-2:] == ["--results", str(out / "analyses" / "probe-transplant-low" / "results")]
    assert [s["analysis"] for s in plan.values() if s["kind"] == "analysis"] == ["transplant", "probe", "probe"]
    assert not any(s["done"] for s in plan.values())
    # the outputs say what is done: the runs' final records, the transplant's record, the probe's seed files
    for run in ("detour", "mlm"):
        (out / "runs" / run / "final").mkdir(parents=True)
        (out / "runs" / run / "final" / "biobench_pretrain.json").write_text("{}")
    (out / "analyses" / "transplant-low").mkdir(parents=True)
    (out / "analyses" / "transplant-low" / "transplant.json").write_text("{}")
    seed = out / "analyses" / "probe-transplant-low" / "results" / "transplant-low--abc--probe-mean-last" / "demo-cls"
    seed.mkdir(parents=True)
    (seed / "seed-42.json").write_text("{}")
    states = {s.step: s for s in study.status()}
    assert states["analysis/transplant-low"].state == "done"
    assert (states["analysis/probe-transplant-low"].state, states["analysis/probe-transplant-low"].detail) == \
        ("partly done", "1/2 seeds done")
    assert (states["analysis/probe-mlm"].state, states["analysis/probe-mlm"].detail) == ("to run", "0/2 seeds done")
    (seed / "seed-43.json").write_text("{}")
    assert is_done(study.study, study.study.step("analysis/probe-transplant-low"))
    assert {s.step: s.state for s in study.status()}["analysis/probe-transplant-low"] == "done"


def test_the_api_refuses_what_the_command_refuses(tmp_path):
    import biobench

    path = _write(tmp_path, _pretrain("a") + _eval("fr", ["run:nope/final"]))
    with pytest.raises(biobench.ConfigError, match="run:nope/final refers to no"):
        biobench.study(path)
    study = biobench.study(_write(tmp_path, _pretrain("a"), "ok.toml"), out=tmp_path / "elsewhere")
    assert study.out == tmp_path / "elsewhere" and [s["id"] for s in study.plan()] == ["pretrain/a"]
    with pytest.raises(biobench.ConfigError, match="steps pretrain/b: no such step"):
        study.run(steps=["pretrain/b"])
    with pytest.raises(biobench.ConfigError, match=r"no \[\[compare\]\] table and no probe"):
        study.report()


def test_bad_study_through_the_command_line_is_one_error_line(tmp_path, capsys):
    path = _write(tmp_path, _pretrain("a", model="run:b/final") + _pretrain("b", model="run:a/final"))
    assert cli.main(["study", "run", str(path), "--dry-run"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "cycle" in err[0]


def test_extends_replaces_tables_by_name_and_keeps_the_base_paths(tmp_path):
    base_dir = tmp_path / "base"
    base_dir.mkdir()
    (base_dir / "corpus.txt").write_text("un texte\n", encoding="utf-8")
    base = (_pretrain("detour").replace('"generated:demo-fr"', '"corpus.txt"') + _pretrain("mlm", "mlm")
            + _eval("fr", ["run:detour/final", "run:mlm/final"]))
    _write(base_dir, base, "base.toml")
    child = 'extends = "base/base.toml"\nout = "mine"\n' + _pretrain("mlm", "mlm", tokens="40K")
    study = load_study(_write(tmp_path, child))
    assert study.pretrain["mlm"]["tokens"] == 40_000 and study.pretrain["detour"]["tokens"] == 20_000
    assert study.pretrain["detour"]["corpus"] == str((base_dir / "corpus.txt").resolve())
    assert study.out == (tmp_path / "mine").resolve() and len(study.grids) == 2
    loop = _write(tmp_path, 'extends = "loop.toml"\n' + _pretrain("a"), "loop.toml")
    with pytest.raises(ConfigError, match="makes a loop of study files"):
        load_study(loop)


def test_adjusted_p_values_holm_and_bonferroni():
    from biobench.stats import adjust_p_values

    p = [0.01, 0.04, 0.03, math.nan, 0.005]
    # statsmodels.stats.multitest.multipletests(..., method="holm") on the four tested values
    assert adjust_p_values(p, "holm")[:3] == pytest.approx([0.03, 0.06, 0.06]) and adjust_p_values(p)[4] == 0.02
    assert math.isnan(adjust_p_values(p, "holm")[3])
    assert adjust_p_values(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, math.nan, 0.02], nan_ok=True)
    assert adjust_p_values([0.3, 0.6], "holm") == [0.6, 0.6] and adjust_p_values([0.3], "none") == [0.3]


def _outputs(root: Path) -> dict[Path, int]:
    return {p: p.stat().st_mtime_ns for p in root.rglob("*")
            if p.is_file() and ".study" not in p.parts and "logs" not in p.parts and "report" not in p.parts}


@pytest.mark.slow
def test_tiny_study_runs_end_to_end_resumes_and_reports_what_compare_says(tmp_path, capsys, monkeypatch):
    """docs/API.md's study example on the tiny study (two pretrainings side by side, their eval grids, CKA and
    its trajectory, a layer transplant and two linear probes), each step after what it needs; `status` says done
    for each; a second run (the command line) reruns nothing; the report's numbers are `biobench compare
    --average` by hand on the same results, its task p-values Holm-adjusted, and the probes' means their seeds'."""
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.chdir(tmp_path)
    path = _write(tmp_path, TINY + TRANSPLANT_PROBES)
    out = tmp_path / "study"
    example = _api_example()
    assert 'biobench.study("examples/studies/tiny.toml", out="study-tiny")' in example
    exec(example.replace("examples/studies/tiny.toml", str(path)).replace('out="study-tiny"', f'out="{out}"'), {})
    captured = capsys.readouterr()
    err = captured.err
    # one line per finished run: 2 models x 2 tasks x 2 seeds of eval, 2 probes x 2 seeds
    assert err.count(": test macro-F1 ") == 8 + 4, err
    assert "eval/cls/detour after pretrain/detour" in captured.out  # the example's plan lines
    assert "study-tiny" not in captured.out and "detour-vs-mlm {'fr': " in captured.out
    # each step starts only after what it needs ended
    assert err.index("[pretrain/detour] finished") < err.index("[eval/cls/detour] started")
    assert max(err.index("[pretrain/detour] finished"), err.index("[pretrain/mlm] finished")) < \
        err.index("[analysis/transplant-low] started")
    assert err.index("[analysis/transplant-low] finished") < err.index("[analysis/probe-transplant-low] started")
    assert (out / "detour" / "final" / "config.json").exists() is False  # runs live under <out>/runs/
    assert (out / "runs" / "detour" / "final" / "config.json").exists()
    assert (out / "analyses" / "cka-final" / "cka.json").exists()
    transplant = json.loads((out / "analyses" / "transplant-low" / "transplant.json").read_text())
    assert (transplant["from"], transplant["into"], transplant["layers"]) == \
        (str(out / "runs" / "detour" / "final"), str(out / "runs" / "mlm" / "final"), [0, 1])
    before = _outputs(out)
    assert cli.main(["study", "run", str(path), "--jobs", "2"]) == 0
    again = capsys.readouterr().err
    assert again.count("done already: skipped") == 9 and "started" not in again
    assert _outputs(out) == before

    assert cli.main(["study", "status", str(path)]) == 0
    status = capsys.readouterr().out.splitlines()
    assert [line.split()[1] for line in status] == ["done"] * 9
    assert "4/4 runs done" in next(line for line in status if line.startswith("eval/cls/detour"))
    assert "2/2 seeds done" in next(line for line in status if line.startswith("analysis/probe-transplant-low"))

    assert cli.main(["study", "report", str(path)]) == 0
    printed = capsys.readouterr().out
    report = json.loads((out / "report" / "report.json").read_text())
    assert cli.main(["compare", str(out / "runs" / "detour" / "final"), str(out / "runs" / "mlm" / "final"),
                     "--results", str(out / "results"), "--average", "--json", "--n-boot", "200"]) == 0
    by_hand = json.loads(capsys.readouterr().out)
    mine = report["comparisons"][0]["compare"]
    assert mine["tasks"] == [{**row, "p_adjusted": mine["tasks"][i]["p_adjusted"]} for i, row in enumerate(by_hand["tasks"])]
    assert mine["averages"] == by_hand["averages"]
    from biobench.stats import adjust_p_values

    assert [r["p_adjusted"] for r in mine["tasks"]] == adjust_p_values([r["p_value"] for r in by_hand["tasks"]], "holm")
    md = (out / "report" / "report.md").read_text()
    assert "| demo-cls | demo-multilabel | average |" in md.replace("model | ", "") and "Holm" in md
    assert "![CKA divergence by layer: cka-final](figures/cka-final.png)" in md
    assert (out / "report" / "figures" / "cka-final.png").stat().st_size > 0
    assert "![CKA divergence along the run (trajectory): trajectory](figures/trajectory.png)" in md
    # the combined figure: A - B per task and on the average with their CIs
    assert "(figures/detour-vs-mlm-differences.png)" in md and "filled: significant after Holm" in md
    assert report["comparisons"][0]["figure"] == str(out / "report" / "figures" / "detour-vs-mlm-differences.png")
    assert (out / "report" / "figures" / "detour-vs-mlm-differences.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # the paper's row for A as published (bench/standings/reference): no demo task in Table 1, its French average
    assert "| CLM detour (Base, 10B) = ModernCamemBERT-bio-base (paper) | – | – | 61.60 |" in md
    assert "\\begin{tabular}" in (out / "report" / "report.tex").read_text()
    csv = (out / "report" / "report.csv").read_text().splitlines()
    assert csv[0].startswith("comparison,task,model_a,model_b,mean_a") and len(csv) == 1 + 2 + 1
    # the probes (Table 3's layout): each one's mean is its seeds' macro-F1 as their result files hold them
    probes = {p["probe"]: p for p in report["probes"]}
    for name in ("probe-mlm", "probe-transplant-low"):
        seeds = sorted((out / "analyses" / name / "results").glob("*/demo-cls/seed-*.json"))
        assert [s.name for s in seeds] == ["seed-42.json", "seed-43.json"]
        f1 = [json.loads(s.read_text())["metrics"]["test"]["macro_f1"] for s in seeds]
        assert probes[name]["summary"]["mean"] == pytest.approx(100 * sum(f1) / 2) and probes[name]["seeds_done"] == 2
    transplant_name = "transplant-low (layers 0-1 [all] of run:detour/final into run:mlm/final)"
    assert probes["probe-transplant-low"]["model"] == transplant_name and probes["probe-mlm"]["model"] == "run:mlm/final"
    assert f"| probe-transplant-low | {transplant_name} | demo-cls |" in md and "## Linear probes" in md
    # a probe's `paper = 32.8`: the paper's score beside it (not passed to analyze probe)
    assert (probes["probe-mlm"]["paper"], probes["probe-transplant-low"]["paper"]) == (32.8, None)
    assert next(line for line in md.splitlines() if line.startswith("| probe-mlm |")).endswith("| 2/2 | 32.80 |")
    import biobench

    plan = {step["id"]: step for step in biobench.study(path).plan()}
    assert "--paper" not in plan["analysis/probe-mlm"]["argv"] and "--task" in plan["analysis/probe-mlm"]["argv"]
    assert f"probe probe-transplant-low: {transplant_name} on demo-cls: " in printed
    assert (out / "report" / "probes.csv").read_text().splitlines()[0] == \
        "probe,model,task,mean,ci_low,ci_high,seeds_done,seeds,paper"


def test_a_failed_step_is_reported_with_its_last_log_line_and_the_retry_command(tmp_path, capsys):
    """A pretraining that fails (its corpus folder holds no text: found only when it runs, a missing one is
    refused before anything starts) fails its step; the eval that needs it is not run; `status` says failed,
    the log's last line and the command that retries; the eval waits on it."""
    missing = tmp_path / "empty-corpus"
    missing.mkdir()
    text = _pretrain("a").replace('"generated:demo-fr"', f'"{missing}"') + _eval("fr", ["run:a/final"])
    path = _write(tmp_path, text)
    assert cli.main(["study", "run", str(path), "--jobs", "1", "--threads", "1"]) == 1
    err = capsys.readouterr().err
    assert "[pretrain/a] failed (exit 2)" in err and "[eval/fr/a] not run: pretrain/a failed" in err, err
    assert cli.main(["study", "status", str(path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split()[:2] == ["pretrain/a", "failed"] and "error: " in lines[0] and str(missing) in lines[0]
    assert lines[1].strip() == f"retry: biobench study run {path}"
    assert lines[2].split()[:4] == ["eval/fr/a", "waiting", "on", "pretrain/a"]


@pytest.mark.parametrize("name", ["tiny", "paper-fr-base", "paper-en-base", "paper-fr-large", "paper-en-50b"])
def test_the_example_studies_are_valid_and_list_their_steps(name, tmp_path, capsys):
    """`study run --dry-run` of each example from a clone holding its inputs (issue 60 item 2): the paper's French study carries Table 7's decay sweep (each
    decay_ratio a run of its own, evaluated and compared with the 1B decay), Table 4's decoder control (a
    Gemma-3 decoder-control run and its CKA from init to final) and Table 3/6's transplants with their probes."""
    path = example_study_clone(tmp_path / "clone") / f"{name}.toml"  # with stand-ins of the inputs it names
    assert cli.main(["study", "run", str(path), "--dry-run", "--out", str(tmp_path / "s")]) == 0
    steps = {line.split(":", 1)[0]: line for line in capsys.readouterr().out.splitlines()}
    assert not (tmp_path / "s").exists()  # a dry run writes nothing
    if name == "paper-en-50b":
        assert {"pretrain/base-detour", "pretrain/large-mlm", "eval/en/PubMedBERT"} <= set(steps)
        return
    if name != "paper-fr-base":
        assert "pretrain/detour" in steps and "pretrain/mlm" in steps
        return
    study = load_study(path, tmp_path / "s")
    sweep = {n: s["decay_ratio"] for n, s in study.pretrain.items() if n.startswith("detour-decay-")}
    assert sweep == {"detour-decay-0.025": 0.025, "detour-decay-0.2": 0.2, "detour-decay-0.3": 0.3,
                     "detour-decay-0.5": 0.5} and study.pretrain["detour"]["decay_ratio"] == 0.1
    assert all(steps[f"eval/decay-sweep/{n}"].endswith(f"(after pretrain/{n})") for n in sweep)
    assert {c.name for c in study.compares} >= {f"decay-{r}-vs-detour" for r in ("0.025", "0.2", "0.3", "0.5")}
    assert study.pretrain["decoder-control"]["recipe"] == "decoder-control"
    assert f"--models {tmp_path / 's' / 'runs' / 'decoder-control' / 'init'} " in steps["analysis/cka-decoder-control"]
    transplants = [s for s in study.steps if s.analysis == "transplant"]
    assert [s.argv[s.argv.index("--layers") + 1] for s in transplants] == ["0-7", "8-14", "15-21", "0-21", "0-21"]
    probes = [s for s in study.steps if s.analysis == "probe"]
    assert len(probes) == 7 and all(s.argv[s.argv.index("--task") + 1] == "diamed" for s in probes)
    assert study.paper_scores == {"probe-mlm": 32.8, "probe-detour": 39.9, "probe-transplant-low": 31.9,
                                  "probe-transplant-mid": 35.3, "probe-transplant-late": 32.4,
                                  "probe-transplant-attention": 33.9, "probe-transplant-mlp": 35.3}
    assert study.step("analysis/probe-transplant-mlp").needs == ("analysis/transplant-mlp",)


def test_status_keeps_each_eval_steps_plan_while_what_it_depends_on_is_unchanged(tmp_path, tiny_mlm_dir, monkeypatch):
    """`study status` plans an eval step once (model revision from its weights, task data, keys) and keeps the
    plan in <out>/.study/plans/; the next call reads the result files and claims against it without planning
    and says the same; new weights (or another grid) make it plan again."""
    import shutil

    import biobench
    from biobench.api import evaluation

    model = tmp_path / "model"
    shutil.copytree(tiny_mlm_dir, model)
    path = _write(tmp_path, _eval("fr", [str(model)], '["demo-cls", "demo-multilabel"]', "42,43"))
    calls: list[str] = []
    real = evaluation.plan_grid
    monkeypatch.setattr(evaluation, "plan_grid", lambda *a, **k: calls.append(a[0]) or real(*a, **k))

    def states() -> list[tuple[str, str, str]]:
        return [(s.step, s.state, s.detail) for s in biobench.study(path).status()]

    first = states()
    assert first == [("eval/fr/model", "to run", "0/4 runs done")] and len(calls) == 1
    kept = tmp_path / "study" / ".study" / "plans" / "eval--fr--model.json"
    assert json.loads(kept.read_text())["runs"][0][:2] == ["demo-cls", 42]
    assert states() == first and len(calls) == 1  # read from the kept plan: not planned again
    weights = next(model.glob("*.safetensors"))
    stat = weights.stat()
    os.utime(weights, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))  # new weights: another revision maybe
    assert states() == first and len(calls) == 2
    assert states() == first and len(calls) == 2
    path.write_text(_eval("fr", [str(model)], '["demo-cls"]', "42"), encoding="utf-8")  # another grid
    assert states() == [("eval/fr/model", "to run", "0/1 runs done")] and len(calls) == 3


def test_the_status_benchmark_compares_both_arms_and_prints_the_ratio_last(tmp_path, capsys):
    """bench/perf/study_status.py (the figure in docs/STUDIES.md): both arms run `study status` as processes,
    must print the same states, and the ratio is the last line."""
    from biobench.perf import study_status

    path = _write(tmp_path, _pretrain("a"))
    assert study_status.main([str(path), "--out", str(tmp_path / "out"), "--repeats", "1"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert lines[0].startswith("plan    median ") and lines[1].startswith("cached  median ")
    assert "states identical in both arms" in lines[2] and lines[-1].startswith("ratio: ")
    with pytest.raises(SystemExit):
        study_status.main([str(path), "--out", str(tmp_path / "out"), "--repeats", "0"])


# ------------------------------------------------------------------------------------------------ issue 60 item 1
def _table_for(spec) -> dict[str, object]:
    """A value of the declared type for each option a study table may give (models: run references)."""
    values: dict[str, object] = {}
    for option in spec.options:
        if option.decided or option.hidden or option.group and any(
                o.group == option.group and o.key in values for o in spec.options):
            continue
        if option.role in ("model", "run"):
            value: object = "run:a/final"
        elif option.choices:
            value = option.choices[-1]
        else:
            value = {"int": 3, "float": 0.5, "flag": True, "text": "demo-cls"}[option.type]
        if option.key in ("data_dir", "haystacks", "data", "task_file"):
            value = "somewhere"
        if "seeds" in option.key or option.key in ("lengths", "layers"):
            value = "42,43"
        values[option.key] = [value, value] if option.nargs == 2 else [value] if option.nargs or option.repeat \
            else value
    return values


def test_every_declared_analysis_option_reaches_the_analyze_parser_as_declared(tmp_path):
    """A study's [[analysis]] keys are the options `biobench analyze KIND` is built from: each one a study may give,
    with a value of its type, is parsed by the real command-line parser into that value."""
    import tomllib

    from biobench.analysis.options import ANALYSES

    parser = cli.build_parser()
    for kind, spec in ANALYSES.items():
        table = {"name": "x", "kind": kind, **_table_for(spec)}
        lines = [f"{k} = {json.dumps(v)}" for k, v in table.items()]
        path = _write(tmp_path, _pretrain("a", extra='save_every = "4096"') + "\n[[analysis]]\n" + "\n".join(lines)
                      + "\n")
        tomllib.loads(path.read_text())
        study = load_study(path)
        args = parser.parse_args(list(study.step("analysis/x").argv))
        for option in spec.options:
            if option.key not in table:
                continue
            got = getattr(args, option.dest or option.key)
            if option.role in ("model", "run", "path") or option.key == "texts":
                assert got, (kind, option.key)  # resolved to a folder of the study or beside the file
            else:
                assert got == table[option.key], (kind, option.key, got)


def test_an_unknown_analysis_key_stops_study_run_before_anything_starts(tmp_path):
    """Issue 60 item 1 on a real process: `nn = 500` was passed as --nn and failed after the pretrainings."""
    from tests.support import run_biobench

    path = _write(tmp_path, _pretrain("a") + _CKA + "nn = 500\n")
    done = run_biobench("study", "run", str(path), cwd=tmp_path)
    assert done.returncode == 2 and done.stderr.count("\n") == 1, done.stderr
    assert "analysis 'x': unknown key 'nn' for kind = 'cka'; did you mean 'n'?" in done.stderr
    assert not (tmp_path / "study").exists()


# ------------------------------------------------------------------------------------------------ issue 58 item 8
def test_reading_a_study_is_linear_in_its_steps(tmp_path, monkeypatch):
    """Each output folder was compared with every earlier one (1,000 analyses: 120 s). Counted as path
    comparisons: twice the steps, about twice the comparisons (the old reading: four times)."""
    import pathlib

    def comparisons(n: int) -> int:
        text = _pretrain("a") + _pretrain("b", "mlm") + "".join(
            f'\n[[analysis]]\nname = "c{i}"\nkind = "cka"\nmodels = ["run:a/final", "run:b/final"]\ntexts = ["t"]\n'
            for i in range(n))
        path = _write(tmp_path, text, f"s{n}.toml")
        count = [0]
        equal = pathlib.PurePath.__eq__

        def counted(self, other):
            count[0] += 1
            return equal(self, other)

        with monkeypatch.context() as m:
            m.setattr(pathlib.PurePath, "__eq__", counted)
            study = load_study(path)
            order(study)
        assert len(study.steps) == n + 2
        return count[0]

    small, large = comparisons(150), comparisons(300)
    assert large < 2.5 * small, (small, large)


def test_extends_of_another_toml_says_so_without_its_keys(tmp_path):
    other = tmp_path / "secrets.toml"
    other.write_text('password_hash = "x"\napi_token = "y"\n', encoding="utf-8")
    message = _refused(tmp_path, 'extends = "secrets.toml"\n' + _pretrain("a"))
    assert "which is not a study file (2 key(s) a study does not have)" in message
    assert "password_hash" not in message and "api_token" not in message


def test_a_long_extends_chain_is_named_as_such_not_as_a_loop(tmp_path):
    for i in range(10):
        (tmp_path / f"s{i}.toml").write_text((f'extends = "s{i + 1}.toml"\n' if i < 9 else "") + _pretrain(f"r{i}"))
    with pytest.raises(ConfigError) as err:
        load_study(tmp_path / "s0.toml")
    assert "a chain of more than 8 study files" in str(err.value) and "loop" not in str(err.value)
    (tmp_path / "s9.toml").write_text('extends = "s0.toml"\n' + _pretrain("r9"))
    (tmp_path / "s3.toml").write_text('extends = "s0.toml"\n' + _pretrain("r3"))
    with pytest.raises(ConfigError, match="extends s0.toml makes a loop of study files"):
        load_study(tmp_path / "s0.toml")


def test_status_reads_no_planted_record_beyond_the_study(tmp_path):
    """Records under <out>/.study/ planted by someone else: one linked to a file outside, one naming that file as
    its log, one with a text pid. `study status` (a real process) shows no byte of the file and no traceback."""
    from tests.support import run_biobench

    secret = tmp_path / "outside" / "secret.txt"
    secret.parent.mkdir()
    secret.write_text("root:x:0:0\nSECRET-LAST-LINE\n", encoding="utf-8")
    path = _write(tmp_path, _pretrain("a") + _pretrain("b", "mlm") + _pretrain("c", "mlm"))
    records = tmp_path / "study" / ".study" / "local"
    records.mkdir(parents=True)
    (records / "pretrain--a.json").symlink_to(secret)
    (records / "pretrain--b.json").write_text(json.dumps({"state": "failed", "log": str(secret)}))
    (records / "pretrain--c.json").write_text(json.dumps({"state": "running", "pid": "12ab", "host": "x",
                                                          "log": str(secret)}))
    (tmp_path / "study" / ".study" / "slurm.json").write_text(json.dumps(
        {"pretrain/a": {"job": "1", "log_dir": str(secret.parent)}, "pretrain/b": "junk"}))
    done = run_biobench("study", "status", str(path), cwd=tmp_path)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr
    assert "SECRET" not in done.stdout + done.stderr and "root:x" not in done.stdout + done.stderr
    states = {line.split()[0]: line.split()[1] for line in done.stdout.splitlines() if line.startswith("pretrain/")}
    assert states == {"pretrain/a": "to", "pretrain/b": "failed", "pretrain/c": "failed"}, done.stdout


def test_no_parser_of_biobench_takes_a_flag_from_its_start(tmp_path):
    """allow_abbrev=False on every parser the command line builds: an analysis key `devi` became --device."""
    import argparse

    def parsers(parser):
        yield parser
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                for sub in set(action.choices.values()):
                    yield from parsers(sub)

    found = list(parsers(cli.build_parser()))
    assert len(found) > 30 and all(p.allow_abbrev is False for p in found)
    from tests.support import run_biobench

    path = _write(tmp_path, _pretrain("a"))
    done = run_biobench("study", "run", str(path), "--dry", cwd=tmp_path)  # was --dry-run
    assert done.returncode == 2 and "unrecognized arguments: --dry" in done.stderr


def test_a_comparison_shows_the_paper_averages_the_file_states(tmp_path, monkeypatch):
    """Table 7 has no Table 1-2 row: `paper_a_average` / `paper_b_average` (with `paper_source`) are the paper's
    rows of the report, their average column only; a number out of 0-100 or both a row and an average refused."""
    from biobench.api import study_report

    text = (_pretrain("a") + _pretrain("b", "mlm") + _eval("fr", ["run:a/final", "run:b/final"])
            + '\n[[compare]]\na = "run:a/final"\nb = "run:b/final"\npaper_a_average = 71.6\npaper_b_average = 72.6\n'
            'paper_source = "Table 7, F1 over 3 tasks"\n')
    study = load_study(_write(tmp_path, text))
    monkeypatch.setattr(study_report, "compare", lambda *args: {"tasks": [], "a": "a", "b": "b", "folder_a": "x",
                                                                  "folder_b": "y", "averages": {}})
    item = study_report.compare_one(study, study.compares[0])
    _, rows = study_report.score_rows(item)
    assert rows[1] == ["run:a/final, Table 7, F1 over 3 tasks (paper)", "71.60"]
    assert rows[3] == ["run:b/final, Table 7, F1 over 3 tasks (paper)", "72.60"]
    assert "paper_a_average value 101: must be at most 100" in _refused(tmp_path, text.replace("71.6", "101"))
    both = text.replace("paper_a_average", 'paper_a = "MLM baseline (Base, 10B)"\npaper_a_average')
    assert "paper_a names a paper row, which has its own average; drop paper_a_average" in _refused(tmp_path, both)


def test_an_eval_name_with_a_nul_or_an_escape_is_one_line_from_the_command(tmp_path):
    """Issue 58 item 8 on a real process: a NUL gave a traceback, an ESC reached the dry run's output."""
    from tests.support import run_biobench

    for name in ("a\\u0000b", "x\\u001b[31m"):
        path = _write(tmp_path, _pretrain("a") + _eval(name, ["run:a/final"]))
        done = run_biobench("study", "run", str(path), "--dry-run", cwd=tmp_path)
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
        assert "is not a plain name" in done.stderr and "\x1b" not in done.stderr and done.stdout == ""
