"""Continued pretraining: the CLM-detour recipe and its controls (`biobench pretrain`)."""

from biobench.training.causal import attention_masks, causal_attention

__all__ = ["attention_masks", "causal_attention"]
