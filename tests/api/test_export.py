"""`biobench results export --format every-eval-ever`: one file per model in the datastore's layout, valid against
the kept copy of the schema (bench/api/schemas/eval.schema.json), carrying what produced each score and no
server path.

The schema is checked by a small draft-07 validator below (no jsonschema dependency): it implements every
keyword the schema uses and fails on any other, so a schema update that needs more cannot pass silently."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import biobench
import pytest
from biobench import store
from biobench.api.export import every_eval_ever_records
from biobench.cli import main

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = json.loads((ROOT / "bench/api/schemas/eval.schema.json").read_text())
ANNOTATIONS = {"$schema", "description", "version", "default", "$defs", "title", "examples"}
TYPES = {"object": dict, "array": list, "string": str, "boolean": bool, "null": type(None)}


def _is(value: Any, kind: str) -> bool:
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "number":
        return isinstance(value, int | float) and not isinstance(value, bool)
    return isinstance(value, TYPES[kind])


def errors(value: Any, node: dict, where: str = "$") -> list[str]:
    """Draft-07 validation of the keywords eval.schema.json uses; an unknown keyword is itself an error."""
    if "$ref" in node:
        target: Any = SCHEMA
        for part in node["$ref"].removeprefix("#/").split("/"):
            target = target[part]
        return errors(value, target, where)
    found: list[str] = []
    for key in node:
        if key not in ANNOTATIONS and key not in {"type", "required", "properties", "additionalProperties", "enum",
                                                  "const", "items", "minItems", "oneOf", "if", "then", "else",
                                                  "pattern", "minimum", "maximum"}:
            found.append(f"{where}: keyword {key!r} not implemented by this test's validator")
    kinds = node.get("type")
    if kinds is not None and not any(_is(value, k) for k in ([kinds] if isinstance(kinds, str) else kinds)):
        return [*found, f"{where}: {value!r} is not of type {kinds}"]
    if "enum" in node and value not in node["enum"]:
        found.append(f"{where}: {value!r} not in {node['enum']}")
    if "const" in node and value != node["const"]:
        found.append(f"{where}: {value!r} != {node['const']!r}")
    if "pattern" in node and isinstance(value, str) and not re.search(node["pattern"], value):
        found.append(f"{where}: {value!r} does not match {node['pattern']}")
    if "minimum" in node and _is(value, "number") and value < node["minimum"]:
        found.append(f"{where}: {value} < {node['minimum']}")
    if "maximum" in node and _is(value, "number") and value > node["maximum"]:
        found.append(f"{where}: {value} > {node['maximum']}")
    if isinstance(value, dict):
        found += [f"{where}: missing {k!r}" for k in node.get("required", []) if k not in value]
        props = node.get("properties", {})
        for k, v in value.items():
            if k in props:
                found += errors(v, props[k], f"{where}.{k}")
            elif node.get("additionalProperties") is False:
                found.append(f"{where}: unexpected property {k!r}")
            elif isinstance(node.get("additionalProperties"), dict):
                found += errors(v, node["additionalProperties"], f"{where}.{k}")
    if isinstance(value, list):
        if len(value) < node.get("minItems", 0):
            found.append(f"{where}: fewer than {node['minItems']} items")
        if "items" in node:
            for i, item in enumerate(value):
                found += errors(item, node["items"], f"{where}[{i}]")
    if "oneOf" in node:
        matching = sum(not errors(value, option, where) for option in node["oneOf"])
        if matching != 1:
            found.append(f"{where}: matches {matching} of the oneOf options, not exactly 1")
    if "if" in node:
        branch = node.get("then") if not errors(value, node["if"], where) else node.get("else")
        if branch is not None:
            found += errors(value, branch, where)
    return found


def test_the_validator_refuses_what_the_schema_refuses():
    good = {"schema_version": "0.3.0", "evaluation_id": "x", "retrieved_timestamp": "1",
            "source_metadata": {"source_type": "evaluation_run", "source_organization_name": "o",
                                "evaluator_relationship": "third_party"},
            "eval_library": {"name": "biobench", "version": "0"},
            "model_info": {"name": "m", "id": "m", "additional_details": {"deployment_type": "self_deployed",
                                                                          "model_availability": "unknown"}},
            "evaluation_results": []}
    assert errors(good, SCHEMA) == []
    assert errors({**good, "extra": 1}, SCHEMA) == ["$: unexpected property 'extra'"]
    bad_result = {"evaluation_name": "t", "source_data": {"dataset_name": "t", "source_type": "other"},
                  "metric_config": {"lower_is_better": False, "score_type": "continuous"},  # min/max required
                  "score_details": {"score": "0.5"}}
    found = errors({**good, "evaluation_results": [bad_result]}, SCHEMA)
    assert any("missing 'min_score'" in e for e in found) and any("is not of type number" in e for e in found)


def _write(root: Path, slug: str, model_id: str, task: str, seed: int, f1: float, details: dict | None = None,
           metadata: dict | None = None) -> None:
    record = store.Result(
        model={"id": model_id, "slug": slug, "name": slug.split("--")[0], "revision": "abc123", "params": 22_700_000,
               "context": 512, "metadata": metadata},
        task={"id": task, "lang": "en", "kind": "classification", "labels": ["a", "b"]},
        seed=seed, protocol={"hash": "p1", "epochs": 3, "lr": 5e-5}, key=store.run_key("abc123", "d1", "p1", seed),
        metrics={"test": {"macro_f1": f1}}, details=details or {})
    gold = ["a", "b", "a", "b"]
    store.write_result(store.result_path(root, slug, task, seed), record,
                       [{"id": str(i), "gold": g, "pred": "a"} for i, g in enumerate(gold)])


def test_export_writes_one_valid_file_per_model_with_what_produced_each_score(tmp_path):
    results = tmp_path / "results"
    server_folder = str(tmp_path / "models" / "my-checkpoint")  # a local model folder: its path stays private
    meta = {"license": "mit", "base_model": "bert-base-uncased", "training_data": ["pubmed.txt"], "open_weights": True}
    for seed, f1 in ((42, 0.60), (43, 0.70)):
        _write(results, "acme-bert--abc123", "acme/bert", "gad", seed, f1, metadata=meta)
    _write(results, "acme-bert--abc123", "acme/bert", "hoc", 42, 0.30,
           details={"overrides": {"epochs": {"run": 1, "protocol": 3}},
                    "degenerate": {"split": "test", "finding": "one class for every example", "reason": "1 epoch"}})
    _write(results, "my-checkpoint--def456", server_folder, "gad", 42, 0.50)
    out = tmp_path / "eee"
    assert main(["results", "export", "--format", "every-eval-ever", "--results", str(results), "--out", str(out)]) == 0

    files = sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json"))
    assert len(files) == 2
    assert [f.rsplit("/", 1)[0] for f in files] == ["data/biobench/acme/bert", "data/biobench/unknown/my-checkpoint"]
    for name in files:
        text = (out / name).read_text()
        assert str(tmp_path) not in text, name  # no server path, in any field
        assert errors(json.loads(text), SCHEMA) == [], name

    acme = json.loads((out / files[0]).read_text())
    assert acme["model_info"]["id"] == "acme/bert" and acme["model_info"]["developer"] == "acme"
    details = acme["model_info"]["additional_details"]
    assert details["model_availability"] == "open_weights" and details["license"] == "mit"
    assert details["training_data"] == "pubmed.txt" and details["params"] == "22700000"
    by_task = {r["evaluation_name"]: r for r in acme["evaluation_results"]}
    gad = by_task["gad"]
    assert gad["score_details"]["score"] == pytest.approx(0.65)
    assert gad["score_details"]["details"]["seeds"] == "42,43" and gad["score_details"]["details"]["protocol"] == "protocol"
    assert gad["score_details"]["uncertainty"]["num_samples"] == 2
    assert gad["score_details"]["uncertainty"]["standard_deviation"] == pytest.approx(0.0707, abs=1e-4)
    assert gad["metric_config"]["metric_id"] == "f1_macro" and gad["metric_config"]["max_score"] == 1.0
    assert gad["generation_config"]["additional_details"]["epochs"] == "3"
    smoke = by_task["hoc (smoke run: epochs 1 (protocol 3))"]["score_details"]
    assert smoke["details"]["protocol"] == "smoke: epochs 1 (protocol 3)"
    assert "one class for every example" in smoke["details"]["degenerate"]
    assert "standard_deviation" not in smoke["uncertainty"]  # one seed: no spread claimed

    local = json.loads((out / files[1]).read_text())
    # a local folder's id is its results folder (name + weights' digits): unique, and no server path
    assert local["model_info"]["id"] == "my-checkpoint--def456" and "developer" not in local["model_info"]
    assert local["model_info"]["additional_details"]["model_availability"] == "unknown"

    # exporting again replaces the same files (the uuid comes from the model's results folder)
    main(["results", "export", "--format", "every-eval-ever", "--results", str(results), "--out", str(out)])
    assert sorted(p.relative_to(out).as_posix() for p in out.rglob("*.json")) == files


def test_records_are_stable_for_a_given_timestamp(tmp_path):
    _write(tmp_path, "m--r", "m", "gad", 42, 0.5)
    one = every_eval_ever_records(biobench.load_results(tmp_path), retrieved=1_700_000_000)
    two = every_eval_ever_records(biobench.load_results(tmp_path), retrieved=1_700_000_000)
    assert one == two and next(iter(one.values()))["evaluation_id"] == "biobench/m/1700000000"


def _run(root: Path, slug: str, model_id: str, task: str, seed: int, f1: float, protocol: dict,
         details: dict | None = None) -> None:
    record = store.Result(
        model={"id": model_id, "slug": slug, "name": slug.split("--")[0], "revision": slug.split("--")[1]},
        task={"id": task, "lang": "fr", "kind": "ner"}, seed=seed, protocol=protocol,
        key=store.run_key(slug.split("--")[1], "d-" + task, protocol["hash"], seed),
        metrics={"test": {"macro_f1": f1}}, details=details or {})
    smoke = protocol["hash"] if details and details.get("overrides") else None
    store.write_result(store.result_path(root, slug, task, seed, smoke), record,
                       [{"id": "0", "gold": [], "pred": []}])


def test_each_entry_carries_the_settings_and_hash_of_the_runs_it_summarises(tmp_path):
    """Issue 52 item 2: a model's --quick run was exported with another smoke run's hash and settings, and three
    local models ending in final/ shared one id. Each entry is checked field by field against its result files."""
    results = tmp_path / "results"
    protocol = {"hash": "aaaa00000001", "head": "span", "batch_size": 16, "max_length": 1024, "epochs": 20}
    one_epoch = {**protocol, "hash": "7194a44f61a6", "epochs": 1}
    quick = {"hash": "643089356ece", "head": "token", "batch_size": 8, "max_length": 128, "max_steps": 150,
             "epochs": 20}
    for i, folder in enumerate(("detour", "mlm", "again")):
        slug = f"{folder}--{i:08d}"
        model = str(tmp_path / "runs" / folder / "final")  # every pretraining ends in final/
        _run(results, slug, model, "quaero-emea", 42, 0.5 + i / 10, protocol)
        _run(results, slug, model, "quaero-emea", 43, 0.4 + i / 10, protocol)
    _run(results, "detour--00000000", str(tmp_path / "runs/detour/final"), "quaero-emea", 42, 0.0, one_epoch,
         {"overrides": {"epochs": {"run": 1, "protocol": 20}}})
    _run(results, "detour--00000000", str(tmp_path / "runs/detour/final"), "quaero-medline", 42, 0.2, quick,
         {"overrides": {"head": {"run": "token", "protocol": "span"}, "max_steps": {"run": 150, "protocol": None}},
          "quick": True})
    records = every_eval_ever_records(biobench.load_results(results), retrieved=1_700_000_000)
    assert len(records) == 3
    ids = [r["model_info"]["id"] for r in records.values()]
    assert sorted(ids) == ["again--00000002", "detour--00000000", "mlm--00000001"]  # unique, no server path
    assert len({r["evaluation_id"] for r in records.values()}) == 3
    assert str(tmp_path) not in json.dumps(records)
    compared = 0
    for record in records.values():
        slug = record["model_info"]["id"]
        for entry in record["evaluation_results"]:
            details = entry["score_details"]["details"]
            task = entry["source_data"]["dataset_name"]
            files = sorted((results / slug / task).glob("seed-*.json"))
            runs = [json.loads(f.read_text()) for f in files]
            runs = [r for r in runs if bool(r.get("overrides")) == details["protocol"].startswith("smoke")]
            assert runs, (slug, entry["evaluation_name"])
            assert details["seeds"] == ",".join(str(r["seed"]) for r in runs)
            assert details["protocol_hash"] == ",".join(sorted({r["key"]["protocol_hash"] for r in runs}))
            assert details["data_checksum"] == runs[0]["key"]["data_checksum"]
            assert entry["score_details"]["score"] == pytest.approx(
                sum(r["metrics"]["test"]["macro_f1"] for r in runs) / len(runs))
            assert entry["score_details"]["uncertainty"]["num_samples"] == len(runs)
            settings = {k: str(v) for k, v in runs[0]["protocol"].items()}
            assert entry["generation_config"]["additional_details"] == settings
            assert errors(record, SCHEMA) == []
            compared += 1
    assert compared == 5


def _checkpoint(root: Path, model_path: str, digest: str, scores: dict[int, float], task: str = "gad",
                metric: str = "macro_f1") -> str:
    """The results of one pretraining checkpoint, written by the store's writer as eval writes them: display name
    'detour · tiny · 213k' (what two checkpoints of one recipe, base and budget share), results folder and
    revision from the weights' digest; its results folder name."""
    from biobench.store.layout import results_slug

    name, revision = "detour · tiny · 213k", f"sha256:{digest}{'0' * 56}"
    slug = results_slug(name, revision)
    protocol = {"hash": "p1", "epochs": 3, "metric": metric}
    for seed, f1 in scores.items():
        record = store.new_result(
            {"id": model_path, "slug": slug, "name": name, "revision": revision},
            {"id": task, "lang": "en", "kind": "classification", "labels": ["a", "b"]}, seed, protocol,
            store.run_key(revision, "d1", "p1", seed),
            {"test": {"macro_f1": f1, "micro_f1": min(1.0, f1 + 0.2), "weighted_f1": f1}}, {})
        store.write_result(store.result_path(root, slug, task, seed), record,
                           [{"id": str(i), "gold": g, "pred": "a"} for i, g in enumerate("abab")])
    return slug


