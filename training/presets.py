"""Tiny ModernBERT models and on-the-fly tokenizers, for offline tests, CPU smoke runs and the demo.

The hub is unreachable here, so `preset:tiny` / `preset:small` and the test suite build a ModernBERT from a
config with a byte-level BPE tokenizer trained on the given texts. The pitfalls handled here:
ModernBertConfig's default special-token ids (50281-50283) must be replaced for a small vocab, and a
`tokenizers` tokenizer needs a TemplateProcessing post-processor or no [CLS]/[SEP] are added.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]

PRESETS: dict[str, dict[str, Any]] = {
    # 4 layers, hidden 64, alternating global/local attention: the whole recipe runs on a CPU in minutes.
    "tiny": dict(
        hidden_size=64, num_hidden_layers=4, num_attention_heads=4, intermediate_size=128,
        global_attn_every_n_layers=2, local_attention=64, vocab_size=4000,
    ),
    "small": dict(
        hidden_size=256, num_hidden_layers=6, num_attention_heads=4, intermediate_size=512,
        global_attn_every_n_layers=3, local_attention=128, vocab_size=8000,
    ),
}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4000, model_max_length: int = 8192):
    """Train a byte-level BPE tokenizer (ModernBERT-style) and wrap it as a PreTrainedTokenizerFast."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    tok = Tokenizer(models.BPE(unk_token="[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=SPECIAL_TOKENS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    cls_id, sep_id = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    tok.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]",
        pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls_id), ("[SEP]", sep_id)],
    )
    return PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="[PAD]", unk_token="[UNK]", cls_token="[CLS]", sep_token="[SEP]", mask_token="[MASK]",
        bos_token="[CLS]", eos_token="[SEP]",
        model_max_length=model_max_length,
        add_prefix_space=True,
    )


def modernbert_config(tokenizer, preset: str = "tiny", **overrides):
    """A ModernBertConfig of the named preset whose vocabulary and special-token ids match `tokenizer`."""
    from transformers import ModernBertConfig

    params = dict(PRESETS[preset])
    params.update(overrides)
    params["vocab_size"] = len(tokenizer)
    params.setdefault("max_position_embeddings", 8192)
    return ModernBertConfig(
        pad_token_id=tokenizer.pad_token_id,
        bos_token_id=tokenizer.cls_token_id,
        eos_token_id=tokenizer.sep_token_id,
        cls_token_id=tokenizer.cls_token_id,
        sep_token_id=tokenizer.sep_token_id,
        **params,
    )


def build_modernbert_mlm(tokenizer, preset: str = "tiny", seed: int = 0, **overrides):
    """A freshly initialised ModernBertForMaskedLM of the named preset (deterministic per seed)."""
    import torch
    from transformers import ModernBertForMaskedLM

    torch.manual_seed(seed)
    return ModernBertForMaskedLM(modernbert_config(tokenizer, preset, **overrides))
