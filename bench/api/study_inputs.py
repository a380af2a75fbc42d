"""The inputs a study reads that no step of it writes — corpora, token stores and the stores of mix files, local
model folders, each task's data, the analyses' text folders — checked before anything starts (`study run`, its
`--dry-run`, `study plan`), all at once: a clone without them got 11 pretrainings that each failed after 20 s
(issue 60 item 2). What a step writes (run:..., analysis:..., a generated corpus) is not an input.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.analysis.options import ANALYSES
from biobench.api.study import Study, parse_ref
from biobench.errors import ConfigError, DataError
from biobench.eval.grid import grid_specs
from biobench.tasks.fetch import task_status
from biobench.tasks.loading import resolve_data_dir
from biobench.tasks.registry import TaskCatalogue
from biobench.training import corpus as corpus_files
from biobench.training import mixture, token_store


@dataclass(frozen=True)
class MissingInput:
    what: str  # "corpus ../corpora/fr-mix", "task data diamed", ...
    needed_by: tuple[str, ...]  # step ids
    fix: str  # the command (or the instruction) that provides it


def _is_local_path(value: str) -> bool:
    """A model or folder written as a path (never a hub id, an alias or a preset)."""
    return value.startswith(("/", "./", "../", "~")) or Path(value).is_absolute()


def _produced(study: Study, path: Path) -> bool:
    """A path inside the study folder is written by a step (a checkpoint, an analysis, a generated corpus)."""
    try:
        Path(path).resolve().relative_to(study.out.resolve())
        return True
    except ValueError:
        return False


def missing_inputs(study: Study) -> list[MissingInput]:
    """Every input of the study that is not there, each once with the steps that read it and its fix."""
    found: dict[str, tuple[list[str], str]] = {}

    def missing(what: str, step: str, fix: str) -> None:
        steps, _ = found.setdefault(what, ([], fix))
        if step not in steps:
            steps.append(step)

    def model_input(model: str, step: str) -> None:
        folder = Path(model).expanduser()
        folder = folder if folder.is_absolute() else study.path.parent / folder
        if parse_ref(model, "") is None and _is_local_path(model) and not _produced(study, folder) \
                and not folder.is_dir():
            missing(f"model folder {model}", step, "a model folder (config.json, weights, tokenizer) at that path, "
                    "or a hub id in its place")

    def task_data(task: str, data_dir: Any, step: str, task_files: Any = ()) -> None:
        try:
            spec = TaskCatalogue.build(task_files or ()).get(task)
        except (ConfigError, DataError, KeyError):
            return  # an unknown task id or a broken task file: the step's own check says so
        data(spec, data_dir, step)

    def data(spec: Any, data_dir: Any, step: str) -> None:
        folder = resolve_data_dir(data_dir)
        status = task_status(spec, folder.resolve() if folder else None, checksums=False)
        if status.state in ("missing", "hub, offline"):
            missing(f"task data {spec.id} ({status.detail})", step, status.fix)

    for name, settings in study.pretrain.items():
        step_id = f"pretrain/{name}"
        model_input(str(settings["model"]), step_id)
        source = str(settings["corpus"])
        if _produced(study, Path(source)):
            continue  # a generated corpus, written by `study run`
        if mixture.is_mix_file(source):
            try:
                mix = mixture.read_mix(source)
            except ConfigError as err:
                missing(f"a valid mix file {source}", step_id, str(err))
                continue
            for part in mix.sources:
                if not token_store.is_store(part.store):
                    missing(f"token store {part.store} (mix {source})", step_id,
                            f"biobench corpus build {part.build_from or 'TEXT_FILES_OR_FOLDERS'} --tokenizer "
                            f"{settings['model'] if parse_ref(settings['model'], '') is None else 'MODEL'} "
                            f"--out {part.store}")
        elif not corpus_files.is_local(source):
            try:
                corpus_files.check_source(source)
            except DataError:
                missing(f"corpus {source}", step_id, "a folder of .txt/.jsonl(.gz) text at that path, or its token "
                        f"store: biobench corpus build TEXT_FILES_OR_FOLDERS --tokenizer {settings['model']} "
                        f"--out {source}")
    grids = iter(study.grids)
    for step in study.steps:
        if step.kind == "eval":
            grid = next(grids)
            model_input(grid.models[0].model, step.id)
            try:
                specs = grid_specs(grid)
            except (ConfigError, DataError):
                continue
            for spec in specs:
                data(spec, grid.data_dir, step.id)
        elif step.kind == "analysis" and step.analysis in ANALYSES:
            values = _option_values(step.argv, step.analysis)
            data_dir = values["data_dir"][0] if values.get("data_dir") else None
            for option in ANALYSES[step.analysis].options:
                for value in values.get(option.key, []):
                    if option.role == "model":
                        model_input(value, step.id)
                    elif option.role == "path" and not _produced(study, Path(value)) and not Path(value).exists():
                        missing(f"{option.key} {value}", step.id, "the folder or file at that path")
                    elif option.role == "texts" and not Path(value).exists():
                        task_data(value, data_dir, step.id)
            if step.analysis == "probe":
                task_data(values["task"][0], data_dir, step.id, values.get("task_file"))
    return [MissingInput(what, tuple(steps), fix) for what, (steps, fix) in found.items()]


def _option_values(argv: tuple[str, ...], kind: str) -> dict[str, list[str]]:
    """An analysis step's command line read back by its declaration: option key -> its words."""
    flags = {o.flag: o.key for o in ANALYSES[kind].options}
    values: dict[str, list[str]] = {}
    key = None
    for word in argv:
        if word in flags:
            key = flags[word]
            values.setdefault(key, [])
        elif key is not None:
            values[key].append(word)
    return values


def check_inputs(study: Study, retry: str) -> None:
    """ConfigError listing every missing input, its fix and the steps that need it; nothing has started."""
    gaps = missing_inputs(study)
    if not gaps:
        return
    lines = [f"{study.path}: {len(gaps)} input(s) missing, so nothing was started:"]
    for gap in gaps:
        steps = ", ".join(gap.needed_by[:4]) + (f" and {len(gap.needed_by) - 4} more" if len(gap.needed_by) > 4 else "")
        lines.append(f"  - {gap.what} (for {steps})\n      fix: {gap.fix}")
    lines.append(f"then: {retry}")
    raise ConfigError("\n".join(lines))
