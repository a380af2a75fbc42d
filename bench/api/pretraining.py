"""`pretrain`: continued pretraining with a recipe (the CLM detour and its controls), from Python or the CLI.

`biobench pretrain` parses its options and calls `pretrain` here; the batch geometry defaults (the paper's
384 x 8192, or 16 x 512 for a preset model on a CPU) and the CPU thread choice live here once.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError

SUFFIXES = {"": 1, "K": 10**3, "M": 10**6, "B": 10**9, "G": 10**9, "T": 10**12}
# CPU defaults for preset models: a run of a few million tokens finishes in minutes. The paper's geometry is
# PretrainConfig's own defaults (training/trainer.py), read from there.
CPU_PRESET_DEFAULTS = {"seq_len": 512, "batch_size": 16}
CONFIG_FILE = "pretrain_config.toml"  # the resolved config, beside the checkpoints: `pretrain --config` reads it


def parse_tokens(text: str | int) -> int:
    """'2M' -> 2_000_000, '1.5B', '500K', '12345' (an int is taken as it is)."""
    if isinstance(text, int) and not isinstance(text, bool):
        if text < 0:
            raise ConfigError(f"token count {text}: give a positive number, e.g. 2M")
        return text
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([KMBGT]?)\s*", str(text).upper())
    if not m:
        raise ConfigError(f"token count {text!r}: expected a number with an optional K/M/B suffix, e.g. 2M")
    return int(round(float(m.group(1)) * SUFFIXES[m.group(2)]))


def resolve_geometry(model: str, device: str | None, batch_size: int | str | None, seq_len: int | None,
                     micro_batch_size: int | str | None) -> dict[str, Any]:
    """Batch geometry: the paper's 384 x 8192 unless a preset runs on CPU (16 x 512); explicit values win."""
    from biobench.runtime.batching import AUTO
    from biobench.runtime.device import resolve_device
    from biobench.training.config import config_defaults

    on_cpu = resolve_device(device).startswith("cpu")
    paper = config_defaults()
    base = CPU_PRESET_DEFAULTS if on_cpu and model.startswith("preset:") else {k: paper[k] for k in CPU_PRESET_DEFAULTS}
    auto = AUTO in (batch_size, micro_batch_size)
    return {"seq_len": seq_len or base["seq_len"],
            "batch_size": batch_size if isinstance(batch_size, int) else base["batch_size"],
            "micro_batch_size": AUTO if auto else micro_batch_size or (16 if on_cpu else 4), "on_cpu": on_cpu}


def cpu_threads(requested: int | None) -> int:
    """Explicit threads, else the idle cores (>= 1): oversubscribed OpenMP threads spin and run 2-3x
    slower on a loaded machine than one thread does (measured on the 2-core dev box)."""
    if requested:
        return requested
    cores = os.cpu_count() or 1
    return max(1, min(cores, cores - round(os.getloadavg()[0])))


def pretrain(model: str, corpus: str | Path, tokens: str | int, out: str | Path, recipe: str | None = None, *,
             batch_size: int | str | None = None, seq_len: int | None = None,
             micro_batch_size: int | str | None = None, warmup_tokens: str | int | None = None,
             save_every: str | int | None = None, threads: int | None = None,
             announce: Callable[[Any, int], None] | None = None, **options: Any) -> Path | None:
    """Continued-pretrain `model` (hub id, local folder or preset:tiny / preset:small) on `corpus` (a text file,
    a folder of .txt / .jsonl(.gz), or a hub dataset id) for `tokens` of phase 1 ('2M', '10B' or an int) with
    `recipe` (`biobench pretrain --list`; default: PretrainConfig's, the detour), writing init/, phase1/, final/
    and the resolved config (pretrain_config.toml) under `out`. `options` are the other fields of
    `biobench.training.trainer.PretrainConfig` (lr, decay_ratio, freeze, seed, device, ...); what is left out
    takes that class's default. Returns the final checkpoint folder (None when this process is not the one that
    saves, under torchrun)."""
    from biobench.runtime.files import output_folder
    from biobench.training import recipes
    from biobench.training.config import PretrainConfig
    from biobench.training.trainer import train

    geometry = resolve_geometry(model, options.get("device"), batch_size, seq_len, micro_batch_size)
    import torch

    if geometry.pop("on_cpu"):
        torch.set_num_threads(cpu_threads(threads))
    given: dict[str, Any] = {"recipe": recipe, "warmup_tokens": parse_tokens(warmup_tokens) if warmup_tokens is not None else None,
             "save_every": parse_tokens(save_every) if save_every else None}
    try:
        cfg = PretrainConfig(model=model, corpus=str(corpus), out=Path(out), tokens=parse_tokens(tokens), **geometry,
                             **{k: v for k, v in given.items() if v is not None}, **options)
    except TypeError as err:
        raise ConfigError(f"pretrain: {err} (options are PretrainConfig's fields)") from None
    cfg.check()  # nan, inf, negative settings refused before anything loads (PretrainConfig states the bounds)
    output_folder(out, "--out")
    write_config(cfg, Path(out) / CONFIG_FILE)
    recipes.get_recipe(cfg.recipe, cfg.freeze)  # fail fast on a bad recipe/freeze before loading anything
    if announce is not None:
        announce(cfg, torch.get_num_threads())
    return train(cfg)


