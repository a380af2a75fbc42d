"""Statistics over seeds and test examples: seed summaries, the paired bootstrap, significance groups.

numpy/scipy only (no torch), so the leaderboard and `biobench compare` stay light.

Bootstrap design (paired over test examples, resampled over seeds):
each replicate draws the n test examples with replacement (the same draw for both models: that is the
pairing) and, independently per model, its seeds with replacement; the replicate's statistic is
mean-over-drawn-seeds metric(A) - mean-over-drawn-seeds metric(B). The percentile interval of the
replicates is the CI; the two-sided p-value is

    p = min(1, 2 * min(#{d* <= 0} + 1, #{d* >= 0} + 1) / (n_boot + 1))

i.e. the smallest alpha at which the percentile interval excludes 0 (with the usual +1 so that p is never 0).
Identical models give d* = 0 everywhere, hence p = 1.

Fast path: a metric given as a `CountMetric` (per-example additive counts + a score over totals, e.g. per-label
TP/FP/FN for macro-F1) is bootstrapped as a matrix product, weights (replicates x examples) @ counts
(examples x k), so thousands of examples x 1000 replicates take well under a second. Any other callable
metric(gold, pred) works too, one call per replicate and seed.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
from biobench import metrics
from biobench.metrics import labels_in
from scipy.special import ndtri, stdtrit  # what scipy.stats' t.ppf / norm.ppf call: 0.2 s to import, not 1 s

Metric = Callable[[list, list], float]


@dataclass(frozen=True)
class SeedSummary:
    """Mean, sample std (ddof=1) and Student-t confidence interval over seed scores.

    With a single seed, std is 0.0 and the interval is undefined: ci_low and ci_high are nan."""

    mean: float
    std: float
    ci_low: float
    ci_high: float
    n: int

    @property
    def half_width(self) -> float:
        return (self.ci_high - self.ci_low) / 2


@functools.lru_cache(maxsize=256)
def _t_quantiles(confidence: float, df: int) -> tuple[float, float]:
    """Student-t quantiles of a two-sided interval: a board has thousands of cells but a handful of seed
    counts, and scipy's ppf costs ~0.3 ms a call. `stdtrit` is the function scipy.stats.t.ppf evaluates (equal
    to the last bit, tested); importing scipy.stats would add a second to every leaderboard start."""
    return float(stdtrit(df, (1 - confidence) / 2)), float(stdtrit(df, (1 + confidence) / 2))


def seed_summary(values: Sequence[float], confidence: float = 0.95,
                 bounds: tuple[float, float] | None = None) -> SeedSummary:
    """Summarise one model's scores on one task across seeds. `bounds` clips the t-interval to the metric's
    range (an F1 interval reaching 105% with 2 seeds says "wide", not "above 100")."""
    x = np.asarray(list(values), dtype=float)
    if x.size == 0:
        raise ValueError("seed_summary needs at least one value")
    mean = float(x.mean())
    if x.size == 1:
        return SeedSummary(mean, 0.0, math.nan, math.nan, 1)
    std = float(x.std(ddof=1))
    if std == 0.0:
        return SeedSummary(mean, 0.0, mean, mean, int(x.size))
    q_low, q_high = _t_quantiles(confidence, int(x.size - 1))
    scale = std / math.sqrt(x.size)
    low, high = q_low * scale + mean, q_high * scale + mean  # scipy's t.interval, its quantiles cached
    if bounds is not None:
        low, high = max(low, bounds[0]), min(high, bounds[1])
    return SeedSummary(mean, std, float(low), float(high), int(x.size))


# --- metrics that decompose into per-example counts (the bootstrap's fast path) -----------------------


@dataclass(frozen=True)
class CountMetric:
    """A metric that is a function of per-example counts summed over examples.

    `counts(gold, pred)` returns an (n_examples, k) array; `score(totals)` maps (..., k) totals to (...)
    scores. Calling the object computes the metric on one prediction list, like any metric callable."""

    counts: Callable[[Sequence, Sequence], np.ndarray]
    score: Callable[[np.ndarray], np.ndarray]
    name: str = "metric"

    def __call__(self, gold: Sequence, pred: Sequence) -> float:
        return float(self.score(self.counts(gold, pred).sum(axis=0)))


def f1_metric(labels: Sequence[Hashable], name: str = "macro_f1", keep_absent: bool = False) -> CountMetric:
    """The F1 `name` (macro_f1, micro_f1 or weighted_f1: a task's headline `metric`) over `labels` from
    predictions-file values (a label, a list of labels, or [start, end, label] spans, exact match), as
    biobench.metrics computes it (one implementation, tested equal to scikit-learn). A label absent from both
    gold and predictions (possible inside a bootstrap resample) is left out of a macro mean, as scikit-learn
    does with labels inferred from the data, unless `keep_absent` (multilabel over a full label inventory,
    where such a label counts 0)."""
    labels = list(labels)
    average = name.removesuffix("_f1")
    if name != f"{average}_f1" or average not in metrics.AVERAGES:
        raise ValueError(f"metric {name!r} has no per-example counts; known: "
                         + ", ".join(f"{a}_f1" for a in metrics.AVERAGES))

    def count(gold: Sequence, pred: Sequence) -> np.ndarray:
        return metrics.counts(gold, pred, labels).reshape(len(gold), -1)

    def score(totals: np.ndarray) -> np.ndarray:
        return metrics.f1_from_totals(totals.reshape(*totals.shape[:-1], -1, 3), average, keep_absent)

    return CountMetric(count, score, name)


def macro_f1_metric(labels: Sequence[Hashable], keep_absent: bool = False) -> CountMetric:
    """Macro-F1 over `labels` (`f1_metric`)."""
    return f1_metric(labels, "macro_f1", keep_absent)


def prediction_metric(gold: Sequence, *preds: Sequence, kind: str | None = None, labels: Sequence[Hashable] = (),
                      metric: str = "macro_f1") -> CountMetric:
    """The task's headline `metric` as a CountMetric whose label axis covers `labels` (the task's inventory,
    when known), gold and every prediction list given; multilabel keeps absent inventory labels at 0, as the
    headline score does. What a paired test, the MDD and significance groups compute: the score the board
    ranks (`Result.score`), never macro-F1 for a task whose metric is micro-F1."""
    found = labels_in(gold, *preds)
    axis = list(dict.fromkeys([*labels, *found]))
    return f1_metric(axis, metric, keep_absent=kind == "multilabel")


def prediction_macro_f1(gold: Sequence, *preds: Sequence, kind: str | None = None,
                        labels: Sequence[Hashable] = ()) -> CountMetric:
    """`prediction_metric` of macro-F1."""
    return prediction_metric(gold, *preds, kind=kind, labels=labels)


# --- paired bootstrap -----------------------------------------------------------------------------------


@dataclass(frozen=True)
class BootstrapResult:
    """A - B: observed difference of seed-mean metrics, percentile CI, two-sided p-value."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    n_boot: int


