"""biobench.stats: seed summaries against scipy, the paired bootstrap's invariants, significance groups."""

import math

import numpy as np
import pytest
from biobench import stats
from scipy import stats as sps
from sklearn.metrics import f1_score


def test_seed_summary_matches_scipy_t_interval():
    values = [0.61, 0.64, 0.60, 0.66, 0.63, 0.62, 0.65, 0.61, 0.64]
    s = stats.seed_summary(values)
    low, high = sps.t.interval(0.95, df=8, loc=np.mean(values), scale=sps.sem(values))
    assert s.n == 9
    assert s.mean == pytest.approx(np.mean(values))
    assert s.std == pytest.approx(np.std(values, ddof=1))
    assert (s.ci_low, s.ci_high) == pytest.approx((low, high))
    assert s.half_width == pytest.approx((high - low) / 2)


def test_quantiles_are_scipy_stats_to_the_last_bit():
    """stats uses scipy.special (light to import) for what scipy.stats.t.ppf / norm.ppf compute."""
    for df in (1, 2, 4, 8, 29, 200):
        assert stats._t_quantiles(0.95, df) == (float(sps.t.ppf((1 - 0.95) / 2, df)), float(sps.t.ppf((1 + 0.95) / 2, df)))
    assert float(stats.ndtri(0.975) + stats.ndtri(0.8)) == float(sps.norm.ppf(0.975) + sps.norm.ppf(0.8))  # MDD's factor


