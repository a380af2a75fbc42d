"""`Results`: a set of result records (one per model, task and seed) as the Python API returns them.

Why a class of its own: `evaluate` and `load_results` hand a notebook the same thing, the records exactly as the
store reads them (`biobench.store.Result`), plus two tables built by the store's own summaries (mean, std and
interval from `store.summary.TaskScores`, the minimum detectable difference from the seeds' predictions, the
trust flags from `store.trust`), so a DataFrame never disagrees with `eval`'s summary or the leaderboard.
Scores are fractions, as in the result files. pandas is imported when a table is asked for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biobench.errors import ResultsError
from biobench.names import display_name, distinct_names
from biobench.store import model_group, read_result
from biobench.store.record import Result
from biobench.store.summary import TaskScores, summary_row
from biobench.store.trust import degenerate, degenerate_text, describe_overrides, overrides

if TYPE_CHECKING:  # numpy and pandas load when a table is asked for: `import biobench` stays instant
    import pandas as pd
    from biobench.api.summary_table import Summary

SUMMARY_COLUMNS = ("model", "slug", "task", "lang", "kind", "seeds", "n", "mean", "std", "ci_low", "ci_high", "mdd",
                   "mdd_many_seeds", "smoke", "degenerate", "contamination")
RUN_COLUMNS = ("model", "slug", "task", "lang", "kind", "seed", "macro_f1", "metric", "score", "smoke", "degenerate",
               "contamination", "path")


@dataclass(frozen=True)
class RefusedFile:
    """A result file that could not be read (path and the reader's one-line reason): reported, never fatal."""

    path: str
    reason: str


@dataclass
class Results:
    """Result records, each with the file it was read from. `records` are `biobench.store.Result` objects;
    `problems` the files that were refused (a corrupt file never hides the others)."""

    records: list[Result] = field(default_factory=list)
    paths: list[Path | None] = field(default_factory=list)
    problems: list[RefusedFile] = field(default_factory=list)

    @classmethod
    def from_files(cls, paths: Iterable[Path]) -> Results:
        """The results in these files, read by the store's one reader; unreadable files become `problems`."""

        out = cls()
        for path in paths:
            try:
                out.add(read_result(path), path)
            except ResultsError as err:
                out.problems.append(RefusedFile(str(path), str(err)))
        return out

    def add(self, record: Result, path: Path | None = None) -> None:
        self.records.append(record)
        self.paths.append(path)

    def __len__(self) -> int:
        return len(self.records)

    def __iter__(self) -> Iterator[Result]:
        return iter(self.records)

    def __repr__(self) -> str:
        models = sorted(self.names().values())
        tasks = sorted({r.task_id for r in self.records})
        return (f"Results({len(self.records)} run(s): {len(models)} model(s) {models[:3]}"
                f"{'...' if len(models) > 3 else ''}, {len(tasks)} task(s)"
                + (f", {len(self.problems)} unreadable file(s)" if self.problems else "") + ")")

    def groups(self) -> list[str]:
        """The models, each its results folder (`store.model_group`: display name + 8 digits of its revision,
        the one identity the board, `compare` and the export use), in order of first appearance: two checkpoints
        with one display name are two models."""
        return list(dict.fromkeys(self._group(i) for i in range(len(self.records))))

    def names(self) -> dict[str, str]:
        """{results folder: the name a table shows}: the display name, followed by the results folder where
        several models share it (`names.distinct_names`, as the board shows them)."""
        firsts: dict[str, Result] = {}
        for i, record in enumerate(self.records):
            firsts.setdefault(self._group(i), record)
        return dict(zip(firsts, distinct_names([(_model_name(r), g) for g, r in firsts.items()]), strict=True))

    def _group(self, i: int) -> str:
        return model_group(self.records[i], self.paths[i])

    @property
    def models(self) -> list[str]:
        """The models' names, in order of first appearance: one per results folder (`groups`), display names
        told apart by their results folder where two models share one."""
        return list(self.names().values())

    def filter(self, model: str | None = None, task: str | None = None, lang: str | None = None) -> Results:
        """The records of one model (display name, the name `models` shows, or results folder), task and/or
        language."""
        names = self.names()
        keep = [(r, p) for r, p in zip(self.records, self.paths, strict=True)
                if (model is None or model in (_model_name(r), names[model_group(r, p)], model_group(r, p), r.slug))
                and (task is None or r.task_id == task) and (lang is None or r.task.get("lang") == lang)]
        return Results([r for r, _ in keep], [p for _, p in keep], list(self.problems))

    def runs(self) -> list[dict[str, Any]]:
        """One dict per run (the rows of `to_pandas`)."""
        rows = []
        names = self.names()
        for record, path in zip(self.records, self.paths, strict=True):
            note = degenerate(record)
            group = model_group(record, path)
            rows.append({"model": names[group], "slug": group, "task": record.task_id,
                         "lang": record.task.get("lang", ""), "kind": record.task.get("kind", ""),
                         "seed": record.seed, "macro_f1": record.macro_f1, "metric": record.metric,
                         "score": record.score,
                         "smoke": describe_overrides(overrides(record)),
                         "degenerate": degenerate_text(note) if note else "",
                         "contamination": _contamination_share(record),
                         "path": str(path) if path is not None else None})
        return rows

    def to_pandas(self) -> pd.DataFrame:
        """One row per run: model (its name, told apart by its results folder where two models share one), slug
        (results folder: the model's identity), task, lang, kind, seed, macro_f1 (a fraction), metric (the task's
        headline metric) and score (its value: what summaries average and the board ranks), smoke (the protocol
        overrides, '' for a protocol run), degenerate (the finding and its likely reason, ''), contamination (the measured share of test examples sharing an n-gram with
        the pretraining corpus, None when not measured) and path."""
        import pandas as pd

        return pd.DataFrame(self.runs(), columns=list(RUN_COLUMNS))

    def summary_rows(self, mdd: bool = True) -> list[dict[str, Any]]:
        """One dict per (model, task, smoke overrides): the rows of `summary` (fractions). A model is its results
        folder (`groups`); a second result for one seed of a model's task is listed in `problems`, never averaged
        in or put in the place of the first."""
        names = self.names()
        rows: list[dict[str, Any]] = []
        refused: list[str] = []
        for (group, task, smoke), members in self.summarised().items():
            first = self.records[members[0]]
            scores = TaskScores(task, str(first.task.get("lang", "")), str(first.task.get("kind", "")), first.metric)
            notes, shares = [], []
            kept = []
            for i in members:
                record = self.records[i]
                try:
                    scores.add(record.seed, record.score, self.paths[i])
                except ResultsError as err:
                    self.problems.append(RefusedFile(str(self.paths[i] or "<record>"), str(err)))
                    continue
                kept.append(i)
                if (note := degenerate(record)) is not None:
                    notes.append(f"seed {record.seed}: {degenerate_text(note)}")
                if (share := _contamination_share(record)) is not None:
                    shares.append(share)
            row = summary_row(scores, mdd=mdd and all(self.paths[i] is not None for i in kept),
                              labels=first.task.get("labels") or (), problems=refused)
            rows.append({"model": names[group], "slug": group, "task": task, "lang": row["lang"], "kind": row["kind"],
                         "seeds": sorted(row["scores"]), "n": row["n"], "mean": row.get("mean"),
                         "std": row.get("std") if row["n"] > 1 else None,
                         "ci_low": row.get("ci_low") if row["n"] > 1 else None,
                         "ci_high": row.get("ci_high") if row["n"] > 1 else None,
                         "mdd": row.get("mdd"), "mdd_many_seeds": row.get("mdd_many_seeds"),
                         "smoke": smoke, "degenerate": "; ".join(notes),
                         "contamination": max(shares) if shares else None})
        listed = {p.path for p in self.problems}
        for line in refused:  # a predictions file refused while the MDD read it: listed, never a silent NaN
            path = re.sub(r":\d+\Z", "", line.split(": ", 1)[0])  # the file, without a line number
            if path not in listed:
                listed.add(path)
                self.problems.append(RefusedFile(path, line))
        return rows

    def summarised(self) -> dict[tuple[str, str, str], list[int]]:
        """{(results folder, task, smoke overrides): the indices of its records}, in order of first appearance:
        the groups `summary` rows and the export's entries are made of."""
        groups: dict[tuple[str, str, str], list[int]] = {}
        for i, record in enumerate(self.records):
            groups.setdefault((self._group(i), record.task_id, describe_overrides(overrides(record))), []).append(i)
        return groups

    def summary(self, mdd: bool = True) -> Summary:
        """One row per (model, task, smoke overrides): model (its name, told apart by its results folder where two
        models share one), slug (its results folder), seeds, n, mean, std, 95% t-interval (ci_low, ci_high,
        clipped to [0, 1]), the minimum detectable difference at 80% power (mdd; mdd_many_seeds: the floor more
        seeds cannot lower; from the saved predictions, `mdd=False` skips it), and the trust flags: smoke (the
        protocol overrides of a smoke run, never averaged with the protocol's seeds), degenerate (seeds whose
        test predictions are degenerate, with the likely reason) and contamination (the largest measured share
        of test examples sharing an n-gram with the model's pretraining corpus, None when not measured). A
        DataFrame with every column; printed, it leads with model, task, mean, 95% interval and n (`Summary`)."""
        # lazy: loads pandas
        from biobench.api.summary_table import Summary

        return Summary(self.summary_rows(mdd), columns=list(SUMMARY_COLUMNS))


def _model_name(record: Result) -> str:
    """A record's display name, as the board shows it (`names.display_name`)."""
    return display_name(record.model)


def _contamination_share(record: Result) -> float | None:
    """The share of test examples found in the pretraining corpus, when the run recorded a check."""
    found = record.details.get("contamination")
    if isinstance(found, dict):
        share = (found.get("splits") or {}).get("test", {}).get("share") if isinstance(found.get("splits"), dict) else None
        if isinstance(share, int | float) and not isinstance(share, bool):
            return float(share)
    return None