def _draws(rng: np.random.Generator, n: int, n_seeds_a: int, n_seeds_b: int, n_boot: int):
    """All random draws up front, so the fast and the generic path see identical resamples."""
    examples = rng.integers(0, n, size=(n_boot, n))
    seeds_a = rng.integers(0, n_seeds_a, size=(n_boot, n_seeds_a))
    seeds_b = rng.integers(0, n_seeds_b, size=(n_boot, n_seeds_b))
    return examples, seeds_a, seeds_b


def _seed_weights(draws: np.ndarray, n_seeds: int) -> np.ndarray:
    """(n_boot, n_seeds) weights whose row r averages the seeds drawn in replicate r."""
    w = np.zeros((draws.shape[0], n_seeds))
    np.add.at(w, (np.arange(draws.shape[0])[:, None], draws), 1.0)
    return w / n_seeds


def _resample_weights(examples: np.ndarray) -> np.ndarray:
    """(r, n) weights: how often each replicate (row of `examples`) drew each of the n test examples."""
    r, n = examples.shape
    flat = (np.arange(r)[:, None] * n + examples).ravel()
    return np.bincount(flat, minlength=r * n).reshape(r, n).astype(np.float64)


def _replicate_scores_fast(metric: CountMetric, gold, preds, examples, chunk: int = 256) -> np.ndarray:
    """(n_boot, n_seeds) metric of each seed on each replicate's resample, as weights @ counts."""
    counts = np.stack([metric.counts(gold, p) for p in preds])  # (S, n, k)
    return _scores_of_counts(metric, [counts], examples, chunk)[0]


