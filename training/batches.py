"""The pretraining input pipeline: labelled micro-batches for each optimiser step, built off the main thread.

Why it exists: on a GPU the step of a ModernBERT-base at 8192 tokens takes tens of milliseconds, so the batch
(packing lookup, MLM masking) must be ready before the step ends. Two things make that true:
- masking is vectorised over the whole micro-batch: its random numbers come from a counter-based hash of
  (seed, data position, token index), so the mask of a sequence depends only on its global data position and
  the seed — not on which rank, micro-batch or worker builds it. A resumed or data-parallel run therefore sees
  exactly the masks of an uninterrupted single-process run (no generator state to carry);
- `step_stream` hands the per-step work to `torch.utils.data` workers with prefetch (and pinned memory on
  CUDA); with `workers=0` it runs in the main process and yields the same batches.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

import numpy as np
import torch
from biobench.training.objectives import IGNORE, clm_labels
from biobench.training.packing import PackedCorpus
from biobench.training.recipes import Objective

_GOLDEN = np.uint64(0x9E3779B97F4A7C15)
_STREAM_SELECT, _STREAM_ACTION, _STREAM_TOKEN = 1, 2, 3


def _mix(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser, elementwise (uint64 arithmetic wraps by design)."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def position_uniforms(seed: int, positions: np.ndarray, width: int, stream: int,
                      columns: np.ndarray | None = None) -> np.ndarray:
    """Uniform [0, 1) numbers for (data position, token index) pairs, a pure function of (seed, stream).

    Returns shape (len(positions), width), or, when `columns` is given, one number per (row, column) pair
    of the flat index arrays `positions` / `columns` (used to draw only where a value is needed)."""
    with np.errstate(over="ignore"):
        key = _mix(np.array([seed], dtype=np.uint64) * _GOLDEN + np.uint64(stream))
        rows = _mix(key ^ (np.asarray(positions, dtype=np.uint64) * _GOLDEN))
        if columns is None:
            cols = np.arange(width, dtype=np.uint64) * _GOLDEN
            bits = _mix(rows[:, None] + cols[None, :])
        else:
            bits = _mix(rows + np.asarray(columns, dtype=np.uint64) * _GOLDEN)
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


@dataclass
class Masker:
    """BERT masking (80% [MASK], 10% random non-special token, 10% unchanged) with tables built once."""

    special_ids: list[int]
    mask_id: int
    vocab_size: int
    seed: int
    is_special: np.ndarray = field(init=False, repr=False)
    allowed: np.ndarray = field(init=False, repr=False)

    def __post_init__(self) -> None:
        size = max([self.vocab_size, *(i + 1 for i in self.special_ids)])
        self.is_special = np.zeros(size, dtype=bool)
        self.is_special[self.special_ids] = True
        self.allowed = np.flatnonzero(~self.is_special[:self.vocab_size]).astype(np.int64)

    def __call__(self, ids: np.ndarray, attention_mask: np.ndarray, positions: np.ndarray,
                 rate: float) -> tuple[np.ndarray, np.ndarray]:
        """(corrupted ids, labels) for rows read at global data `positions`."""
        ids = ids.copy()
        protected = self.is_special[ids] | (attention_mask == 0)
        selected = (position_uniforms(self.seed, positions, ids.shape[1], _STREAM_SELECT) < rate) & ~protected
        labels = np.where(selected, ids, IGNORE)
        rows, cols = np.nonzero(selected)
        action = position_uniforms(self.seed, positions[rows], 0, _STREAM_ACTION, cols)
        to_mask, to_random = action < 0.8, (action >= 0.8) & (action < 0.9)
        ids[rows[to_mask], cols[to_mask]] = self.mask_id
        r, c = rows[to_random], cols[to_random]
        pick = position_uniforms(self.seed, positions[r], 0, _STREAM_TOKEN, c)
        ids[r, c] = self.allowed[(pick * len(self.allowed)).astype(np.int64)]
        return ids, labels


def mlm_mask(input_ids: torch.Tensor, rate: float, special_ids: list[int], mask_id: int, vocab_size: int,
             generator: torch.Generator | None = None,
             attention_mask: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """BERT masking of a small batch: each non-special token is selected with probability `rate`; selected
    tokens become [MASK] 80%, a random non-special token 10%, stay unchanged 10%. Returns (corrupted ids,
    labels). The pretraining loop uses `Masker` directly (same code), keyed by data position; here row i counts
    as position i and the generator's seed as the seed. Beside `Masker`, not in objectives: batches imports the
    objectives' labels, so the objectives module must not import batches (no import circle)."""
    seed = generator.initial_seed() if generator is not None else int(torch.initial_seed())
    mask = attention_mask if attention_mask is not None else torch.ones_like(input_ids)
    ids, labels = Masker(list(special_ids), mask_id, vocab_size, seed)(
        input_ids.numpy(), mask.numpy(), np.arange(input_ids.shape[0]), rate)
    return torch.from_numpy(ids).to(input_ids.dtype), torch.from_numpy(labels).to(input_ids.dtype)


