"""Continued pretraining: the CLM-detour recipe and its controls (`biobench pretrain`)."""

from biobench.training.causal import (
    attention_masks,
    bidirectional_attention,
    causal_attention,
    phase_attention,
    set_bidirectional,
)

__all__ = ["attention_masks", "bidirectional_attention", "causal_attention", "phase_attention", "set_bidirectional"]
