"""The random streams a training step can draw from, saved and restored in one place.

Why one place: a resumed pretraining run must continue the same streams (training/trainer.py saves them in
its checkpoint), and a `--batch-size auto` probe must leave them as they were, so the real run's dropout masks
do not depend on whether a probe ran (bench/runtime/batching.py). Both need the same list of generators:
torch's CPU generator (a uint8 tensor), each CUDA device's (a list of them) and Python's `random` (a tuple).
torch is imported inside the functions.
"""

from __future__ import annotations

import contextlib
import random
from collections.abc import Iterator
from typing import Any


def rng_state() -> dict[str, Any]:
    """Every generator's state: {'torch': tensor, 'cuda': [tensor, ...] or None, 'python': tuple}."""
    import torch

    return {"torch": torch.get_rng_state(),
            "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
            "python": random.getstate()}


def set_rng_state(saved: dict[str, Any]) -> None:
    """Restore what `rng_state` saved; a state saved without CUDA or Python streams (older checkpoints) leaves
    those as they are."""
    import torch

    torch.set_rng_state(saved["torch"])
    if torch.cuda.is_available() and saved.get("cuda") is not None:
        torch.cuda.set_rng_state_all(saved["cuda"])
    if saved.get("python") is not None:
        random.setstate(saved["python"])


@contextlib.contextmanager
def rng_preserved() -> Iterator[None]:
    """Run a block (a probe) without consuming the random streams of the real run."""
    saved = rng_state()
    try:
        yield
    finally:
        set_rng_state(saved)
