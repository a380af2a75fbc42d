"""`biobench pretrain`: the CLM-detour continued-pretraining recipe and its controls (paper §3.2).

Single process: `biobench pretrain ...`; several GPUs: `torchrun --nproc_per_node 8 -m biobench.cli pretrain ...`
or `accelerate launch -m biobench.cli pretrain ...` (DDP; --fsdp for large models).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

from biobench.api.pretraining import check_settings, parse_tokens, pretrain, setting_value
from biobench.errors import ConfigError
from biobench.runtime.interrupts import WALL_CLOCK_SIGNALS
from biobench.runtime.jsonfile import UnsafeJSONError, parse_toml, read_bytes
from biobench.runtime.slurm import requeue_self, restart_count
from biobench.training import recipes
from biobench.training.config import PretrainConfig

__all__ = ["add_parser", "parse_tokens", "run"]

MAX_CONFIG_BYTES = 1 << 20  # a pretraining config is a few dozen lines


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list", action="store_true", help="show the recipes and their phases, then exit")
    p.add_argument("--config", type=Path, metavar="RUN.toml",
                   help="settings from a TOML file (keys: the flags' names; flags given here override it); every "
                        "run writes its resolved settings to <out>/pretrain_config.toml in this form")
    add_config_flags(p)
    p.add_argument("--threads", type=int, help="CPU threads (default: the cores not already busy, "
                   "from the load average: a shared machine is faster with fewer threads)")
    p.set_defaults(func=run)


def add_config_flags(p: argparse.ArgumentParser) -> None:
    """One flag per PretrainConfig setting that has a help text (training/trainer.py states each setting once:
    its default, bounds and help); every flag defaults to None, meaning "not given here", so that a --config
    file's value stands unless the flag is given. Flags are parsed as text and turned into values by
    `setting_value` (`flag_settings`), as a --config file's are: `--tokens 12Q` was a ConfigError raised inside
    argparse's type function (a 43-line traceback) and `--max-documents 50` stayed the text '50'."""
    from dataclasses import MISSING, fields

    for spec in fields(PretrainConfig):
        text, cli = spec.metadata.get("help"), dict(spec.metadata.get("cli") or {})
        if not text:
            continue
        flag = "--" + spec.name.replace("_", "-")
        default = spec.default_factory() if spec.default_factory is not MISSING else spec.default
        if default is True:  # on unless turned off: --no-progress
            p.add_argument("--no-" + spec.name.replace("_", "-"), dest=spec.name, action="store_false", default=None,
                           help="no " + re.sub(r"^an? ", "", f"{text[0].lower()}{text[1:]}"))  # not "no a ..."
            continue
        if default is False:
            p.add_argument(flag, dest=spec.name, action="store_true", default=None, help=text)
            continue
        if default not in (MISSING, None, []) and "default" not in text:
            text += f" (default: {default})"
        cli.pop("type", None)  # text; setting_value converts it (one line on a bad value)
        p.add_argument(flag, dest=spec.name, default=None, help=text, **cli)


def config_file(path: Path) -> dict[str, Any]:
    """The settings of a `--config` TOML file, checked: a bounded regular file, keys that are settings (dashes or
    underscores; an unknown one is refused with the closest name), values of the setting's kind and within its
    bounds (biobench.api.pretraining.check_settings, which a study file's [[pretrain]] tables share; the same
    `setting_value` as the flags)."""

    try:
        raw = parse_toml(read_bytes(path, MAX_CONFIG_BYTES), path)
    except UnsafeJSONError as err:
        raise ConfigError(str(err)) from None
    except OSError as err:
        raise ConfigError(f"--config {path}: cannot read it ({err.strerror or err})") from None
    return check_settings(raw, f"--config {path}")


def flag_settings(args: argparse.Namespace) -> dict[str, Any]:
    """The settings given as flags (None: not given), each turned into its value by `setting_value`."""
    from dataclasses import fields

    return {spec.name: setting_value(spec, value, f"--{spec.name.replace('_', '-')} {str(value)[:40]!r}")
            for spec in fields(PretrainConfig) if (value := getattr(args, spec.name, None)) is not None}


