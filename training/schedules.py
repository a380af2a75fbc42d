"""Learning-rate schedules as multipliers of the peak lr, a pure function of the step within a phase.

Phase 1: linear warmup then constant. The paper warms up over 100M tokens; a small budget scales that down
to at most 10% of phase 1 (rule: warmup = min(100M, 0.10 x phase-1 tokens), at least one step).
Phase 2: no warmup; lr = peak x (floor + (1 - floor) x (1 - sqrt(t / (T - 1)))), from the peak on the first
decay step to 10% of the peak on the last. Only the schedule resets between phases, never the optimiser.
"""

from __future__ import annotations

import math

from biobench.errors import ConfigError

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


def phase_steps(tokens: int, batch_size: int, seq_len: int, decay_ratio: float) -> tuple[int, int]:
    """Optimiser steps of each phase of a run of `tokens` phase-1 tokens in global batches of `batch_size`
    sequences of `seq_len`: phase 1 the whole batches that fit, phase 2 (the decay) `decay_ratio` of them (>= 1).
    The one rule for what a run reads: the trainer's plan and `corpus plan` both call it."""
    tokens_per_step = batch_size * seq_len
    steps1 = tokens // tokens_per_step
    if steps1 < 1:
        raise ConfigError(f"--tokens {tokens:,} is smaller than one batch ({batch_size} sequences x "
                          f"{seq_len} tokens = {tokens_per_step:,}); raise --tokens or lower --batch-size/--seq-len")
    if not 0 < decay_ratio <= 1:
        raise ConfigError(f"--decay-ratio {decay_ratio} must be in (0, 1]")
    return steps1, max(1, round(decay_ratio * steps1))
