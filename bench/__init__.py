"""biobench: benchmark, CLM-detour pretraining recipe and leaderboard for biomedical text encoders.

The Python API (docs/API.md), the same functions the `biobench` commands call:

    biobench.list_tasks(lang="fr", data_dir="data/")         the tasks and where their data is
    biobench.evaluate(model, tasks=[...], seeds=[42])        fine-tune and score -> Results
    biobench.load_results("results/")                        a results folder or hf://datasets/ORG/NAME -> Results
    biobench.compare("model A", "model B")                   paired bootstrap A - B per task
    biobench.pretrain(model, corpus, "2M", "runs/x")         continued pretraining (the CLM detour)
    biobench.contamination(corpus, lang="fr")                shared 13-grams between a corpus and the tasks
    biobench.study("examples/studies/tiny.toml")             a study file: .plan() .run() .status() .report()
    Results.summary() / Results.to_pandas()                  pandas tables (per model and task / per run)
    BiobenchError                                            every error a user can fix, with one-line messages

`import biobench` is light: the API loads on first use (PEP 562 `__getattr__`), and torch only when a model is
trained. `biobench.tasks` is the task package (biobench.tasks.registry, ...).
"""

from importlib import import_module
from typing import Any

from biobench.errors import BiobenchError

__version__ = "0.1.0"
API = ("evaluate", "list_tasks", "load_results", "compare", "pretrain", "contamination", "study", "Results", "ConfigError", "DataError",
       "DiskFullError", "ModelLoadError", "ResultsError")
__all__ = ["BiobenchError", "__version__", "tasks", *API]


def __getattr__(name: str) -> Any:
    """The API on first use. Why through import_module: biobench.api imports the evaluation engine, and every
    layer imports `biobench.__version__` from here, so a module-level import would load all of it at `import
    biobench` (and make this package the top of every import circle)."""
    if name in API:
        return getattr(import_module("biobench.api.front"), name)
    if name == "tasks":  # the task package (biobench.tasks), before anything imported it
        return import_module("biobench.tasks")
    raise AttributeError(f"module 'biobench' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
