"""Decoupled AdamW (Composer semantics), the two schedules, and bit-exact freezing."""

from __future__ import annotations

import math

import pytest
import torch
from biobench.errors import ConfigError
from biobench.training import schedules
from biobench.training.freezing import apply_freezes
from biobench.training.optim import DecoupledAdamW, build_optimizer
from biobench.training.recipes import Freeze, get_recipe, parse_freeze


def test_weight_decay_follows_lr_ratio_not_lr():
    p = torch.nn.Parameter(torch.full((3,), 2.0))
    opt = DecoupledAdamW([p], lr=2e-4, weight_decay=1e-5)
    for group in opt.param_groups:
        group["lr"] = 1e-4  # half the peak: decay factor 1 - 1e-5 * 0.5
    p.grad = torch.zeros(3)  # no Adam move (zero moments): only the decay acts
    opt.step()
    torch.testing.assert_close(p.detach(), torch.full((3,), 2.0 * (1 - 1e-5 * 0.5)), rtol=0, atol=1e-9)
    assert opt.defaults["betas"] == (0.9, 0.98) and opt.defaults["eps"] == 1e-6


def test_adam_part_matches_torch_adam():
    torch.manual_seed(0)
    a, b = torch.nn.Parameter(torch.randn(5)), None
    b = torch.nn.Parameter(a.detach().clone())
    ours, ref = DecoupledAdamW([a], weight_decay=0.0), torch.optim.Adam([b], lr=2e-4, betas=(0.9, 0.98), eps=1e-6)
    for _ in range(3):
        g = torch.randn(5)
        a.grad, b.grad = g.clone(), g.clone()
        ours.step()
        ref.step()
    assert torch.equal(a, b)


def test_no_decay_for_bias_and_norms(tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    opt = build_optimizer(build_modernbert_mlm(tiny_tokenizer, "tiny"))
    decayed, plain = opt.param_groups
    assert decayed["decoupled_decay"] == 1e-5 and plain["decoupled_decay"] == 0.0
    assert all(p.dim() == 1 for p in plain["params"]) and all(p.dim() == 2 for p in decayed["params"])


def test_schedules():
    assert schedules.warmup_steps(1000, 8192) == 100  # 10% cap (100M tokens > 10% of 8.2M)
    assert schedules.warmup_steps(100_000, 384 * 8192) == round(100e6 / (384 * 8192))  # the paper's 100M tokens
    assert [schedules.warmup_constant(s, 4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    decay = [schedules.sqrt_decay(t, 5) for t in range(5)]
    assert decay[0] == 1.0 and math.isclose(decay[-1], 0.1)
    assert math.isclose(decay[1], 0.1 + 0.9 * (1 - math.sqrt(0.25)))
    assert all(x > y for x, y in zip(decay, decay[1:], strict=False))


def test_freeze_specs_and_ranges(tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    assert parse_freeze("0-7@clm") == Freeze(0, 7, "clm") and parse_freeze("2-3@phase2").phase == "decay"
    with pytest.raises(ConfigError, match="expected FIRST-LAST@clm or FIRST-LAST@decay"):
        parse_freeze("0-7")
    assert get_recipe("mlm", ["1-2@decay"]).frozen_layers(1) == [Freeze(1, 2, "decay")]
    with pytest.raises(ConfigError, match="unknown recipe 'nope'"):
        get_recipe("nope")
    model = build_modernbert_mlm(tiny_tokenizer, "tiny")
    with pytest.raises(ConfigError, match=r"freeze range 0-7@clm is outside the model's 4 layers \(0-3\)"):
        apply_freezes(model, get_recipe("detour-freeze-low").frozen_layers(0))


def test_frozen_layers_bit_identical_through_steps(tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    model = build_modernbert_mlm(tiny_tokenizer, "tiny")
    opt = build_optimizer(model, weight_decay=0.1)
    ids = torch.randint(5, len(tiny_tokenizer), (2, 16))
    # a first unfrozen step gives every parameter Adam momentum, so a later frozen step would move it
    for frozen in ([], [Freeze(1, 2, "clm")]):
        apply_freezes(model, frozen)
        before = {n: p.detach().clone() for n, p in model.named_parameters()}
        state_before = {n: opt.state[p]["exp_avg"].clone() for n, p in model.named_parameters() if p in opt.state}
        for _ in range(2):
            model(ids, labels=ids).loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
    for n, p in model.named_parameters():
        if n.startswith(("model.layers.1.", "model.layers.2.")):
            assert torch.equal(p, before[n]), n
            assert torch.equal(opt.state[p]["exp_avg"], state_before[n]), n
        elif n.startswith("model.layers.3."):
            assert not torch.equal(p, before[n]), n


def _reference_step(params, state, lr, betas, eps, wd, step):
    """The previous implementation, written out: per-parameter decoupled decay, then textbook Adam."""
    for p in params:
        if p.grad is None:
            continue
        p.mul_(1.0 - wd)  # lr == initial lr in this test
        m, v = state.setdefault(id(p), (torch.zeros_like(p), torch.zeros_like(p)))
        m.mul_(betas[0]).add_(p.grad, alpha=1 - betas[0])
        v.mul_(betas[1]).addcmul_(p.grad, p.grad, value=1 - betas[1])
        m_hat = m / (1 - betas[0] ** step)
        v_hat = v / (1 - betas[1] ** step)
        p.sub_(lr * m_hat / (v_hat.sqrt() + eps))


def test_foreach_decoupled_adamw_equals_per_parameter_loop_over_50_steps():
    torch.manual_seed(0)
    shapes = [(7, 5), (5,), (3, 3, 2), (11,)]
    ours = [torch.nn.Parameter(torch.randn(s, dtype=torch.float64)) for s in shapes]
    ref = [p.detach().clone() for p in ours]
    start = [p.detach().clone() for p in ours]
    frozen = ours[3]  # never gets a gradient: untouched by both
    opt = DecoupledAdamW(ours, lr=1e-2, weight_decay=1e-2)
    assert opt.param_groups[0]["foreach"] is True  # CPU: multi-tensor kernels
    state: dict = {}
    for step in range(1, 51):
        grads = [torch.randn(s, dtype=torch.float64) for s in shapes]
        for p, r, g in zip(ours, ref, grads, strict=True):
            p.grad = None if p is frozen else g.clone()
            r.grad = None if p is frozen else g.clone()
        opt.step()
        with torch.no_grad():
            _reference_step(ref, state, 1e-2, (0.9, 0.98), 1e-6, 1e-2, step)
    for p, r in zip(ours, ref, strict=True):
        assert torch.allclose(p.detach(), r, rtol=0, atol=1e-6), (p - r).abs().max()
    assert torch.equal(frozen.detach(), ref[3])
    assert all((p.detach() - s).abs().max() > 1e-3 for p, s in zip(ours[:3], start[:3], strict=True))  # it trained
