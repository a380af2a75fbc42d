"""`pretrain`: continued pretraining with a recipe (the CLM detour and its controls), from Python or the CLI.

`biobench pretrain` parses its options and calls `pretrain` here; the batch geometry defaults (the paper's
384 x 8192, or 16 x 512 for a preset model on a CPU) live here once; the CPU thread choice is the one rule of
`biobench.runtime.device.use_cpu_threads`, which eval shares.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.models import resolve_model
from biobench.ranges import parse_count
from biobench.runtime.batching import AUTO, batch_size_value
from biobench.runtime.device import resolve_device, use_cpu_threads
from biobench.runtime.files import atomic_write
from biobench.runtime.ownership import check_output_folder
from biobench.runtime.paths import check_text
from biobench.tasks.options import check_keys
from biobench.training import recipes
from biobench.training.config import PretrainConfig, config_defaults
from biobench.training.recipes import parse_freeze

# CPU defaults for preset models: a run of a few million tokens finishes in minutes. The paper's geometry is
# PretrainConfig's own defaults (training/trainer.py), read from there.
CPU_PRESET_DEFAULTS = {"seq_len": 512, "batch_size": 16}
CONFIG_FILE = "pretrain_config.toml"  # the resolved config, beside the checkpoints: `pretrain --config` reads it


def parse_tokens(text: str | int) -> int:
    """'2M' -> 2_000_000, '1.5B', '500K', '12345' (an int is taken as it is): bounded at parse time by the one
    count parser (biobench.ranges.parse_count)."""
    return parse_count(text, "token count")


def resolve_geometry(model: str, device: str | None, batch_size: int | str | None, seq_len: int | None,
                     micro_batch_size: int | str | None) -> dict[str, Any]:
    """Batch geometry: the paper's 384 x 8192 unless a preset runs on CPU (16 x 512); explicit values win."""
    on_cpu = resolve_device(device).startswith("cpu")
    paper = config_defaults()
    base = CPU_PRESET_DEFAULTS if on_cpu and model.startswith("preset:") else {k: paper[k] for k in CPU_PRESET_DEFAULTS}
    auto = AUTO in (batch_size, micro_batch_size)
    return {"seq_len": seq_len or base["seq_len"],
            "batch_size": batch_size if isinstance(batch_size, int) else base["batch_size"],
            "micro_batch_size": AUTO if auto else micro_batch_size or (16 if on_cpu else 4), "on_cpu": on_cpu}


def model_source(model: str) -> str:
    """What `--model` names, as the folder or hub id the run loads: an alias (`biobench models`, e.g.
    all-MiniLM-L6-v2) resolved as `corpus build --tokenizer` and eval resolve it; a preset or a folder as given."""
    if str(model).startswith("preset:") or Path(model).expanduser().is_dir():
        return model

    return resolve_model(model).source


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
    # lazy: loads torch
    from biobench.training.trainer import train

    geometry = resolve_geometry(model, options.get("device"), batch_size, seq_len, micro_batch_size)
    geometry.pop("on_cpu")
    n_threads = use_cpu_threads(threads, options.get("device"))
    given: dict[str, Any] = {"recipe": recipe, "warmup_tokens": parse_tokens(warmup_tokens) if warmup_tokens is not None else None,
             "save_every": parse_tokens(save_every) if save_every else None}
    try:
        cfg = PretrainConfig(model=model, corpus=str(corpus), out=Path(out), tokens=parse_tokens(tokens), **geometry,
                             **{k: v for k, v in given.items() if v is not None}, **options)
    except TypeError as err:
        raise ConfigError(f"pretrain: {err} (options are PretrainConfig's fields)") from None
    cfg.check()  # nan, inf, negative settings refused before anything loads (PretrainConfig states the bounds)
    check_output_folder(out, "--out", "pretraining run", legacy=legacy_run)
    write_config(cfg, Path(out) / CONFIG_FILE)
    recipes.get_recipe(cfg.recipe, cfg.freeze)  # fail fast on a bad recipe/freeze before loading anything
    # the alias as given in the resolved config (portable), what it names for the run
    cfg = replace(cfg, model=model_source(cfg.model))
    if announce is not None:
        announce(cfg, n_threads)
    return train(cfg)


CONFIG_HEADER = "# biobench pretrain: the resolved settings of this run"


def legacy_run(folder: Path) -> bool:
    """A run folder a biobench before the ownership marker wrote: its resolved settings file (written first, with
    this header) or a checkpoint's biobench_pretrain.json."""
    try:
        with (folder / CONFIG_FILE).open(encoding="utf-8") as handle:
            if handle.readline().startswith(CONFIG_HEADER):
                return True
    except (OSError, UnicodeDecodeError):
        pass
    return any(p.is_file() and not p.is_symlink() for p in folder.glob("*/biobench_pretrain.json"))


