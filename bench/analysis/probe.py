"""Linear probes (paper §5.2, Table 3): logistic regression on frozen encoder features.

Features are computed once per split (the encoder is frozen); each seed then fits a standardised
scikit-learn LogisticRegression (one-vs-rest for multilabel tasks). The seed is the classifier's
random_state and draws the training subsample when `limit_train` is set — without a subsample the lbfgs
fit is deterministic, so seeds then agree (the spread across seeds comes from the subsample).
Results are written like eval results (docs/FORMATS.md) with protocol name "probe".
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from typing import Any

import numpy as np
from biobench.errors import ConfigError

PROBE_KINDS = ("classification", "relation", "multilabel")


def protocol(pooling: str, layer: int, max_length: int, limit_train: int | None, c: float = 1.0,
             max_iter: int = 2000) -> dict[str, Any]:
    """The probe protocol record, hashed like eval protocols (sha256 of the canonical JSON)."""
    fields = {"name": "probe", "classifier": "logistic_regression", "standardize": True, "C": c,
              "max_iter": max_iter, "pooling": pooling, "layer": layer, "max_length": max_length,
              "limit_train": limit_train}
    digest = hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()
    return {**fields, "hash": f"sha256:{digest}"}


def targets(kind: str, examples: Sequence[Any]) -> list[Any]:
    """Gold values as in prediction files: a label, or a list of labels for multilabel tasks."""
    if kind not in PROBE_KINDS:
        raise ConfigError(f"linear probes need a classification, relation or multilabel task, not '{kind}'")
    return [list(ex.labels) if kind == "multilabel" else ex.label for ex in examples]


def fit_predict(
    kind: str, x_train: np.ndarray, y_train: Sequence[Any], x_eval: dict[str, np.ndarray], labels: Sequence[str],
    seed: int, c: float = 1.0, max_iter: int = 2000,
) -> dict[str, list[Any]]:
    """Fit one probe; predictions (labels, or label lists) for each evaluation split."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.multiclass import OneVsRestClassifier
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import MultiLabelBinarizer, StandardScaler

    lr = LogisticRegression(C=c, max_iter=max_iter, random_state=seed)
    if kind == "multilabel":
        binarizer = MultiLabelBinarizer(classes=list(labels))
        y = binarizer.fit_transform(y_train)
        keep = y.sum(axis=0) > 0  # a label never seen in train cannot be fitted: it is never predicted
        model = make_pipeline(StandardScaler(), OneVsRestClassifier(lr)).fit(x_train, y[:, keep])
        kept = np.array(binarizer.classes_)[keep]
        return {s: [list(kept[row.astype(bool)]) for row in model.predict(x)] for s, x in x_eval.items()}
    if len(set(y_train)) < 2:
        raise ConfigError("the probe's training set has a single label; raise --limit-train")
    model = make_pipeline(StandardScaler(), lr).fit(x_train, list(y_train))
    return {s: [str(p) for p in model.predict(x)] for s, x in x_eval.items()}


def train_subsample(n: int, limit: int | None, seed: int) -> np.ndarray:
    if not limit or limit >= n:
        return np.arange(n)
    return np.sort(np.random.default_rng(seed).choice(n, size=limit, replace=False))


def run_seed(
    kind: str, feats: dict[str, np.ndarray], gold: dict[str, list[Any]], labels: Sequence[str], seed: int,
    limit_train: int | None = None, c: float = 1.0, max_iter: int = 2000,
) -> tuple[dict[str, Any], list[Any]]:
    """(metrics {"dev": ..., "test": ...}, test predictions) of one seed."""
    from biobench.metrics import score

    rows = train_subsample(len(gold["train"]), limit_train, seed)
    preds = fit_predict(
        kind, feats["train"][rows], [gold["train"][i] for i in rows],
        {s: feats[s] for s in ("dev", "test") if len(gold[s])}, labels, seed, c, max_iter,
    )
    metrics = {s: score(kind, gold[s], preds[s], labels) for s in preds}
    return metrics, preds.get("test", [])
