"""The lineage of a `biobench pretrain` checkpoint (its biobench_pretrain.json, recorded in every result's `model`),
as a record that loads back.

Why a record: display names, the board's lineage column, the efficiency table and the results dataset each read
recipe, base model, tokens, freezes, compute and hardware out of the raw dictionary with their own guards. Here
the file's dictionary loads once into typed fields; `to_dict` gives back exactly what was loaded (fields this
version does not type stay in `extra`), so reading a lineage never loses what a newer pretraining recorded.
Written by biobench.training as the dictionary (its `Freeze`); a root module, so that `names` (a root module) and
training may import it (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from biobench.runtime.jsonfile import list_at, object_at

_TYPED = ("recipe", "phase", "base_model", "tokens", "frozen", "compute", "hardware")


@dataclass(frozen=True)
class Freeze:
    """Layers first..last (0-based, inclusive) frozen during `phase` (None: every phase)."""

    first: int
    last: int
    phase: str | None = None

    def to_json(self) -> dict[str, Any]:
        """The `frozen` entry of biobench_pretrain.json, as `Lineage.from_dict` reads it back (the trainer wrote
        this with a method the class lacked: every run with frozen layers crashed, issue 51 §6)."""
        return {"layers": [self.first, self.last], "phase": self.phase}


def _count(value: Any) -> int | None:
    ok = isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value) and value >= 0
    return int(value) if ok else None


@dataclass(frozen=True)
class Lineage:
    recipe: str
    phase: str | None = None  # the checkpoint: phase1, final, step-N
    base_model: str = ""
    # seen (in all), phase1, phase2, ... (per phase) and clm, mlm, ... (per objective); only counts that are numbers
    tokens: dict[str, int] = field(default_factory=dict)
    frozen: tuple[Freeze, ...] = ()
    compute: dict[str, Any] = field(default_factory=dict)  # train_s, devices, device_type, device_hours
    hardware: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)  # the rest of the file, as written
    source: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)  # the dictionary loaded

    def objective_tokens(self) -> dict[str, int]:
        """The tokens trained per objective (clm, mlm, any later one), in the order the file lists them: the
        non-zero counts of `tokens` that are neither the total (`seen`) nor a phase's (`phase1`, `phase2`, ...)."""
        return {k: n for k, n in self.tokens.items() if n and k != "seen" and not re.fullmatch(r"phase\d+", k)}

    @property
    def device_hours(self) -> float | None:
        hours = self.compute.get("device_hours")
        return float(hours) if isinstance(hours, int | float) and not isinstance(hours, bool) else None

    @classmethod
    def from_dict(cls, data: Any) -> Lineage | None:
        """The lineage of a model record's `lineage` value; None when it is not a pretraining lineage (no dict,
        or no recipe). Malformed parts are left out of the typed fields, never raised on."""
        if not isinstance(data, Mapping) or not data.get("recipe"):
            return None
        tokens = object_at(data, "tokens")
        frozen = []
        for f in list_at(data, "frozen"):
            layers = f.get("layers") if isinstance(f, Mapping) else None
            if isinstance(layers, list) and len(layers) == 2 and all(isinstance(x, int) for x in layers):
                frozen.append(Freeze(layers[0], layers[1], str(f["phase"]) if f.get("phase") else None))
        compute = object_at(data, "compute")
        return cls(str(data["recipe"]), str(data["phase"]) if data.get("phase") else None,
                   str(data.get("base_model") or ""),
                   {k: n for k, v in tokens.items() if (n := _count(v)) is not None}, tuple(frozen), dict(compute),
                   str(data["hardware"]) if data.get("hardware") else None,
                   {k: v for k, v in data.items() if k not in _TYPED}, dict(data))

    def to_dict(self) -> dict[str, Any]:
        """The dictionary this lineage was loaded from (biobench_pretrain.json's fields, in their order)."""
        return dict(self.source)
