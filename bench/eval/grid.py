"""Grid files: the runs of a study (models x tasks x seeds, with protocol overrides) as one reviewable TOML file.

Why: a paper's evaluation is dozens of `biobench eval` commands; written as one file it can be read, reviewed,
versioned and rerun as a whole (`biobench eval --config grid.toml`), and `--dry-run` lists every run and
whether its result already exists before hours are spent. A file holds one or more `[[grid]]` tables:

    results = "results"                  # optional defaults for every grid of the file
    data_dir = "data"

    [[grid]]
    name = "paper-fr"
    lang = "fr"                          # or tasks = ["diamed", "quaero-emea"]
    seeds = "42-50"                      # optional: default, each task's protocol seeds
    parallel = 4                         # optional: runs at once on the device, or "auto" (eval's --parallel)
    overrides = { epochs = 3 }           # optional protocol overrides (the names of eval's flags)
    models = [
      { model = "ModernCamemBERT-bio" },
      { model = "runs/mlm/final", name = "MLM baseline (Base, 10B)", overrides = { lr = 5e-5 } },
      { model = "runs/mlm/final", metadata = { license = "mit", training_data = ["pubmed-2024"] } },
    ]

Paths in the file (results, data_dir, local model folders, task files) are relative to the file. Each
(grid, model) pair runs exactly as `biobench eval --model M --name N --tasks ... --seeds ...` would, through
the same plan and runner, so a grid file and single commands share results and skip each other's finished runs.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from biobench.errors import BiobenchError, ConfigError, ModelLoadError, NoModelFolder, ResultsError
from biobench.eval.claims import read_claim
from biobench.eval.parallel import check_parallel
from biobench.protocols import OVERRIDES, SEEDS, check_override
from biobench.ranges import format_ranges, optional_seeds
from biobench.runtime.jsonfile import UnsafeJSONError, parse_toml, read_bytes
from biobench.runtime.leases import now_iso
from biobench.runtime.paths import check_text
from biobench.store import read_result
from biobench.store.metadata import check_metadata
from biobench.tasks.registry import TaskCatalogue, TaskSpec, builtin_catalogue, list_specs

MAX_GRID_BYTES = 4 * 2**20  # a grid file is a few KiB of TOML
# Runs (models x tasks x seeds, over its grids) one grid file may plan: the paper's study is 19 tasks x ~20 models
# x 5-9 seeds (~2,500). 2,000 grids x 256 seeds took 154 s to --dry-run and printed 520,001 lines; 2,000 models x
# 11 tasks x 256 seeds printed nothing in 180 s while memory grew (issue 51 §10). Refused before planning.
MAX_GRID_RUNS = 20_000

GRID_KEYS = {"name", "tasks", "lang", "seeds", "overrides", "models", "results", "data_dir", "task_files", "parallel"}
MODEL_KEYS = {"model", "name", "overrides", "metadata"}
TOP_KEYS = {"grid", "results", "data_dir", "task_files", "parallel"}
OVERRIDE_NAMES = {dest: kind for dest, kind, _ in OVERRIDES.values()}


@dataclass(frozen=True)
class GridModel:
    model: str
    name: str | None = None
    overrides: dict[str, Any] = field(default_factory=dict)
    # stated model metadata (params, context, license, ...; biobench.store.metadata): wins over the model card's
    metadata: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Grid:
    name: str
    models: list[GridModel]
    tasks: list[str] | None  # None: every paper task of `lang`
    lang: str | None
    # parsed when the file is read (bench/ranges.parse_seeds: --seeds' forms and bounds), so a bad range is refused
    # before anything is planned and every reader of a grid gets integers; None: each task's protocol seeds
    seeds: list[int] | None
    overrides: dict[str, Any]
    results: Path
    data_dir: Path | None
    task_files: list[Path]
    source: str  # "file.toml [[grid]] #n", for messages
    parallel: int | str | None = None  # runs at once (eval's --parallel, which wins over it); an execution detail


def _check_keys(table: dict[str, Any], allowed: set[str], where: str) -> None:
    unknown = sorted(set(table) - allowed)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; allowed: {', '.join(sorted(allowed))}")


def _overrides(value: Any, where: str) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise ConfigError(f"{where}: overrides must be a table, e.g. overrides = {{ epochs = 3 }}")
    out = {}
    for key, raw in value.items():
        dest = key.replace("-", "_")
        if dest not in OVERRIDE_NAMES:
            raise ConfigError(f"{where}: unknown override {key!r}; overridable: {', '.join(sorted(OVERRIDE_NAMES))}")
        try:
            out[dest] = check_override(dest, raw)  # the one table of ranges (protocols.OVERRIDE_RANGES)
        except ConfigError as err:
            raise ConfigError(f"{where}: override {key}: {err}") from None
        if out[dest] == "auto":
            raise ConfigError(f"{where}: batch_size = \"auto\" is how a run uses the device, not a protocol "
                              "setting: pass --batch-size auto on the command line")
    return out


def _path(base: Path, value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a path string, got {value!r}")
    path = Path(value).expanduser()
    return path if path.is_absolute() else base / path


def _model_text(base: Path, text: str) -> str:
    """A model as the file names it: a local folder relative to the file when it exists there, else as given
    (an alias or a hub id)."""
    local = base / text
    return str(local) if not Path(text).is_absolute() and local.is_dir() else text


def read_grid_file(path: str | Path) -> list[Grid]:
    """Every [[grid]] of a grid file, validated; ConfigError naming the file and the grid on bad input."""
    path = Path(path)
    try:
        raw = parse_toml(read_bytes(path, MAX_GRID_BYTES), path)
    except FileNotFoundError:
        raise ConfigError(f"grid file {path} does not exist") from None
    except UnsafeJSONError as err:  # a FIFO or /dev/zero given as --config, not TOML, nested 100k deep
        raise ConfigError(f"{path}: {err.reason}") from None
    except OSError as err:
        raise ConfigError(f"grid file {path}: unreadable ({err})") from None
    _check_keys(raw, TOP_KEYS, str(path))
    tables = raw.get("grid")
    if not isinstance(tables, list) or not tables:
        raise ConfigError(f"{path}: no [[grid]] table (a grid file holds one or more [[grid]] tables with models "
                          "and tasks; see biobench/grid.py or examples/grids/)")
    return grids_from_tables(tables, raw, path)


def select_grids(path: str | Path, names: Sequence[str] = (), catalogue: TaskCatalogue | None = None) -> list[Grid]:
    """The grids of a grid file (`eval --config`), only those named in `names` (`--grid`) when given; `catalogue`:
    the command line's, whose own tasks (--task-file) a `lang` grid runs too (counted against the cap)."""
    grids = read_grid_file(path)
    if catalogue is not None and catalogue.files:
        check_size(grids, Path(path), len(catalogue.files))
    if names:
        unknown = [g for g in names if g not in {grid.name for grid in grids}]
        if unknown:
            raise ConfigError(f"{path}: no grid named {', '.join(unknown)} (grids: "
                              f"{', '.join(g.name for g in grids)})")
        grids = [g for g in grids if g.name in names]
    return grids


