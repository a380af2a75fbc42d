"""The one home of the device, dtype and attention-backend rules (biobench.runtime.device) and of the MFU
formula (biobench.training.flops), shared by fine-tuning, pretraining and the performance scripts."""

from __future__ import annotations

import importlib.util
from types import SimpleNamespace

import pytest
import torch
from biobench.runtime import device as dev
from biobench.training import flops


@pytest.fixture
def no_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)


@pytest.fixture
def with_cuda(monkeypatch):
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)


@pytest.fixture
def flash_installed(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: SimpleNamespace(name=name) if name == "flash_attn" else real(name, *a))


@pytest.fixture
def flash_missing(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "flash_attn" else real(name, *a))


def test_default_device(no_cuda):
    assert dev.default_device() == "cpu" and dev.default_device(local_rank=3) == "cpu"
    assert dev.resolve_device(None) == dev.resolve_device("auto") == "cpu"
    assert dev.resolve_device("cuda:1") == "cuda:1"  # an explicit choice is kept as written


def test_default_device_with_cuda(with_cuda):
    assert dev.default_device() == "cuda"
    assert dev.default_device(local_rank=2) == "cuda:2"  # one process per GPU under torchrun
    assert dev.resolve_device("auto") == "cuda" and dev.resolve_device("cpu") == "cpu"


def test_default_dtype_is_bf16_on_cuda_only():
    assert dev.default_dtype("cuda") is torch.bfloat16
    assert dev.default_dtype(torch.device("cuda", 1)) is torch.bfloat16
    assert dev.default_dtype("cpu") is torch.float32
    assert dev.default_dtype(torch.device("cpu")) is torch.float32


def test_autocast_follows_the_precision_rule():
    x = torch.ones(2, 2)
    with dev.autocast("cpu"):  # auto on CPU: full float32
        assert (x @ x).dtype is torch.float32
    with dev.autocast("cpu", "bf16"):  # asked for: bf16 on CPU too
        assert (x @ x).dtype is torch.bfloat16
    with dev.autocast(torch.device("cpu"), "fp32"):
        assert (x @ x).dtype is torch.float32


def test_attention_is_sdpa_on_cpu_even_with_flash_installed(flash_installed):
    assert dev.attention_implementation("cpu") == "sdpa"
    assert dev.attention_implementation(torch.device("cpu")) == "sdpa"


def test_attention_is_flash_on_cuda_when_flash_attn_is_installed(flash_installed):
    assert dev.attention_implementation("cuda") == "flash_attention_2"
    assert dev.attention_implementation(torch.device("cuda", 0)) == "flash_attention_2"


def test_attention_is_sdpa_on_cuda_without_flash_attn(flash_missing):
    assert dev.attention_implementation("cuda:0") == "sdpa"


def test_bench_and_training_use_the_same_rules():
    """No second copy: the fine-tuning loader and the pretraining trainer import these very functions."""
    from biobench.eval import encoder, finetune
    from biobench.training import loading, trainer

    assert encoder.attention_implementation is dev.attention_implementation is trainer.attention_implementation
    assert encoder.default_dtype is dev.default_dtype
    assert finetune.autocast is dev.autocast is trainer.autocast
    assert not hasattr(loading, "default_attention")


# ---------------------------------------------------------------- MFU
CONFIG = SimpleNamespace(num_hidden_layers=4, hidden_size=256, global_attn_every_n_layers=2, local_attention=128)


def test_mfu_on_a_hand_computed_value():
    # layers 0 and 2 global: 12 x 1024 x 256 = 3,145,728 each; layers 1 and 3 local: 12 x 128 x 256 = 393,216
    # each; attention 7,077,888 + 6 x 1e8 parameters = 607,077,888 FLOPs per token; x 1e5 tokens/s / 1e15 peak.
    assert flops.attention_flops_per_token(CONFIG, 1024) == 7_077_888
    assert flops.flops_per_token(100_000_000, CONFIG, 1024) == 607_077_888
    assert flops.mfu(100_000_000, CONFIG, 1024, 1e5, 1e15) == pytest.approx(0.0607077888)
    # causal (CLM): the attention half a flash kernel skips is not counted
    assert flops.mfu(100_000_000, CONFIG, 1024, 1e5, 1e15, causal=True) == pytest.approx(0.0603538944)
    # local windows longer than the sequence count the sequence
    assert flops.attention_flops_per_token(CONFIG, 64) == 4 * 12 * 64 * 256


def test_mfu_of_a_config_without_local_layers_counts_every_layer_as_global():
    dense = SimpleNamespace(num_hidden_layers=2, hidden_size=8)
    assert flops.attention_flops_per_token(dense, 10) == flops.dense_attention_flops_per_token(dense, 10) == 1920


def test_trainer_logs_no_mfu_on_cpu():
    from biobench.training.trainer import _mfu

    model = torch.nn.Linear(4, 4)
    model.config = CONFIG
    assert flops.table_peak_flops("cpu") is None
    assert _mfu(model, 1e5, 1024, torch.device("cpu"), causal=False) is None


def test_trainer_mfu_uses_the_shared_formula_with_the_table_peak(monkeypatch):
    from biobench.training.trainer import _mfu

    monkeypatch.setattr(torch.cuda, "get_device_name", lambda device=None: "NVIDIA H100 80GB HBM3")
    model = torch.nn.Linear(10, 10)  # 110 parameters
    model.config = CONFIG
    assert flops.table_peak_flops("cuda:0") == 989e12
    expected = (6 * 110 + 7_077_888 / 2) * 1e5 / 989e12
    assert _mfu(model, 1e5, 1024, torch.device("cuda", 0), causal=True) == pytest.approx(expected)
