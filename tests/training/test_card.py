"""Model cards: pretraining writes a Hugging Face card that huggingface_hub parses; `biobench card` adds the
evaluation results as model-index entries."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.training.trainer import PretrainConfig, train

TEXTS = ["Le patient présente une douleur thoracique.", "Antécédents de diabète de type 2 et d'hypertension."]


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory) -> Path:
    root = tmp_path_factory.mktemp("card")
    corpus = root / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"{t} Observation {i}."}) + "\n" for i in range(40) for t in TEXTS))
    cfg = PretrainConfig(recipe="detour", model="preset:tiny", corpus=str(corpus), out=root / "run", tokens=4 * 4 * 64,
                         batch_size=4, seq_len=64, micro_batch_size=2, decay_ratio=0.5, progress=False,
                         cache_dir=root / "cache", language="fr", license="apache-2.0")
    train(cfg)
    return root / "run"


def test_pretraining_writes_a_card_huggingface_hub_parses(run_dir):
    from huggingface_hub import ModelCard

    for phase in ("phase1", "final"):
        card = ModelCard.load(run_dir / phase / "README.md")
        data = card.data.to_dict()
        assert data["library_name"] == "transformers" and data["pipeline_tag"] == "fill-mask"
        assert data["language"] == ["fr"] and data["license"] == "apache-2.0"
        assert "recipe-detour" in data["tags"] and "base_model" not in data  # preset: no hub base model
        assert f"end of **{phase}**" in card.text
    final = ModelCard.load(run_dir / "final" / "README.md").text
    meta = json.loads((run_dir / "final" / "biobench_pretrain.json").read_text())
    assert f"{meta['tokens']['seen']:,}" in final and "median tokens/s" in final and "CPU" in final
    log = [json.loads(line) for line in (run_dir / "train_log.jsonl").read_text().splitlines()]
    step_s = sum(meta["schedule"]["tokens_per_step"] / r["tokens_per_s"] for r in log)
    assert meta["hardware"].startswith("CPU") and meta["compute"]["device_type"] == "cpu"
    assert meta["compute"]["train_s"] == pytest.approx(step_s, abs=0.1) and meta["compute"]["devices"] == 1
    assert meta["compute"]["device_hours"] == pytest.approx(step_s / 3600, abs=1e-4)
    assert not list(run_dir.glob("step-*/README.md"))


def _result(slug: str, task: str, seed: int, value: float, lineage: dict | None = None, revision: str = "") -> dict:
    return {"schema": "biobench.result/1", "model": {"id": "/abs/x", "slug": slug, "lineage": lineage,
                                                     "revision": revision}, "seed": seed,
            "task": {"id": task, "lang": "fr", "kind": "classification"},
            "protocol": {"metric": "macro_f1"}, "metrics": {"test": {"macro_f1": value}, "dev": {}},
            "key": {"model_revision": "sha256:0", "data_checksum": "sha256:1", "protocol_hash": "p", "seed": seed}}


def test_card_command_adds_model_index(run_dir, tmp_path, capsys):
    from biobench.models import inspect_model
    from huggingface_hub import ModelCard

    info = inspect_model(str(run_dir / "final"))
    for seed, value in ((42, 0.5), (43, 0.7)):
        path = tmp_path / "results" / info.slug / "demo-cls" / f"seed-{seed}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        lineage = json.loads((run_dir / "final" / "biobench_pretrain.json").read_text())
        path.write_text(json.dumps(_result(info.slug, "demo-cls", seed, value, lineage, info.revision)))
    other = tmp_path / "results" / "other--0123abcd" / "demo-cls" / "seed-42.json"  # other weights: not counted
    other.parent.mkdir(parents=True)
    other.write_text(json.dumps(_result("other--0123abcd", "demo-cls", 42, 0.1, None, "sha256:0123abcd")))
    text_before = ModelCard.load(run_dir / "final" / "README.md").text
    assert main(["card", str(run_dir / "final"), "--results", str(tmp_path / "results"), "--name", "tiny-detour"]) == 0
    card = ModelCard.load(run_dir / "final" / "README.md")
    (result,) = card.data.eval_results
    assert result.metric_type == "macro_f1" and result.metric_value == pytest.approx(0.6)
    assert result.dataset_type == "demo-cls" and "42, 43" in result.metric_name
    assert card.data.model_name == "tiny-detour" and card.text == text_before
    assert "demo-cls" in capsys.readouterr().out
    assert main(["card", str(run_dir / "final"), "--results", str(tmp_path / "results")]) == 0
    # without --name: the leaderboard's display name of the results' model
    assert ModelCard.load(run_dir / "final" / "README.md").data.model_name.startswith("detour · tiny · ")


def test_card_of_a_copied_folder_finds_its_results_by_revision(run_dir, tmp_path, capsys):
    """Results written under the old layout's name (`final__x`, another location) count for a copy of the
    weights: `card` looks them up by revision, not by folder name."""
    import shutil

    from biobench.models import inspect_model

    copy = tmp_path / "moved" / "elsewhere"
    shutil.copytree(run_dir / "final", copy)
    revision = inspect_model(str(copy)).revision
    path = tmp_path / "results" / "run__final" / "demo-ner" / "seed-42.json"
    path.parent.mkdir(parents=True)
    path.write_text(json.dumps(_result("run__final", "demo-ner", 42, 0.25, None, revision)))
    assert main(["card", str(copy), "--results", str(tmp_path / "results")]) == 0
    assert "demo-ner" in capsys.readouterr().out


def test_card_command_errors(run_dir, tmp_path, capsys):
    assert main(["card", str(tmp_path), "--results", str(tmp_path)]) == 2
    assert "not a model folder" in capsys.readouterr().err
    assert main(["card", str(run_dir / "final"), "--results", str(tmp_path / "none")]) == 2
    assert "no results for the weights of" in capsys.readouterr().err


def test_card_leaves_smoke_runs_out_of_model_index(run_dir, tmp_path, capsys):
    """A result made with protocol overrides is not the protocol's score: model-index never states it."""
    from biobench.models import inspect_model
    from huggingface_hub import ModelCard

    info = inspect_model(str(run_dir / "final"))
    root = tmp_path / "results" / info.slug
    smoke = {**_result(info.slug, "demo-ner", 42, 0.9, None, info.revision),
             "overrides": {"epochs": {"run": 1, "protocol": 15}, "limit_train": {"run": 200, "protocol": None}}}
    (root / "demo-ner").mkdir(parents=True)
    (root / "demo-ner" / "seed-42.json").write_text(json.dumps(smoke))
    assert main(["card", str(run_dir / "final"), "--results", str(tmp_path / "results")]) == 2
    assert "only smoke runs for the weights of" in capsys.readouterr().err
    (root / "demo-cls").mkdir(parents=True)
    (root / "demo-cls" / "seed-42.json").write_text(json.dumps(_result(info.slug, "demo-cls", 42, 0.5, None,
                                                                       info.revision)))
    assert main(["card", str(run_dir / "final"), "--results", str(tmp_path / "results")]) == 0
    assert [r.dataset_type for r in ModelCard.load(run_dir / "final" / "README.md").data.eval_results] == ["demo-cls"]
    assert "left out 1 smoke run(s) (protocol overrides, e.g. epochs 1 (protocol 15), limit_train 200)" in \
        capsys.readouterr().out


