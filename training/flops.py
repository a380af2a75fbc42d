"""Model FLOPs utilisation (MFU): one formula for the pretraining log (`train_log.jsonl` "mfu") and the
performance scripts (biobench.perf), so a number in one can be compared with a number in the other.

Convention (docs/performance.md): training FLOPs per token = 6 x all parameters (embeddings included) + the
attention FLOPs a flash-attention kernel has to do, 12 x span x hidden per layer (forward and backward of
QK^T and AV), where the span is the whole sequence for global layers and the local window for
sliding-window layers, halved for a causal (CLM) step. MFU = FLOPs per token x tokens/s / peak FLOP/s.
The performance scripts divide by a measured bf16 matmul peak; the trainer, which must not spend seconds
measuring, by the datasheet peak of a known GPU (`table_peak_flops`).
"""

from __future__ import annotations

from typing import Any

# Dense bf16 peak FLOP/s per device (datasheets, no sparsity); unknown devices log mfu = null.
PEAK_FLOPS = {"H200": 989e12, "H100": 989e12, "A100": 312e12, "L40S": 362e12, "A10": 125e12, "L4": 121e12}


def attention_flops_per_token(config: Any, seq_len: int, causal: bool = False) -> float:
    """Training FLOPs per token of QK^T and AV: 12 x span x hidden per layer, the span being `seq_len` for
    global layers (every `global_attn_every_n_layers`-th, from layer 0) and `local_attention` for the others;
    halved when causal. A config without those fields (not ModernBERT) counts every layer as global."""
    every = getattr(config, "global_attn_every_n_layers", 1) or 1
    window = getattr(config, "local_attention", seq_len) or seq_len
    total = 0.0
    for layer in range(config.num_hidden_layers):
        span = seq_len if layer % every == 0 else min(window, seq_len)
        total += 12 * span * config.hidden_size
    return total / 2 if causal else total


def dense_attention_flops_per_token(config: Any, seq_len: int) -> float:
    """PaLM's convention, every layer over the full sequence (12 x layers x hidden x seq_len): only for
    comparison with published figures that count it that way."""
    return 12 * config.num_hidden_layers * config.hidden_size * seq_len


def flops_per_token(n_params: int, config: Any, seq_len: int, causal: bool = False) -> float:
    """Training FLOPs per token in biobench's convention (module docstring)."""
    return 6 * n_params + attention_flops_per_token(config, seq_len, causal)


def mfu(n_params: int, config: Any, seq_len: int, tokens_per_s: float, peak_flops: float,
        causal: bool = False) -> float:
    """Model FLOPs utilisation: flops_per_token x tokens/s / peak_flops (a fraction, 0.4 = 40%)."""
    return flops_per_token(n_params, config, seq_len, causal) * tokens_per_s / peak_flops


def table_peak_flops(device) -> float | None:
    """Datasheet bf16 peak of the CUDA device `device` when its name is in PEAK_FLOPS; None on CPU or an
    unknown GPU (MFU is then not reported rather than guessed)."""
    import torch

    if torch.device(str(device)).type != "cuda":
        return None
    name = torch.cuda.get_device_name(device)
    return next((v for k, v in PEAK_FLOPS.items() if k in name), None)
