"""biobench's Python API (docs/API.md): `evaluate`, `load_results`, `compare`, `list_tasks`, `pretrain`,
`contamination`, `study`, `Results` and the errors, defined in biobench.api.front.

The package itself imports nothing: a command that needs one module of it (`corpus` needs biobench.api.corpus)
loads that module alone, not the evaluation engine, the study planner and the contamination check the front door
imports (~1 s of every command's start before). The names are handed out on first use (PEP 562 `__getattr__`),
as `import biobench` does. `contamination` and `study` name both a function of the front door and a module of
this package: as attributes of the package they are the modules once imported; `biobench.contamination` and
`biobench.study` are always the functions (biobench/__init__.py reads them from biobench.api.front).
"""

from importlib import import_module
from typing import Any

PUBLIC = ("evaluate", "list_tasks", "load_results", "compare", "pretrain", "contamination", "study", "Results",
          "RefusedFile", "BiobenchError", "ConfigError", "DataError", "DiskFullError", "ModelLoadError", "ResultsError")


def __getattr__(name: str) -> Any:
    if name in PUBLIC:
        return getattr(import_module("biobench.api.front"), name)
    raise AttributeError(f"module 'biobench.api' has no attribute {name!r}")
