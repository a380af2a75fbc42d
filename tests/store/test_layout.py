"""Results are named by what the model is (display name + 8 digits of its weights' revision), not by where its
folder lies: two different `final/` folders keep separate results, a moved copy finds its own, and results
folders of the old layout (`detour__final`) keep working."""

from __future__ import annotations

import shutil
from types import SimpleNamespace

import pytest
from biobench.eval import runner
from biobench.models import inspect_model
from biobench.standings.folder_pairs import compare
from biobench.store import read_result
from biobench.store.layout import results_slug, short_revision
from biobench.tasks.schema import ClassificationExample, TaskData

WORDS = {"cardio": "cœur infarctus", "pneumo": "poumon toux", "neuro": "cerveau migraine"}
OVERRIDES = {"epochs": 1, "lr": 3e-3, "batch_size": 4, "max_length": 32}


def _data() -> TaskData:
    labels = list(WORDS)
    ex = [ClassificationExample(f"x{i}", f"Patient {i}: {WORDS[labels[i % 3]]}.", labels[i % 3]) for i in range(9)]
    return TaskData("t", "classification", {"train": ex, "dev": ex[:6], "test": ex[:6]}, sorted(WORDS), "toy:t",
                    "sha256:t")


SPEC = SimpleNamespace(id="t", lang="en", kind="classification", max_length=32, protocol="en", seeds=(1,))


def _plan(model, results, **kw) -> runner.Plan:
    return runner.plan_grid(str(model), [SPEC], lambda s: _data(), results, overrides=OVERRIDES, **kw)


@pytest.fixture(scope="module")
def two_finals(tiny_mlm_dir, tmp_path_factory):
    """`a/detour/final` and `b/detour/final`: same folder names, different weights."""
    import torch
    from safetensors.torch import load_file, save_file

    root = tmp_path_factory.mktemp("finals")
    first, second = root / "a" / "detour" / "final", root / "b" / "detour" / "final"
    shutil.copytree(tiny_mlm_dir, first)
    shutil.copytree(tiny_mlm_dir, second)
    (weights,) = second.glob("*.safetensors")
    tensors = load_file(weights)
    name = next(k for k, v in tensors.items() if v.is_floating_point())
    tensors[name] = tensors[name] + torch.full_like(tensors[name], 0.01)
    save_file(tensors, weights, metadata={"format": "pt"})
    return first, second


def test_slug_is_display_name_and_revision_digits():
    assert short_revision("sha256:3FA2b01cdeadbeef") == "3fa2b01c" and short_revision("unknown") is None
    assert results_slug("detour · tiny · 400k", "sha256:3fa2b01cdeadbeef") == "detour_tiny_400k--3fa2b01c"
    assert results_slug("org/model", "0123456789abcdef0123456789abcdef01234567") == "org__model--01234567"
    assert results_slug("org/model", "unknown") == "org__model"


def test_two_final_folders_keep_separate_results_and_a_moved_copy_finds_its_own(two_finals, tmp_path, capsys):
    first, second = two_finals
    results = tmp_path / "results"
    plans = [_plan(model, results) for model in (first, second)]
    for plan in plans:
        runner.execute(plan, device="cpu", progress=False)  # the second is not refused as "another run"
    finished = [line for line in capsys.readouterr().err.splitlines() if "test macro-F1" in line]
    assert len(finished) == 2 and finished[0].startswith("[1/1] detour/final · t seed 1: test macro-F1 ")
    score = float(finished[0].split("test macro-F1 ")[1].split()[0])  # percent, as tables print it
    assert score == round(100 * read_result(plans[0].runs[0].path).macro_f1, 2)
    paths = [plan.runs[0].path for plan in plans]
    assert paths[0].parent.parent != paths[1].parent.parent and all(p.is_file() for p in paths)
    assert {p.parent.parent.name for p in paths} == {f"detour__final--{short_revision(plan.model.info.revision)}"
                                                     for plan in plans}
    moved = tmp_path / "elsewhere" / "renamed"
    shutil.copytree(first, moved)
    again = _plan(moved, results)
    assert again.name == "renamed" and again.runs[0].status == "skipped" and again.runs[0].path == paths[0]
    named = _plan(second, results, name="my model")  # another name for the same weights: found, not redone
    assert named.runs[0].status == "skipped" and named.runs[0].path == paths[1]
    # compare: by model folder, by display name of one, and the table shows display names, never a folder name
    report = compare(results, str(first), str(second), n_boot=20)
    assert (report["a"], report["b"]) == ("detour/final", "detour/final")
    assert report["folder_a"] == paths[0].parent.parent.name
    from biobench.cli import main

    assert main(["compare", str(moved), str(second), "--results", str(results), "--n-boot", "20"]) == 0
    out = capsys.readouterr().out
    assert "A = detour/final" in out and "--" not in out.split("\n")[0]


