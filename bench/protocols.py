"""The paper's fine-tuning protocols (Appendix H; DESIGN.md) as data, CLI overrides, and a stable hash.

Why a hash: a result is only comparable to another one computed with the same protocol, so every result
records the resolved protocol and its hash is part of the run key (biobench.results).
"""

from __future__ import annotations

import argparse
import hashlib
import json
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from biobench.errors import ConfigError


@dataclass(frozen=True)
class Protocol:
    """Every knob of one fine-tuning run. `max_steps` (when set) wins over `epochs`; evaluation on dev happens
    after every epoch, or every `eval_every` steps when set, and always after the last step."""

    name: str
    epochs: int | None
    max_steps: int | None
    lr: float
    head_lr: float | None
    batch_size: int
    max_length: int
    warmup_ratio: float
    weight_decay: float = 0.01
    grad_clip: float = 1.0
    eval_every: int | None = None
    limit_train: int | None = None

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["hash"] = self.hash
        return data

    @property
    def hash(self) -> str:
        canonical = json.dumps(asdict(self), sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode()).hexdigest()


# (protocol, kind) -> knobs; max_length comes from the task spec, head_lr None = same as lr. fr: AdamW wd 0.01, best dev checkpoint.
# en is the BioClinical-ModernBERT protocol: lr 5e-5, wd 0.01, batch 16, 10 epochs (20 for NER).
_FR_SEQUENCE = dict(epochs=15, max_steps=None, lr=2e-5, head_lr=None, batch_size=4, warmup_ratio=0.1)
_EN_SEQUENCE = dict(epochs=10, max_steps=None, lr=5e-5, head_lr=None, batch_size=16, warmup_ratio=0.1)
PROTOCOLS: dict[tuple[str, str], dict[str, Any]] = {
    ("fr", "classification"): _FR_SEQUENCE,
    ("fr", "relation"): _FR_SEQUENCE,
    ("fr", "multilabel"): _FR_SEQUENCE,
    ("fr", "ner"): dict(epochs=None, max_steps=4000, lr=5e-5, head_lr=1e-3, batch_size=16, warmup_ratio=0.1,
                        eval_every=500),
    ("en", "classification"): _EN_SEQUENCE,
    ("en", "relation"): _EN_SEQUENCE,
    ("en", "multilabel"): _EN_SEQUENCE,
    ("en", "ner"): dict(_EN_SEQUENCE, epochs=20, head_lr=1e-3),
}

# CLI flag -> (Protocol field, type, help)
OVERRIDES: dict[str, tuple[str, type, str]] = {
    "--epochs": ("epochs", int, "training epochs (clears the step budget of step-based protocols)"),
    "--max-steps": ("max_steps", int, "optimiser steps (wins over epochs)"),
    "--batch-size": ("batch_size", int, "training batch size"),
    "--lr": ("lr", float, "encoder learning rate"),
    "--head-lr": ("head_lr", float, "head learning rate (default: the protocol's)"),
    "--max-length": ("max_length", int, "max tokens per input (default: the task's)"),
    "--limit-train": ("limit_train", int, "train on a fixed random subset of N examples (smoke runs)"),
    "--warmup-ratio": ("warmup_ratio", float, "fraction of steps with linear warmup"),
    "--weight-decay": ("weight_decay", float, "AdamW weight decay"),
    "--eval-every": ("eval_every", int, "evaluate on dev every N steps (default: every epoch)"),
}


def add_protocol_arguments(parser: argparse.ArgumentParser) -> None:
    group = parser.add_argument_group("protocol overrides (recorded in every result)")
    for flag, (dest, kind, text) in OVERRIDES.items():
        group.add_argument(flag, dest=dest, type=kind, default=None, metavar=dest.upper(), help=text)


def overrides_from_args(args: argparse.Namespace) -> dict[str, Any]:
    return {dest: getattr(args, dest) for dest, _, _ in OVERRIDES.values() if getattr(args, dest, None) is not None}


def resolve_protocol(protocol: str, kind: str, max_length: int, overrides: dict[str, Any] | None = None,
                     model_context: int | None = None) -> Protocol:
    """The protocol of a task (its spec's `protocol`, `kind`, `max_length`) with CLI overrides applied; the max
    length is capped at what the model can take."""
    try:
        base = PROTOCOLS[(protocol, kind)]
    except KeyError:
        raise ConfigError(f"no fine-tuning protocol {protocol!r} for task kind {kind!r}; "
                          f"known: {sorted({p for p, _ in PROTOCOLS})}") from None
    resolved = Protocol(name=protocol, max_length=max_length, **base)
    overrides = dict(overrides or {})
    known = {f.name for f in fields(Protocol)}
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