MAX_PRODUCT_COLUMNS = 4096  # columns (seeds x counts) per matrix product: ~16 MB of float32 totals per block
WEIGHTS_KEPT_BYTES = 64 * 2**20  # the resample weights kept across blocks (float64 + float32) up to this size


def _exact_in_float32(counts: np.ndarray, n: int) -> bool:
    """Whether weights @ counts is exact in float32: non-negative integer counts whose largest possible
    total (n draws of the largest count) stays below 2**24, where float32 still holds every integer."""
    return bool(counts.size == 0 or (counts.min() >= 0 and np.all(counts == np.rint(counts))
                                     and counts.max() * n < 2**24))


def _scores_of_counts(metric: CountMetric, counts: Sequence[np.ndarray], examples: np.ndarray,
                      chunk: int = 1000) -> list[np.ndarray]:
    """For each model's (S, n, k) counts, its (n_boot, S) scores on every replicate of one resample of the test
    examples (`examples`, shared by every model): totals = weights @ counts, one matrix product per block of
    models and `chunk` replicates instead of one per pair and seed. Why: a board's groups bootstrap every
    model against the best; each model's replicate scores are computed once, whatever the pair. Counts are
    integers, so float32 products give the same totals as float64 (`_exact_in_float32`) at half the cost."""
    n_boot, n = examples.shape
    out = [np.empty((n_boot, c.shape[0])) for c in counts]
    blocks: list[list[int]] = []
    block: list[int] = []
    cols = 0
    for i, c in enumerate(counts):
        if block and cols + c.shape[0] * c.shape[2] > MAX_PRODUCT_COLUMNS:
            blocks.append(block)
            block, cols = [], 0
        block.append(i)
        cols += c.shape[0] * c.shape[2]
    blocks += [block] if block else []
    # The resample weights of every chunk are built once and kept for the next blocks (every block of every model
    # shares them) while they fit WEIGHTS_KEPT_BYTES; one block's counts at a time (all blocks' counts held at once
    # put the 300-model board's groups worker 95 MiB higher, over its 1 GB). Float32 is exact for the weights as
    # for the counts (draws per example <= n < 2**24).
    kept: dict[int, dict[np.dtype, np.ndarray]] = {}
    keep = n_boot * n * 12 <= WEIGHTS_KEPT_BYTES

    def weights_at(start: int) -> dict[np.dtype, np.ndarray]:
        if start in kept:
            return kept[start]
        weights = _resample_weights(examples[start : start + chunk])
        both: dict[np.dtype, np.ndarray] = {np.dtype(np.float64): weights,
                                            np.dtype(np.float32): weights.astype(np.float32)}
        if keep:
            kept[start] = both
        return both

    for block in blocks:
        flat = np.concatenate([counts[i].transpose(1, 0, 2).reshape(n, -1) for i in block], axis=1)  # (n, cols)
        flat = flat.astype(np.float32 if _exact_in_float32(flat, n) else np.float64)
        for start in range(0, n_boot, chunk):
            totals = weights_at(start)[flat.dtype] @ flat
            offset = 0
            for i in block:  # scored a model at a time: a block's totals at once (33 MB in float64) ran twice as
                s, _, k = counts[i].shape  # slow, out of the cache
                part = totals[:, offset : offset + s * k].reshape(-1, s, k).astype(np.float64)
                out[i][start : start + chunk] = metric.score(part)
                offset += s * k
    return out


def _replicate_scores_generic(metric: Metric, gold, preds, examples, seed_draws) -> np.ndarray:
    n_boot = examples.shape[0]
    out = np.full((n_boot, len(preds)), np.nan)
    for r in range(n_boot):
        idx = examples[r]
        g = [gold[i] for i in idx]
        for s in np.unique(seed_draws[r]):
            out[r, s] = metric(g, [preds[s][i] for i in idx])
    return out


def _replicate_means(metric, gold, preds, examples, seed_draws) -> np.ndarray:
    if isinstance(metric, CountMetric):
        scores = _replicate_scores_fast(metric, gold, preds, examples)
    else:
        scores = _replicate_scores_generic(metric, gold, preds, examples, seed_draws)
    return _seed_means(scores, seed_draws)


