"""The contamination check from the API and the command line: load the tasks, stream the corpus once through
biobench.analysis.contamination, and (for `eval --check-contamination`) record the result in each run."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from biobench.analysis.contamination import check
from biobench.api.evaluation import select_specs
from biobench.errors import ConfigError, DataError
from biobench.standings.entries import CONTAMINATION_THRESHOLD
from biobench.tasks.loading import load_task, resolve_data_dir
from biobench.tasks.registry import TaskCatalogue
from biobench.training.corpus import check_source, iter_documents

if TYPE_CHECKING:
    from biobench.eval.runner import GridPlan



def task_texts(specs: Sequence[Any], data_dir: str | Path | None, lenient: bool
               ) -> tuple[dict[tuple[str, str], list[tuple[str, str]]], dict[str, str]]:
    """(task, split) -> [(example id, text)] of every loadable task, and why the others could not be loaded."""
    folder = resolve_data_dir(data_dir)
    texts: dict[tuple[str, str], list[tuple[str, str]]] = {}
    unavailable: dict[str, str] = {}
    for spec in specs:
        try:
            data = load_task(spec, folder)
        except DataError as err:
            if not lenient:
                raise
            unavailable[spec.id] = str(err)
            continue
        for split, examples in data.splits.items():
            texts[(spec.id, split)] = [(str(ex.id), ex.text) for ex in examples]
    return texts, unavailable


def check_tasks(corpus: str | Path | Sequence[str | Path], tasks: str | Sequence[str] | None = None, *,
                lang: Literal["fr", "en"] | None = None, data_dir: str | Path | None = None, n: int = 13,
                catalogue: TaskCatalogue | None = None, text_field: str = "text",
                progress: bool = False) -> dict[str, Any]:
    """The contamination report of `corpus` (one source or several, each as `pretrain` reads it) against the
    tasks (ids, or a language's; default all the paper's tasks with data), looked up in `catalogue` (default the
    built-ins)."""
    specs, lenient = select_specs(tasks, lang, catalogue)
    texts, unavailable = task_texts(specs, data_dir, lenient)
    if not texts:
        raise DataError("no task could be loaded for the contamination check ("
                        + "; ".join(f"{t}: {why}" for t, why in unavailable.items()) + ")")
    sources = [str(corpus)] if isinstance(corpus, str | Path) else [str(c) for c in corpus]
    report = check(texts, _documents(sources, text_field), n=n, progress=_progress if progress else None)
    report["corpus"]["sources"] = [_public(s) for s in sources]
    report["unavailable"] = unavailable
    return report


def _documents(sources: Sequence[str], text_field: str):
    for source in sources:
        check_source(source)
    for source in sources:
        yield from iter_documents(source, text_field)


def _public(source: str) -> str:
    """A corpus as a record shows it: a hub id as it is, a local path by its last two parts (no server paths)."""
    path = Path(source)
    return source if not path.exists() else "/".join(path.resolve().parts[-2:])


def _progress(scan: Any) -> None:
    print(f"  {scan.documents:,} documents, {scan.words:,} words, {scan.chars / max(scan.seconds, 1e-9) / 1e6:.1f} "
          "M chars/s", file=sys.stderr)


def corpus_of(lineage: dict[str, Any] | None) -> list[str]:
    """The corpus files a `biobench pretrain` checkpoint recorded (its biobench_pretrain.json): the files with
    their hashes when recorded, else the corpus it names. ConfigError when the model is not such a checkpoint
    or its corpus is not here any more."""
    if not lineage or not lineage.get("corpus"):
        raise ConfigError("--check-contamination needs a `biobench pretrain` checkpoint (its biobench_pretrain.json "
                          "names the corpus); for another model run `biobench contamination --corpus ...`")
    record = lineage.get("corpus_record")
    record = record if isinstance(record, dict) else {}
    files = [str(f["path"]) for f in record.get("files") or [] if isinstance(f, dict) and f.get("path")]
    sources = files or [str(lineage["corpus"])]
    missing = [s for s in sources if not Path(s).exists() and (files or Path(s).is_absolute())]
    if missing:
        raise ConfigError(f"the checkpoint's corpus is not here ({', '.join(missing[:3])}); run `biobench "
                          "contamination --corpus COPY` on a copy of it")
    return sources


def attach_to_plan(plan: GridPlan, n: int = 13) -> dict[str, Any]:
    """Check the plan's tasks against the checkpoint's recorded corpus and put each task's result in the plan,
    so every run of the task records it (`contamination` in the result file)."""
    lineage = plan.model.info.lineage or {}
    sources = corpus_of(lineage)
    texts = {(task, split): [(str(ex.id), ex.text) for ex in examples]
             for task, data in plan.data.items() for split, examples in data.splits.items()}
    record = lineage.get("corpus_record")
    record = record if isinstance(record, dict) else {}
    report = check(texts, _documents(sources, str(record.get("text_field") or "text")), n=n)
    for task, splits in report["tasks"].items():
        plan.annotations.setdefault(task, {})["contamination"] = {
            "n": n, "corpus": [_public(s) for s in sources], "threshold": _threshold(),
            "splits": {split: {k: v for k, v in found.items() if k != "ids"} for split, found in splits.items()}}
    return report


def _threshold() -> float:
    """The board's contamination threshold, imported when used: this module loads with `biobench.api` (see its
    __init__), which must stay light."""
    return CONTAMINATION_THRESHOLD
