"""Linear probes on frozen features: multiclass and one-vs-rest multilabel fits, seeds, result files."""

import numpy as np
import pytest
from biobench.analysis import probe
from biobench.errors import ConfigError
from biobench.tasks.schema import ClassificationExample, MultilabelExample, NerExample


def _blobs(n: int, labels: list[str], seed: int) -> tuple[np.ndarray, list[str]]:
    rng = np.random.default_rng(seed)
    centers = {lab: rng.normal(scale=4.0, size=8) for lab in labels}
    y = [labels[i % len(labels)] for i in range(n)]
    return np.stack([centers[lab] + rng.normal(size=8) for lab in y]), y


def test_classification_probe_separates_blobs():
    labels = ["a", "b", "c"]
    x, y = _blobs(90, labels, 0)
    feats = {"train": x[:60], "dev": x[60:75], "test": x[75:]}
    gold = {"train": y[:60], "dev": y[60:75], "test": y[75:]}
    metrics, preds = probe.run_seed("classification", feats, gold, labels, seed=42)
    assert metrics["test"]["macro_f1"] == 1.0 and preds == gold["test"]
    assert set(metrics) == {"dev", "test"}


def test_multilabel_probe_is_one_vs_rest():
    rng = np.random.default_rng(1)
    x = rng.normal(size=(240, 6))
    gold_all = [[lab for lab, col in (("x", 0), ("y", 1)) if row[col] > 0] for row in x]
    feats = {"train": x[:160], "dev": x[160:200], "test": x[200:]}
    gold = {"train": gold_all[:160], "dev": gold_all[160:200], "test": gold_all[200:]}
    metrics, preds = probe.run_seed("multilabel", feats, gold, ["x", "y", "never"], seed=0)
    assert metrics["test"]["micro_f1"] > 0.9
    # "never" is in the inventory but in no gold row and no prediction: it counts 0 in the macro average
    per_label = metrics["test"]["per_label"]
    assert per_label["never"]["f1"] == 0.0
    assert metrics["test"]["macro_f1"] == (per_label["x"]["f1"] + per_label["y"]["f1"]) / 3
    assert all(isinstance(p, list) and "never" not in p for p in preds)


def test_seed_draws_the_train_subsample():
    assert np.array_equal(probe.train_subsample(100, 10, 1), probe.train_subsample(100, 10, 1))
    assert not np.array_equal(probe.train_subsample(100, 10, 1), probe.train_subsample(100, 10, 2))
    assert np.array_equal(probe.train_subsample(5, None, 1), np.arange(5))


def test_targets_and_kinds():
    assert probe.targets("classification", [ClassificationExample("1", "t", "a")]) == ["a"]
    assert probe.targets("multilabel", [MultilabelExample("1", "t", ("a", "b"))]) == [["a", "b"]]
    with pytest.raises(ConfigError, match="linear probes need a classification, relation or multilabel task, not 'ner'"):
        probe.targets("ner", [NerExample("1", "t", ())])


def test_protocol_hash_changes_with_its_fields():
    a, b = probe.protocol("mean", -1, 128, None), probe.protocol("cls", -1, 128, None)
    assert a["name"] == "probe" and a["hash"] != b["hash"] and a["hash"].startswith("sha256:")
