"""Causal attention for transformers' ModernBERT: the CLM half of the detour.

ModernBERT is an encoder; setting its `is_causal` flag is not enough on sdpa/eager (measured with
transformers 5.24: the padding and sliding-window masks are built bidirectionally and take precedence, so
tokens see the future). What works is to hand the model its per-layer-type mask mapping ourselves:

    {"full_attention":    causal AND padding,
     "sliding_attention": causal AND (q - kv) <= local_attention // 2 AND padding}

built with transformers' own mask helpers (so every attention backend gets the mask format it expects), and
to set `is_causal=True` on the attention modules for the flash-attention path (which ignores 4D masks).
`--doc-mask` adds "same document" to both masks (sdpa/eager) so packed documents cannot see each other.
"""

from __future__ import annotations

import contextlib
import inspect
from collections.abc import Iterator
from typing import Any

from biobench.errors import ConfigError

SUPPORTED = "transformers ModernBERT models (model_type 'modernbert', e.g. ModernBertForMaskedLM, ModernBertModel)"


def modernbert_base(model: Any):
    """The ModernBertModel inside `model` (itself, a *ForMaskedLM, or a wrapper such as DDP)."""
    for module in model.modules():
        if type(module).__name__ == "ModernBertModel":
            return module
    model_type = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
    raise ConfigError(f"causal attention supports {SUPPORTED}; got '{model_type}'")


def _same_document(document_ids):
    def inner(batch_idx, head_idx, q_idx, kv_idx):
        return document_ids[batch_idx, q_idx] == document_ids[batch_idx, kv_idx]

    return inner


def attention_masks(model: Any, attention_mask, batch_size: int, seq_len: int, *, causal: bool,
                    document_ids=None, device=None) -> dict[str, Any]:
    """The {"full_attention", "sliding_attention"} mask mapping a ModernBertModel accepts as `attention_mask`.

    `attention_mask` is the usual 2D padding mask (or None); `document_ids` (batch, seq) restricts attention
    to tokens of the same packed document. Built with transformers.masking_utils so the format follows the
    model's attention implementation (bool for sdpa, additive float for eager, 2D/None for flash).
    """
    import torch
    from transformers.masking_utils import (
        and_masks,
        causal_mask_function,
        create_bidirectional_mask,
        create_bidirectional_sliding_window_mask,
    )

    base = modernbert_base(model)
    config = base.config
    device = device if device is not None else next(base.parameters()).device
    # Only shape, dtype and device of inputs_embeds are read by the helpers: a broadcast view costs nothing.
    dtype = next(base.parameters()).dtype
    embeds = torch.empty((), dtype=dtype, device=device).expand(batch_size, seq_len, 1)
    extra = []
    if causal:
        extra.append(causal_mask_function)
    if document_ids is not None:
        extra.append(_same_document(document_ids.to(device)))
    if attention_mask is not None:
        attention_mask = attention_mask.to(device)
    impl = config._attn_implementation
    no_padding = attention_mask is None or bool(attention_mask.all())
    and_fn = and_masks(*extra) if extra else None
    kwargs = dict(config=config, inputs_embeds=embeds, attention_mask=attention_mask, and_mask_function=and_fn)
    if causal and impl == "sdpa" and no_padding and document_ids is None:
        # Plain causal full attention: let sdpa use its fused is_causal kernel (the modules have is_causal=True
        # inside causal_attention). Only for sdpa: eager would treat None as "attend everywhere".
        full = None
    else:
        full = create_bidirectional_mask(**kwargs)
    return {"full_attention": full, "sliding_attention": create_bidirectional_sliding_window_mask(**kwargs)}


def _attention_modules(base) -> list:
    return [m for m in base.modules() if hasattr(m, "is_causal") and hasattr(m, "sliding_window")]


