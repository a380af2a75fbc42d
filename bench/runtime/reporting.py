"""Training scalars to TensorBoard (`--report-to tensorboard`), the field's usual way to watch a long run.

Why one module: pretraining (training/trainer.py) and fine-tuning (bench/finetune.py) report the same way
and fail the same way when the optional package is missing. The JSON logs (train_log.jsonl, the result's
history) stay the record; TensorBoard is a view. `tensorboard --logdir DIR` then shows:
- pretraining: `<out>/tensorboard/` with train/loss, train/lr, train/grad_norm, train/tokens_per_s, train/mfu
  against the global step;
- fine-tuning: `<results>/<model>/<task>/tensorboard/seed-<n>/` with train/loss and dev/<metric> at each
  evaluation.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

from biobench.errors import ConfigError

REPORT_TO = ("none", "tensorboard")


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


def make_reporter(report_to: str | None, log_dir: Path) -> Reporter:
    """The reporter `--report-to` names; an unknown name is a ConfigError listing the choices."""
    if report_to in (None, "none"):
        return NoReport()
    if report_to == "tensorboard":
        return TensorBoardReport(log_dir)
    raise ConfigError(f"--report-to {report_to!r}: choose one of {', '.join(REPORT_TO)}")
