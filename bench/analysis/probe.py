"""Linear probes (paper §5.2, Table 3): logistic regression on frozen encoder features.

Features are computed once per split (the encoder is frozen); each seed then fits a standardised
scikit-learn LogisticRegression (one-vs-rest for multilabel tasks). The seed is the classifier's
random_state and draws the training subsample when `limit_train` is set — without a subsample the lbfgs
fit is deterministic, so seeds then agree (the spread across seeds comes from the subsample).
Results are written like eval results (docs/FORMATS.md, one `biobench.store.Result` per seed) with protocol
name "probe"; `evaluate` is the whole analysis, `biobench analyze probe` only parses and dispatches.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
from biobench import store
from biobench.analysis import features
from biobench.errors import ConfigError
from biobench.eval.runner import versions
from biobench.metrics import score

if TYPE_CHECKING:
    from biobench.tasks.registry import TaskSpec
    from biobench.tasks.schema import TaskData

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
    rows = train_subsample(len(gold["train"]), limit_train, seed)
    preds = fit_predict(
        kind, feats["train"][rows], [gold["train"][i] for i in rows],
        {s: feats[s] for s in ("dev", "test") if len(gold[s])}, labels, seed, c, max_iter,
    )
    metrics = {s: score(kind, gold[s], preds[s], labels) for s in preds}
    return metrics, preds.get("test", [])


def encode_splits(encode: Callable[[list], np.ndarray], splits: dict[str, list], limit_train: int | None,
                  seeds: Sequence[int]) -> dict[str, np.ndarray]:
    """Features per split. The encoder is frozen, so each split is encoded once for all seeds, and of train
    only the rows some seed samples (the others stay zero and are never used)."""
    feats = {s: encode(exs) for s, exs in splits.items() if s != "train"}
    used = np.unique(np.concatenate([train_subsample(len(splits["train"]), limit_train, seed) for seed in seeds]))
    train = encode([splits["train"][i] for i in used])
    feats["train"] = np.zeros((len(splits["train"]), train.shape[1]))
    feats["train"][used] = train
    return feats


def evaluate(model: str, spec: TaskSpec, task: TaskData, seeds: Sequence[int], results_dir: str | Path, *,
             pooling: str = "mean", layer: int = -1, max_length: int | None = None, limit_train: int | None = None,
             batch_size: int = 8, overwrite: bool = False, device: str = "cpu",
             log: Callable[[str], None] = print) -> dict[int, Path]:
    """Probe `model` on a loaded task for every seed whose result is not there yet; writes eval-style results
    under `<results>/<model-slug>--probe-<pooling>-<layer>/<task>/` and returns {seed: result path}."""
    import sklearn

    if spec.kind not in PROBE_KINDS:  # before any encoding
        raise ConfigError(f"task '{spec.id}' is a {spec.kind} task; linear probes need classification, "
                          "relation or multilabel")
    encoder, tokenizer, info = features.load_frozen_encoder(model, device)
    max_length = min(max_length or spec.max_length, features.model_max_length(encoder, tokenizer))
    proto = protocol(pooling, layer, max_length, limit_train)
    variant = f"probe-{pooling}-{'last' if layer == -1 else f'l{layer}'}"
    slug = f"{info.slug}--{variant}"
    todo = {}
    for seed in seeds:
        path = store.result_path(results_dir, slug, spec.id, seed)
        key = store.run_key(info.revision, task.checksum, proto["hash"], seed)
        if store.decide(path, key, overwrite, proto) == "skip":
            log(f"seed {seed}: done already ({path})")
        else:
            todo[seed] = (path, key)
    if not todo:
        return {}
    start = time.time()
    splits = {s: task.splits.get(s, []) for s in ("train", "dev", "test")}

    def encode(exs: list) -> np.ndarray:
        return features.pooled_features(encoder, tokenizer, [ex.text for ex in exs], pooling=pooling, layer=layer,
                                        max_length=max_length, batch_size=batch_size)

    feats = encode_splits(encode, splits, limit_train, list(todo))
    gold = {s: targets(spec.kind, exs) for s, exs in splits.items()}
    encode_s = time.time() - start
    for seed, (path, key) in todo.items():
        t0 = time.time()
        metrics, preds = run_seed(spec.kind, feats, gold, task.labels, seed, limit_train)
        result = store.new_result(
            model={**info.to_dict(), "slug": slug, "variant": variant},
            task={"id": spec.id, "lang": spec.lang, "kind": spec.kind, "data_checksum": task.checksum,
                  "source": task.source, **{f"n_{s}": len(exs) for s, exs in splits.items()}},
            seed=seed, protocol=proto, key=dict(key), metrics=metrics,
            details={"dev_score": metrics.get("dev", {}).get("macro_f1"), "best_epoch": None,
                     "timings": {"encode_s": round(encode_s, 2), "train_s": round(time.time() - t0, 2),
                                 "total_s": round(encode_s + time.time() - t0, 2)},
                     "versions": versions(**{"scikit-learn": sklearn.__version__}), "device": device},
        )
        rows = [{"id": ex.id, "gold": g, "pred": p} for ex, g, p in zip(splits["test"], gold["test"], preds, strict=True)]
        store.write_result(path, result, rows)
        log(f"seed {seed}: test macro-F1 {100 * metrics['test']['macro_f1']:.2f} -> {path}")
    return {seed: path for seed, (path, _) in todo.items()}
