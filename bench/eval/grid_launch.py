"""`biobench eval --config GRID.toml --launcher slurm`: a grid file's runs shared by one SLURM array.

At submit time the grid is resolved (paths absolute, the command line's overrides, task files and data folder
merged in, each model's revision pinned in launch.json) and written to the log folder; every array element then
runs `biobench eval --config <that grid>`, claiming the next unfinished run (eval.claims), so the elements share
the grid without a shard each. Submitting goes through runtime.launch (submitit); this module decides what is
submitted. The command (commands/eval.py) parses the options and prints where to look.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.eval.grid import Grid, resolved_grid_file, select_grids
from biobench.models import identify_model
from biobench.runtime import launch
from biobench.runtime.files import empty_folders_removed_on_error
from biobench.runtime.jsonfile import UnsafeJSONError, read_json
from biobench.tasks.registry import TaskCatalogue

# what a worker of `--launcher slurm` is given on its command line (the rest is in the resolved grid), by the
# option's argparse dest: a value passed as `FLAG VALUE` unless unset (None, or `--report-to none`)...
PASSED_FLAGS = {"threads": "--threads", "device": "--device", "claim_seconds": "--claim-seconds",
                "parallel": "--parallel", "report_to": "--report-to", "max_model_gb": "--max-model-gb"}
# ... and switches passed when set
PASSED_SWITCHES = {"compile": "--compile", "trust_remote_code": "--trust-remote-code", "overwrite": "--overwrite",
                   "no_claims": "--no-claims"}
DEFAULT_WORKERS = 8


@dataclass(frozen=True)
class ArraySettings:
    """The launcher options of `eval` (runtime.launch.add_launcher_arguments), as given on the command line."""

    workers: int | None
    partition: str | None
    account: str | None
    gpus_per_task: int
    cpus_per_task: int | None
    time: str
    array_parallelism: int | None
    slurm_arg: list[str]
    log_dir: str | None

    @classmethod
    def from_options(cls, options: Mapping[str, Any]) -> ArraySettings:
        return cls(**{f.name: options[f.name] for f in fields(cls)})


@dataclass(frozen=True)
class LaunchedGrid:
    """What was submitted: the SLURM job id, how many workers, the log folder and the resolved grid file there."""

    job: str
    workers: int
    log_dir: Path
    grid_file: Path
    models: int
    grids: int


def worker_argv(grid_file: Path, options: Mapping[str, Any]) -> list[str]:
    """The `biobench` words each array element runs: eval of the resolved grid, with the execution options of
    `options` (eval's parsed options by argparse dest) that its runs need too."""
    argv = ["eval", "--config", str(grid_file), "--no-progress"]
    argv += [part for dest, flag in PASSED_FLAGS.items() if options.get(dest) not in (None, "none")
             for part in (flag, str(options.get(dest)))]
    argv += [flag for dest, flag in PASSED_SWITCHES.items() if options.get(dest, False)]
    if str(options.get("batch_size")).strip().lower() == "auto":  # micro-batches: an execution choice, passed on
        argv += ["--batch-size", "auto"]
    return argv


def check_not_queued(config: Path, grid_names: Sequence[str], log_dir: Path) -> None:
    """A rerun of the same launch while its array is still queued or running submits nothing (issue 57 §4: a
    rerun submitted it again): the launch records (launch.json) in `log_dir` and beside it (the default log
    folders, one per submission, share a parent) whose grid file and grids are these and whose job squeue says
    is pending or running. A finished array is no obstacle: claims skip the runs it did."""
    for record_path in [log_dir / "launch.json", *sorted(log_dir.parent.glob("*/launch.json"))[-200:]]:
        try:
            record = read_json(record_path, 1 << 20)
        except (OSError, UnsafeJSONError, ValueError):
            continue
        if not isinstance(record, dict) or record.get("grid_source") != str(config) \
                or record.get("grids", list(grid_names)) != list(grid_names):
            continue
        job = str(record.get("job_id", ""))
        if launch.is_live(job):
            raise ConfigError(f"{config} is already submitted as SLURM array {job} ({launch.job_state(job)}; "
                              f"logs {record_path.parent}), whose workers claim its runs: nothing submitted again "
                              f"(`scancel {job}` first to replace it)")


def launch_grid(config: str, grid_names: Sequence[str], settings: ArraySettings, options: Mapping[str, Any], *,
                overrides: dict[str, Any], catalogue: TaskCatalogue | None = None,
                data_dir: str | Path | None = None, shard: str | None = None) -> LaunchedGrid:
    """Check the launch (every refusal before anything is written or submitted), resolve the grids of `config`
    (those named by `grid_names`, default all), pin each model's revision, write the resolved grid to the log
    folder and submit the array. A submit that fails leaves no resolved grid behind. `catalogue`: the command
    line's tasks, whose task files the resolved grid names so that every element builds the same catalogue."""
    if shard:
        raise ConfigError("--launcher slurm shares the grid by claims; drop --shard")
    for what, value in (("--config", config), ("--account", settings.account), ("--partition", settings.partition),
                        ("--log-dir", settings.log_dir)):
        if value is not None:
            launch.check_text(value, what)
    workers = DEFAULT_WORKERS if settings.workers is None else settings.workers  # `--workers 0` is refused
    time_min, extra = launch.minutes(settings.time), launch.slurm_args(settings.slurm_arg)
    launch.import_submitit()
    launch.check_slurm(settings.partition)
    launch.check_counts(workers, settings.gpus_per_task, settings.cpus_per_task, settings.array_parallelism)
    grids = select_grids(config, grid_names)
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    log_dir = Path(settings.log_dir or Path("biobench-slurm") / f"{Path(config).stem}-{stamp}").resolve()
    check_not_queued(Path(config).resolve(), grid_names, log_dir)
    # a refusal from here on (a model that does not resolve, sbatch's) leaves none of the empty folders made below
    with empty_folders_removed_on_error(log_dir, *(Path(grid.results) for grid in grids)):
        return _submit_grid(config, grid_names, grids, settings, options, overrides, catalogue, data_dir, workers,
                            time_min, extra, log_dir)


def _submit_grid(config: str, grid_names: Sequence[str], grids: list[Grid], settings: ArraySettings,
                 options: Mapping[str, Any], overrides: dict[str, Any], catalogue: TaskCatalogue | None,
                 data_dir: str | Path | None, workers: int, time_min: int, extra: dict[str, str],
                 log_dir: Path) -> LaunchedGrid:
    """launch_grid's writes and the submit, once every refusal that needs no folder has passed."""
    for grid in grids:
        launch.check_writable(Path(grid.results), f"results folder of grid {grid.name!r}")
    launch.check_writable(log_dir, "--log-dir")
    revisions = {}
    for grid in grids:  # pinned now: what the models are at submit time (also: each one resolves from here)
        for entry in grid.models:
            identity = identify_model(entry.model, grid.results, entry.name)
            revisions[f"{grid.name}/{identity.name}"] = identity.info.revision
    grid_file = log_dir / "grid.toml"
    wrote_grid = not grid_file.exists()
    grid_file.write_text(resolved_grid_file(grids, overrides, list(catalogue.files) if catalogue else [], data_dir),
                         encoding="utf-8")
    try:
        job = launch.submit(launch.SlurmLaunch(
            worker_argv(grid_file, options), workers, log_dir, f"biobench-{Path(config).stem}"[:60],
            settings.partition, settings.account, settings.gpus_per_task, settings.cpus_per_task, time_min,
            settings.array_parallelism, extra,
            record={"grid": str(grid_file), "grid_source": str(Path(config).resolve()), "grids": list(grid_names),
                    "revisions": revisions}))
    except ConfigError:  # nothing was submitted: leave no resolved grid behind for a job that does not exist
        if wrote_grid:
            grid_file.unlink(missing_ok=True)
        raise  # launch_grid removes the folders this submit made, now empty
    return LaunchedGrid(job, workers, log_dir, grid_file, sum(len(g.models) for g in grids), len(grids))
