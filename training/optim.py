"""Decoupled AdamW with Composer's DecoupledAdamW semantics (the optimiser of ModernBERT and the paper).

torch's AdamW multiplies the weight decay by the lr (p -= lr * wd * p); Composer decouples it from the lr
*scale*: p *= 1 - wd * lr / initial_lr, so wd=1e-5 is the per-step decay at the peak lr and follows the
schedule's shape, not its magnitude. Parameters without a gradient (frozen ones) get neither the decay nor
any Adam update or state change (torch's Adam skips them), so freezing is bit-exact.

Speed: the decay is one `torch._foreach_mul_` per group and the Adam part runs on torch's multi-tensor
(`foreach`) kernels, or its single-kernel `fused` path on CUDA — a per-parameter Python loop costs a
kernel launch per tensor per step (hundreds for ModernBERT-base) on a GPU.
"""

from __future__ import annotations

import torch
from biobench.training.config import PAPER_OPTIMIZER as PAPER


class DecoupledAdamW(torch.optim.Adam):
    def __init__(self, params, lr: float = PAPER["lr"], betas=PAPER["betas"], eps: float = PAPER["eps"],
                 weight_decay: float = PAPER["weight_decay"], fused: bool | None = None):
        """`fused=None`: torch's fused kernel when every parameter is on CUDA, else the foreach kernels."""
        params = list(params)
        if fused is None:
            fused = _all_on_cuda(params)
        super().__init__(params, lr=lr, betas=betas, eps=eps, weight_decay=0.0,
                         foreach=None if fused else True, fused=fused or None)
        for group in self.param_groups:
            group.setdefault("decoupled_decay", weight_decay)
            group.setdefault("initial_lr", lr)

    @torch.no_grad()
    def step(self, closure=None):
        for group in self.param_groups:
            wd = group["decoupled_decay"]
            if wd == 0:
                continue
            factor = 1.0 - wd * group["lr"] / group["initial_lr"]
            with_grad = [p for p in group["params"] if p.grad is not None]
            if with_grad:
                torch._foreach_mul_(with_grad, factor)
        return super().step(closure)


def _all_on_cuda(params: list) -> bool:
    tensors = [p for g in params for p in (g["params"] if isinstance(g, dict) else [g])]
    return bool(tensors) and all(t.is_cuda for t in tensors)


def param_groups(model: torch.nn.Module, weight_decay: float) -> list[dict]:
    """All parameters (frozen ones too, so optimiser state carries across phases); biases and norm weights
    without decay (ModernBERT's filter_bias_norm_wd)."""
    decay: list[torch.nn.Parameter] = []
    no_decay: list[torch.nn.Parameter] = []
    norm_params = {id(p) for m in model.modules() if isinstance(m, torch.nn.LayerNorm) for p in m.parameters()}
    for name, p in model.named_parameters():
        (no_decay if name.endswith("bias") or id(p) in norm_params else decay).append(p)
    return [{"params": decay, "decoupled_decay": weight_decay},
            {"params": no_decay, "decoupled_decay": 0.0}]


def build_optimizer(model: torch.nn.Module, lr: float = PAPER["lr"], betas=PAPER["betas"], eps: float = PAPER["eps"],
                    weight_decay: float = PAPER["weight_decay"]) -> DecoupledAdamW:
    return DecoupledAdamW(param_groups(model, weight_decay), lr=lr, betas=betas, eps=eps, weight_decay=weight_decay)
