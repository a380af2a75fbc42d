"""Where a model runs and in which number format and attention kernel: the device, dtype and attention-backend
rules, in one place so that fine-tuning (`biobench eval`, bench/), pretraining (training/), the analyses and
the performance scripts make the same choice on the same machine.

It lives in the runtime layer (bench/runtime/), which imports no other project package, so that training/
(which must not import bench/) and bench/ can both use it. torch is imported
inside the functions, so importing this module keeps `biobench --help` fast.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
from typing import Any

from biobench.errors import ConfigError


def on_cuda(device: Any) -> bool:
    """True for "cuda", "cuda:1" or a torch.device of type cuda."""
    return str(device).startswith("cuda")


def default_device(local_rank: int | None = None) -> str:
    """"cuda" (or "cuda:<local_rank>" for a torchrun process) when CUDA is available, else "cpu"."""
    import torch

    if not torch.cuda.is_available():
        return "cpu"
    return "cuda" if local_rank is None else f"cuda:{local_rank}"


def check_device(name: str | None) -> None:
    """A --device value that names a device this machine has, or one ConfigError line (`toaster`, `cuda:99`,
    `cuda` without CUDA) before any model loads — instead of a torch traceback in the middle of a run."""
    import re


    if name in (None, "", "auto"):
        return
    match = re.fullmatch(r"(cpu|mps|cuda)(?::(\d{1,3}))?", str(name))
    if not match:
        raise ConfigError(f"--device {str(name)[:40]!r}: expected cpu, cuda, cuda:N, mps or auto")
    if match[1] == "cuda":
        import torch

        count = torch.cuda.device_count() if torch.cuda.is_available() else 0
        index = int(match[2] or 0)
        if index >= count:
            raise ConfigError(f"--device {name}: this machine has {count} CUDA device(s)"
                              + (f" (cuda:0 to cuda:{count - 1})" if count else "; use --device cpu"))


def resolve_device(name: str | None) -> str:
    """A --device value: an explicit device is kept, None or "auto" means `default_device()`."""
    return default_device() if name in (None, "", "auto") else str(name)


def default_dtype(device: Any):
    """Weights' dtype when nobody asked: bf16 on CUDA (what its tensor cores run fast), float32 on CPU."""
    import torch

    return torch.bfloat16 if on_cuda(device) else torch.float32


def autocast(device: Any, precision: str = "auto"):
    """The mixed-precision context of a training step: bf16 autocast when `precision` is "bf16", or "auto" on
    CUDA (`default_dtype`); otherwise none (full float32)."""
    import torch

    dtype = torch.bfloat16 if precision == "bf16" else default_dtype(device) if precision == "auto" else None
    if dtype is not torch.bfloat16:
        return contextlib.nullcontext()
    return torch.autocast(torch.device(str(device)).type, dtype=torch.bfloat16)


def attention_implementation(device: Any) -> str:
    """flash-attention 2 on CUDA when the flash_attn package is installed (unpadded batches, is_causal path),
    else PyTorch's sdpa. A model class without sdpa support makes transformers raise; callers that load
    arbitrary hub models fall back to transformers' own default (eager) then (`biobench.eval.encoder.load_encoder`)."""
    if on_cuda(device) and importlib.util.find_spec("flash_attn") is not None:
        return "flash_attention_2"
    return "sdpa"


def cpu_threads(requested: int | None = None, *, cores: int | None = None, load: float | None = None) -> int:
    """The CPU threads torch gets, one rule for `pretrain`, `eval`, `biobench.evaluate` and the worker's eval: the
    number asked for (--threads), else the cores not already busy by the 1-minute load average (at least 1).
    Why: on a shared machine torch's default (every core) oversubscribes it and its OpenMP threads spin: the
    README's Python example at a load of 11-14 on 2 cores did 2 of 150 steps in 137 s with the default, 22 of 150
    in 62 s with one thread (issue 62 item 1). `cores` and `load` default to this machine's."""
    if requested:
        return requested
    cores = cores or os.cpu_count() or 1
    if load is None:
        try:
            load = os.getloadavg()[0]
        except OSError:  # no load average on this system: nothing is known to be busy
            load = 0.0
    return max(1, min(cores, cores - round(load)))


def use_cpu_threads(requested: int | None, device: Any) -> int:
    """Apply `cpu_threads` to torch when the work runs on the CPU (on a GPU the CPU threads barely matter and
    torch's default is kept unless --threads asks); return the threads torch uses now, what the start line says."""
    import torch

    if requested or resolve_device(device).startswith("cpu"):
        torch.set_num_threads(cpu_threads(requested))
    return torch.get_num_threads()