def _seed_means(scores: np.ndarray, seed_draws: np.ndarray) -> np.ndarray:
    """(n_boot,) mean over each replicate's drawn seeds of the (n_boot, S) replicate scores."""
    w = _seed_weights(seed_draws, scores.shape[1])
    return (np.where(w > 0, scores, 0.0) * w).sum(axis=1)


def bootstrap_p_value(replicates: np.ndarray) -> float:
    """Two-sided p-value of 'difference = 0' from bootstrap replicates of the difference (rule above)."""
    b = replicates.size
    below = int((replicates <= 0).sum()) + 1
    above = int((replicates >= 0).sum()) + 1
    return float(min(1.0, 2 * min(below, above) / (b + 1)))


def paired_bootstrap(
    gold: Sequence,
    preds_a: Sequence[Sequence],
    preds_b: Sequence[Sequence],
    metric: Metric,
    n_boot: int = 1000,
    seed: int = 0,
    confidence: float = 0.95,
) -> BootstrapResult:
    """Paired bootstrap of metric(A) - metric(B) over test examples and seeds.

    `preds_a` / `preds_b` are lists over seeds (possibly of different lengths) of per-example predictions
    aligned with `gold`. Deterministic for a given `seed`. See the module docstring for the exact rule."""
    n = len(gold)
    if n == 0 or not preds_a or not preds_b:
        raise ValueError("paired_bootstrap needs test examples and at least one seed per model")
    for p in (*preds_a, *preds_b):
        if len(p) != n:
            raise ValueError(f"predictions of length {len(p)} do not align with {n} gold examples")
    gold = list(gold)
    observed = float(np.mean([metric(gold, list(p)) for p in preds_a]) - np.mean([metric(gold, list(p)) for p in preds_b]))
    rng = np.random.default_rng(seed)
    examples, seeds_a, seeds_b = _draws(rng, n, len(preds_a), len(preds_b), n_boot)
    reps = _replicate_means(metric, gold, preds_a, examples, seeds_a) - _replicate_means(
        metric, gold, preds_b, examples, seeds_b
    )
    return _bootstrap_result(observed, reps, confidence)


def _bootstrap_result(observed: float, reps: np.ndarray, confidence: float) -> BootstrapResult:
    alpha = (1 - confidence) / 2
    low, high = np.quantile(reps, [alpha, 1 - alpha])
    return BootstrapResult(observed, float(low), float(high), bootstrap_p_value(reps), reps.size)


# --- significance groups --------------------------------------------------------------------------------


@dataclass(frozen=True)
class SignificanceGroups:
    """The best model of a task and the models not significantly worse than it (the top group, best
    included); `vs_best[m]` is the bootstrap of best - m for every other model."""

    best: str
    top: frozenset[str]
    vs_best: dict[str, BootstrapResult] = field(default_factory=dict)
    alpha: float = 0.05

    def in_top(self, model: str) -> bool:
        return model in self.top


def significance_groups(
    gold: Sequence,
    preds: Mapping[str, Sequence[Sequence]],
    metric: Metric,
    n_boot: int = 1000,
    seed: int = 0,
    alpha: float = 0.05,
) -> SignificanceGroups:
    """Group models of one task: the best (highest seed-mean metric) and every model whose paired bootstrap
    against the best gives p >= alpha share the top group.

    `vs_best[m]` is `paired_bootstrap(gold, preds[best], preds[m], metric, n_boot, seed)`, to the last bit
    (tested). With a CountMetric it is computed for all pairs at once: each pair's bootstrap starts its
    generator at `seed`, so every pair draws the same test examples, and the same seeds for models with the
    same number of seeds; each model's counts and replicate scores are therefore computed once
    (`_scores_of_counts`) and only the seed averaging is per pair."""
    if not preds:
        raise ValueError("significance_groups needs at least one model")
    gold = list(gold)
    if not isinstance(metric, CountMetric):
        means = {m: float(np.mean([metric(gold, list(p)) for p in seeds])) for m, seeds in preds.items()}
        best = max(means, key=lambda m: (means[m], m))
        vs_best = {m: paired_bootstrap(gold, preds[best], preds[m], metric, n_boot, seed) for m in preds if m != best}
    else:
        best, vs_best = _groups_vs_best(gold, preds, metric, n_boot, seed)
    top = frozenset([best, *(m for m, r in vs_best.items() if r.p_value >= alpha)])
    return SignificanceGroups(best, top, vs_best, alpha)


