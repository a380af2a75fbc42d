"""`--compile` for pretraining and fine-tuning: torch.compile of the encoder in place, or eager with one
warning line where the compiler cannot run.

In place (`Module.compile`), so parameter and state-dict names stay those of the model (no `_orig_mod.`
prefix): checkpoints, freezing, optimiser groups and best-dev state copies do not notice. torch.compile is
lazy and would only fail at the first forward, deep in a run, with a long traceback when inductor lacks its
toolchain (a C++ compiler on CPU, Triton on CUDA); that is checked up front instead, cheaply, without
compiling anything. Random ops (dropout) use torch's own generator, so a compiled run draws what an eager one
with the same seed draws.
"""

from __future__ import annotations

import functools
import sys

from torch import nn

_warned: set[str] = set()  # device types already warned about: a 9-seed grid says it once, not per run


@functools.cache
def compile_problem(device_type: str) -> str | None:
    """Why torch.compile's default backend cannot run on this device type here, or None when it can."""
    import torch

    try:
        import torch._dynamo

        if not torch._dynamo.is_dynamo_supported():
            return f"torch.compile does not support Python {sys.version_info.major}.{sys.version_info.minor} in torch {torch.__version__}"
        if device_type == "cuda":
            from torch.utils._triton import has_triton

            return None if has_triton() else "Triton is not installed (pip install triton)"
        from torch._inductor import config
        from torch._inductor.cpp_builder import cpp_compiler_search

        search = tuple(config.cpp.cxx) if isinstance(config.cpp.cxx, list | tuple) else (config.cpp.cxx,)
        cpp_compiler_search(search)
    except Exception as err:  # InvalidCxxCompiler, a missing private module in another torch version, ...
        reason = str(err).strip().splitlines()[0] if str(err).strip() else type(err).__name__
        return f"its C++ toolchain is missing ({reason[:160]})" if device_type != "cuda" else reason[:160]
    return None


def compile_in_place(module: nn.Module, device_type: str, dynamic: bool) -> bool:
    """torch.compile `module` in place (dynamic shapes when input lengths vary); returns whether it did.
    Where the compiler cannot run, says so in one line on stderr (once per process) and leaves it eager."""
    problem = compile_problem(device_type)
    if problem is not None:
        if device_type not in _warned:
            _warned.add(device_type)
            print(f"warning: --compile: torch.compile cannot run on {device_type} here: {problem}; running eager",
                  file=sys.stderr, flush=True)
        return False
    from torch._inductor import config

    # Dropout under inductor otherwise draws from inductor's own RNG, not torch's: the same seed would give
    # other masks, hence other scores than eager (measured: GAD, MiniLM, test macro-F1 0.349 vs 0.415).
    # Eager's RNG keeps --compile an execution detail (same seed, same run), for a little speed.
    config.fallback_random = True
    module.compile(dynamic=dynamic)
    return True
