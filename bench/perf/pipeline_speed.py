"""Tokens/s of the pretraining batch builder alone, on one core, against what one GPU consumes.

    .venv/bin/python -m biobench.perf.pipeline_speed            # 384 x 8192, 50k vocabulary, median of 3
    .venv/bin/python -m biobench.perf.pipeline_speed --quick

Arms, side by side in one process (one torch/numpy thread):
- `biobench`: `training.batches.BatchBuilder.step` (packing lookup + MLM masking vectorised over each
  micro-batch, counter-based randoms);
- `row-by-row`: the builder this project had before — the same packing, then per row a seeded torch
  Generator, `torch.isin` for specials and the allowed-token table rebuilt for every row (written out below
  as the baseline; it is not used by the trainer any more).
The rate one H100 needs is an input: ModernBERT-base trains at about 300k tokens/s on one H100 (the paper's
hardware class), so a builder must produce at least that per core, with margin, to stay off the critical path.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import time

import numpy as np
import torch
from biobench.perf.perf_common import ARM_WINDOWS, ArmClock, alternating, disturbance_summary, script
from biobench.runtime.files import atomic_write

GPU_NEED_TOKENS_PER_S = 300_000  # ModernBERT-base on one H100, see docstring
SPECIAL = [0, 1, 2, 3, 4]


def _corpus(tokens: int, vocab: int, seq_len: int):
    # lazy: loads torch
    from biobench.training.packing import PackedCorpus

    rng = np.random.default_rng(0)
    stream = rng.integers(5, vocab, size=tokens).astype(np.uint32)
    doc_len = 700
    stream[::doc_len] = 3
    offsets = np.concatenate([[0], np.arange(doc_len, tokens, doc_len), [tokens]])
    return PackedCorpus(stream, offsets, seq_len=seq_len, pad_id=0, seed=0)


def _row_by_row_mask(ids: torch.Tensor, rate: float, vocab: int, g: torch.Generator) -> tuple[torch.Tensor, torch.Tensor]:
    """The previous per-row masking, as it ran once per sequence."""
    ids = ids.clone()
    special = torch.isin(ids, torch.tensor(SPECIAL, dtype=ids.dtype))
    selected = (torch.rand(ids.shape, generator=g) < rate) & ~special
    labels = torch.where(selected, ids, torch.full_like(ids, -100))
    action = torch.rand(ids.shape, generator=g)
    ids[selected & (action < 0.8)] = 4
    randomise = selected & (action >= 0.8) & (action < 0.9)
    keep = torch.ones(vocab, dtype=torch.bool)
    keep[SPECIAL] = False
    allowed = keep.nonzero().squeeze(1).to(ids.dtype)
    picks = torch.randint(len(allowed), ids.shape, generator=g)
    ids[randomise] = allowed[picks[randomise]]
    return ids, labels


def _row_by_row_step(packed, position: int, rows: int, micro: int, vocab: int) -> int:
    for start in range(position, position + rows, micro):
        positions = list(range(start, start + micro))
        b = packed.batch(positions)
        for row, pos in enumerate(positions):
            g = torch.Generator().manual_seed((0 << 40) + pos)
            _row_by_row_mask(b["input_ids"][row:row + 1], 0.3, vocab, g)
    return rows * packed.seq_len


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__.split("\n")[0])
    parser.add_argument("--seq-len", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=384, help="sequences per optimiser step")
    parser.add_argument("--micro", type=int, default=8, help="sequences per micro-batch")
    parser.add_argument("--vocab", type=int, default=50368)
    parser.add_argument("--baseline-rows", type=int, default=64, help="rows timed for the slow baseline arm")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="batch 64, baseline 16 rows")
    parser.add_argument("--out", default=None, help="write the figures as JSON here")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch, args.baseline_rows = 64, 16
    torch.set_num_threads(1)
    # lazy: loads torch
    from biobench.training.batches import BatchBuilder, Masker

    packed = _corpus(max(4 * args.batch * args.seq_len, 1 << 22), args.vocab, args.seq_len)
    builder = BatchBuilder(packed, Masker(SPECIAL, 4, args.vocab, seed=0), args.batch, args.micro)
    rates: dict[str, list[float]] = {"biobench": [], "row-by-row": []}
    for i, arm in enumerate(alternating(list(rates), args.repeats)):
        r = i // 2
        with ArmClock() as clock:
            t0 = time.perf_counter()
            if arm == "biobench":
                builder.step(r * args.batch, "mlm", 0.3)
                tokens = args.batch * args.seq_len
            else:
                tokens = _row_by_row_step(packed, r * args.batch, args.baseline_rows, args.micro, args.vocab)
            rates[arm].append(tokens / (time.perf_counter() - t0))
        assert clock.window is not None  # set on leaving the with block
        ARM_WINDOWS.append((arm, clock.window))
    medians = {arm: statistics.median(v) for arm, v in rates.items()}
    result = {"seq_len": args.seq_len, "batch": args.batch, "micro": args.micro, "vocab": args.vocab,
              "repeats": args.repeats, "tokens_per_s": rates, "median_tokens_per_s": medians,
              "gpu_need_tokens_per_s": GPU_NEED_TOKENS_PER_S,
              "x_gpu_need": {arm: m / GPU_NEED_TOKENS_PER_S for arm, m in medians.items()},
              "ratio": medians["biobench"] / medians["row-by-row"],
              "disturbance": {"flag": disturbance_summary(), "arms": [{"arm": a, **w.to_dict()} for a, w in ARM_WINDOWS]}}
    print(f"batch builder, one core, {args.batch} x {args.seq_len} tokens, vocabulary {args.vocab}, "
          f"median of {args.repeats}")
    print(f"{'arm':<12} {'tokens/s':>14} {'x one H100 need (300k/s)':>26}")
    for arm, m in medians.items():
        print(f"{arm:<12} {m:>14,.0f} {m / GPU_NEED_TOKENS_PER_S:>26.1f}")
    if args.out:
        atomic_write(args.out, json.dumps(result, indent=2))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    print(f"ratio: {result['ratio']:.2f}  {result['disturbance']['flag']}".rstrip())
    return result


if __name__ == "__main__":
    raise SystemExit(script(main))