def _groups_vs_best(gold: list, preds: Mapping[str, Sequence[Sequence]], metric: CountMetric, n_boot: int,
                    seed: int) -> tuple[str, dict[str, BootstrapResult]]:
    """The best model and paired_bootstrap(best, m) for every other m, all pairs at once (see the caller)."""
    n = len(gold)
    for seeds in preds.values() if len(preds) > 1 else ():  # a lone model has no pair to test
        if n == 0 or not seeds:
            raise ValueError("paired_bootstrap needs test examples and at least one seed per model")
        for p in seeds:
            if len(p) != n:
                raise ValueError(f"predictions of length {len(p)} do not align with {n} gold examples")
    models = list(preds)
    counts = [np.stack([metric.counts(gold, p) for p in preds[m]]) for m in models]  # (S, n, k) each
    observed = {m: seed_scores(metric, c) for m, c in zip(models, counts, strict=True)}
    if len(models) == 1:
        return models[0], {}
    scores = dict(zip(models, _scores_of_counts(metric, counts, replicate_examples(n, n_boot, seed)), strict=True))
    return groups_from_replicates(observed, scores, n, n_boot, seed)


def seed_scores(metric: CountMetric, counts: np.ndarray) -> list[float]:
    """The metric of each seed from its (S, n, k) per-example counts (the observed scores)."""
    # every seed's totals scored in one call: the metric is element-wise over leading axes (10,260 calls for the
    # seeds of a 60-model board were a fifth of its F1 time)
    return [float(v) for v in metric.score(counts.sum(axis=1))]