def run(args) -> int:
    if args.list:
        print(recipes.describe())
        return 0

    settings = config_file(args.config) if args.config else {}
    settings.update(flag_settings(args))
    missing = [f"--{name}" for name in ("model", "corpus", "tokens", "out") if settings.get(name) in (None, "")]
    if missing:
        raise ConfigError(f"biobench pretrain needs {', '.join(missing)}, as flags or in --config "
                          "(or --list to see the recipes)")

    def announce(cfg, threads: int) -> None:
        print(f"biobench pretrain: recipe {cfg.recipe}, model {cfg.model}, corpus {cfg.corpus}, phase-1 budget "
              f"{cfg.tokens:,} tokens, decay ratio {cfg.decay_ratio}, global batch {cfg.batch_size} x {cfg.seq_len} "
              f"{micro_text(cfg)}, lr {cfg.lr}, {threads} CPU threads, out {cfg.out}", flush=True)

    out = Path(settings.pop("out"))
    if settings.get("resume") is None:
        settings["resume"] = requeued_resume(out)
    for off_when_zero in ("grad_clip", "save_minutes"):  # 0 = off on the command line; None in the config
        if settings.get(off_when_zero) == 0:
            settings[off_when_zero] = None
    if settings.get("report_to") == "none":
        settings["report_to"] = None
    try:
        final = pretrain(settings.pop("model"), settings.pop("corpus"), settings.pop("tokens"), out,
                         threads=args.threads, announce=announce, **settings)
    except KeyboardInterrupt as stop:
        print(f"interrupted; {kept(out)}", file=sys.stderr)
        requeue_after(stop)
        return 130
    if final is not None:
        print(f"done: {final}")
    return 0


def micro_text(cfg) -> str:
    """The micro-batch as it runs: never above the global batch (`--micro-batch-size 16` with a batch of 8 runs
    8 at once; the start line said "global batch 8 x 128 (micro-batch 16)"), 'auto' until measured."""
    micro = cfg.micro_batch_size
    if micro in (None, "auto") or not isinstance(micro, int):
        return f"(micro-batch {micro or cfg.batch_size})"
    return f"(micro-batch {min(micro, cfg.batch_size)})"


def requeued_resume(out: Path) -> bool | None:
    """A SLURM job that was requeued (SLURM_RESTART_COUNT > 0) runs its batch script again, with the same
    command: it resumes from the latest checkpoint under --out without --resume, as if it had been given."""
    # lazy: loads torch
    from biobench.training import checkpoint

    restarts = restart_count()
    if not restarts or not out.is_dir() or checkpoint.latest(out) is None:
        return None
    print(f"SLURM job restart {restarts}: resuming from {checkpoint.latest(out)} (--resume)", flush=True)
    return True


def requeue_after(stop: KeyboardInterrupt) -> None:
    """After the checkpoint a wall-clock warning (SIGUSR1 from `#SBATCH --signal=B:USR1@120`, the job's time
    nearly out) made it write, a SLURM job puts itself back in the queue (rank 0 only: one request per job); it
    resumes there. SIGTERM (`scancel`) stops it for good: runtime.slurm.requeue_self says so in one line."""
    # lazy: loads torch
    from biobench.training.trainer import Stopped

    wall_clock = {signal.Signals(s).name for s in WALL_CLOCK_SIGNALS}
    if isinstance(stop, Stopped) and str(stop) in wall_clock and os.environ.get("RANK", "0") == "0":
        requeue_self(lambda line: print(line, file=sys.stderr, flush=True), str(stop))


def kept(out: Path) -> str:
    """What an interrupted run left to resume from, in words (the latest resumable checkpoint, or none)."""
    # lazy: loads torch
    from biobench.training import checkpoint

    folder = checkpoint.latest(out) if out.is_dir() else None
    if folder is None:
        return (f"no resumable checkpoint was written in {out} (stopped before the first training step "
                f"finished): run the same command again to start over")
    tokens = checkpoint.read_meta(folder).get("tokens", {}).get("seen", 0)
    return (f"kept {folder} ({tokens:,} tokens trained): continue with the same command and --resume")
