"""The pretraining batch pipeline: masks are a function of (seed, data position) alone, so the split over
ranks, micro-batches and loader workers never changes the data; the worker stream equals the in-process one."""

from __future__ import annotations

import numpy as np
import torch
from biobench.training.batches import BatchBuilder, Masker, position_uniforms, step_stream
from biobench.training.objectives import IGNORE
from biobench.training.packing import PackedCorpus

SPECIAL = [0, 1, 2, 3, 4]  # pad unk cls sep mask


def _builder(micro: int, rank: int = 0, world: int = 1, seed: int = 7, batch: int = 8) -> BatchBuilder:
    rng = np.random.default_rng(0)
    tokens = rng.integers(5, 500, size=20_000).astype(np.uint16)
    tokens[::97] = 3  # document separators
    offsets = np.concatenate([[0], np.arange(97, len(tokens), 97), [len(tokens)]])
    packed = PackedCorpus(tokens, offsets, seq_len=64, pad_id=0, seed=1)
    return BatchBuilder(packed, Masker(SPECIAL, 4, 500, seed), batch_size=batch, micro=micro, rank=rank, world=world)


def _rows(micro_batches, key):
    return torch.cat([b[key] for b in micro_batches])


def test_masks_do_not_depend_on_micro_batching_or_ranks():
    whole = _builder(micro=8).step(16, "mlm", 0.3)
    small = _builder(micro=2).step(16, "mlm", 0.3)
    ranks = _builder(micro=2, rank=0, world=2).step(16, "mlm", 0.3) + _builder(micro=2, rank=1, world=2).step(16, "mlm", 0.3)
    for key in ("input_ids", "labels", "attention_mask"):
        assert torch.equal(_rows(whole, key), _rows(small, key))
        assert torch.equal(_rows(whole, key), _rows(ranks, key))
    assert int(whole[0]["n_labels"]) == int((whole[0]["labels"] != IGNORE).sum()) > 0


def test_seed_and_position_change_the_masks():
    a = _rows(_builder(micro=8, seed=7).step(0, "mlm", 0.3), "labels")
    b = _rows(_builder(micro=8, seed=8).step(0, "mlm", 0.3), "labels")
    assert not torch.equal(a != IGNORE, b != IGNORE)
    u = position_uniforms(7, np.array([0, 1]), 64, stream=1)
    assert u.shape == (2, 64) and (u >= 0).all() and (u < 1).all() and not np.array_equal(u[0], u[1])


def test_masking_statistics_and_specials_on_a_large_batch():
    ids = np.random.default_rng(1).integers(0, 500, size=(64, 512))
    attn = np.ones_like(ids)
    attn[:, 400:] = 0
    corrupted, labels = Masker(SPECIAL, 4, 500, seed=3)(ids, attn, np.arange(64), 0.3)
    eligible = ~np.isin(ids, SPECIAL) & (attn == 1)
    selected = labels != IGNORE
    assert not (selected & ~eligible).any()
    assert abs(selected.sum() / eligible.sum() - 0.3) < 0.01
    masked = (corrupted == 4) & selected
    unchanged = (corrupted == ids) & selected
    assert abs(masked.sum() / selected.sum() - 0.8) < 0.01
    assert abs(unchanged.sum() / selected.sum() - 0.1 - 0.1 / 495) < 0.01
    assert not np.isin(corrupted[selected & ~masked], SPECIAL).any()  # random replacements are never special
    assert np.array_equal(corrupted[~selected], ids[~selected])


def test_worker_stream_equals_in_process_stream():
    builder = _builder(micro=4)
    inline = list(step_stream(builder, 8, 3, "mlm", 0.3, workers=0))
    workers = list(step_stream(builder, 8, 3, "mlm", 0.3, workers=2))
    assert len(inline) == len(workers) == 3
    for x, y in zip(inline, workers, strict=True):
        for key in ("input_ids", "labels"):
            assert torch.equal(_rows(x, key), _rows(y, key))
    assert torch.equal(_rows(inline[1], "input_ids"), _rows(builder.step(16, "mlm", 0.3), "input_ids"))
    clm = builder.step(0, "clm", 0.0)[0]
    assert torch.equal(clm["labels"][:, :-1], clm["input_ids"][:, 1:])


def test_an_mlm_step_runs_no_torch_kernel_and_its_rows_are_the_packed_sequences():
    """Issue 59 item 3: the in-process loader's CPU went to torch reductions on the trainer's intra-op thread pool
    (counting the labels: 7x the loader's CPU on a busy 2-core machine); a step is now numpy work handed to torch
    as tensors, counted here as the torch operators it dispatches: none computes. Its rows are sequence()'s."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Count(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.ops: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.ops.append(str(func))
            return func(*args, **(kwargs or {}))

    builder = _builder(micro=4)
    with Count() as count:
        step = builder.step(8, "mlm", 0.3)
    assert [op for op in count.ops if not op.startswith(("aten.lift_fresh", "aten.detach"))] == []
    rows = [builder.packed.sequence(builder.packed.at(p)) for p in range(8, 16)]
    assert torch.equal(_rows(step, "attention_mask"), torch.from_numpy(np.stack([r[1] for r in rows])))
    assert torch.equal(_rows(step, "document_ids"), torch.from_numpy(np.stack([r[2] for r in rows])))
    for micro in step:
        assert micro["n_labels"].dtype == torch.int64 and micro["n_labels"].dim() == 0
        assert int(micro["n_labels"]) == int((micro["labels"] != IGNORE).sum()) > 0