def replicate_examples(n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, n) test-example indices of every replicate: the first draw of `_draws`, the same for every pair
    (each pair's generator starts at `seed`), so also the resample of the rank intervals."""
    return np.random.default_rng(seed).integers(0, n, size=(n_boot, n))


def replicate_scores(metric: CountMetric, counts: Sequence[np.ndarray], n: int, n_boot: int,
                     seed: int) -> list[np.ndarray]:
    """Each model's (n_boot, S) scores on every replicate (`_scores_of_counts`): per model, whatever the other
    models, so a board caches them per model and recomputes only a new model's (bench/standings/cache.py)."""
    return _scores_of_counts(metric, counts, replicate_examples(n, n_boot, seed))


def groups_from_replicates(observed: Mapping[str, Sequence[float]], scores: Mapping[str, np.ndarray], n: int,
                           n_boot: int, seed: int) -> tuple[str, dict[str, BootstrapResult]]:
    """The best model and its bootstrap against every other from each model's observed per-seed scores and
    (n_boot, S) replicate scores: the seed draws of each pair as `paired_bootstrap` draws them."""
    means = {m: float(np.mean(list(obs))) for m, obs in observed.items()}
    best = max(means, key=lambda m: (means[m], m))
    s_best = scores[best].shape[1]
    draws = {}  # seeds of the other model -> (examples, seeds of best, seeds of the other), as paired_bootstrap draws
    for m in means:
        if m != best and scores[m].shape[1] not in draws:
            draws[scores[m].shape[1]] = _draws(np.random.default_rng(seed), n, s_best, scores[m].shape[1], n_boot)
    if not draws:
        return best, {}
    best_means = _seed_means(scores[best], next(iter(draws.values()))[1])
    vs_best = {}
    for m in means:
        if m != best:
            reps = best_means - _seed_means(scores[m], draws[scores[m].shape[1]][2])
            vs_best[m] = _bootstrap_result(means[best] - means[m], reps, 0.95)
    return best, vs_best


# --- rank intervals ---------------------------------------------------------------------------------------


def rank_replicates(scores: Mapping[str, np.ndarray], n: int, n_boot: int, seed: int) -> np.ndarray:
    """(n_boot, M) seed-mean score of each model (in `scores` order) on every replicate: the test examples of
    `replicate_examples` and, for a model of S seeds, the seeds a pair of S-seed models draws for its second
    model (`_draws(..., S, S, ...)[2]`): every model of a board of S-seed models is averaged over the same
    seed draws as in its significance pair, and two identical models get identical replicates."""
    seed_draws: dict[int, np.ndarray] = {}
    columns = []
    for s in scores.values():
        k = s.shape[1]
        if k not in seed_draws:
            seed_draws[k] = _draws(np.random.default_rng(seed), n, k, k, n_boot)[2]
        columns.append(_seed_means(s, seed_draws[k]))
    return np.stack(columns, axis=1) if columns else np.empty((n_boot, 0))


@dataclass(frozen=True)
class RankInterval:
    """A model's rank on a table (1 = best) with its bootstrap interval: `low`-`high` holds its rank in
    `confidence` of the replicates."""

    rank: int
    low: int
    high: int

    def __str__(self) -> str:
        return f"{self.low}-{self.high}"


def rank_intervals(replicates: np.ndarray, observed: Sequence[float], confidence: float = 0.95) -> list[RankInterval]:
    """Each model's rank (1 + the models strictly better; ties share the better rank) on the observed scores and
    its `confidence` interval over the (n_boot, M) replicate scores (lower and higher empirical quantiles)."""
    b, m = replicates.shape
    ranks = np.empty((b, m), dtype=np.int64)
    for r in range(b):
        ordered = np.sort(replicates[r])
        ranks[r] = m - np.searchsorted(ordered, replicates[r], side="right") + 1
    alpha = (1 - confidence) / 2
    low = np.quantile(ranks, alpha, axis=0, method="lower")
    high = np.quantile(ranks, 1 - alpha, axis=0, method="higher")
    obs = np.asarray(observed, dtype=np.float64)
    rank = [int((obs > v).sum()) + 1 for v in obs]
    return [RankInterval(rank[j], int(low[j]), int(high[j])) for j in range(m)]


# --- the task average (the freeze experiment's p = 0.25) ------------------------------------------------


@dataclass(frozen=True)
class TaskPredictions:
    """One task's test predictions for models A and B: gold, per-seed prediction lists, its metric."""

    task: str
    gold: Sequence
    preds_a: Sequence[Sequence]
    preds_b: Sequence[Sequence]
    metric: Metric


@dataclass(frozen=True)
class AverageBootstrapResult:
    """A - B on the average over tasks of the seed-mean metric: difference, percentile CI, p-value."""

    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    n_boot: int
    mean_a: float
    mean_b: float
    tasks: tuple[str, ...]


def average_bootstrap(tasks: Sequence[TaskPredictions], n_boot: int = 1000, seed: int = 0,
                      confidence: float = 0.95) -> AverageBootstrapResult:
    """Paired bootstrap of the task-averaged score (A - B). Each replicate resamples, within every task, its
    test examples (one draw shared by A and B: the pairing) and, per model, its seeds, exactly as
    `paired_bootstrap` does for one task; the replicate's statistic is the mean over tasks of the seed-mean
    metric of A minus that of B. The tasks are fixed (the average is over the tasks both models have), so
    only the examples and seeds vary. Same CI and p-value rule as `paired_bootstrap`."""
    if not tasks:
        raise ValueError("average_bootstrap needs at least one task")
    rng = np.random.default_rng(seed)
    reps = np.zeros(n_boot)
    means_a, means_b = [], []
    for t in tasks:
        gold = list(t.gold)
        n = len(gold)
        if n == 0 or not t.preds_a or not t.preds_b:
            raise ValueError(f"task {t.task}: needs test examples and at least one seed per model")
        for p in (*t.preds_a, *t.preds_b):
            if len(p) != n:
                raise ValueError(f"task {t.task}: predictions of length {len(p)} do not align with {n} gold examples")
        means_a.append(float(np.mean([t.metric(gold, list(p)) for p in t.preds_a])))
        means_b.append(float(np.mean([t.metric(gold, list(p)) for p in t.preds_b])))
        examples, seeds_a, seeds_b = _draws(rng, n, len(t.preds_a), len(t.preds_b), n_boot)
        reps += _replicate_means(t.metric, gold, t.preds_a, examples, seeds_a)
        reps -= _replicate_means(t.metric, gold, t.preds_b, examples, seeds_b)
    reps /= len(tasks)
    alpha = (1 - confidence) / 2
    low, high = np.quantile(reps, [alpha, 1 - alpha])
    mean_a, mean_b = float(np.mean(means_a)), float(np.mean(means_b))
    return AverageBootstrapResult(mean_a - mean_b, float(low), float(high), bootstrap_p_value(reps), n_boot,
                                  mean_a, mean_b, tuple(t.task for t in tasks))


# --- minimum detectable difference ---------------------------------------------------------------------


@dataclass(frozen=True)
class DetectableDifference:
    """The smallest true A - B a two-sided test at `alpha` detects with probability `power`, for two models
    with this model's noise on this task (module function docstring).

    mdd: with the model's number of seeds (nan with one seed: the seed variance is unknown);
    mdd_many_seeds: the floor that more seeds cannot lower (test-set noise only)."""

    mdd: float
    mdd_many_seeds: float
    seed_std: float
    test_se: float
    n_seeds: int
    alpha: float
    power: float


def minimum_detectable_difference(gold: Sequence, preds: Sequence[Sequence], metric: Metric, n_boot: int = 1000,
                                  seed: int = 0, alpha: float = 0.05, power: float = 0.80) -> DetectableDifference:
    """Minimum detectable difference at `power` from the seed variance and the bootstrap.

    One model's seed-mean score has variance  seed_std^2 / k + test_se^2 : seed_std is the standard deviation
    of the k seeds' scores (ddof=1); test_se is the bootstrap standard error over test examples of one seed's
    score (mean over seeds of each seed's bootstrap variance; the test set is shared by the seeds, so this
    part does not shrink with k). A difference of two such models has twice that variance (a conservative
    bound: pairing on the same test examples usually shrinks it), so
        MDD = (z_{1-alpha/2} + z_{power}) * sqrt(2 * (seed_std^2 / k + test_se^2)).
    At alpha 0.05 and power 0.80 the factor is 1.96 + 0.84 = 2.80."""
    gold = list(gold)
    if not gold or not preds:
        raise ValueError("minimum_detectable_difference needs test examples and at least one seed")
    scores = [metric(gold, list(p)) for p in preds]
    rng = np.random.default_rng(seed)
    examples = rng.integers(0, len(gold), size=(n_boot, len(gold)))
    all_seeds = np.tile(np.arange(len(preds)), (n_boot, 1))
    if isinstance(metric, CountMetric):
        reps = _replicate_scores_fast(metric, gold, preds, examples)
    else:
        reps = _replicate_scores_generic(metric, gold, preds, examples, all_seeds)
    test_se = float(np.sqrt(np.mean(np.var(reps, axis=0, ddof=1))))
    k = len(preds)
    seed_std = float(np.std(scores, ddof=1)) if k > 1 else math.nan
    factor = float(ndtri(1 - alpha / 2) + ndtri(power))  # scipy.stats.norm.ppf
    mdd = factor * math.sqrt(2 * (seed_std**2 / k + test_se**2)) if k > 1 else math.nan
    return DetectableDifference(mdd, factor * math.sqrt(2) * test_se, seed_std, test_se, k, alpha, power)


# --- many tasks, one question ---------------------------------------------------------------------------
def adjust_p_values(p_values: Sequence[float], method: str = "holm") -> list[float]:
    """p-values adjusted for testing one difference on several tasks at once, in input order; NaN (no test)
    stays NaN and is not counted. `holm`: Holm's step-down (1979), which controls the family-wise error rate as
    Bonferroni does and rejects at least as often; `bonferroni`: p x m; `none`: as given. Adjusted values are
    capped at 1 and, for Holm, made monotone in the order of the raw p-values (statsmodels' `multipletests`)."""
    tested = [(p, i) for i, p in enumerate(p_values) if p == p]
    out = [math.nan] * len(p_values)
    m = len(tested)
    if method == "none":
        return [float(p) for p in p_values]
    if method == "bonferroni":
        for p, i in tested:
            out[i] = min(1.0, p * m)
        return out
    if method != "holm":
        raise ValueError(f"unknown correction {method!r} (holm, bonferroni, none)")
    running = 0.0
    for rank, (p, i) in enumerate(sorted(tested)):
        running = max(running, min(1.0, (m - rank) * p))
        out[i] = running
    return out
