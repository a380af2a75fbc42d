"""Tiny ModernBERT and Gemma-3 models and on-the-fly tokenizers, for offline tests, CPU smoke runs and the demo.

The hub is unreachable here, so `preset:tiny` / `preset:small` and the test suite build a ModernBERT from a
config with a byte-level BPE tokenizer trained on the given texts; `preset:tiny-decoder` builds a Gemma-3 text
model (transformers' Gemma3ForCausalLM: sliding-window and global layers, tied LM head) with a decoder-style
tokenizer (<bos>/<eos>/<pad>/<unk>, no mask token: the decoder-control recipe adds `<mask>` itself, as it does
for Gemma-3 270M). The pitfalls handled here: ModernBertConfig's default special-token ids (50281-50283) must
be replaced for a small vocab, and a `tokenizers` tokenizer needs a TemplateProcessing post-processor or no
[CLS]/[SEP] (or <bos>) are added.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

SPECIAL_TOKENS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
DECODER_SPECIAL_TOKENS = ["<pad>", "<eos>", "<bos>", "<unk>"]  # Gemma's first ids, in Gemma's order

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

# ModernBERT shapes by name, for configs built from scratch (the performance scripts): the presets above, and
# ModernBERT-base's architecture (answerdotai/ModernBERT-base config.json: 22 layers, hidden 768, 12 heads, GLU
# MLP 1152, global attention every 3rd layer, 128-token local window, vocabulary 50368). "base" is a shape, not
# a `preset:` model: pretraining it from scratch on a CPU is not what a preset is for.
SHAPES: dict[str, dict[str, Any]] = {
    **PRESETS,
    "base": dict(
        hidden_size=768, num_hidden_layers=22, num_attention_heads=12, intermediate_size=1152,
        global_attn_every_n_layers=3, local_attention=128, vocab_size=50368,
    ),
}

# Gemma-3 text models (decoders) for the decoder control of Table 4. Layer types alternate sliding/global so
# both mask kinds are exercised (Gemma-3 270M: 5 sliding layers per global one, window 512).
DECODER_PRESETS: dict[str, dict[str, Any]] = {
    "tiny-decoder": dict(
        hidden_size=64, num_hidden_layers=4, num_attention_heads=4, num_key_value_heads=1, head_dim=16,
        intermediate_size=128, sliding_window=64, vocab_size=4000,
        layer_types=["sliding_attention", "full_attention", "sliding_attention", "full_attention"],
    ),
}


def train_tokenizer(texts: Iterable[str], vocab_size: int = 4000, model_max_length: int = 8192,
                    decoder: bool = False):
    """Train a byte-level BPE tokenizer and wrap it as a PreTrainedTokenizerFast: ModernBERT-style
    ([CLS] text [SEP], with [MASK]) or, with `decoder=True`, Gemma-style (<bos> text, no mask token)."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    specials = DECODER_SPECIAL_TOKENS if decoder else SPECIAL_TOKENS
    tok = Tokenizer(models.BPE(unk_token=specials[3] if decoder else "[UNK]"))
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(texts, trainer=trainer)
    if decoder:
        tok.post_processor = processors.TemplateProcessing(
            single="<bos> $A", pair="<bos> $A $B:1", special_tokens=[("<bos>", tok.token_to_id("<bos>"))])
        return PreTrainedTokenizerFast(
            tokenizer_object=tok, pad_token="<pad>", eos_token="<eos>", bos_token="<bos>", unk_token="<unk>",
            model_max_length=model_max_length, add_prefix_space=True,
        )
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
    """A ModernBertConfig of the named preset (or shape, `SHAPES`) whose vocabulary and special-token ids match
    `tokenizer`."""
    from transformers import ModernBertConfig

    params = dict(SHAPES[preset])
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


def gemma3_config(tokenizer, preset: str = "tiny-decoder", **overrides):
    """A Gemma3TextConfig of the named decoder preset whose vocabulary and special-token ids match `tokenizer`."""
    from transformers import Gemma3TextConfig

    params = dict(DECODER_PRESETS[preset])
    params.update(overrides)
    params["vocab_size"] = len(tokenizer)
    params.setdefault("max_position_embeddings", 8192)
    return Gemma3TextConfig(pad_token_id=tokenizer.pad_token_id, bos_token_id=tokenizer.bos_token_id,
                            eos_token_id=tokenizer.eos_token_id, **params)


def build_gemma3_causal_lm(tokenizer, preset: str = "tiny-decoder", seed: int = 0, **overrides):
    """A freshly initialised Gemma3ForCausalLM of the named decoder preset (deterministic per seed)."""
    import torch
    from transformers import Gemma3ForCausalLM

    torch.manual_seed(seed)
    return Gemma3ForCausalLM(gemma3_config(tokenizer, preset, **overrides))
