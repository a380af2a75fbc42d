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

from collections.abc import Callable, Iterator
from typing import Any

from biobench.errors import ConfigError
from biobench.runtime.randomness import rng_preserved

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


def length_grouped_order(lengths: list[int], batch_size: int, generator: Any) -> list[int]:
    """Indices in an order where each run of `batch_size` holds examples of similar length, with some randomness:
    a random permutation (from `generator`), cut into mega-batches of min(n // (4 batch), 50) batches (at least
    one), each sorted by decreasing length, the longest example of all moved to the very front (so a batch that
    does not fit fails at the first step). The Hugging Face Trainer's `group_by_length` order, index for index
    (tests/runtime/test_batching.py compares them); owned here because transformers keeps it in an internal module."""
    import torch

    per_mega = max(1, min(len(lengths) // (batch_size * 4), 50))
    indices = torch.randperm(len(lengths), generator=generator).tolist()
    size = per_mega * batch_size
    megabatches = [sorted(indices[i:i + size], key=lambda k: lengths[k], reverse=True)
                   for i in range(0, len(indices), size)]
    if megabatches:
        longest = max(range(len(megabatches)), key=lambda m: (lengths[megabatches[m][0]], -m))
        megabatches[0][0], megabatches[longest][0] = megabatches[longest][0], megabatches[0][0]
    return [i for megabatch in megabatches for i in megabatch]


class LengthGroupedSampler:
    """A DataLoader sampler over `length_grouped_order`: a new order each epoch, drawn from `generator`."""

    def __init__(self, batch_size: int, lengths: list[int], generator: Any) -> None:
        self.batch_size, self.lengths, self.generator = batch_size, list(lengths), generator

    def __len__(self) -> int:
        return len(self.lengths)

    def __iter__(self) -> Iterator[int]:
        return iter(length_grouped_order(self.lengths, self.batch_size, self.generator))


def free_device_memory() -> None:
    import gc

    import torch

    gc.collect()
    if torch.cuda.is_available():
        torch.cuda.empty_cache()


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
