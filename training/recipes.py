"""Recipes as data: a sequence of phases, each an objective, a masking rate and a schedule, and optional frozen
layers.

Phase 1 ("clm" slot, even in the MLM control, so one freeze spelling fits every recipe) runs the token
budget; phase 2 ("decay") runs `decay_ratio` of it with MLM at 15% and the 1 - sqrt decay schedule. An objective
is one row of `OBJECTIVES` (its attention, whether it corrupts the input) plus its labels in
`batches.LABELS`; the loss is the same position-aligned cross-entropy for every objective (`objectives.LMLoss`).
The attention follows the objective: causal for CLM, bidirectional for MLM (training/causal.py
`phase_attention`). `decoder-control` (paper §3.1/§5.4, Table 4) is the mirror image on a causal LM (Gemma-3):
MLM 30% with the causal mask removed and a `<mask>` token added, then a CLM decay with the causal mask back.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from typing import Literal

from biobench.errors import ConfigError

# the frozen-layer record is the lineage's (the contract between the trainer that writes biobench_pretrain.json
# and the store that reads it): one class for both
from biobench.lineage import Freeze

Objective = Literal["clm", "mlm"]


@dataclass(frozen=True)
class ObjectiveSpec:
    """What an objective means for a phase, torch-free (the recipes are listed and checked before torch loads)."""

    title: str  # how `pretrain --list`, the logs and a checkpoint's lineage name it
    causal: bool  # attention: the causal mask (next-token prediction) or bidirectional
    masks: bool  # corrupts the input at the phase's mask rate (and predicts what it hid)


# Each objective stated once; its labels are batches.LABELS[objective] (tests/training check both name the same).
OBJECTIVES: dict[Objective, ObjectiveSpec] = {
    "clm": ObjectiveSpec("CLM", causal=True, masks=False),
    "mlm": ObjectiveSpec("MLM", causal=False, masks=True),
}

# A frozen-layer record names its phase by a tag (biobench_pretrain.json's `frozen`): phase 1 is "clm" and phase 2
# "decay" (what every run has written), phase N also "phaseN".
PHASE_TAGS = ("clm", "decay")


def phase_tag(phase_index: int) -> str:
    return PHASE_TAGS[phase_index] if phase_index < len(PHASE_TAGS) else f"phase{phase_index + 1}"


def phase_of_tag(tag: str) -> int | None:
    """0-based phase index of a --freeze tag: clm / phase1, decay / phase2, phaseN; None for anything else."""
    if tag in PHASE_TAGS:
        return PHASE_TAGS.index(tag)
    m = re.fullmatch(r"phase([1-9]\d?)", tag)
    return int(m.group(1)) - 1 if m else None


@dataclass(frozen=True)
class Phase:
    name: str  # checkpoint folder: phase1 / final
    objective: Objective
    mask_rate: float  # selection rate of an objective that masks (unused otherwise)
    schedule: str  # "warmup-constant" | "sqrt-decay"

    @property
    def causal(self) -> bool:
        return OBJECTIVES[self.objective].causal

    def title(self) -> str:
        """'CLM', 'MLM 30%': the objective and, when it masks, its rate."""
        spec = OBJECTIVES[self.objective]
        return f"{spec.title} {self.mask_rate:.0%}" if spec.masks else spec.title


@dataclass(frozen=True)
class Recipe:
    name: str
    description: str
    phases: tuple[Phase, ...]  # run in order; the last one writes final/
    freezes: tuple[Freeze, ...] = field(default=())
    decoder: bool = False  # runs on a causal LM (Gemma-3), not an encoder

    def frozen_layers(self, phase_index: int) -> list[Freeze]:
        tag = phase_tag(phase_index)
        return [f for f in self.freezes if f.phase == tag]

    @property
    def needs_causal(self) -> bool:
        return any(p.causal for p in self.phases)


CLM = Phase("phase1", "clm", 0.0, "warmup-constant")
MLM30 = Phase("phase1", "mlm", 0.30, "warmup-constant")
DECAY = Phase("final", "mlm", 0.15, "sqrt-decay")
CLM_DECAY = Phase("final", "clm", 0.0, "sqrt-decay")

RECIPES: dict[str, Recipe] = {r.name: r for r in [
    Recipe("detour", "CLM detour (causal mask, next-token prediction through the MLM head), then MLM 15% decay",
           (CLM, DECAY)),
    Recipe("mlm", "matched baseline: MLM 30%, then MLM 15% decay (same budgets and schedules)", (MLM30, DECAY)),
    Recipe("detour-freeze-low", "detour with layers 0-7 frozen during CLM", (CLM, DECAY), (Freeze(0, 7, "clm"),)),
    Recipe("detour-freeze-mid", "detour with layers 8-14 frozen during CLM", (CLM, DECAY), (Freeze(8, 14, "clm"),)),
    Recipe("detour-freeze-low-decay", "detour with layers 0-7 frozen during the MLM decay", (CLM, DECAY),
           (Freeze(0, 7, "decay"),)),
    Recipe("decoder-control", "decoder control (Table 4) on a Gemma-3 causal LM: causal mask removed, <mask> token "
           "added, MLM 30% through the LM head with no shift; then the causal mask restored and a CLM decay",
           (MLM30, CLM_DECAY), decoder=True),
]}


def get_recipe(name: str, extra_freezes: list[str] | None = None) -> Recipe:
    if name not in RECIPES:
        raise ConfigError(f"unknown recipe {name!r}; choose one of: {', '.join(RECIPES)} (biobench pretrain --list)")
    recipe = RECIPES[name]
    extra = tuple(parse_freeze(spec, len(recipe.phases)) for spec in extra_freezes or [])
    return replace(recipe, freezes=recipe.freezes + extra) if extra else recipe


def parse_freeze(spec: str, phases: int = 2) -> Freeze:
    """'0-7@clm' -> Freeze(0, 7, 'clm'); '@decay' (or @phase2) names phase 2, '@clm' (or @phase1) phase 1,
    '@phaseN' phase N of a recipe of `phases` phases."""
    m = re.fullmatch(r"\s*(\d+)\s*-\s*(\d+)\s*@\s*(\w+)\s*", spec)
    index = phase_of_tag(m.group(3)) if m else None
    if not m or index is None or index >= phases:
        raise ConfigError(f"--freeze {spec!r}: expected FIRST-LAST@clm or FIRST-LAST@decay, e.g. 0-7@clm")
    first, last = int(m.group(1)), int(m.group(2))
    if first > last:
        raise ConfigError(f"--freeze {spec!r}: first layer {first} is after last layer {last}")
    return Freeze(first, last, phase_tag(index))


def describe() -> str:
    """The `biobench pretrain --list` table."""
    lines = []
    for r in RECIPES.values():
        phases = []
        for i, p in enumerate(r.phases):
            what = p.title()
            if r.decoder:
                what += ", causal mask" if p.causal else ", bidirectional (causal mask removed)"
            frozen = "".join(f", layers {f.first}-{f.last} frozen" for f in r.frozen_layers(i))
            length = "budget" if i == 0 else "decay-ratio x budget"
            phases.append(f"phase {i + 1}: {what}, {p.schedule}, {length}{frozen}")
        lines.append(f"{r.name}\n  {r.description}\n  " + "\n  ".join(phases))
    return "\n".join(lines)


def recipes_help() -> str:
    """The recipe names (the --recipe help, from RECIPES); `biobench pretrain --list` describes each."""
    return " | ".join(f"{name} (causal LMs, e.g. Gemma-3)" if recipe.decoder else name for name, recipe in RECIPES.items())