@dataclass
class BatchBuilder:
    """This rank's labelled micro-batches for one optimiser step, from the packed corpus."""

    packed: PackedCorpus
    masker: Masker
    batch_size: int  # global sequences per step
    micro: int  # sequences per micro-batch
    rank: int = 0
    world: int = 1

    def step(self, position: int, objective: Objective, mask_rate: float) -> list[dict[str, torch.Tensor]]:
        """Micro-batches of the step whose first global data position is `position`."""
        per_rank = self.batch_size // self.world
        first = position + self.rank * per_rank
        label = LABELS[objective]
        out = []
        for start in range(first, first + per_rank, self.micro):
            positions = np.arange(start, start + self.micro)
            b = self.packed.batch(positions.tolist())
            label(self, b, positions, mask_rate)
            # counted in numpy: a torch reduction here ran on the trainer's intra-op thread pool, whose threads
            # spin on a busy machine (7x the loader's CPU on 2 loaded cores, issue 59 item 3); same int64 0-d tensor
            b["n_labels"] = torch.tensor(int(np.count_nonzero(b["labels"].numpy() != IGNORE)))
            out.append(b)
        return out


def _next_token(_builder: BatchBuilder, batch: dict[str, torch.Tensor], _positions: np.ndarray, _rate: float) -> None:
    """CLM: each position predicts the next token; the input is left as it is."""
    batch["labels"] = clm_labels(batch["input_ids"], batch["attention_mask"])


def _masked(builder: BatchBuilder, batch: dict[str, torch.Tensor], positions: np.ndarray, rate: float) -> None:
    """MLM: `rate` of the tokens corrupted (keyed by data position, see Masker), each predicted at its place."""
    ids, labels = builder.masker(batch["input_ids"].numpy(), batch["attention_mask"].numpy(), positions, rate)
    batch["input_ids"], batch["labels"] = torch.from_numpy(ids), torch.from_numpy(labels)


# An objective's labels (and corrupted input) for a micro-batch read at `positions`, in place: one function per
# row of recipes.OBJECTIVES.
LABELS: dict[Objective, Callable[[BatchBuilder, dict[str, torch.Tensor], np.ndarray, float], None]] = {
    "clm": _next_token,
    "mlm": _masked,
}


class _Steps(torch.utils.data.Dataset):
    def __init__(self, builder: BatchBuilder, first_position: int, steps: int, objective: Objective, mask_rate: float):
        self.builder, self.first, self.steps = builder, first_position, steps
        self.objective, self.mask_rate = objective, mask_rate

    def __len__(self) -> int:
        return self.steps

    def __getitem__(self, k: int) -> list[dict[str, torch.Tensor]]:
        return self.builder.step(self.first + k * self.builder.batch_size, self.objective, self.mask_rate)


def step_stream(builder: BatchBuilder, first_position: int, steps: int, objective: Objective, mask_rate: float,
                workers: int = 0, pin_memory: bool = False, prefetch: int = 4) -> Iterator[list[dict[str, torch.Tensor]]]:
    """The next `steps` steps' micro-batches, in order, built by `workers` processes ahead of the loop."""
    if steps <= 0:
        return iter(())
    loader = torch.utils.data.DataLoader(
        _Steps(builder, first_position, steps, objective, mask_rate), batch_size=None, shuffle=False,
        num_workers=workers, pin_memory=pin_memory, prefetch_factor=prefetch if workers else None,
        persistent_workers=False, worker_init_fn=_ignore_stop_signals if workers else None)
    return iter(loader)


def _ignore_stop_signals(_worker: int) -> None:
    """Ctrl-C reaches the whole process group: the loader's workers keep building batches while the trainer
    finishes its step and saves (it stops them; they also exit with their parent)."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if hasattr(signal, "SIGTERM"):
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
