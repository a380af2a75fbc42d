"""`--batch-size auto`: the largest micro-batch that fits the device, with gradient accumulation up to the
protocol's batch.

Why: a protocol's batch (16 sequences of up to 8192 tokens, 384 packed sequences of 8192) is part of what
makes results comparable, but whether it fits in one forward pass depends on the GPU. Splitting each batch
into micro-batches and accumulating their gradients keeps the effective batch, hence the optimiser steps and
the schedule, of the protocol; only the memory peak changes. The micro-batch is found by trying one
forward/backward pass on the worst case (the longest inputs) and halving on out-of-memory. On a CPU there is
no device memory to run out of, so the protocol's batch is taken as it is (one micro-batch, no accumulation).
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable

from biobench.errors import ConfigError

AUTO = "auto"


def batch_size_value(text: str) -> int | str:
    """argparse type of --batch-size / --micro-batch-size: a positive integer or 'auto'."""
    if str(text).strip().lower() == AUTO:
        return AUTO
    try:
        value = int(text)
    except ValueError:
        raise ValueError(f"expected a positive integer or 'auto', got {text!r}") from None
    if value < 1:
        raise ValueError(f"expected a positive integer or 'auto', got {text!r}")
    return value


def is_out_of_memory(err: BaseException) -> bool:
    """A device out-of-memory error (CUDA's OutOfMemoryError, or the RuntimeError some backends raise)."""
    import torch

    oom = getattr(torch, "OutOfMemoryError", None) or getattr(torch.cuda, "OutOfMemoryError", None)
    return (oom is not None and isinstance(err, oom)) or (
        isinstance(err, RuntimeError) and "out of memory" in str(err).lower())


def free_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


@contextlib.contextmanager
def rng_preserved():
    """Run a probe without consuming the random streams of the real run (dropout masks stay the same)."""
    import torch

    cpu = torch.random.get_rng_state()
    cuda = torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None
    try:
        yield
    finally:
        torch.random.set_rng_state(cpu)
        if cuda is not None:
            torch.cuda.set_rng_state_all(cuda)


def largest_fitting(batch: int, try_size: Callable[[int], None], what: str = "batch") -> int:
    """The largest n <= batch that divides `batch` and for which `try_size(n)` (one forward/backward pass of n
    worst-case examples) runs without running out of device memory, halving from `batch`. Other errors pass
    through; when even one example does not fit, a ConfigError says what to lower."""
    n = batch
    while True:
        try:
            with rng_preserved():
                try_size(n)
            return n
        except Exception as err:
            if not is_out_of_memory(err):
                raise
            free_device_memory()
            if n == 1:
                raise ConfigError(f"--batch-size auto: not even one {what} example fits in device memory; lower "
                                  "--max-length / --seq-len, or use --gradient-checkpointing or a larger device") from None
            n = max(1, n // 2)
            while batch % n:
                n -= 1


def micro_batch_size(requested: int | str | None, batch: int, device_type: str,
                     try_size: Callable[[int], None]) -> int:
    """The micro-batch for a protocol batch of `batch`: `requested` when it is a number (capped at `batch`),
    `batch` when None (no accumulation), and with 'auto' the protocol's batch on CPU or the largest fitting
    divisor of it on an accelerator."""
    if requested is None:
        return batch
    if requested != AUTO:
        return min(int(requested), batch)
    if device_type == "cpu":
        return batch
    return largest_fitting(batch, try_size)