def test_old_layout_is_read_and_a_different_model_no_longer_collides(two_finals, tmp_path):
    first, second = two_finals
    results = tmp_path / "results"
    plan = _plan(first, results)
    runner.execute(plan, device="cpu", progress=False)
    old = results / "detour__final"  # what biobench named both `final/` folders before
    written = plan.runs[0].path
    assert written.is_file() and written.name.startswith("seed-1.smoke-")  # _plan's overrides: a smoke run
    written.parent.parent.rename(old)
    resumed = _plan(first, results)
    assert resumed.runs[0].status == "skipped" and resumed.runs[0].path == old / "t" / written.name
    other = _plan(second, results)  # other weights, same old name: a folder of its own, not a refusal
    assert other.runs[0].decision == "new" and other.runs[0].path.parent.parent.name.endswith(
        "--" + short_revision(inspect_model(str(second)).revision))
    assert compare(results, "detour__final", str(first), n_boot=10)["folder_b"] == "detour__final"


def test_eval_table_shows_the_display_name(two_finals, tmp_path, capsys):
    from biobench.commands.eval import print_summary

    plan = _plan(two_finals[0], tmp_path, name="tiny detour")
    print_summary(runner.summarize(plan))
    title = capsys.readouterr().out.splitlines()[0]
    assert title.startswith("tiny detour — test macro-F1") and "final" not in title


def test_a_rename_that_cannot_be_done_changes_nothing(tmp_path):
    """`eval --name` renames a results folder only when it holds these weights alone and no run of it is claimed
    (issue 57 item 9); otherwise one ResultsError says why, and every file stays byte for byte."""
    from biobench.errors import ResultsError
    from biobench.store import Result, claim_path, result_path, run_key, write_result
    from biobench.store.layout import rename_results

    revision = "sha256:" + "ab12cd34" * 8
    slug = results_slug("tiny", revision)

    def write(seed: int, rev: str) -> None:
        write_result(result_path(tmp_path, slug, "t", seed), Result(
            model={"id": "m", "slug": slug, "name": "tiny", "revision": rev},
            task={"id": "t", "lang": "en", "kind": "classification"}, seed=seed, protocol={"hash": "p"},
            key=run_key(rev, "d", "p", seed), metrics={"test": {"macro_f1": 0.5}}), [{"id": "0", "gold": "a", "pred": "a"}])

    write(1, revision)
    claim = claim_path(result_path(tmp_path, slug, "t", 2))
    claim.mkdir()
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ResultsError, match="is claimed"):
        rename_results(tmp_path, slug, "my model", revision)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files
    claim.rmdir()
    write(3, "sha256:" + "ff" * 32)  # another checkpoint's result copied in
    files = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    with pytest.raises(ResultsError, match="holds results of other weights"):
        rename_results(tmp_path, slug, "my model", revision)
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == files
    assert [p.name for p in tmp_path.iterdir()] == [slug]
    result_path(tmp_path, slug, "t", 3).unlink()
    new = rename_results(tmp_path, slug, "my model", revision)
    assert new.name == "my_model--ab12cd34" and [p.name for p in tmp_path.iterdir()] == [new.name]
    assert read_result(result_path(tmp_path, new.name, "t", 1)).model["name"] == "my model"
