"""Training scalars to TensorBoard or Weights & Biases (`--report-to tensorboard|wandb`), the field's usual
ways to watch a long run, behind one small interface (`Reporter`: scalars at a step, close).

Why one module: pretraining (training/trainer.py) and fine-tuning (bench/eval/finetune.py) report the same way
and fail the same way when the optional package is missing. The JSON logs (train_log.jsonl, the result's
history) stay the record; the reporters are views. Each run reports to `<folder>/<backend>/...`
(`report_dir`): `tensorboard --logdir DIR` then shows:
- pretraining: `<out>/tensorboard/` with train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu
  against the global step;
- fine-tuning: `<results>/<model>/<task>/tensorboard/seed-<n>/` (a smoke run: `seed-<n>.smoke-<hex>/`, named
  as its result file) with train/loss and dev/<metric> at each evaluation.
With wandb the same scalars go to one W&B run per pretraining run or per fine-tuning seed, named and configured
(model, task, seed, protocol) so runs group in its UI; its files are under `<out>/wandb/` and
`<results>/<model>/<task>/wandb/seed-<n>/`. `WANDB_PROJECT` names the project (default biobench) and
`WANDB_MODE=offline` keeps everything local until `wandb sync`.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

from biobench.errors import ConfigError

REPORT_TO = ("none", "tensorboard", "wandb")


class Reporter(Protocol):
    def scalars(self, values: Mapping[str, float | None], step: int) -> None: ...

    def close(self) -> None: ...


class NoReport:
    """What `--report-to none` (the default) gets: nothing is written."""

    def scalars(self, values: Mapping[str, float | None], step: int) -> None:
        pass

    def close(self) -> None:
        pass


class TensorBoardReport:
    """Scalars as TensorBoard event files in `log_dir` (None values, e.g. MFU off CUDA, are left out)."""

    def __init__(self, log_dir: Path):
        try:
            from torch.utils.tensorboard import SummaryWriter
        except ImportError as err:
            raise ConfigError("--report-to tensorboard needs the tensorboard package: "
                              "pip install -e '.[tensorboard]' (or pip install tensorboard)") from err
        self.log_dir = Path(log_dir)
        self.writer = SummaryWriter(log_dir=str(self.log_dir))

    def scalars(self, values: Mapping[str, float | None], step: int) -> None:
        for tag, value in values.items():
            if value is not None:
                self.writer.add_scalar(tag, float(value), step)

    def close(self) -> None:
        self.writer.close()


class WandbReport:
    """Scalars as one Weights & Biases run whose files go under `log_dir` (None values are left out)."""

    def __init__(self, log_dir: Path, name: str | None = None, config: Mapping[str, Any] | None = None):
        try:
            import wandb
        except ImportError as err:
            raise ConfigError("--report-to wandb needs the wandb package: pip install -e '.[wandb]' "
                              "(or pip install wandb)") from err
        self.log_dir = Path(log_dir)
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self.run = wandb.init(project=os.environ.get("WANDB_PROJECT", "biobench"), dir=str(self.log_dir),
                              name=name, config=dict(config or {}),
                              settings=wandb.Settings(console="off", silent=True))

    def scalars(self, values: Mapping[str, float | None], step: int) -> None:
        kept = {tag: float(value) for tag, value in values.items() if value is not None}
        if kept:
            self.run.log(kept, step=step)

    def close(self) -> None:
        self.run.finish()


def report_dir(folder: Path, report_to: str | None, result_file: Path | None = None) -> Path:
    """Where a run's reporter writes: `<folder>/<backend>/` (pretraining), `<folder>/<backend>/<result stem>/`
    for a fine-tuning run, `folder` being its task's results folder and `result_file` its result
    (store.result_path): `seed-<n>/`, or `seed-<n>.smoke-<hex>/` for a smoke run, so that a check and the
    protocol run of one seed never mix their curves."""
    path = Path(folder) / str(report_to or "none")
    return path / Path(result_file).name.removesuffix(".json") if result_file is not None else path


def make_reporter(report_to: str | None, log_dir: Path, name: str | None = None,
                  config: Mapping[str, Any] | None = None) -> Reporter:
    """The reporter `--report-to` names; an unknown name is a ConfigError listing the choices. `name` and
    `config` label the run where the backend has runs (wandb)."""
    if report_to in (None, "none"):
        return NoReport()
    if report_to == "tensorboard":
        return TensorBoardReport(log_dir)
    if report_to == "wandb":
        return WandbReport(log_dir, name, config)
    raise ConfigError(f"--report-to {report_to!r}: choose one of {', '.join(REPORT_TO)}")