def test_the_card_counts_the_tokens_of_every_phase_the_recipe_has():
    """A phase1/ card of a two-phase recipe still shows phase 2's 0; a three-phase recipe shows its third."""
    from biobench.training.card import card_metadata, card_text

    two = {"recipe": "detour", "phase": "phase1", "tokens": {"seen": 300, "phase1": 300, "clm": 300},
           "attention": {"phase1": "causal", "final": "bidirectional"}}
    assert "| tokens seen | 300 (phase 1 300, phase 2 0) |" in card_text(two, {}, None)
    three = {"recipe": "three", "phase": "final", "tokens": {"seen": 600, "phase1": 300, "phase2": 200, "phase3": 100},
             "attention": {"phase1": "causal", "phase2": "bidirectional", "final": "bidirectional"}}
    assert "| tokens seen | 600 (phase 1 300, phase 2 200, phase 3 100) |" in card_text(three, {}, "CPU")
    header = card_metadata({"recipe": "three", "base_model": "almanach/moderncamembert-base", "corpus": "org/corpus"},
                           language="fr")
    assert header["base_model"] == "almanach/moderncamembert-base" and header["datasets"] == ["org/corpus"]
    assert header["pipeline_tag"] == "fill-mask" and "recipe-three" in header["tags"] and header["language"] == ["fr"]
