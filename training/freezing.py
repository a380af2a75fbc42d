"""Layer freezing: frozen encoder layers get requires_grad=False, hence no gradient, no Adam update, no
momentum change and no weight decay — bit-identical through the phase (zeroing gradients is not enough:
AdamW momentum and decay would still move them)."""

from __future__ import annotations

import torch
from biobench.errors import ConfigError
from biobench.training.recipes import Freeze


def encoder_layers(model: torch.nn.Module) -> torch.nn.ModuleList:
    """The stack of transformer layers: ModernBERT's model.layers, BERT's encoder.layer, ..."""
    n = getattr(model.config, "num_hidden_layers", None)
    for module in model.modules():
        if isinstance(module, torch.nn.ModuleList) and len(module) == n:
            return module
    raise ConfigError(f"cannot find the {n} transformer layers of {type(model).__name__} to freeze")


def apply_freezes(model: torch.nn.Module, freezes: list[Freeze]) -> list[int]:
    """Unfreeze everything, then freeze the listed layer ranges; returns the frozen layer indices."""
    validate_freezes(model, freezes)
    layers = encoder_layers(model)
    for p in model.parameters():
        p.requires_grad_(True)
    frozen = sorted({i for f in freezes for i in range(f.first, f.last + 1)})
    for i in frozen:
        for p in layers[i].parameters():
            p.requires_grad_(False)
    return frozen


def validate_freezes(model: torch.nn.Module, freezes: list[Freeze]) -> None:
    """Fail before training starts (not at the phase switch) when a range does not fit the model."""
    n = len(encoder_layers(model))
    for f in freezes:
        if f.first < 0 or f.last >= n:
            raise ConfigError(f"freeze range {f.first}-{f.last}@{f.phase} is outside the model's {n} "
                              f"layers (0-{n - 1}); pick a range within them")
