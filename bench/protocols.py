"""The paper's fine-tuning protocols (Appendix E; docs/PROTOCOL.md) as data, CLI overrides, and a stable hash.

Each fine-tuning setting is stated once, as a field of `Protocol` made by `setting()` (as training/config.py's
`setting()` does for pretraining): its default per protocol and task kind, its bounds, its `--quick` value, its
command-line flag and help, and where its default comes from (a paper section or a harness file). The flags of
`eval` and `submit`, the grid file's and a queued request's override keys, their range check, the `--quick`
budget and the protocol table (`biobench tasks --protocol`, docs/PROTOCOL.md, the About tab) are all read from
those fields: `SETTINGS`, and the views `OVERRIDES`, `OVERRIDE_RANGES`, `QUICK` and `PROTOCOLS` made from it.
The seeds of each protocol are `SEEDS`. A head and the knobs it brings with it (head learning rate, gradient
clipping, selection metric: its `knobs`) are biobench.heads.HEAD_SPECS; the protocol *names* a task spec may give
are vocabulary of the spec format (biobench.tasks.schema.PROTOCOL_NAMES, next to TASK_KINDS) because the task
registry validates specs and may import nothing from bench but errors and the runtime layer; `SEEDS` covers
exactly those names (tests/test_protocols.py).

Why a hash: a result is only comparable to another one computed with the same protocol, so every result
records the resolved protocol and its hash is part of the run key (biobench.store).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from collections.abc import Callable, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

from biobench.errors import ConfigError
from biobench.heads import head_config, head_entry, heads_help
from biobench.metrics import METRICS
from biobench.ranges import Bounds
from biobench.runtime.batching import AUTO, batch_size_value
from biobench.tasks.formats import sample_unit_of
from biobench.tasks.schema import PROTOCOL_NAMES, TASK_KINDS

if TYPE_CHECKING:
    from biobench.tasks.registry import TaskSpec

# A value stated per protocol: keyed by (protocol, task kind), else by protocol ("fr"), else "*" (every protocol);
# the most specific key wins (`stated`).
Scope = str | tuple[str, str]
PerProtocol = Mapping[Any, Any]  # keyed by Scope; Any: Mapping is invariant in its key type (a dict keyed by tuples only is no Mapping[str | tuple])


def stated(values: PerProtocol, protocol: str, kind: str, missing: Any = MISSING) -> Any:
    """The value `values` states for (protocol, kind): its (protocol, kind) entry, else its protocol's, else
    its "*" entry, else `missing`."""
    for key in ((protocol, kind), protocol, "*"):
        if key in values:
            return values[key]
    return missing


# ------------------------------------------------------------------------------------------ where values come from
PAPER = "paper arXiv 2605.12438"
# The harness config each protocol and kind reads its training knobs from (epochs or steps, batch, lr, warmup,
# weight decay). fr: Rian-T/tabib configs/base/*.yaml (AdamW wd 0.01, 10% warmup, best dev checkpoint); en:
# BioClinical-ModernBERT, the Trainer's defaults (one lr 5e-5 for encoder and head, no warmup, linear decay to 0,
# wd 0.01, batch 16, 10 epochs, 20 for NER).
KNOB_SOURCES: dict[tuple[str, str], str] = {
    ("fr", "classification"): "tabib configs/base/cls_bert.yaml",
    ("fr", "relation"): "tabib configs/base/cls_bert.yaml",
    ("fr", "multilabel"): "tabib configs/base/multilabel_bert_4096.yaml",
    ("fr", "ner"): f"{PAPER} Appendix H (NER: batch 16); tabib configs/base/ner_span_bert.yaml",
    **{("en", kind): f"{PAPER} Appendix E (follows BioClinical-ModernBERT); BioClinical-ModernBERT "
                     "src/tasks/sequence_classification.py" for kind in ("classification", "relation", "multilabel")},
    ("en", "ner"): f"{PAPER} Appendix E (follows BioClinical-ModernBERT); BioClinical-ModernBERT "
                   "src/tasks/token_classification.py",
}
_FR_LINEAR = "docs/PROTOCOL.md (issue 10: linear on the first token; tabib loads AutoModelForSequenceClassification)"
HEAD_SOURCES: dict[Scope, str] = {  # the default head per protocol and kind
    "fr": _FR_LINEAR,
    ("fr", "ner"): "tabib configs/base/ner_span_bert.yaml (model: bert_span_ner)",
    "en": f"{PAPER} Appendix E (follows BioClinical-ModernBERT: the model's own HF head)",
}
DEV_SOURCES: dict[Scope, str] = {  # the default dev selection per protocol and kind
    ("fr", "classification"): "tabib configs/base/cls_bert.yaml (metric_for_best_model)",
    ("fr", "relation"): "tabib configs/base/cls_bert.yaml (metric_for_best_model)",
    ("fr", "multilabel"): "tabib configs/base/multilabel_bert_4096.yaml (metric_for_best_model)",
    ("fr", "ner"): "exact-span micro-F1 for a head without its own (docs/PROTOCOL.md)",
    "en": "BioClinical-ModernBERT src/tasks/sequence_classification.py (metric_for_best_model)",
    ("en", "ner"): "BioClinical-ModernBERT src/tasks/token_classification.py (metric_for_best_model: seqeval f1)",
}
METRIC_SOURCE = f"{PAPER} Table 8, Appendix E (macro-F1)"  # the headline metric (a task spec's, not a setting)
SEEDS_SOURCE = f"{PAPER} §3.5 (9 seeds per French task, 5 per English one; Tables 1-2)"


@dataclass(frozen=True)
class Setting:
    """One fine-tuning setting, as its `Protocol` field states it (`setting()`): `defaults` per protocol and kind
    (a missing entry: the field's own default), `quick` its `--quick` value (none: the protocol's), `flag` its
    command-line flag (None: not overridable), `parse` how an override's text is read, `bounds` the values an
    override may ask for, `source` where the defaults come from, `row` the protocol table's row that shows it
    (None: not shown; its own row by default) with `label`, and `late`: added after results were published, so it
    counts in the hash only when set (the runs of the protocol keep their keys across versions)."""

    name: str
    help: str = ""
    flag: str | None = None
    parse: Callable[[str], Any] = str
    bounds: Bounds | None = None
    defaults: PerProtocol = field(default_factory=dict)
    quick: PerProtocol = field(default_factory=dict)
    source: PerProtocol = field(default_factory=dict)
    row: str | None = None
    label: str = ""
    late: bool = False

    def default(self, protocol: str, kind: str) -> Any:
        """The protocol's value for a task kind; MISSING: the field's own default (or, for `max_length`, the task's)."""
        return stated(self.defaults, protocol, kind)

    def source_of(self, protocol: str, kind: str) -> str:
        return stated(self.source, protocol, kind, "")


def setting(default: Any = MISSING, *, help: str = "", flag: bool = True, parse: Callable[[str], Any] = str,
            bounds: Bounds | None = None, defaults: PerProtocol | None = None, quick: PerProtocol | None = None,
            source: PerProtocol | None = None, row: str | None = "", label: str = "", late: bool = False) -> Any:
    """A field of Protocol that is a fine-tuning setting (see `Setting`); with `help` and `flag`, its flag is
    `--field-name`. `row=""`: its own row of the protocol table, labelled `label` (default: its name in words)."""
    spec = dict(help=help, flag=flag and bool(help), parse=parse, bounds=bounds, defaults=dict(defaults or {}),
                quick=dict(quick or {}), source=dict(source or {}), row=row, label=label, late=late)
    return field(default=default, metadata={"setting": spec})


@dataclass(frozen=True)
class Protocol:
    """Every knob of one fine-tuning run. `max_steps` (when set) wins over `epochs`; evaluation on dev happens
    after every epoch, or every `eval_every` steps when set, and always after the last step. `head` names an
    entry of biobench.heads.HEAD_SPECS and `head_config` its sizes; the checkpoint kept is the one best on
    dev by `dev_metric`, and `metric` is the headline test metric (both names of biobench.metrics.METRICS).
    Field order is the order of a result's `protocol` object (docs/FORMATS.md) and of the flags."""

    name: str
    epochs: int | None = setting(help="training epochs (clears the step budget of step-based protocols)", parse=int,
                                 bounds=Bounds(1, 1000, integer=True), source=KNOB_SOURCES, row="training",
                                 defaults={"fr": 15, ("fr", "ner"): None, "en": 10, ("en", "ner"): 20})
    max_steps: int | None = setting(help="optimiser steps (wins over epochs)", parse=int,
                                    bounds=Bounds(1, 10_000_000, integer=True), source=KNOB_SOURCES, row="training",
                                    defaults={"*": None, ("fr", "ner"): 4000}, quick={"*": 150})
    lr: float = setting(help="encoder learning rate", parse=float, bounds=Bounds(0, 1, above=True),
                        source=KNOB_SOURCES, row="lr", defaults={"fr": 2e-5, ("fr", "ner"): 5e-5, "en": 5e-5})
    # None = same as lr (a head may bring its own: its biobench.heads.HEAD_SPECS entry's knobs)
    head_lr: float | None = setting(help="head learning rate (default: the protocol's)", parse=float,
                                    bounds=Bounds(0, 1, above=True), source=KNOB_SOURCES, row="lr",
                                    defaults={"*": None})
    batch_size: int = setting(help="training batch size; 'auto' keeps the protocol's batch and runs it in the largest "
                              "micro-batches that fit the device, accumulating gradients (on CPU: the whole batch at "
                              "once); the micro-batch is recorded in each result", parse=batch_size_value,
                              bounds=Bounds(1, 8192, integer=True), source=KNOB_SOURCES, label="batch",
                              defaults={"fr": 4, ("fr", "ner"): 16, "en": 16}, quick={"*": 8})
    # no protocol default: the task spec's (paper Table 8), capped by the model's context
    max_length: int = setting(help="max tokens per input (default: the task's)", parse=int,
                              bounds=Bounds(8, 131_072, integer=True), quick={"*": 128}, label="max length",
                              source={"*": f"{PAPER} Table 8",
                                      ("fr", "ner"): f"{PAPER} Appendix H, Table 8; tabib configs/base/ner_span_bert.yaml"})
    warmup_ratio: float = setting(help="fraction of steps with linear warmup", parse=float,
                                  bounds=Bounds(0, 1, below=True), source=KNOB_SOURCES, row="warmup",
                                  defaults={"fr": 0.1, "en": 0.0})
    weight_decay: float = setting(0.01, help="AdamW weight decay", parse=float, bounds=Bounds(0, 10),
                                  source=KNOB_SOURCES, label="weight decay")
    grad_clip: float = setting(1.0, flag=False, source={"*": "the HF Trainer's default max_grad_norm"},
                               label="grad clip")
    eval_every: int | None = setting(None, help="evaluate on dev every N steps (default: every epoch)", parse=int,
                                     bounds=Bounds(1, 10_000_000, integer=True), source=KNOB_SOURCES, row="training",
                                     defaults={("fr", "ner"): 500})
    # smoke runs only (no protocol sets them; not in the protocol table)
    limit_train: int | None = setting(None, help="train on a fixed random subset of N examples (smoke runs: the "
                                      "score is not the protocol's)", parse=int,
                                      bounds=Bounds(1, 100_000_000, integer=True), quick={"*": 1000}, row=None)
    limit_eval: int | None = setting(None, help="score dev and test on a fixed random subset of N examples each "
                                     "(smoke runs: the score is not the protocol's)", parse=int,
                                     bounds=Bounds(1, 100_000_000, integer=True), quick={"*": 200}, row=None,
                                     late=True)
    # fr: bert_text_cls / bert_multilabel_cls / span NER; en: the model's own HF heads. A quick fr NER check uses
    # the token head: the span head predicts nothing for its first ~200 steps (QUICK below)
    head: str = setting("", help=f"task head: {heads_help()}; default: the task spec's, else its protocol's",
                        source=HEAD_SOURCES, quick={("fr", "ner"): "hf-token"},
                        defaults={"fr": "linear", ("fr", "ner"): "span", "en": "hf-sequence", ("en", "ner"): "hf-token"})
    head_config: dict[str, Any] = field(default_factory=dict)
    metric: str = "macro_f1"
    # fr: weighted-F1 (the harness's eval_f1 for classification), micro-F1 (eval_f1_micro), and for NER the span
    # head's own selection (its registry entry's knobs; exact-span micro-F1 for another head); en: weighted-F1,
    # seqeval micro-F1 (= exact word-span micro-F1 on flat BIO, which our span metric computes)
    dev_metric: str = setting("macro_f1", flag=False, source=DEV_SOURCES, label="dev selection",
                              defaults={"fr": "weighted_f1", ("fr", "multilabel"): "micro_f1",
                                        ("fr", "ner"): "micro_f1", "en": "weighted_f1", ("en", "ner"): "micro_f1"})

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["hash"] = self.hash
        return data

    @property
    def hash(self) -> str:
        """sha256 of every knob; a setting added after results were published (`late`) counts only when set, so
        the results of protocol runs keep their keys (and are still skipped) across versions."""
        knobs = {k: v for k, v in asdict(self).items() if not (k in LATE_KNOBS and v is None)}
        canonical = json.dumps(knobs, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


def _settings() -> dict[str, Setting]:
    out = {}
    for spec in fields(Protocol):
        if "setting" in spec.metadata:
            meta = dict(spec.metadata["setting"])
            flag = f"--{spec.name.replace('_', '-')}" if meta.pop("flag") else None
            label = meta.pop("label") or spec.name.replace("_", " ")
            row = meta.pop("row")
            out[spec.name] = Setting(spec.name, flag=flag, label=label, row=spec.name if row == "" else row, **meta)
    return out


# every fine-tuning setting by Protocol field, in field order: the one statement the views below are made from
SETTINGS: dict[str, Setting] = _settings()
# settings added after results were published: hashed only when set (Protocol.hash)
LATE_KNOBS = frozenset(s.name for s in SETTINGS.values() if s.late)
# (protocol, kind) -> the protocol's stated values (head and dev selection included; max_length is the task's)
PROTOCOLS: dict[tuple[str, str], dict[str, Any]] = {
    (p, k): {s.name: v for s in SETTINGS.values() if (v := s.default(p, k)) is not MISSING}
    for p in PROTOCOL_NAMES for k in TASK_KINDS}
# --quick: one budget per (protocol, task kind) that learns on a CPU in minutes (a smoke run: recorded as
# overrides, marked ⚑, never ranked with the protocol's runs). Why these numbers: the README's old check (1 epoch
# of 500 examples at batch 16: 32 steps) scored 0.00 ⚠ on ncbi-disease and quaero-emea. The span head (the fr
# NER default) predicts no entity for its first ~200 optimiser steps and is the slowest head (docs/PROTOCOL.md,
# "Steps before the span head predicts"): all-MiniLM-L6-v2 on quaero-emea, 300 steps of batch 8, 800 train, 200
# dev/test, length 128, scored 0.04 after 636 s of training on the shared 2-core machine, where ncbi-disease's
# token head scored 67.72 with the same budget. So a quick fr NER check uses the token head (`hf-token`, 23.7 at
# 300 steps on quaero-emea in the learning curve there), and every kind gets 150 steps of batch 8.
QUICK: dict[tuple[str, str], dict[str, Any]] = {
    (p, k): {s.name: v for s in SETTINGS.values() if (v := stated(s.quick, p, k)) is not MISSING}
    for p in PROTOCOL_NAMES for k in TASK_KINDS}
# CLI flag -> (Protocol field, how its text is read, help)
OVERRIDES: dict[str, tuple[str, Callable[[str], Any], str]] = {
    s.flag: (s.name, s.parse, s.help) for s in SETTINGS.values() if s.flag}
# Protocol field -> the values an override may ask for (biobench.ranges.Bounds): what the CLI, a grid file, a
# queued request and the Submit form are all checked against (`check_override`). The bounds are far above the
# paper's protocols (15 epochs, 4,000 steps, batch 16-384 on 8 GPUs, 8,192 tokens, lr 2e-5..1e-3) and far below a
# run that never ends: 100,000,000 steps at batch 1 is weeks of a GPU.
OVERRIDE_RANGES: dict[str, Bounds] = {s.name: s.bounds for s in SETTINGS.values() if s.flag and s.bounds}

# protocol -> its seeds (paper Tables 1-2: 9 seeds per French task, 5 per English one; docs/PROTOCOL.md);
# a task spec's own `seeds` win.
SEEDS: dict[str, tuple[int, ...]] = {"fr": tuple(range(42, 51)), "en": tuple(range(42, 47))}


def task_seeds(spec: Any) -> tuple[int, ...]:
    """The seeds a task runs with: its spec's own, else its protocol's."""
    return tuple(getattr(spec, "seeds", ()) or SEEDS[spec.protocol])


def quick_overrides(protocol: str, kind: str, overrides: dict[str, Any] | None = None) -> dict[str, Any]:
    """The overrides of a `--quick` run of a task: each setting's `quick` value for its (protocol, kind),
    explicit overrides winning."""
    budget = {s.name: v for s in SETTINGS.values() if (v := stated(s.quick, protocol, kind)) is not MISSING}
    return {**budget, **(overrides or {})}


def default_head(protocol: str, kind: str) -> str:
    return PROTOCOLS.get((protocol, kind), {}).get("head", "")


def default_dev_metric(protocol: str, kind: str) -> str:
    return PROTOCOLS.get((protocol, kind), {}).get("dev_metric", "macro_f1")


def add_protocol_arguments(parser: argparse.ArgumentParser, quick: bool = False) -> None:
    group = parser.add_argument_group("protocol overrides (recorded in every result)")
    if quick:
        group.add_argument("--quick", action="store_true", help="a check that learns on a CPU in minutes: 150 steps "
                           "of batch 8 on 1,000 training examples, dev/test on 200, length 128; French NER with the "
                           "token head (the span head predicts nothing for ~200 steps); flags given win. "
                           "A smoke run (⚑), stored beside the protocol's runs")
    for s in SETTINGS.values():
        if not s.flag:
            continue
        shown = s.help if "default" in s.help else f"{s.help} (default: the task's protocol, docs/PROTOCOL.md)"
        # read as text and parsed by `check_override` (its parse and bounds): a bad value is one error line
        # naming the range, never argparse's usage block
        group.add_argument(s.flag, dest=s.name, type=str, default=None, metavar=s.name.upper(), help=shown)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    """The protocol overrides given on the command line (`--batch-size auto` is an execution choice, not one),
    each checked by `check_override` (argparse's `float` lets `nan` and `inf` through)."""
    return {dest: check_override(dest, getattr(args, dest)) for dest, _, _ in OVERRIDES.values()
            if getattr(args, dest, None) is not None and str(getattr(args, dest)).strip().lower() != AUTO}


def check_override(dest: str, value: Any) -> Any:
    """One override value as its setting's `parse` reads it, numbers within its `bounds`; ConfigError naming the
    flag and the range otherwise. Why here: a `--lr nan` run trains, then writes a result every reader refuses;
    `--max-steps 1e30` never ends; a request read from a queue carries overrides from strangers, and the grid
    file and the form pass through here too."""
    s = SETTINGS.get(dest) if isinstance(dest, str) else None
    if s is None or not s.flag:
        raise ConfigError(f"unknown protocol override {str(dest)[:40]!r}; known: {', '.join(d for d, _, _ in OVERRIDES.values())}")
    if isinstance(value, bool) or not isinstance(value, int | float | str) or len(str(value)) > 40:
        raise ConfigError(f"bad {s.flag} value {str(value)[:40]!r}: expected one {getattr(s.parse, '__name__', 'value')} value")
    try:
        parsed = s.parse(str(value))
    except (TypeError, ValueError, argparse.ArgumentTypeError) as err:
        raise ConfigError(f"bad {s.flag} value {str(value)[:40]!r}: {err}") from None
    if isinstance(parsed, int | float) and not isinstance(parsed, bool) and s.bounds is not None:
        s.bounds.check(parsed, s.flag)
    return parsed


def resolve_protocol(protocol: str, kind: str, max_length: int, overrides: dict[str, Any] | None = None,
                     model_context: int | None = None, head: str | None = None, metric: str = "macro_f1",
                     dev_metric: str | None = None, origin: str = "") -> Protocol:
    """The protocol of a task (its spec's `protocol`, `kind`, `max_length`, `head`, `metric`, `dev_metric`;
    `origin` names the spec file in errors) with the head's own knobs, then CLI overrides, applied; the max
    length is capped at what the model can take."""
    try:
        base = PROTOCOLS[(protocol, kind)]
    except KeyError:
        raise ConfigError(f"no fine-tuning protocol {protocol!r} for task kind {kind!r}; "
                          f"known: {sorted({p for p, _ in PROTOCOLS})}") from None
    where = f"{origin}: " if origin else ""
    if metric not in METRICS:
        raise ConfigError(f"{where}metric {metric!r} is not computed; computed metrics: {', '.join(METRICS)}")
    overrides = dict(overrides or {})
    if overrides.get("head"):
        head, origin = overrides.pop("head"), "--head"
    overrides.pop("head", None)
    head = head or default_head(protocol, kind)
    entry = head_entry(head, kind, origin)
    knobs = {k: v for k, v in entry.knobs.items() if v is not None}
    dev_metric = dev_metric or knobs.pop("dev_metric", None) or default_dev_metric(protocol, kind)
    knobs.pop("dev_metric", None)
    selectable = (*METRICS, *entry.selection_metrics)
    if dev_metric not in selectable:
        raise ConfigError(f"{where}dev_metric {dev_metric!r} is not computed; computed metrics: "
                          f"{', '.join(selectable)} (head {head!r})")
    resolved = Protocol(name=protocol, max_length=max_length, **base)
    resolved = replace(resolved, **knobs, head=head, head_config=head_config(head, kind).as_dict(kind),
                       metric=metric, dev_metric=dev_metric)
    known = {f.name for f in fields(Protocol)} - {"head", "head_config", "metric", "dev_metric", "name"}
    unknown = set(overrides) - known
    if unknown:
        raise ConfigError(f"unknown protocol field(s) {sorted(unknown)}; known: {sorted(known)}")
    if "epochs" in overrides and "max_steps" not in overrides:
        overrides["max_steps"] = None
        overrides.setdefault("eval_every", None)
    for name, value in overrides.items():
        if isinstance(value, int | float) and value <= 0 and not (name in ("warmup_ratio", "weight_decay") and value == 0):
            raise ConfigError(f"--{name.replace('_', '-')} must be positive (got {value})")
    if overrides.get("warmup_ratio", 0) >= 1:
        raise ConfigError(f"--warmup-ratio must be below 1 (got {overrides['warmup_ratio']})")
    resolved = replace(resolved, **overrides)
    if resolved.head_lr is None:
        resolved = replace(resolved, head_lr=resolved.lr)
    if model_context and resolved.max_length > model_context:
        resolved = replace(resolved, max_length=model_context)
    return resolved


def resolve_task_protocol(spec: TaskSpec, overrides: dict[str, Any] | None = None,
                          model_context: int | None = None) -> Protocol:
    """resolve_protocol for a task spec (biobench.tasks.registry.TaskSpec): its head, metric and dev_metric,
    errors naming its spec file."""
    return resolve_protocol(spec.protocol, spec.kind, spec.max_length, overrides, model_context,
                            head=getattr(spec, "head", None), metric=getattr(spec, "metric", "macro_f1"),
                            dev_metric=getattr(spec, "dev_metric", None),
                            origin=spec_origin(spec))


def spec_origin(spec: TaskSpec) -> str:
    """Where a task spec came from, for error messages: its file."""
    return getattr(spec, "origin", "") or f"tasks/specs/{spec.id}.json"


def protocol_overrides(protocol: Protocol, run: Protocol) -> dict[str, dict[str, Any]]:
    """{knob: {"run": value, "protocol": the task protocol's value}} for every knob where `run` (the protocol
    with CLI / grid overrides) differs from `protocol` (the task's own, same model context); {} for a protocol
    run. Recorded in each result (`overrides`): such a score is a smoke run, not the protocol's
    (biobench.store.trust). The head's sizes follow its name, so `head_config` is not listed."""
    return {f.name: {"run": getattr(run, f.name), "protocol": getattr(protocol, f.name)} for f in fields(Protocol)
            if f.name != "head_config" and getattr(run, f.name) != getattr(protocol, f.name)}


def protocol_steps(protocol: Protocol, n_train: int) -> int:
    """The optimiser steps `protocol` runs on `n_train` examples: its step budget, else epochs x batches."""
    return protocol.max_steps or (protocol.epochs or 1) * -(-n_train // protocol.batch_size)


# ---------------------------------------------------------------------------------------------- the protocol table
# Where each value of a task's protocol comes from: `biobench tasks --protocol`, the leaderboard's About tab and
# docs/PROTOCOL.md's table are all `protocol_rows` (tests/test_protocol_paper.py holds them to the paper).
# (key, label) of each row, in the order the table shows them: the settings' rows (a setting's `row`; one that
# names no row of this layout gets its own, before the seeds) and what a task spec decides.
_LAYOUT: tuple[tuple[str, str], ...] = (
    ("sample_unit", "sample unit"), ("max_length", "max length"), ("training", "training"), ("batch_size", "batch"),
    ("lr", "lr"), ("warmup", "warmup"), ("weight_decay", "weight decay"), ("grad_clip", "grad clip"),
    ("head", "head"), ("loss", "loss"), ("decision", "decision rule"), ("metric", "headline"),
    ("dev_metric", "dev selection"),
)
_OWN_ROWS = tuple(s for s in SETTINGS.values() if s.row and s.row not in dict(_LAYOUT))
PROTOCOL_FIELDS: tuple[tuple[str, str], ...] = (*_LAYOUT, *((str(s.row), s.label) for s in _OWN_ROWS), ("seeds", "seeds"))


def _training(p: Protocol) -> str:
    if p.max_steps:
        return f"{p.max_steps} step{'' if p.max_steps == 1 else 's'}" + (f", dev every {p.eval_every}" if p.eval_every else "")
    return f"{p.epochs} epochs, dev after each"


def _lr(p: Protocol) -> str:
    return f"{p.lr:g}" if p.head_lr in (None, p.lr) else f"{p.lr:g} / head {p.head_lr:g}"


def _metric_name(name: str) -> str:
    return name.replace("_f1", "-F1").replace("_", " ")


def seeds_text(seeds: tuple[int, ...]) -> str:
    """`42-50 (9)` for a run of consecutive seeds, else the list."""
    if not seeds:
        return ""
    if list(seeds) == list(range(min(seeds), max(seeds) + 1)):
        return f"{min(seeds)}-{max(seeds)} ({len(seeds)})"
    return f"{', '.join(map(str, seeds))} ({len(seeds)})"


def protocol_row(spec: TaskSpec) -> dict[str, Any]:
    """Everything that decides a task's score, each value with where it comes from: {"task", "lang", "kind",
    "paper_task", "settings": {field: {"value", "source"}}} (fields: PROTOCOL_FIELDS). The values are the
    resolved protocol (resolve_task_protocol, the one a run hashes), not a copy of it."""
    p = resolve_task_protocol(spec)
    origin = spec_origin(spec)
    entry = head_entry(p.head, spec.kind)

    def source(name: str) -> str:
        return SETTINGS[name].source_of(spec.protocol, spec.kind)

    knobs = source("epochs")
    head_src = f"{source('lr')}; head: {entry.source}" if p.head_lr != p.lr or p.grad_clip != 1.0 else source("lr")
    loss, decision = entry.rules.get(spec.kind, ("", ""))
    paper = spec.paper_task
    first = spec.sources[0]
    settings = {
        "sample_unit": (sample_unit_of(first), f"{origin} (source 1: {first.describe()}"
                                               f"{', sample_unit ' + first.options['sample_unit'] if 'sample_unit' in first.options else ''})"),
        "max_length": (p.max_length, source("max_length") if paper else origin),
        "training": (_training(p), knobs),
        "batch_size": (p.batch_size, source("batch_size")),
        "lr": (_lr(p), head_src),
        "warmup": (f"{p.warmup_ratio:.0%}", source("warmup_ratio")),
        "weight_decay": (p.weight_decay, source("weight_decay")),
        "grad_clip": (p.grad_clip, f"head: {entry.source}" if p.grad_clip != 1.0 else source("grad_clip")),
        "head": (p.head, origin if spec.head else source("head")),
        "loss": (loss, entry.source),
        "decision": (decision, entry.source),
        "metric": (_metric_name(p.metric), METRIC_SOURCE if paper and p.metric == "macro_f1" else origin),
        "dev_metric": (_metric_name(p.dev_metric), origin if spec.dev_metric and spec.dev_metric != default_dev_metric(spec.protocol, spec.kind)
                       else f"head: {entry.source}" if "dev_metric" in entry.knobs
                       else source("dev_metric")),
        **{s.row: (getattr(p, s.name), source(s.name) or origin) for s in _OWN_ROWS},
        "seeds": (seeds_text(task_seeds(spec)), origin if spec.seeds else SEEDS_SOURCE),
    }
    return {"task": spec.id, "lang": spec.lang, "kind": spec.kind, "paper_task": spec.paper_task,
            "settings": {key: {"value": value, "source": source} for key, (value, source) in settings.items()}}


def _cell(value: Any) -> str:
    return str(value).replace("|", "\\|").replace("\n", " ")


def protocol_markdown(rows: list[dict[str, Any]]) -> str:
    """The Markdown table of the rows' values, one task a row (the About tab per language, docs/PROTOCOL.md for
    all paper tasks)."""
    lines = ["| task | kind | " + " | ".join(label for _, label in PROTOCOL_FIELDS) + " |",
             "|---|---|" + "---|" * len(PROTOCOL_FIELDS)]
    for row in rows:
        cells = [_cell(row["settings"][key]["value"]) for key, _ in PROTOCOL_FIELDS]
        lines.append(f"| **{_cell(row['task'])}** | {_cell(row['kind'])} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def sources_markdown(rows: list[dict[str, Any]]) -> str:
    """Where the table's values come from: per setting, each distinct source with the tasks it holds for."""
    lines = ["| setting | tasks | source |", "|---|---|---|"]
    for key, label in PROTOCOL_FIELDS:
        by_source: dict[str, list[str]] = {}
        for row in rows:
            by_source.setdefault(row["settings"][key]["source"], []).append(row["task"])
        for source, tasks in by_source.items():
            shown = "all" if len(tasks) == len(rows) else ", ".join(tasks)
            lines.append(f"| {label} | {_cell(shown)} | {_cell(source)} |")
    return "\n".join(lines)
