"""A versus B, per task and on the task average, in the results' unit (fractions).

Why one implementation: `biobench compare` and the leaderboard's Compare tab answered the same question with
two codes (one in fractions, one in percent, with different fallbacks). Here: a paired bootstrap over test
examples x seeds when both models have aligned predictions (`biobench.stats.paired_bootstrap`); otherwise Welch's t over
the seed scores when both have at least two seeds; otherwise the difference of the seed means only. Callers
format (percent, tables) at the edge.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from biobench.stats import TaskPredictions, average_bootstrap, paired_bootstrap, seed_summary

PAIRED = "paired bootstrap"
WELCH = "Welch t over seeds"
MEANS_ONLY = "reported means only"


@dataclass(frozen=True)
class Comparison:
    """A - B on one task (or the average of `tasks`): seed means, difference, 95% CI and two-sided p-value
    (NaN when only the means are known), and how they were obtained."""

    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_value: float
    method: str
    n_boot: int | None = None
    tasks: tuple[str, ...] = ()

    def scaled(self, factor: float) -> dict[str, float | str | int | None]:
        """The scores and interval times `factor` (100: percentage points); p-value and method as they are."""
        return {"A": factor * self.mean_a, "B": factor * self.mean_b, "diff": factor * self.diff,
                "ci_low": factor * self.ci_low, "ci_high": factor * self.ci_high, "p_value": self.p_value,
                "method": self.method}


def _mean(scores: Sequence[float]) -> float:
    return seed_summary(list(scores)).mean


def compare_task(scores_a: Sequence[float], scores_b: Sequence[float], paired: TaskPredictions | None = None,
                 n_boot: int = 1000, seed: int = 0) -> Comparison:
    """A - B on one task from the seed scores (fractions) and, when both have aligned predictions, `paired`."""
    mean_a, mean_b = _mean(scores_a), _mean(scores_b)
    if paired is not None:
        r = paired_bootstrap(paired.gold, paired.preds_a, paired.preds_b, paired.metric, n_boot, seed)
        return Comparison(mean_a, mean_b, r.diff, r.ci_low, r.ci_high, r.p_value, PAIRED, r.n_boot, (paired.task,))
    if len(scores_a) >= 2 and len(scores_b) >= 2:
        from scipy import stats as sps  # here, not at import: scipy.stats adds ~1 s to every app start

        t = sps.ttest_ind(list(scores_a), list(scores_b), equal_var=False)
        ci = t.confidence_interval(0.95)
        p = float(t.pvalue) if math.isfinite(t.pvalue) else 1.0
        return Comparison(mean_a, mean_b, mean_a - mean_b, float(ci.low), float(ci.high), p, WELCH)
    return Comparison(mean_a, mean_b, mean_a - mean_b, math.nan, math.nan, math.nan, MEANS_ONLY)


def compare_average(paired: Sequence[TaskPredictions], n_boot: int = 1000, seed: int = 0) -> Comparison | None:
    """A - B on the average over the tasks of `paired` (`biobench.stats.average_bootstrap`: test examples resampled within
    each task, seeds per model); None when no task has aligned predictions for both."""
    if not paired:
        return None
    r = average_bootstrap(list(paired), n_boot, seed)
    return Comparison(r.mean_a, r.mean_b, r.diff, r.ci_low, r.ci_high, r.p_value, PAIRED, r.n_boot, r.tasks)

