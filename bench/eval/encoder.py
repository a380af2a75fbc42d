"""Loading an encoder and its tokenizer (torch, transformers): the one part of a model's handling that needs them.
Its identity (alias, revision, context, results folder) is biobench.models, torch-free."""

from __future__ import annotations

import contextlib
from dataclasses import replace
from typing import Any

from biobench.errors import ModelLoadError
from biobench.models import ModelRef, check_memory, inspect_model, offline_message, resolve_model
from biobench.runtime.device import attention_implementation, default_dtype
from biobench.runtime.weights import untrusted_weights
from biobench.tasks.hub import ensure_hub_mode


@contextlib.contextmanager
def _quiet_transformers():
    """Loading an encoder from an *ForMaskedLM checkpoint lists the unused head weights: expected, silenced."""
    from transformers.utils import logging as hf_logging

    level = hf_logging.get_verbosity()
    hf_logging.set_verbosity_error()
    try:
        yield
    finally:
        hf_logging.set_verbosity(level)


def load_encoder(name_or_ref: str | ModelRef, device: str = "cpu", dtype: Any = None, trust_remote_code: bool = False,
                 attn_device: str | None = None):
    """(encoder, tokenizer, ModelInfo) for an alias, hub id or local folder.

    dtype None means bf16 on CUDA and float32 on CPU (the fine-tuning loop passes float32 and uses autocast).
    `attn_device` is where the model will run when it is loaded on another device first (the grid keeps a
    pristine CPU copy and moves a clone per seed): the attention backend (flash-attention 2 / sdpa) is
    chosen for it.
    """
    from transformers import AutoModel, AutoTokenizer

    ref = name_or_ref if isinstance(name_or_ref, ModelRef) else resolve_model(name_or_ref)
    if not ref.path:
        ensure_hub_mode()
    info = inspect_model(ref)
    check_memory(ref, device, training=False)  # a config claiming 2e9 tokens is refused, not allocated
    kwargs: dict[str, Any] = {"trust_remote_code": trust_remote_code, "dtype": dtype or default_dtype(device)}
    attn = attention_implementation(attn_device or device)
    try:
        with _quiet_transformers(), untrusted_weights(ref.source, ModelLoadError):
            tokenizer = AutoTokenizer.from_pretrained(ref.source, trust_remote_code=trust_remote_code)
            try:
                encoder = AutoModel.from_pretrained(ref.source, attn_implementation=attn, **kwargs)
            except (ValueError, ImportError):
                encoder = AutoModel.from_pretrained(ref.source, **kwargs)  # architecture without flash/sdpa
    except OSError as err:
        if ref.path:
            raise ModelLoadError(f"cannot load model folder {ref.path}: {str(err).splitlines()[0]}") from None
        raise ModelLoadError(offline_message(ref)) from None
    except RuntimeError as err:  # weights whose shapes the config does not describe (a vocab_size edited)
        if "mismatched_sizes" not in str(err) and "size mismatch" not in str(err):
            raise
        raise ModelLoadError(f"cannot load model {ref.name!r}: its weights' shapes differ from what its "
                             "config.json describes (vocab_size, hidden_size or layers edited?); fix the config"
                             ) from None
    except ValueError as err:
        hint = "" if trust_remote_code else " (if it needs custom code, pass --trust-remote-code)"
        raise ModelLoadError(f"cannot load model {ref.name!r}: {str(err).splitlines()[0]}{hint}") from None
    except (RecursionError, Exception) as err:
        # a hub model's files are only on disk once from_pretrained fetched them: a forged safetensors header
        # (SafetensorError) or a tokenizer.json nested too deeply (RecursionError) is one line here too
        if not (isinstance(err, RecursionError) or type(err).__name__ == "SafetensorError"):
            raise
        why = "nested too deeply" if isinstance(err, RecursionError) else str(err).splitlines()[0][:200]
        raise ModelLoadError(f"cannot load model {ref.name!r}: a forged or damaged file ({why}); re-download or "
                             "re-save the model") from None
    encoder.to(device)
    info = replace(info, params=sum(p.numel() for p in encoder.parameters()), architecture=type(encoder).__name__)
    return encoder, tokenizer, info