def test_stats_and_the_leaderboard_do_not_import_scipy_stats():
    import subprocess
    import sys

    code = ("import sys\nfrom biobench.standings import aggregate, cache, entry_pairs\nfrom biobench.leaderboard.tables import detail, export, html, text\n"
            "print('scipy.stats' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert out.stdout.strip() == "False"


def test_seed_summary_single_seed_has_no_interval():
    s = stats.seed_summary([0.7])
    assert (s.mean, s.std, s.n) == (0.7, 0.0, 1)
    assert math.isnan(s.ci_low) and math.isnan(s.ci_high)


def test_seed_summary_constant_values_and_empty():
    s = stats.seed_summary([0.5, 0.5, 0.5])
    assert (s.ci_low, s.ci_high, s.std) == (0.5, 0.5, 0.0)
    with pytest.raises(ValueError):
        stats.seed_summary([])


def test_macro_f1_metric_classification_matches_sklearn():
    gold, pred = ["a", "b", "c", "a", "b"], ["a", "c", "c", "a", "a"]
    assert stats.prediction_macro_f1(gold, pred)(gold, pred) == pytest.approx(f1_score(gold, pred, average="macro"))


@pytest.mark.parametrize(
    ("gold", "pred", "expected"),
    [  # multilabel: x 2/3, y 1, z 2/3; spans (exact match): D 2/3, C 0
        ([["x"], ["x", "y"], [], ["z"]], [["x"], ["y"], ["z"], ["z"]], (2 / 3 + 1 + 2 / 3) / 3),
        ([[[0, 3, "D"], [5, 9, "C"]], [[1, 2, "D"]]], [[[0, 3, "D"], [5, 8, "C"]], [[1, 2, "C"]]], 1 / 3),
    ],
)
def test_macro_f1_metric_label_lists_and_spans(gold, pred, expected):
    assert stats.prediction_macro_f1(gold, pred)(gold, pred) == pytest.approx(expected)


def _noisy(gold, labels, acc, seed):
    rng = np.random.default_rng(seed)
    return [g if rng.random() < acc else labels[rng.integers(len(labels))] for g in gold]


LABELS = ["a", "b", "c", "d"]
GOLD = [LABELS[i] for i in np.random.default_rng(1).integers(0, 4, 400)]


def test_bootstrap_identical_models_diff_zero_p_one():
    preds = [_noisy(GOLD, LABELS, 0.7, 5)]
    m = stats.prediction_macro_f1(GOLD, *preds)
    r = stats.paired_bootstrap(GOLD, preds, preds, m, n_boot=300)
    assert r.diff == 0.0 and r.p_value == 1.0 and r.ci_low == r.ci_high == 0.0
    # several seeds resampled independently per model: still centred on 0, p close to 1
    seeds = [_noisy(GOLD, LABELS, 0.7, s) for s in range(4)]
    r = stats.paired_bootstrap(GOLD, seeds, seeds, stats.prediction_macro_f1(GOLD, *seeds), n_boot=300)
    assert r.diff == 0.0 and r.p_value > 0.5 and r.ci_low < 0 < r.ci_high


def test_bootstrap_clear_difference_is_significant_and_deterministic():
    a = [_noisy(GOLD, LABELS, 0.9, s) for s in range(3)]
    b = [_noisy(GOLD, LABELS, 0.6, 10 + s) for s in range(5)]
    m = stats.prediction_macro_f1(GOLD, *a, *b)
    r = stats.paired_bootstrap(GOLD, a, b, m, n_boot=500, seed=3)
    assert r.diff > 0.2 and r.ci_low > 0 and r.p_value < 0.05
    assert r.p_value == pytest.approx(2 / 501)
    assert stats.paired_bootstrap(GOLD, a, b, m, n_boot=500, seed=3) == r
    assert stats.paired_bootstrap(GOLD, a, b, m, n_boot=500, seed=4) != r
    flipped = stats.paired_bootstrap(GOLD, b, a, m, n_boot=500, seed=3)
    assert flipped.diff == pytest.approx(-r.diff)


def test_bootstrap_fast_path_equals_generic_metric():
    gold, a, b = GOLD[:120], [_noisy(GOLD[:120], LABELS, 0.75, s) for s in range(3)], [_noisy(GOLD[:120], LABELS, 0.7, 9)]
    fast = stats.paired_bootstrap(gold, a, b, stats.prediction_macro_f1(gold, *a, *b), n_boot=100)
    slow = stats.paired_bootstrap(gold, a, b, lambda g, p: f1_score(g, p, average="macro"), n_boot=100)
    assert fast.diff == pytest.approx(slow.diff)
    assert (fast.ci_low, fast.ci_high, fast.p_value) == pytest.approx((slow.ci_low, slow.ci_high, slow.p_value))


def test_bootstrap_rejects_misaligned_predictions():
    with pytest.raises(ValueError, match="do not align"):
        stats.paired_bootstrap(["a", "b"], [["a"]], [["a", "b"]], lambda g, p: 0.0)


def test_bootstrap_of_thousands_of_examples_takes_the_vectorised_path(monkeypatch):
    """3,000 examples x 9 seeds x 1,000 replicates: macro-F1 is a CountMetric, so every replicate is scored from
    count arrays at once (`_replicate_scores_fast`, once per model), never one metric call per replicate and seed
    (the generic path: 18,000 calls). Its time is bench/perf/time_bounds.py's `bootstrap` row."""
    labels = [f"l{i}" for i in range(30)]
    gold = [labels[i] for i in np.random.default_rng(0).integers(0, 30, 3000)]
    a = [_noisy(gold, labels, 0.8, s) for s in range(9)]
    b = [_noisy(gold, labels, 0.79, 50 + s) for s in range(9)]
    m = stats.prediction_macro_f1(gold, *a, *b)
    paths = {"fast": 0}
    real_fast = stats._replicate_scores_fast

    def fast(*args, **kwargs):
        paths["fast"] += 1
        return real_fast(*args, **kwargs)

    def generic(*args, **kwargs):
        raise AssertionError("the per-replicate path ran")

    monkeypatch.setattr(stats, "_replicate_scores_fast", fast)
    monkeypatch.setattr(stats, "_replicate_scores_generic", generic)
    result = stats.paired_bootstrap(gold, a, b, m, n_boot=1000)
    assert paths["fast"] == 2 and result.n_boot == 1000
    assert result.ci_low <= result.diff <= result.ci_high and 0 < result.p_value <= 1


def test_significance_groups():
    strong = [_noisy(GOLD, LABELS, 0.9, s) for s in range(3)]
    tie = [_noisy(GOLD, LABELS, 0.9, 20 + s) for s in range(3)]
    weak = [_noisy(GOLD, LABELS, 0.5, 40 + s) for s in range(3)]
    preds = {"strong": strong, "tie": tie, "weak": weak}
    m = stats.prediction_macro_f1(GOLD, *strong, *tie, *weak)
    g = stats.significance_groups(GOLD, preds, m, n_boot=300)
    assert g.best in {"strong", "tie"}
    assert g.top == frozenset({"strong", "tie"})
    assert not g.in_top("weak") and g.vs_best["weak"].p_value < 0.05
    assert set(g.vs_best) == set(preds) - {g.best}


def test_seed_summary_bounds_clip_the_interval_to_the_metric_range():
    from biobench.stats import seed_summary

    wide = seed_summary([0.78, 0.99])
    assert wide.ci_high > 1.0
    clipped = seed_summary([0.78, 0.99], bounds=(0.0, 1.0))
    assert wide.ci_low < 0.0
    assert (clipped.ci_low, clipped.ci_high, clipped.mean) == (0.0, 1.0, wide.mean)


def _per_pair_reference(gold, preds, metric, n_boot, seed):
    """The per-pair implementation the vectorised groups replaced (float64 weights built with np.add.at, one
    product per pair and seed), kept here as the reference the groups must equal to the last bit."""
    def scores(p, examples):
        counts = np.stack([metric.counts(gold, x) for x in p])
        w = np.zeros(examples.shape)
        np.add.at(w, (np.arange(examples.shape[0])[:, None], examples), 1.0)
        return metric.score(np.matmul(w[None], counts)).T

    def seed_means(s, draws):
        w = np.zeros((draws.shape[0], s.shape[1]))
        np.add.at(w, (np.arange(draws.shape[0])[:, None], draws), 1.0)
        return (np.where(w > 0, s, 0.0) * (w / s.shape[1])).sum(axis=1)

    means = {m: float(np.mean([metric(gold, p) for p in seeds])) for m, seeds in preds.items()}
    best = max(means, key=lambda m: (means[m], m))
    out = {}
    for m in preds:
        if m == best:
            continue
        rng = np.random.default_rng(seed)
        examples = rng.integers(0, len(gold), size=(n_boot, len(gold)))
        sa = rng.integers(0, len(preds[best]), size=(n_boot, len(preds[best])))
        sb = rng.integers(0, len(preds[m]), size=(n_boot, len(preds[m])))
        reps = seed_means(scores(preds[best], examples), sa) - seed_means(scores(preds[m], examples), sb)
        low, high = np.quantile(reps, [(1 - 0.95) / 2, 1 - (1 - 0.95) / 2])  # the same floats as paired_bootstrap
        diff = float(np.mean([metric(gold, p) for p in preds[best]]) - np.mean([metric(gold, p) for p in preds[m]]))
        out[m] = stats.BootstrapResult(diff, float(low), float(high), stats.bootstrap_p_value(reps), n_boot)
    return best, out


@pytest.mark.parametrize("kind", ["classification", "multilabel", "ner"])
def test_significance_groups_of_all_pairs_at_once_equal_the_per_pair_bootstrap_to_the_last_bit(kind, monkeypatch):
    """The groups reuse each model's replicate scores across pairs (one resample shared by every pair, as each
    per-pair bootstrap draws it from the same seed): the random stream is unchanged, so every difference, CI and
    p-value is the per-pair one exactly, with models of different seed counts, in one product block or many."""
    rng = np.random.default_rng(5)
    n = 60
    if kind == "classification":
        gold = [LABELS[i] for i in rng.integers(0, 4, n)]
        noisy = lambda acc, s: _noisy(gold, LABELS, acc, s)  # noqa: E731
    elif kind == "multilabel":
        gold = [sorted({LABELS[i] for i in rng.integers(0, 4, rng.integers(0, 3))}) for _ in range(n)]
        noisy = lambda acc, s: [g if r < acc else [LABELS[s % 4]] for g, r in  # noqa: E731
                                zip(gold, np.random.default_rng(s).random(n), strict=True)]
    else:
        gold = [[[0, 3, "X"], [5, 9, "Y"]][: i % 3] for i in range(n)]
        noisy = lambda acc, s: [g if r < acc else [[0, 4, "X"]] for g, r in  # noqa: E731
                                zip(gold, np.random.default_rng(s).random(n), strict=True)]
    preds = {f"m{m}": [noisy(0.95 - 0.06 * m, 10 * m + s) for s in range(2 + m % 3)] for m in range(7)}
    metric = stats.prediction_macro_f1(gold, *[p for seeds in preds.values() for p in seeds], kind=kind)
    best, reference = _per_pair_reference(gold, preds, metric, 200, 3)
    for columns in (4096, 7):  # one block of models, or a block per model
        monkeypatch.setattr(stats, "MAX_PRODUCT_COLUMNS", columns)
        groups = stats.significance_groups(gold, preds, metric, n_boot=200, seed=3)
        assert groups.best == best
        assert groups.vs_best == reference
        assert groups.top == frozenset([best, *(m for m, r in reference.items() if r.p_value >= 0.05)])
    assert stats.significance_groups(gold, {"alone": preds["m0"]}, metric).vs_best == {}


def test_bootstrap_products_fall_back_to_float64_where_float32_would_round():
    assert stats._exact_in_float32(np.array([[0.0, 3.0]]), 1000)
    assert not stats._exact_in_float32(np.array([[0.0, 0.5]]), 10)  # not a count
    assert not stats._exact_in_float32(np.array([[2.0**20]]), 100)  # totals past 2**24
    assert not stats._exact_in_float32(np.array([[-1.0]]), 10)


def test_the_resample_weights_are_built_once_per_chunk_whatever_the_blocks(monkeypatch):
    """Every block of models shares a chunk's weights: built once per chunk of replicates, not once per block."""
    rng = np.random.default_rng(2)
    gold = [LABELS[i] for i in rng.integers(0, 4, 40)]
    metric = stats.macro_f1_metric(LABELS)
    counts = [np.stack([metric.counts(gold, _noisy(gold, LABELS, 0.8, 10 * m + s)) for s in range(3)])
              for m in range(5)]
    reference = stats.replicate_scores(metric, counts, 40, 300, 1)  # one block
    built = []
    weights = stats._resample_weights
    monkeypatch.setattr(stats, "_resample_weights", lambda examples: built.append(len(examples)) or weights(examples))
    monkeypatch.setattr(stats, "MAX_PRODUCT_COLUMNS", 1)  # a block per model: 5 blocks
    scores = stats._scores_of_counts(metric, counts, stats.replicate_examples(40, 300, 1), chunk=100)
    assert built == [100, 100, 100]  # 3 chunks, not 15 (chunks x blocks)
    assert all(np.array_equal(a, b) for a, b in zip(scores, reference, strict=True))
