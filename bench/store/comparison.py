"""A versus B: the one computation behind `biobench compare` and the leaderboard's Compare tab (fractions).

Why one home: the command and the Compare tab answered the same question with their own code (three
`compare_average`s, one in fractions, one in percent, with different fallbacks) and neither looked at how the
runs were made: two models fine-tuned with epochs 2 / lr 5e-5 and epochs 3 / lr 1e-3 got a p-value as if the
models alone differed. Here:

- `compare_task` / `compare_average`: a paired bootstrap over test examples x seeds when both models have
  aligned predictions (`biobench.stats.paired_bootstrap`, `average_bootstrap`); otherwise Welch's t over the
  seed scores when both have at least two seeds; otherwise the difference of the seed means only.
- `run_settings` / `protocol_differences`: the protocol settings in which A's runs and B's runs of a task differ:
  every setting the runs' protocol records hold (the protocol hash's inputs: epochs, lr, max length, steps,
  batch, head, metric, ...), their smoke overrides and the test data itself.
- `compare_pair`: every task of a pair at once. A task whose protocols differ gets its means and difference but
  no interval, p-value or significance (and stays out of the average) unless the caller allows it
  (`biobench compare --allow-different-protocols`): a difference in settings is not a difference of models.

Callers (`biobench.standings.folder_pairs` for model folders, `biobench.standings.entry_pairs` for the board) collect
the runs and format percent at the edge.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from biobench.stats import TaskPredictions, average_bootstrap, paired_bootstrap, seed_summary

PAIRED = "paired bootstrap"
WELCH = "Welch t over seeds"
MEANS_ONLY = "reported means only"
DIFFERENT_PROTOCOLS = "no test: different protocols"

# What a comparison checks is every setting a result's protocol record holds: the record is the protocol's
# fields as `biobench.protocols.Protocol.to_dict` writes them, the inputs of its hash, so a setting added to the
# protocol table is compared the day it is recorded, with no second list to forget it in (issue 57 item 3: a
# list here left out `name`, and would have left out the next setting). `hash` is those settings again. Each is
# shown by its own name in words ('max_length' -> 'max length', the protocol table's default label); the run's
# smoke overrides and test data, which are no protocol field, are named here.
NOT_A_SETTING = frozenset(("hash",))
WORDS: dict[str, str] = {"name": "protocol", "smoke": "smoke overrides",
                         "data": "test data (checksum; e.g. another sample unit)"}
_RUN_EXTRAS = ("smoke", "data")  # a run's settings beyond its protocol record, compared after it


def setting_words(setting: str) -> str:
    """How a setting is named in a difference: 'max_length' -> 'max length', 'name' -> 'protocol'."""
    return WORDS.get(setting, setting.replace("_", " "))


@dataclass(frozen=True)
class Comparison:
    """A - B on one task (or the average of `tasks`): seed means, difference, 95% CI and two-sided p-value
    (NaN when only the means are known, or when the protocols differ and no test was asked), and how."""

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

    @property
    def tested(self) -> bool:
        return not math.isnan(self.p_value)


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
    """A - B on the average over the tasks of `paired` (`biobench.stats.average_bootstrap`: test examples
    resampled within each task, seeds per model); None when no task has aligned predictions for both."""
    if not paired:
        return None
    r = average_bootstrap(list(paired), n_boot, seed)
    return Comparison(r.mean_a, r.mean_b, r.diff, r.ci_low, r.ci_high, r.p_value, PAIRED, r.n_boot, r.tasks)


# ------------------------------------------------------------------------------------------ protocol settings
def _shown(value: Any) -> str:
    if isinstance(value, Mapping):
        return json.dumps(value, sort_keys=True, separators=(",", ":"))
    if isinstance(value, float):
        return f"{value:g}"
    return "none" if value is None else str(value)


_PROTOCOL_VALUE = re.compile(r" \(protocol [^)]*\)")  # describe_overrides' '(protocol 15)' after a value


def run_settings(protocol: Mapping[str, Any] | None, smoke: str = "", data_checksum: Any = None) -> dict[str, str]:
    """The settings of one run as comparable strings: every setting its protocol record holds (the inputs of the
    protocol hash, in the record's order), its smoke overrides as described by
    `biobench.store.trust.describe_overrides` ('' for a protocol run) and the checksum of the data it was scored
    on (another sample unit or data version changes it)."""
    protocol = protocol if isinstance(protocol, Mapping) else {}
    out = {str(k): _shown(v) for k, v in protocol.items() if k not in NOT_A_SETTING and k not in _RUN_EXTRAS}
    # what ran, not the protocol each override departs from: two models run with the same `--quick` command
    # differ in the protocol's max length (capped by each model's context: 512 vs 1,024) though both ran at 128
    out["smoke"] = _PROTOCOL_VALUE.sub("", smoke) or "none"
    if data_checksum:
        out["data"] = str(data_checksum)[:12]
    return out


@dataclass(frozen=True)
class SettingDifference:
    """One setting in which A's runs and B's runs of a task differ; `a`/`b` list each side's values."""

    setting: str
    a: tuple[str, ...]
    b: tuple[str, ...]

    def text(self) -> str:
        """'epochs 2 vs 3', 'lr 5e-05 vs 0.001', 'smoke overrides epochs 1 (protocol 15) vs none'."""
        return f"{setting_words(self.setting)} {' / '.join(self.a)} vs {' / '.join(self.b)}"


def protocol_differences(settings_a: Iterable[Mapping[str, str]], settings_b: Iterable[Mapping[str, str]]
                         ) -> list[SettingDifference]:
    """The settings (`run_settings` of each run of A, of B, on one task) whose values differ between A and B,
    in the order the runs record them (the protocol's fields, then smoke overrides and test data); [] when A
    and B were run with the same protocol. A setting one side did not record (older files) is not a
    difference."""
    runs_a, runs_b = list(settings_a), list(settings_b)
    recorded = [k for r in (*runs_a, *runs_b) for k in r if k not in _RUN_EXTRAS]
    out = []
    for setting in (*dict.fromkeys(recorded), *_RUN_EXTRAS):
        values_a = {r[setting] for r in runs_a if setting in r}
        values_b = {r[setting] for r in runs_b if setting in r}
        if values_a and values_b and values_a != values_b:
            out.append(SettingDifference(setting, tuple(sorted(values_a)), tuple(sorted(values_b))))
    return out


def differences_text(differences: Sequence[SettingDifference]) -> str:
    return "; ".join(d.text() for d in differences)


# ------------------------------------------------------------------------------------------ a pair, every task
@dataclass(frozen=True)
class TaskRuns:
    """What a comparison needs of A and B on one task: seed scores (fractions, seed order), each run's
    `run_settings` and, when both have aligned test predictions, the pair of them."""

    task: str
    scores_a: Sequence[float]
    scores_b: Sequence[float]
    settings_a: Sequence[Mapping[str, str]] = ()
    settings_b: Sequence[Mapping[str, str]] = ()
    paired: TaskPredictions | None = None


@dataclass(frozen=True)
class TaskComparison:
    task: str
    comparison: Comparison
    differences: tuple[SettingDifference, ...] = ()


@dataclass(frozen=True)
class PairComparison:
    """A - B over tasks. `differences` (task -> settings that differ) is filled whether or not a test was run;
    `refused` lists the tasks left untested because their protocols differ (and out of `average`)."""

    tasks: list[TaskComparison]
    average: Comparison | None = None
    allow_different_protocols: bool = False
    refused: tuple[str, ...] = ()
    differences: dict[str, tuple[SettingDifference, ...]] = field(default_factory=dict)

    @property
    def same_protocol(self) -> bool:
        return not self.differences

    def warning(self, to_test: str = "pass --allow-different-protocols") -> str:
        """One paragraph for a console or the Compare tab ('' when A and B share their protocols); `to_test`
        says how this reader asks for the tests anyway (the Compare tab: its checkbox, never a CLI flag)."""
        if not self.differences:
            return ""
        by_text: dict[str, list[str]] = {}
        for task, diffs in self.differences.items():
            by_text.setdefault(differences_text(diffs), []).append(task)
        listed = "; ".join(f"{', '.join(tasks)}: {text}" for text, tasks in by_text.items())
        if self.allow_different_protocols:
            return (f"A and B were run with different settings ({listed}); the tests were run anyway, as asked: "
                    "a difference may come from the settings, not the models.")
        return (f"A and B were run with different settings ({listed}); no significance test on "
                f"{len(self.refused)} task(s), since the difference may come from the settings, not the models. "
                f"Rerun one with the other's settings, or {to_test} to test anyway.")


def compare_pair(tasks: Sequence[TaskRuns], n_boot: int = 1000, seed: int = 0, average: bool = True,
                 allow_different_protocols: bool = False) -> PairComparison:
    """A - B per task (`compare_task`) and on the average of the tasks with aligned predictions
    (`compare_average`; None when there are none, or `average` is False). A task whose runs differ in protocol
    settings gets its means and difference only (method `DIFFERENT_PROTOCOLS`) unless
    `allow_different_protocols`."""
    rows, refused, differences, testable = [], [], {}, []
    for t in tasks:
        diffs = tuple(protocol_differences(t.settings_a, t.settings_b))
        if diffs:
            differences[t.task] = diffs
        if diffs and not allow_different_protocols:
            mean_a, mean_b = _mean(t.scores_a), _mean(t.scores_b)
            c = Comparison(mean_a, mean_b, mean_a - mean_b, math.nan, math.nan, math.nan, DIFFERENT_PROTOCOLS)
            refused.append(t.task)
        else:
            c = compare_task(t.scores_a, t.scores_b, t.paired, n_boot, seed)
            if t.paired is not None:
                testable.append(t.paired)
        rows.append(TaskComparison(t.task, c, diffs))
    avg = compare_average(testable, n_boot, seed) if average else None
    return PairComparison(rows, avg, allow_different_protocols, tuple(refused), differences)