@contextlib.contextmanager
def causal_attention(model: Any) -> Iterator[Any]:
    """Make a transformers ModernBERT model causal for the duration of the block.

    Inside the block every forward pass through the model's ModernBertModel gets a causal mask mapping
    (global layers: causal; local layers: causal AND within local_attention // 2 tokens to the left; padding
    respected) unless the caller already passes a mapping, and every attention module has `is_causal=True`
    (flash-attention path). Weights are untouched; leaving the block restores bidirectional attention.

        with causal_attention(model):
            logits = model(input_ids, attention_mask=attention_mask).logits   # position t sees only <= t
    """
    base = modernbert_base(model)
    signature = inspect.signature(base.forward)
    modules = _attention_modules(base)
    saved = [m.is_causal for m in modules]

    def pre_hook(module, args, kwargs):
        bound = signature.bind_partial(*args, **kwargs)
        values = dict(bound.arguments)
        values.update(values.pop("kwargs", {}))
        mask = values.get("attention_mask")
        if isinstance(mask, dict):
            return None
        source = values.get("input_ids")
        if source is None:
            source = values.get("inputs_embeds")
        assert source is not None  # a forward call gives input_ids or inputs_embeds
        values["attention_mask"] = attention_masks(
            module, mask, source.shape[0], source.shape[1], causal=True, device=source.device
        )
        return (), values

    handle = base.register_forward_pre_hook(pre_hook, with_kwargs=True)
    for m in modules:
        m.is_causal = True
    try:
        yield model
    finally:
        handle.remove()
        for m, flag in zip(modules, saved, strict=True):
            m.is_causal = flag


# ---------------------------------------------------------------- decoders (the decoder control of Table 4)
DECODER_FAMILIES = ("gemma3_text",)
DECODER_SUPPORTED = "transformers Gemma-3 text models (model_type 'gemma3_text': Gemma3ForCausalLM, e.g. Gemma-3 270M)"


def is_decoder(model: Any) -> bool:
    return getattr(getattr(model, "config", None), "model_type", None) in DECODER_FAMILIES


def _decoder_bases(model: Any) -> list:
    bases = [m for m in model.modules() if type(m).__name__ == "Gemma3TextModel"]
    if not bases:
        model_type = getattr(getattr(model, "config", None), "model_type", type(model).__name__)
        raise ConfigError(f"bidirectional attention for decoders supports {DECODER_SUPPORTED}; got '{model_type}'")
    return bases


def set_bidirectional(model: Any, bidirectional: bool) -> None:
    """Switch a Gemma-3 text model between its causal mask and a bidirectional one, in place.

    transformers' Gemma-3 builds its masks from `config.use_bidirectional_attention` (global layers: full
    attention; sliding layers: |q - kv| < sliding_window, i.e. the window opens to both sides), but reads each
    attention module's `is_causal`, fixed at construction, whenever the mask helpers skip an all-ones mask
    (sdpa, no padding, sequence within the window): flipping only the config leaks the future on sdpa, as the
    leak tests show. Both are set here. The setting is part of the saved config, so a checkpoint reloads
    (AutoModelForCausalLM) with the attention it was trained with.
    """
    for base in _decoder_bases(model):
        base.config.use_bidirectional_attention = bidirectional
        for module in base.modules():
            if hasattr(module, "is_causal") and hasattr(module, "sliding_window"):
                module.is_causal = not bidirectional
    if getattr(model, "config", None) is not None:
        model.config.use_bidirectional_attention = bidirectional


@contextlib.contextmanager
def bidirectional_attention(model: Any, bidirectional: bool = True) -> Iterator[Any]:
    """`set_bidirectional` for the duration of the block; leaving it restores the model's previous setting."""
    before = bool(getattr(_decoder_bases(model)[0].config, "use_bidirectional_attention", False))
    set_bidirectional(model, bidirectional)
    try:
        yield model
    finally:
        set_bidirectional(model, before)


def phase_attention(model: Any, causal: bool) -> contextlib.AbstractContextManager:
    """The attention a training phase runs with: causal for CLM, bidirectional for MLM.

    Encoders (ModernBERT) are bidirectional by nature: CLM phases get `causal_attention` for the block. Decoders
    (Gemma-3) are switched in place and keep the phase's mask after the block, so the phase's checkpoint saves
    (and reloads with) the attention it was trained with: phase1/ of decoder-control is bidirectional, final/
    causal again.
    """
    if is_decoder(model):
        set_bidirectional(model, not causal)
        return contextlib.nullcontext(model)
    return causal_attention(model) if causal else contextlib.nullcontext(model)
