"""Frozen-encoder features for the analyses: per-layer mean-pooled hidden states, CLS vectors.

Every analysis treats the encoder as a fixed function, so features are computed once (no grad, eval mode,
batches sorted by length to waste little padding) and returned as float64 numpy arrays: CKA needs float64,
and the probes are cheap on top of cached features.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from biobench.eval.encoder import load_encoder
from biobench.runtime.files import atomic_write


def load_frozen_encoder(name_or_path: str | Path, device: str = "cpu") -> tuple[Any, Any, Any]:
    """(encoder, tokenizer, ModelInfo) in eval mode, float32 (CKA and probes compare exact features),
    gradients off. Aliases, hub ids and local folders resolve through biobench.models."""
    import torch

    encoder, tokenizer, info = load_encoder(str(name_or_path), device, dtype=torch.float32)
    encoder.eval()
    for p in encoder.parameters():
        p.requires_grad_(False)
    if tokenizer.pad_token is None:  # decoders (Gemma-3, Llama...) may have none; padding is masked out anyway
        tokenizer.pad_token = tokenizer.eos_token or tokenizer.unk_token
    return encoder, tokenizer, info


def model_max_length(encoder, tokenizer) -> int:
    """The longest input the encoder accepts: position embeddings, capped by the tokenizer's limit."""
    limits = [getattr(encoder.config, "max_position_embeddings", None), getattr(tokenizer, "model_max_length", None)]
    caps = [int(x) for x in limits if x and int(x) < 10**8]
    return min(caps) if caps else 512


def num_layers(encoder) -> int:
    """Transformer layers (hidden-state count minus the embedding output)."""
    return int(encoder.config.num_hidden_layers)


def _batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    order = sorted(range(len(lengths)), key=lambda i: -lengths[i])
    return [order[i : i + batch_size] for i in range(0, len(order), batch_size)]


def layer_features(
    encoder, tokenizer, texts: Sequence[str], max_length: int = 512, batch_size: int = 8
) -> list[np.ndarray]:
    """Mean-pooled hidden states of every layer (index 0 = embeddings, then each transformer layer), one
    float64 array (n_texts, hidden) per layer. Padding is excluded from the mean via the attention mask, on
    either padding side, so encoders and decoders (causal LMs loaded as their base model, e.g. Gemma-3's
    Gemma3TextModel) pool the same way."""
    import torch

    device = next(encoder.parameters()).device
    max_length = min(max_length, model_max_length(encoder, tokenizer))
    lengths = [len(t) for t in texts]
    out: list[np.ndarray] | None = None
    with torch.no_grad():
        for idx in _batches(lengths, batch_size):
            enc = tokenizer(
                [texts[i] for i in idx], padding=True, truncation=True, max_length=max_length, return_tensors="pt"
            ).to(device)
            states = encoder(**enc, output_hidden_states=True).hidden_states
            mask = enc["attention_mask"].unsqueeze(-1).to(torch.float64)
            if out is None:
                out = [np.zeros((len(texts), s.shape[-1]), dtype=np.float64) for s in states]
            for layer, hidden in enumerate(states):
                pooled = (hidden.to(torch.float64) * mask).sum(1) / mask.sum(1).clamp(min=1.0)
                out[layer][idx] = pooled.cpu().numpy()
    return out or []


def pooled_features(
    encoder,
    tokenizer,
    texts: Sequence[str],
    pairs: Sequence[str] | None = None,
    pooling: str = "cls",
    layer: int = -1,
    max_length: int = 512,
    batch_size: int = 8,
) -> np.ndarray:
    """One float64 vector per text (or (text, pair) input, truncating only the pair) from hidden layer
    `layer` (-1 = last, after the final norm): the first token ("cls") or the masked mean ("mean")."""
    import torch

    device = next(encoder.parameters()).device
    max_length = min(max_length, model_max_length(encoder, tokenizer))
    lengths = [len(t) + (len(pairs[i]) if pairs else 0) for i, t in enumerate(texts)]
    result: np.ndarray | None = None
    with torch.no_grad():
        for idx in _batches(lengths, batch_size):
            args = ([texts[i] for i in idx],) + (([pairs[i] for i in idx],) if pairs else ())
            enc = tokenizer(
                *args, padding=True, max_length=max_length, return_tensors="pt",
                truncation="only_second" if pairs else True,
            ).to(device)
            out = encoder(**enc, output_hidden_states=layer != -1)
            hidden = out.last_hidden_state if layer == -1 else out.hidden_states[layer]
            hidden = hidden.to(torch.float64)
            if pooling == "cls":
                vec = hidden[:, 0]
            else:
                mask = enc["attention_mask"].unsqueeze(-1).to(torch.float64)
                vec = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1.0)
            if result is None:
                result = np.zeros((len(texts), vec.shape[-1]), dtype=np.float64)
            result[idx] = vec.cpu().numpy()
    return result if result is not None else np.zeros((0, 0))


def cached(path: Path, source: Path, compute: Callable[[], np.ndarray]) -> np.ndarray:
    """Features from the .npy cache at `path` when it is newer than `source` (the data they were computed
    from); otherwise `compute()` them and store the cache atomically (a killed run never leaves half a cache)."""
    if path.is_file() and source.stat().st_mtime < path.stat().st_mtime:
        return np.load(path)
    feats = compute()
    buffer = io.BytesIO()
    np.save(buffer, feats)
    atomic_write(path, buffer.getvalue(),
                 safe=lambda: f"{len(list(path.parent.glob('*.npy')))} cached feature file(s) in {path.parent} are safe")
    return feats


def model_layer_features(name: str | Path, texts: list[str], max_length: int, batch_size: int,
                         device: str = "cpu") -> tuple[list[np.ndarray], dict[str, Any]]:
    """The per-layer features of `texts` under one model (layer_features, the model freed after) and what
    identifies the model in a report: id, revision, architecture and its number of layers."""
    model, tokenizer, info = load_frozen_encoder(name, device)
    feats = layer_features(model, tokenizer, texts, max_length, batch_size)
    del model
    return feats, {"id": info.id, "revision": info.revision, "architecture": info.architecture,
                   "layers": len(feats) - 1}
