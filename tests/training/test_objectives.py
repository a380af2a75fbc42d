"""CLM labels (one shift, one loss) and MLM masking (80/10/10, special tokens never masked)."""

from __future__ import annotations

import torch
from biobench.training import causal_attention
from biobench.training.batches import mlm_mask
from biobench.training.objectives import IGNORE, LMLoss, clm_labels


def test_clm_labels_shift_once_and_skip_padding():
    ids = torch.tensor([[2, 10, 11, 12, 3], [2, 20, 21, 0, 0]])
    mask = torch.tensor([[1, 1, 1, 1, 1], [1, 1, 1, 0, 0]])
    assert clm_labels(ids, mask).tolist() == [[10, 11, 12, 3, IGNORE], [20, 21, IGNORE, IGNORE, IGNORE]]


def test_clm_loss_equals_manual_cross_entropy(tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    model = build_modernbert_mlm(tiny_tokenizer, "tiny", seed=3).eval()
    ids = torch.randint(5, len(tiny_tokenizer), (2, 40), generator=torch.Generator().manual_seed(1))
    mask = torch.ones_like(ids)
    mask[1, 30:] = 0
    with torch.no_grad(), causal_attention(model):
        loss_sum, n = LMLoss(model)(ids, clm_labels(ids, mask), attention_mask=mask)
        logits = model(ids, attention_mask=mask).logits
    keep = mask[:, 1:].bool()
    manual = torch.nn.functional.cross_entropy(logits[:, :-1][keep], ids[:, 1:][keep], reduction="sum")
    assert n == keep.sum() == 40 + 29 - 1 + 0  # row 0: 39 targets, row 1: 29 targets
    torch.testing.assert_close(loss_sum, manual, rtol=1e-5, atol=1e-4)
    # and not the double-shifted loss transformers' causal-LM loss would compute from pre-shifted labels
    double = torch.nn.functional.cross_entropy(logits[:, :-2][keep[:, 1:]], ids[:, 2:][keep[:, 1:]], reduction="sum")
    assert not torch.isclose(loss_sum, double, rtol=1e-3)


def test_mlm_masking_rate_and_80_10_10():
    vocab, special, mask_id = 1000, [0, 1, 2, 3, 4], 4
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (64, 512), generator=g)
    ids[:, 0], ids[:, -1] = 2, 3  # [CLS] ... [SEP]
    ids[:5, 400:] = 0  # padding
    attn = (ids != 0).long()
    corrupted, labels = mlm_mask(ids, 0.30, special, mask_id, vocab, generator=g, attention_mask=attn)
    selected = labels != IGNORE
    eligible = ~torch.isin(ids, torch.tensor(special))
    assert not selected[~eligible].any()  # special tokens and padding never masked
    assert torch.equal(corrupted[~eligible], ids[~eligible])
    assert abs(selected.sum() / eligible.sum() - 0.30) < 0.01
    assert torch.equal(labels[selected], ids[selected])
    frac_mask = (corrupted[selected] == mask_id).float().mean()
    frac_same = (corrupted[selected] == ids[selected]).float().mean()
    frac_random = 1 - frac_mask - frac_same
    assert abs(frac_mask - 0.8) < 0.01 and abs(frac_random - 0.1) < 0.01 and abs(frac_same - 0.1) < 0.01
    assert not torch.isin(corrupted[selected & (corrupted != ids)], torch.tensor([0, 1, 2, 3])).any()
    assert torch.equal(corrupted[~selected], ids[~selected])


def test_masks_depend_on_the_whole_seed():
    """torch keeps only 32 bits of a generator seed, so (seed << 40) + position once ignored --seed entirely;
    the pretraining masker hashes the full 64-bit seed with the data position."""
    import numpy as np
    from biobench.training.batches import Masker

    ids = np.random.default_rng(0).integers(5, 100, size=(2, 256))
    attn = np.ones_like(ids)
    labels = {s: Masker([0, 1, 2, 3, 4], 4, 100, s)(ids, attn, np.array([3, 4]), 0.3)[1] for s in (17, 42, 17 + (1 << 40))}
    assert not np.array_equal(labels[17], labels[42])
    assert not np.array_equal(labels[17], labels[17 + (1 << 40)])  # high bits count too
    assert not np.array_equal(labels[17][0], labels[17][1])  # and the position
