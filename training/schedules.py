"""Learning-rate schedules as multipliers of the peak lr, a pure function of the step within a phase.

Phase 1: linear warmup then constant. The paper warms up over 100M tokens; a small budget scales that down
to at most 10% of phase 1 (rule: warmup = min(100M, 0.10 x phase-1 tokens), at least one step).
Phase 2: no warmup; lr = peak x (floor + (1 - floor) x (1 - sqrt(t / (T - 1)))), from the peak on the first
decay step to 10% of the peak on the last. Only the schedule resets between phases, never the optimiser.
"""

from __future__ import annotations

import math

PAPER_WARMUP_TOKENS = 100_000_000
WARMUP_FRACTION_CAP = 0.10
DECAY_FLOOR = 0.10


def warmup_steps(phase_steps: int, tokens_per_step: int, warmup_tokens: int = PAPER_WARMUP_TOKENS) -> int:
    """Warmup length in steps: the paper's 100M tokens, capped at 10% of the phase (>= 1 step)."""
    tokens = min(warmup_tokens, WARMUP_FRACTION_CAP * phase_steps * tokens_per_step)
    return max(1, round(tokens / tokens_per_step))


def warmup_constant(step: int, warmup: int) -> float:
    return min(1.0, (step + 1) / warmup)


def sqrt_decay(step: int, total: int, floor: float = DECAY_FLOOR) -> float:
    fraction = step / (total - 1) if total > 1 else 1.0
    return floor + (1.0 - floor) * (1.0 - math.sqrt(min(1.0, fraction)))


def multiplier(schedule: str, step: int, total: int, warmup: int) -> float:
    if schedule == "warmup-constant":
        return warmup_constant(step, warmup)
    if schedule == "sqrt-decay":
        return sqrt_decay(step, total)
    raise ValueError(f"unknown schedule {schedule!r}")
