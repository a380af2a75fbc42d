"""Task layer: declarative task specs, data readers, one normalised example schema per task kind.

The package is also the API's `biobench.tasks(lang=..., data_dir=...)`: calling it lists the tasks
(biobench.api.tasks). Why a callable package: `biobench.tasks` is this package's import name, so a function of
that name on `biobench` would be replaced by the package as soon as anything imports biobench.tasks.registry.
The call is forwarded by name (import_module) because this layer sits below the API and never uses it.
"""

import sys
from importlib import import_module
from types import ModuleType
from typing import Any


class _CallablePackage(ModuleType):
    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """biobench.tasks(lang=None, data_dir=None, *, task_files=(), include_extra=False, counts=False)."""
        return import_module("biobench.api").tasks(*args, **kwargs)


sys.modules[__name__].__class__ = _CallablePackage