def grids_from_tables(tables: list[Any], defaults: dict[str, Any], path: Path, table_name: str = "grid") -> list[Grid]:
    """Each table of `tables` (a grid file's [[grid]] tables, a study file's [[eval]] tables) as a validated Grid;
    `defaults`: the file's top-level results, data_dir, task_files and parallel; paths relative to `path`'s folder."""
    raw = defaults
    base = path.parent
    checked: list[tuple[dict[str, Any], str | None]] = []
    names: set[str] = set()
    for n, table in enumerate(tables, 1):
        where = f"{path} [[{table_name}]] #{n}"
        if not isinstance(table, dict):
            raise ConfigError(f"{where}: expected a table")
        _check_keys(table, GRID_KEYS, where)
        name = str(table.get("name") or f"grid-{n}")
        if name in names:
            raise ConfigError(f"{where}: grid name {name!r} is used twice in the file")
        names.add(name)
        where = f"{path} {table_name} {name!r}"
        tasks, lang = table.get("tasks"), table.get("lang")
        if (tasks is None) == (lang is None):
            raise ConfigError(f"{where}: give either tasks = [...] or lang = \"fr\" / \"en\"")
        if tasks is not None and (not isinstance(tasks, list) or not tasks or
                                  not all(isinstance(t, str) for t in tasks)):
            raise ConfigError(f"{where}: tasks must be a non-empty list of task ids")
        if lang is not None and lang not in ("fr", "en"):
            raise ConfigError(f"{where}: lang must be \"fr\" or \"en\", not {lang!r}")
        seeds = table.get("seeds")  # "42-50", "42,44", 42 or [42, 44]: one range text for the one parser
        if isinstance(seeds, list):
            seeds = ",".join(str(s) for s in seeds)
        models = table.get("models")
        if not isinstance(models, list) or not models:
            raise ConfigError(f"{where}: models must be a non-empty list, e.g. models = [{{ model = \"DrBERT\" }}]")
        parsed = []
        for i, entry in enumerate(models, 1):
            entry = {"model": entry} if isinstance(entry, str) else entry
            if not isinstance(entry, dict) or not isinstance(entry.get("model"), str):
                raise ConfigError(f"{where}: model #{i} needs model = \"ALIAS, ORG/NAME or FOLDER\"")
            _check_keys(entry, MODEL_KEYS, f"{where} model #{i}")
            if entry.get("name") is not None:  # a display name: no invisible character (issue 58 item 2)
                check_text(entry["name"], f"{where} model #{i} name")
            parsed.append(GridModel(_model_text(base, entry["model"]), entry.get("name"),
                                    _overrides(entry.get("overrides"), f"{where} model #{i}"),
                                    check_metadata(entry.get("metadata"), f"{where} model #{i}")))
        results = table.get("results", raw.get("results", "results"))
        data_dir = table.get("data_dir", raw.get("data_dir"))
        task_files = table.get("task_files", raw.get("task_files", []))
        parallel = table.get("parallel", raw.get("parallel"))
        checked.append((dict(
            name=name, models=parsed, tasks=list(tasks) if tasks else None, lang=lang,
            overrides=_overrides(table.get("overrides"), where), results=_path(base, results, where),
            data_dir=_path(base, data_dir, where) if data_dir else None,
            task_files=[_path(base, f, where) for f in task_files], source=where,
            parallel=None if parallel is None else check_parallel(parallel, where)), None if seeds is None else str(seeds)))
    # the seeds of every grid once the file's other keys are checked (the order in which a file's errors are met)
    grids = [Grid(**fields, seeds=optional_seeds(text, f"{fields['source']} seeds")) for fields, text in checked]
    check_size(grids, path)
    return grids


