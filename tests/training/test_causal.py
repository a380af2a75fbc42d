"""Causal mode on ModernBERT: no information from the future, local layers keep their (causal) window."""

from __future__ import annotations

import pytest
import torch
from biobench.errors import ConfigError
from biobench.training import attention_masks, causal_attention


def _model(tokenizer, impl: str, **overrides):
    from biobench.training.presets import build_modernbert_mlm

    model = build_modernbert_mlm(tokenizer, "tiny", seed=1, **overrides)
    model.set_attn_implementation(impl)
    return model.eval()


def _pair(vocab: int, length: int, t: int):
    g = torch.Generator().manual_seed(0)
    ids = torch.randint(5, vocab, (2, length), generator=g)
    changed = ids.clone()
    changed[:, t + 1:] = torch.randint(5, vocab, (2, length - t - 1), generator=g)
    mask = torch.ones(2, length, dtype=torch.long)
    mask[1, length - 12:] = 0  # right padding in the second row
    return ids, changed, mask


@pytest.mark.parametrize("impl", ["sdpa", "eager"])
def test_no_leak_from_future_tokens(tiny_tokenizer, impl):
    model = _model(tiny_tokenizer, impl, local_attention=16)  # 3 x the window: sliding layers matter
    length, t = 48, 20
    ids, changed, mask = _pair(len(tiny_tokenizer), length, t)
    with torch.no_grad():
        leak = (model(ids, attention_mask=mask).logits - model(changed, attention_mask=mask).logits)[:, : t + 1]
        assert leak.abs().max() > 0  # bidirectional by default: the test can see a leak
        with causal_attention(model):
            for attn_mask in (mask, None):
                a = model(ids, attention_mask=attn_mask).logits
                b = model(changed, attention_mask=attn_mask).logits
                assert torch.equal(a[:, : t + 1], b[:, : t + 1])
                assert not torch.equal(a[:, t + 1:], b[:, t + 1:])
            assert all(m.is_causal for m in model.modules() if hasattr(m, "sliding_window"))  # flash path
        assert not any(m.is_causal for m in model.modules() if hasattr(m, "sliding_window"))
        # leaving the block restores bidirectional attention
        after = model(ids, attention_mask=mask).logits - model(changed, attention_mask=mask).logits
        assert after[:, : t + 1].abs().max() > 0


@pytest.mark.canary
def test_is_causal_flag_alone_leaks(tiny_tokenizer):
    """Upstream canary: tests transformers, not biobench. ModernBERT's own `is_causal=True` is not causal on
    sdpa (the sliding-window and padding masks win), which is why biobench.training.causal builds its own
    mask mapping. When this starts failing, transformers has fixed the flag: nothing in biobench breaks
    (test_no_leak_from_future_tokens still guards the CLM phase), but the mask mapping may be redundant."""
    model = _model(tiny_tokenizer, "sdpa", local_attention=16)
    ids, changed, mask = _pair(len(tiny_tokenizer), 48, 20)
    model.config.is_causal = True
    for m in model.modules():
        if hasattr(m, "is_causal"):
            m.is_causal = True
    with torch.no_grad():
        diff = model(ids, attention_mask=mask).logits - model(changed, attention_mask=mask).logits
    assert diff[:, :21].abs().max() > 0, (
        "upstream canary: transformers' ModernBERT is_causal=True alone no longer leaks future tokens. "
        "biobench is unaffected (test_no_leak_from_future_tokens still guards it); check whether "
        "biobench.training.causal.attention_masks can defer to the flag, update the known-pitfalls notes, "
        "then delete this canary.")


def test_mask_mapping_is_causal_and_windowed(tiny_tokenizer):
    model = _model(tiny_tokenizer, "sdpa", local_attention=8)
    half = model.config.local_attention // 2
    pad = torch.ones(1, 20, dtype=torch.long)
    pad[0, 17:] = 0
    masks = attention_masks(model, pad, 1, 20, causal=True)
    q = torch.arange(20)[:, None]
    kv = torch.arange(20)[None, :]
    causal = (kv <= q) & (kv < 17)
    assert torch.equal(masks["full_attention"][0, 0], causal)
    assert torch.equal(masks["sliding_attention"][0, 0], causal & (q - kv <= half))
    bidir = attention_masks(model, pad, 1, 20, causal=False)
    assert torch.equal(bidir["sliding_attention"][0, 0], ((q - kv).abs() <= half) & (kv < 17))


def test_document_mask_blocks_other_documents(tiny_tokenizer):
    model = _model(tiny_tokenizer, "eager")
    docs = torch.tensor([[0] * 5 + [1] * 7])
    masks = attention_masks(model, None, 1, 12, causal=False, document_ids=docs)
    allowed = masks["full_attention"][0, 0] == 0  # eager: additive mask, 0 = attend
    assert torch.equal(allowed, docs[0][:, None] == docs[0][None, :])


def test_non_modernbert_is_refused():
    from transformers import BertConfig, BertForMaskedLM

    bert = BertForMaskedLM(BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                                      intermediate_size=16))
    with pytest.raises(ConfigError, match="supports transformers ModernBERT models.*got 'bert'"):
        with causal_attention(bert):
            pass
