"""How far a result's score can be trusted: smoke runs (protocol overrides) and degenerate test predictions.

Why one home: a score made with `--epochs 1 --limit-train 200` or one whose model predicts no entity at all is
a real number that reads like any other. The console line, `eval`'s summary, the leaderboard (marker, tooltip,
ranking), the results dataset and the model card all ask the two questions here, so they agree:

- `overrides(result)`: the protocol knobs the run changed, each with the protocol's own value (recorded by the
  writer as `overrides`; for older files the subset limits, the only overrides a protocol record tells apart on
  its own). A result with any is a smoke run: not the protocol's score.
- `find_degenerate(kind, predictions)`: what is degenerate in a split's predictions (no entity predicted, one
  class for every example, no positive label at all), and `degenerate_note(result, predictions)` the record a
  writer stores as `degenerate`, with the likely reason computed from the run's steps and the protocol's.
No torch here (the leaderboard reads results).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

from biobench.runtime.jsonfile import object_at
from biobench.runtime.paths import public_model
from biobench.store.record import Result

# protocol knobs a result tells apart without a recorded `overrides` (older files): a subset is never the protocol's
SUBSET_KNOBS = ("limit_train", "limit_eval")
# the marks every view puts next to such a score (eval's summary, the leaderboard's cells and rows)
SMOKE_MARK = "⚑"  # a smoke run: protocol overrides
DEGENERATE_MARK = "⚠"  # degenerate test predictions
NEAR_EMPTY = 0.01  # predicting under 1% of the gold entities / labels is as good as predicting none
FAR_BELOW = 0.5  # a run with less than this share of the protocol's steps is "far below" its budget


def overrides(result: Result) -> dict[str, dict[str, Any]]:
    """{knob: {"run": value, "protocol": the protocol's value}} of the protocol knobs this run overrode; {} for
    a protocol run. Older results lack the record: their subset limits are the overrides found."""
    recorded = result.details.get("overrides")
    if isinstance(recorded, Mapping):
        return {str(k): dict(v) if isinstance(v, Mapping) else {"run": v, "protocol": None}
                for k, v in recorded.items()}
    protocol = result.protocol if isinstance(result.protocol, Mapping) else {}
    return {k: {"run": protocol[k], "protocol": None} for k in SUBSET_KNOBS if protocol.get(k) is not None}


def is_smoke(result: Result) -> bool:
    """True for a run with protocol overrides: its score is not the protocol's."""
    return bool(overrides(result))


def _value(value: Any) -> str:
    if value is None:
        return "none"
    return f"{value:,}" if isinstance(value, int) and not isinstance(value, bool) else str(value)


def describe_overrides(found: Mapping[str, Mapping[str, Any]]) -> str:
    """'epochs 1 (protocol 15), limit_train 200': the overrides of a run for a marker's tooltip or a column;
    '' for a protocol run."""
    parts = []
    for knob, values in sorted(found.items()):
        default = values.get("protocol")
        shown = f" (protocol {_value(default)})" if default is not None else ""
        parts.append(f"{knob} {_value(values.get('run'))}{shown}")
    return ", ".join(parts)


def protocol_label(described: str) -> str:
    """'protocol' for a protocol run, else 'smoke: <overrides>' (`described`: `describe_overrides` of the run's
    overrides): the protocol/overrides column of the exports and the results dataset."""
    return f"smoke: {described}" if described else "protocol"


def split_smoke(results: Iterable[Result]) -> tuple[list[Result], list[Result]]:
    """(protocol runs, smoke runs) of `results`, order kept: what a model card's model-index may state as the
    protocol's scores, and what it must leave out."""
    protocol: list[Result] = []
    smoke: list[Result] = []
    for result in results:
        (smoke if is_smoke(result) else protocol).append(result)
    return protocol, smoke


# ------------------------------------------------------------------------------------------ degenerate predictions
def find_degenerate(kind: str, predictions: Sequence[Any], gold: Sequence[Any] | None = None) -> str | None:
    """What is degenerate in one split's predictions, or None: no entity in any example (NER), no positive label
    at all (multilabel), the same class for every example (classification, relation). With `gold`, a NER or
    multilabel split that predicts under `NEAR_EMPTY` of the gold count (1 span for 378 gold ones) is degenerate
    too. One example is never degenerate (nothing to vary)."""
    n = len(predictions)
    if n == 0:
        return None
    if kind in ("ner", "multilabel"):
        found = sum(len(p or ()) for p in predictions)
        noun = ("entity" if found == 1 else "entities") if kind == "ner" else ("label" if found == 1 else "labels")
        expected = sum(len(g or ()) for g in gold) if gold is not None else 0
        if found == 0:
            return (f"no entity predicted in any of the {n:,} test examples" if kind == "ner"
                    else f"no label predicted for any of the {n:,} test examples")
        if found < NEAR_EMPTY * expected:
            return f"only {found:,} {noun} predicted against {expected:,} gold ones in {n:,} test examples"
        return None
    classes = {str(p) for p in predictions}
    if n > 1 and len(classes) == 1:
        return f"the same class ({next(iter(classes))}) for every one of the {n:,} test examples"
    return None


def _symptom(kind: str, head: Mapping[str, Any]) -> str:
    """The head's mechanism behind an empty prediction: a threshold nothing passes, or an all-O tagging."""
    threshold = head.get("threshold")
    if kind == "ner":
        if head.get("name", "").startswith("span"):
            return f"no span above the {threshold if threshold is not None else 0.5} threshold"
        return "every token tagged O"
    if kind == "multilabel":
        return f"no label above the {threshold} threshold" if threshold is not None else "no label above the threshold"
    return "the classifier collapsed to one class"


def budget_reason(result: Result) -> str:
    """Why a run may not have learnt, from its recorded budget (steps run against the protocol's) and overrides:
    'the budget (60 steps) is far below the protocol's 4,000 steps'; a protocol-budget run says so."""
    budget = object_at(result.details, "budget")
    steps, planned = budget.get("steps"), budget.get("protocol_steps")
    reasons = []
    if isinstance(steps, int) and isinstance(planned, int) and planned > 0 and steps < planned:
        how = "far below" if steps < FAR_BELOW * planned else "below"
        reasons.append(f"the budget ({steps:,} step{'' if steps == 1 else 's'}) is {how} the protocol's {planned:,} steps")
    found = overrides(result)
    if "limit_train" in found:
        full = budget.get("protocol_train")
        of = f" of {full:,}" if isinstance(full, int) else ""
        reasons.append(f"trained on {_value(found['limit_train'].get('run'))}{of} examples (--limit-train)")
    if not reasons:
        return "at the protocol's budget: look at the data and the head" if not found else \
            f"with overrides {describe_overrides(found)}"
    return "; ".join(reasons)


def fix_command(result: Result) -> str:
    """The command that would give this run's model a score that means something, for the end of a ⚠ line: a
    smoke run below the `--quick` budget gets `--quick` (a budget per task kind that learns: the span head
    predicts nothing for its first ~200 steps); a `--quick` run, the protocol's own budget; a protocol run, a
    look at the task's data."""
    model = result.model if isinstance(result.model, Mapping) else {}
    name = str(model.get("alias") or model.get("id") or model.get("slug") or "MODEL")
    if name.startswith(("/", "~", ".")):  # a local folder: the board is public and never shows a server path
        name = f"path/to/{public_model(name)}"
    shown = f'"{name}"' if any(c.isspace() for c in name) else name
    run = f"biobench eval --model {shown} --tasks {result.task_id} --seeds {result.seed}"
    if not is_smoke(result):
        return f"biobench data status (is {result.task_id}'s data whole?), then {run} --head <another head>"
    return run if result.details.get("quick") else f"{run} --quick"


def degenerate_note(result: Result, predictions: Sequence[Any], gold: Sequence[Any] | None = None
                    ) -> dict[str, str] | None:
    """{"finding", "reason"} for a result whose test predictions are degenerate (the writer records it as the
    result's `degenerate`), None otherwise. The reason joins the head's symptom and the budget's shortfall:
    'no span above the 0.5 threshold: the budget (60 steps) is far below the protocol's 4,000 steps'. A test
    score of 0 with predictions that vary is degenerate too (nothing predicted is right: a user task at one
    epoch scored 0.00 with no mark)."""
    kind = str(result.task.get("kind", ""))
    finding = find_degenerate(kind, predictions, gold)
    if finding is None and predictions and _score(result) == 0.0:
        return {"finding": f"a test {result.metric} of 0.00: none of the {len(predictions):,} test predictions is "
                           "right", "reason": budget_reason(result)}
    if finding is None:
        return None
    head = object_at(result.details, "head")
    symptom = ("almost " if finding.startswith("only ") else "") + _symptom(kind, head)
    return {"finding": finding, "reason": f"{symptom}: {budget_reason(result)}"}


def _score(result: Result) -> float | None:
    test = result.metrics.get("test") if isinstance(result.metrics, Mapping) else None
    value = test.get(result.metric) if isinstance(test, Mapping) else None
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def degenerate(result: Result, fix: Callable[[Result], str] | None = None) -> dict[str, str] | None:
    """The recorded `degenerate` note of a result ({"finding", "reason", "fix"}), None when its predictions
    were not. `fix` (`fix_command`) is worked out on reading, so older files get it too. The terminal that ran
    the command passes its own `fix` (the user's command with only what changes: `commands.eval.own_fix`);
    the board, exports and the API keep `fix_command`, which never shows a server path."""
    note = result.details.get("degenerate")
    if isinstance(note, Mapping) and isinstance(note.get("finding"), str):
        return {"finding": note["finding"], "reason": str(note.get("reason", "")),
                "fix": (fix or fix_command)(result)}
    return None


def degenerate_text(note: Mapping[str, str]) -> str:
    """One line for a console, a summary or a tooltip: 'degenerate: <finding> (likely: <reason>); run: <fix>',
    the command that would fix it last."""
    fix = f"; run: {note['fix']}" if note.get("fix") else ""
    return f"degenerate: {note['finding']} (likely: {note['reason']}){fix}"