def check_size(grids: list[Grid], path: Path, extra_task_files: int = 0) -> None:
    """ConfigError in one line when `grids` plan more than MAX_GRID_RUNS runs (planned_runs)."""
    runs = planned_runs(grids, extra_task_files)
    if runs > MAX_GRID_RUNS:
        raise ConfigError(f"{path}: plans {runs:,} runs (models x tasks x seeds over its {len(grids):,} grid(s)), over "
                          f"the limit of {MAX_GRID_RUNS:,} per grid file; split it into several files")


def planned_runs(grids: list[Grid], extra_task_files: int = 0) -> int:
    """An upper bound of the runs `grids` plan, counted from the file alone (no task data read): a grid's models x
    its tasks (for `lang`: all of its language's paper tasks plus one per task file, the grid's and
    `extra_task_files` given on the command line, whatever their language: a file is not read to count it) x its
    seeds (its protocol's, 9 at most, when it names none). A `lang` grid with 500 task files counted 19,800 runs
    and its dry run then took minutes (issue 58 item 5)."""

    default_seeds = max(len(s) for s in SEEDS.values())
    total = 0
    for grid in grids:
        tasks = len(grid.tasks) if grid.tasks else (len(list_specs(grid.lang)) + len(grid.task_files)
                                                    + extra_task_files)
        seeds = len(grid.seeds) if grid.seeds else default_seeds
        total += len(grid.models) * tasks * seeds
    return total


UNRESOLVED = "revision unresolved"  # the model's weights cannot be read here: whether a run is done is unknown


@dataclass
class RunStatus:
    grid: str
    model: str  # display name
    task: str
    seed: int | None
    status: str  # done | to run | claimed | conflict | no data | cannot plan | revision unresolved
    detail: str = ""
    holder: str = ""  # a claimed run: who holds it (host, pid, SLURM job ids)
    expires: str = ""  # a claimed run: when its claim expires unless renewed (UTC)


def run_status(path: Path, key: dict[str, Any]) -> tuple[str, str]:
    """Whether a planned run is finished: its result exists with the same key."""
    if not path.exists():
        return "to run", ""
    try:
        same = read_result(path).key == key
    except ResultsError as err:
        return "conflict", str(err)
    return ("done", "") if same else ("conflict", f"{path} holds another run's result (--overwrite replaces it)")


def cannot_plan(grid: str, model: str, err: Exception) -> RunStatus:
    """The one dry-run row of a model whose runs cannot be planned (a bad selection, a broken task file, a model
    folder that is not there): why, in place of its runs."""
    return RunStatus(grid, model, "*", None, "cannot plan", str(err))