def write_config(cfg: Any, path: Path) -> None:
    """The resolved config as TOML, beside the checkpoints: `biobench pretrain --config <out>/pretrain_config.toml`
    runs the same recipe again (unset settings are left out; `resume` is not written: a run resumes on purpose)."""
    import json
    from dataclasses import fields

    from biobench.runtime.files import atomic_write

    lines = ["# biobench pretrain: the resolved settings of this run (biobench pretrain --config THIS_FILE)"]
    for spec in fields(cfg):
        value = getattr(cfg, spec.name)
        if value is None or spec.name in ("resume", "stop_after_steps"):
            continue
        value = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        # JSON's strings, numbers, booleans and arrays of them are TOML's too
        lines.append(f"{spec.name} = {json.dumps(value, ensure_ascii=False)}")
    atomic_write(path, "\n".join(lines) + "\n")


def check_settings(raw: dict[str, Any], where: str) -> dict[str, Any]:
    """Pretraining settings given as a table (a `--config` file, a study file's [[pretrain]] table), checked: keys
    that are PretrainConfig settings (dashes or underscores; an unknown one is refused with the closest name),
    values of the setting's kind, token counts ('2M') and batch sizes parsed. `where` starts each error line.
    Numbers are checked against their bounds with everything else, when the config is built."""
    from dataclasses import MISSING, fields

    from biobench.runtime.batching import batch_size_value
    from biobench.tasks.options import check_keys
    from biobench.training.config import PretrainConfig

    settings = {spec.name: spec for spec in fields(PretrainConfig)}
    values = {str(key).replace("-", "_"): value for key, value in raw.items()}
    check_keys(values, settings, where, "setting")
    for name, value in values.items():
        spec = settings[name]
        default = spec.default_factory() if spec.default_factory is not MISSING else spec.default
        kind = (spec.metadata.get("cli") or {}).get("type")
        ok = (isinstance(value, str | int) and not isinstance(value, bool) if kind in ("tokens", "batch") else
              isinstance(value, bool) if isinstance(default, bool) else
              isinstance(value, list) and all(isinstance(v, str | int | float) for v in value)
              if isinstance(default, list | tuple) else
              isinstance(value, int | float) and not isinstance(value, bool)
              if isinstance(default, int | float) or spec.metadata.get("bounds") is not None else
              isinstance(value, str | bool))
        if not ok:  # a setting with bounds and no default (data_seed, max_documents) is a number too
            expected = "a number" if spec.metadata.get("bounds") is not None and kind is None else _kind_name(default, kind)
            raise ConfigError(f"{where}: {name} = {str(value)[:40]!r}: expected {expected}")
        if kind == "tokens":
            values[name] = parse_tokens(value)
        elif kind == "batch":
            values[name] = batch_size_value(str(value))
        elif spec.name in ("out", "cache_dir"):
            values[name] = Path(value)
        elif isinstance(default, tuple):
            values[name] = tuple(value)
    return values


def _kind_name(default: Any, kind: Any) -> str:
    if kind == "tokens":
        return "a token count (e.g. 2M)"
    if kind == "batch":
        return "a batch size (a number, or auto)"
    return ("true or false" if isinstance(default, bool) else "a list" if isinstance(default, list | tuple)
            else "a number" if isinstance(default, int | float) else "text")