def write_config(cfg: Any, path: Path) -> None:
    """The resolved config as TOML, beside the checkpoints: `biobench pretrain --config <out>/pretrain_config.toml`
    runs the same recipe again (unset settings are left out; `resume` is not written: a run resumes on purpose)."""
    import json
    from dataclasses import fields


    lines = [f"{CONFIG_HEADER} (biobench pretrain --config THIS_FILE)"]
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
    each value turned into the setting's value by `setting_value`, as the flags' are. `where` starts each error
    line."""
    from dataclasses import fields

    settings = {spec.name: spec for spec in fields(PretrainConfig)}
    values = {str(key).replace("-", "_"): value for key, value in raw.items()}
    check_keys(values, settings, where, "setting")
    return {name: setting_value(settings[name], value, f"{where}: {name} = {str(value)[:40]!r}", from_flag=False)
            for name, value in values.items()}


MAX_TEXT_SETTING = 4096  # a model id, a corpus, a folder: a 1 MB `out` was an OSError traceback at mkdir


def setting_value(spec: Any, value: Any, where: str, from_flag: bool = True) -> Any:
    """A setting's value from a flag's text (`from_flag`) or a --config file's TOML value, checked and converted
    the same way for both: token counts ('2M'), batch sizes ('auto'), numbers within the field's bounds, freeze
    ranges parsed (`freeze = [1]` was a TypeError traceback), text settings of at most MAX_TEXT_SETTING characters
    without control characters (a 1 MB `out` was an OSError traceback), paths as Paths. ConfigError naming
    `where` and what was expected otherwise."""
    from dataclasses import MISSING

    default = spec.default_factory() if spec.default_factory is not MISSING else spec.default
    kind, bounds = (spec.metadata.get("cli") or {}).get("type"), spec.metadata.get("bounds")
    option = "--" + spec.name.replace("_", "-")
    number_ok = (str, int, float) if from_flag else (int, float)

    def expected(detail: str = "") -> ConfigError:
        return ConfigError(f"{where}: expected {_kind_name(default, kind, bounds)}"
                           + (f" ({detail})" if detail else ""))

    if kind in ("tokens", "batch"):
        if isinstance(value, bool) or not isinstance(value, str | int):
            raise expected()
        try:
            return parse_tokens(value) if kind == "tokens" else batch_size_value(str(value))
        except (ConfigError, ValueError) as err:  # its own words name the value and the form
            raise ConfigError(f"{option if from_flag else where.split(' = ')[0]}: {err}") from None
    if isinstance(default, list):  # --freeze: ranges like 0-7@clm
        items = value if isinstance(value, list) else [value]
        if not all(isinstance(v, str) for v in items):
            raise expected('ranges as text, e.g. ["0-7@clm"]')
        for item in items:
            parse_freeze(item)  # its own line names the range and the form
        return list(items)
    if isinstance(default, tuple):  # betas (config file only)
        if not (isinstance(value, list) and all(isinstance(v, int | float) and not isinstance(v, bool)
                                                for v in value)):
            raise expected()
        return tuple(value)
    if isinstance(default, bool):
        if not isinstance(value, bool):
            raise expected()
        return value
    if bounds is not None or (isinstance(default, int | float) and not isinstance(default, bool)):
        if isinstance(value, bool) or not isinstance(value, number_ok):
            raise expected()
        if bounds is None:
            return value
        if isinstance(value, str) and bounds.integer and not value.strip().lstrip("+-").isdigit():
            raise ConfigError(f"bad {option} value {value[:40]!r}: expected a whole number {bounds.text()}")
        number = bounds.check(value, option)  # its own line: "bad --lr value 'nan': give a finite number"
        return int(number) if bounds.integer else number
    if spec.name == "resume" and value is True:
        return True
    if not isinstance(value, str):
        raise expected()
    text = check_text(value, option, MAX_TEXT_SETTING)
    return Path(text) if spec.name in ("out", "cache_dir") else text


def _kind_name(default: Any, kind: Any, bounds: Any = None) -> str:
    if kind == "tokens":
        return "a token count (e.g. 2M)"
    if kind == "batch":
        return "a batch size (a number, or auto)"
    if bounds is not None:
        return f"a {'whole ' if bounds.integer else ''}number {bounds.text()}"
    return ("true or false" if isinstance(default, bool) else "a list" if isinstance(default, list | tuple)
            else "a number" if isinstance(default, int | float) else "text")