def plan_rows(grid: str, model: str, plan_model, unresolved=None) -> list[RunStatus]:
    """The dry-run rows of one model (`eval --model` and each model of a grid file)."""
    try:
        plan = plan_model()
    except NoModelFolder as err:  # a path that is not there: no hub can resolve it, so no "revision unresolved"
        return [cannot_plan(grid, model, err)]
    except ModelLoadError as err:
        if unresolved is None:
            return [cannot_plan(grid, model, err)]
        return [RunStatus(grid, model, task, None, "no data", missing) if missing else
                RunStatus(grid, model, task, seed, UNRESOLVED, str(err)) for task, seed, missing in unresolved()]
    except BiobenchError as err:
        return [cannot_plan(grid, model, err)]

    rows = []
    for run in plan.grid:
        status, detail = run_status(run.path, run.key)
        row = RunStatus(grid, plan.name, run.task.id, run.seed, status, detail)
        if status == "to run" and (claim := read_claim(run.path)) is not None:
            if claim.held and claim.holder is not None:
                row.status, row.holder, row.expires = "claimed", claim.holder.describe(), now_iso(claim.expires)
            row.detail = claim.note() or ""  # a claim's problem, a dead holder, a run too long for its job
        rows.append(row)
    for task, reason in plan.unavailable.items():
        rows.append(RunStatus(grid, plan.name, task, None, "no data", reason))
    return rows


def grid_catalogue(grid: Grid, catalogue: TaskCatalogue | None = None) -> TaskCatalogue:
    """`catalogue` (the command line's; default the built-ins) with the grid's own task files: build it once per
    grid and pass it to what plans the grid's models (grid_specs does not read a file it already holds). The
    grid's tasks are listed first, then the command line's (the order a `lang` grid has always run them in)."""
    return (catalogue or builtin_catalogue()).extended(grid.task_files, first=True)


def grid_specs(grid: Grid, catalogue: TaskCatalogue | None = None) -> list[TaskSpec]:
    """The task specs of a grid: its task ids, or every paper task of its language (with its and the catalogue's
    own tasks), looked up in `catalogue` extended by the grid's task files (grid_catalogue)."""
    tasks = grid_catalogue(grid, catalogue)
    return [tasks.get(t) for t in grid.tasks] if grid.tasks else tasks.tasks(lang=grid.lang)


def _toml_value(value: Any) -> str:
    """A TOML value for the types a grid holds (JSON's string escapes are TOML's basic-string escapes)."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, str | Path):
        return json.dumps(str(value))
    if isinstance(value, list):
        return "[" + ", ".join(_toml_value(v) for v in value) + "]"
    if isinstance(value, dict):
        return "{ " + ", ".join(f"{json.dumps(str(k))} = {_toml_value(v)}" for k, v in value.items()) + " }"
    raise TypeError(f"no TOML form for {type(value).__name__}")


def resolved_grid_file(grids: list[Grid], overrides: dict[str, Any] | None = None,
                       task_files: list[Path] | tuple = (), data_dir: str | Path | None = None) -> str:
    """The grids as one self-contained grid file: every path absolute (it is read from another folder, e.g. a
    SLURM job's log folder), the command line's protocol overrides, task files and data folder merged in — what
    `eval --launcher slurm` decides at submit time, so every array element runs exactly this."""
    lines = ["# written by biobench eval --launcher: the grid as resolved at submit time (paths absolute)", ""]
    for grid in grids:
        table: dict[str, Any] = {"name": grid.name}
        if grid.tasks:
            table["tasks"] = grid.tasks
        else:
            table["lang"] = grid.lang
        if grid.seeds:
            table["seeds"] = format_ranges(grid.seeds)  # "42-50" as such a file is written by hand
        merged = {**grid.overrides, **(overrides or {})}
        if merged:
            table["overrides"] = merged
        table["results"] = str(Path(grid.results).resolve())
        folder = grid.data_dir or data_dir
        if folder:
            table["data_dir"] = str(Path(folder).resolve())
        files = [str(Path(f).resolve()) for f in [*grid.task_files, *task_files]]
        if files:
            table["task_files"] = files
        if grid.parallel is not None:
            table["parallel"] = grid.parallel
        lines.append("[[grid]]")
        lines += [f"{key} = {_toml_value(value)}" for key, value in table.items()]
        models = []
        for entry in grid.models:
            model = str(Path(entry.model).resolve()) if Path(entry.model).is_dir() else entry.model
            item = {"model": model, **({"name": entry.name} if entry.name else {}),
                    **({"overrides": entry.overrides} if entry.overrides else {}),
                    **({"metadata": entry.metadata} if entry.metadata else {})}
            models.append(_toml_value(item))
        lines.append("models = [\n  " + ",\n  ".join(models) + ",\n]")
        lines.append("")
    return "\n".join(lines)
