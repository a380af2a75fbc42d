"""The task-average bootstrap against an exact brute-force enumeration, and the minimum detectable difference."""

import itertools
import math

import numpy as np
import pytest
from biobench import stats


def _task_distribution(gold, preds_a, preds_b, metric):
    """Every equally likely (example draw, seed draw A, seed draw B) of one task: the values of the
    replicate statistic mean_drawn_seeds metric(A) - mean_drawn_seeds metric(B)."""
    n, ka, kb = len(gold), len(preds_a), len(preds_b)
    values = []
    for idx in itertools.product(range(n), repeat=n):
        g = [gold[i] for i in idx]
        sa = [metric(g, [p[i] for i in idx]) for p in preds_a]
        sb = [metric(g, [p[i] for i in idx]) for p in preds_b]
        for da in itertools.product(range(ka), repeat=ka):
            for db in itertools.product(range(kb), repeat=kb):
                values.append(np.mean([sa[s] for s in da]) - np.mean([sb[s] for s in db]))
    return np.array(values)


@pytest.fixture
def two_tasks():
    t1 = stats.TaskPredictions(
        "t1", ["x", "y", "x"], [["x", "y", "y"], ["x", "x", "x"]], [["y", "y", "x"]], None)
    t2 = stats.TaskPredictions(
        "t2", [["a"], ["a", "b"], ["b"]], [[["a"], ["a", "b"], []], [["a"], ["b"], ["b"]]],
        [[["b"], ["a"], ["b"]], [["a"], [], ["a"]]], None)
    out = []
    for t in (t1, t2):
        metric = stats.prediction_macro_f1(t.gold, *t.preds_a, *t.preds_b)
        out.append(stats.TaskPredictions(t.task, t.gold, t.preds_a, t.preds_b, metric))
    return out


def test_average_bootstrap_matches_the_exact_enumeration(two_tasks):
    per_task = [_task_distribution(t.gold, t.preds_a, t.preds_b, t.metric) for t in two_tasks]
    exact = ((per_task[0][:, None] + per_task[1][None, :]) / 2).ravel()  # tasks resampled independently
    p_exact = min(1.0, 2 * min((exact <= 0).mean(), (exact >= 0).mean()))

    result = stats.average_bootstrap(two_tasks, n_boot=20000, seed=1)
    observed = np.mean([np.mean([t.metric(t.gold, p) for p in t.preds_a]) - np.mean([t.metric(t.gold, p) for p in t.preds_b])
                        for t in two_tasks])
    assert result.diff == pytest.approx(observed, abs=1e-12)
    assert result.mean_a - result.mean_b == pytest.approx(observed, abs=1e-12)
    assert result.tasks == ("t1", "t2")
    assert result.p_value == pytest.approx(p_exact, abs=0.02)
    cdf = np.sort(exact)
    for bound, q in ((result.ci_low, 0.025), (result.ci_high, 0.975)):
        below = np.searchsorted(cdf, bound, side="left") / cdf.size  # P(d < bound)
        at_or_below = np.searchsorted(cdf, bound, side="right") / cdf.size  # P(d <= bound)
        assert below <= q + 0.01 and at_or_below >= q - 0.01, (bound, q, below, at_or_below)


def test_average_of_a_model_against_itself_is_zero_with_p_one(two_tasks):
    same = [stats.TaskPredictions(t.task, t.gold, t.preds_a, t.preds_a, t.metric) for t in two_tasks]
    result = stats.average_bootstrap(same, n_boot=200)
    assert result.diff == 0.0 and result.p_value == 1.0


def test_average_bootstrap_equals_the_task_bootstrap_for_one_task(two_tasks):
    t = two_tasks[1]
    avg = stats.average_bootstrap([t], n_boot=500, seed=3)
    one = stats.paired_bootstrap(t.gold, t.preds_a, t.preds_b, t.metric, n_boot=500, seed=3)
    assert (avg.diff, avg.ci_low, avg.ci_high, avg.p_value) == pytest.approx((one.diff, one.ci_low, one.ci_high, one.p_value))


def test_minimum_detectable_difference_from_seed_and_test_noise():
    rng = np.random.default_rng(0)
    n = 400
    gold = [int(x) for x in rng.integers(0, 2, size=n)]

    def accuracy(g, p):
        return float(np.mean(np.array(g) == np.array(p)))

    def noisy(rate, seed):
        r = np.random.default_rng(seed)
        return [1 - g if r.random() < rate else g for g in gold]

    one = stats.minimum_detectable_difference(gold, [noisy(0.3, 1)], accuracy, n_boot=2000)
    p = accuracy(gold, noisy(0.3, 1))
    assert one.test_se == pytest.approx(math.sqrt(p * (1 - p) / n), rel=0.1)  # binomial SE of an accuracy
    assert math.isnan(one.mdd) and one.mdd_many_seeds == pytest.approx(2.8016 * math.sqrt(2) * one.test_se, rel=1e-3)

    preds = [noisy(rate, s) for s, rate in enumerate((0.2, 0.3, 0.4))]
    many = stats.minimum_detectable_difference(gold, preds, accuracy, n_boot=2000)
    scores = [accuracy(gold, q) for q in preds]
    assert many.seed_std == pytest.approx(np.std(scores, ddof=1))
    assert many.mdd == pytest.approx(2.8016 * math.sqrt(2 * (many.seed_std**2 / 3 + many.test_se**2)), rel=1e-3)
    assert many.mdd > many.mdd_many_seeds
    fast = stats.minimum_detectable_difference(gold, preds, stats.prediction_macro_f1(gold, *preds), n_boot=500)
    assert fast.n_seeds == 3 and 0 < fast.test_se < 0.1