@pytest.mark.slow
def test_two_checkpoints_sharing_a_display_name_stay_two_models_with_their_own_scores(tmp_path):
    """Issue 57 item 2: `pretrain --out runs/tiny` and `--seed 1 --out runs/tiny-seed1` are both 'detour · tiny ·
    213k'. The export wrote ONE model (one checkpoint's id and revision, the other's score) and `load_results`
    said 1 model. A model is its results folder everywhere: two files, each checked field by field against the
    result files of its folder; two models in the API, named apart by their folders as the board names them."""
    import statistics

    from biobench.standings.aggregate import build_board

    results = tmp_path / "results"
    slugs = [_checkpoint(results, str(tmp_path / "runs/tiny/final"), "3f201efc", {42: 0.40, 43: 0.50}),
             _checkpoint(results, str(tmp_path / "runs/tiny-seed1/final"), "517bdbb2", {42: 0.80, 43: 0.90})]
    out = tmp_path / "eee"
    assert main(["results", "export", "--format", "every-eval-ever", "--results", str(results), "--out", str(out)]) == 0
    exported = [json.loads(p.read_text()) for p in sorted(out.rglob("*.json"))]
    assert len(exported) == 2
    assert sorted(e["model_info"]["id"] for e in exported) == sorted(slugs)
    for record in exported:
        info = record["model_info"]
        files = sorted((results / info["id"] / "gad").glob("seed-*.json"))
        runs = [json.loads(f.read_text()) for f in files if not f.name.endswith(".predictions.jsonl")]
        assert len(runs) == 2 and {r["model"]["slug"] for r in runs} == {info["id"]}
        assert info["additional_details"]["revision"] == runs[0]["model"]["revision"]
        assert info["additional_details"]["results_folder"] == info["id"]
        assert info["name"] == f"detour · tiny · 213k ({info['id']})"  # told apart, as the board names it
        [entry] = record["evaluation_results"]
        assert entry["score_details"]["score"] == pytest.approx(
            statistics.mean(r["metrics"]["test"]["macro_f1"] for r in runs))
        assert entry["score_details"]["details"]["seeds"] == ",".join(str(r["seed"]) for r in runs)
        assert entry["score_details"]["uncertainty"]["num_samples"] == 2
        assert errors(record, SCHEMA) == []
    assert str(tmp_path) not in json.dumps(exported)

    loaded = biobench.load_results(results)
    assert len(loaded.models) == 2 and "2 model(s)" in repr(loaded)
    board = build_board([results], reference=False, significance=False)
    assert sorted(loaded.models) == sorted(e.name for e in board.entries)  # one rule names them apart
    summary = loaded.summary(mdd=False)
    assert sorted(zip(summary["slug"], summary["mean"], strict=True)) == [
        (slugs[0], pytest.approx(0.45)), (slugs[1], pytest.approx(0.85))]
    assert loaded.filter(model=slugs[1]).summary(mdd=False)["mean"].tolist() == [pytest.approx(0.85)]
    # push: the dataset card's table has a row per checkpoint, with its own mean
    assert main(["results", "push", "org/r", "--results", str(results), "--dry-run", str(tmp_path / "push")]) == 0
    card = (tmp_path / "push" / "README.md").read_text()
    assert f"| detour · tiny · 213k ({slugs[0]}) | 1 | 2 | 45.0 |" in card
    assert f"| detour · tiny · 213k ({slugs[1]}) | 1 | 2 | 85.0 |" in card


def test_a_second_result_for_one_seed_of_one_model_is_a_problem_not_a_replacement(tmp_path):
    """Issue 57 item 2: a second score for one seed of a model's task took the first's place in the summary
    (store/summary.py). The same results folder read from two places: the first is kept, the second listed."""
    import shutil

    first, second = tmp_path / "a", tmp_path / "b"
    slug = _checkpoint(first, "runs/tiny/final", "3f201efc", {42: 0.40})
    shutil.copytree(first, second)
    copy = second / slug / "gad" / "seed-42.json"
    data = json.loads(copy.read_text())
    data["metrics"]["test"]["macro_f1"] = 0.99
    copy.write_text(json.dumps(data))
    loaded = biobench.load_results([first, second])
    summary = loaded.summary(mdd=False)
    assert summary["mean"].tolist() == [pytest.approx(0.40)] and summary["n"].tolist() == [1]
    assert [p.path for p in loaded.problems] == [str(copy)]
    assert "a second result for seed 42" in loaded.problems[0].reason
