"""Token stores and mixes from Python: `build_store`, `store_info`, `plan`. `biobench corpus` calls these."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.models import resolve_model
from biobench.ranges import Bounds
from biobench.runtime.files import output_folder
from biobench.training import mixture, token_store


def tokenizer_source(model: str) -> str:
    """What `--tokenizer` names (an alias, a model folder, a tokenizer-only folder or a hub id) as the folder or hub
    id AutoTokenizer reads; the same resolution `--model` uses."""
    path = Path(model).expanduser()
    if path.is_dir():
        return str(path.resolve())

    return resolve_model(model).source


def build_store(sources: list[str], tokenizer: str, out: str | Path, workers: int = 1, text_field: str = "text",
                unit_mb: float = 64, log: Callable[[str], None] | None = None) -> Path:
    """Tokenise `sources` (text, JSONL(.gz), parquet files or folders, hub dataset ids) into a token store at `out`
    with `workers` processes; a killed build rerun with the same arguments resumes. Returns the store folder."""

    Bounds(1, 256, integer=True).check(workers, "--workers")
    Bounds(0.001, 4096).check(unit_mb, "--unit-mb")
    out = Path(out)
    if out.exists() and not (out / token_store.WORK).is_dir() and not (out / token_store.DONE).is_file() \
            and any(p.name != token_store.BUILD_LOCK for p in out.iterdir()):  # the lock: a build just begun
        raise ConfigError(f"--out {out} is a folder that is not a token store; choose a new folder")
    output_folder(out, "--out")
    return token_store.build(list(sources), out, tokenizer_source(tokenizer), workers=workers, text_field=text_field,
                             unit_bytes=int(unit_mb * 2**20), log=log)


def store_info(store: str | Path, verify: bool = True) -> str:
    return token_store.describe(token_store.open_store(store, verify=verify))


def plan(mix_file: str | Path, tokens: int, seq_len: int) -> tuple[str, list[str], list[dict[str, Any]]]:
    """(table, lines naming the sources that cannot fill their share, rows) of a mix for a run of `tokens` tokens
    in sequences of `seq_len`; reads the stores' manifests only."""
    if seq_len < 8 or tokens < seq_len:
        raise ConfigError(f"--tokens {tokens:,} and --seq-len {seq_len}: need at least one sequence of 8+ tokens")
    mix = mixture.read_mix(mix_file)
    available = [int(token_store.read_manifest(s.store)["tokens"]) for s in mix.sources]
    result = mixture.plan_mix(mix, available, -(-tokens // seq_len), seq_len)
    return result.table(), result.short(), result.rows()
