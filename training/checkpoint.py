"""Checkpoints: Hugging Face model folders (safetensors + tokenizer) that `biobench eval --model DIR` and
AutoModelForMaskedLM / AutoModel load, plus biobench_pretrain.json (docs/FORMATS.md) and, for resuming,
trainer_state.pt (optimiser, phase, step, data position, RNG). Written to a temporary folder then renamed, so
a crash never leaves a half-written checkpoint that --resume would pick."""

from __future__ import annotations

import json
import os
import shutil
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import torch
from biobench.errors import ConfigError
from biobench.training.files import disk_full_guard

META = "biobench_pretrain.json"
STATE = "trainer_state.pt"
SCHEMA = "biobench.pretrain/1"


def save(folder: Path, model, tokenizer, meta: dict[str, Any], state: dict[str, Any] | None,
         model_state: dict[str, torch.Tensor] | None = None) -> Path:
    """Write one checkpoint folder atomically. `model_state` overrides the weights (gathered FSDP state)."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    if tmp.exists():
        shutil.rmtree(tmp)
    needed = _tensor_bytes(model_state if model_state is not None else model.state_dict()) + _tensor_bytes(state)
    with disk_full_guard(folder.parent, needed, lambda: _finished(folder.parent),
                         cleanup=lambda: shutil.rmtree(tmp, ignore_errors=True)):
        tmp.mkdir(parents=True)
        model.save_pretrained(tmp, state_dict=model_state)
        tokenizer.save_pretrained(tmp)
        full = {"schema": SCHEMA, **meta, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        (tmp / META).write_text(json.dumps(full, indent=1))
        if state is not None:
            torch.save(state, tmp / STATE)
        if folder.exists():
            shutil.rmtree(folder)
        os.replace(tmp, folder)
    return folder


def _tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in a (nested) state: what a checkpoint is about to write."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def _finished(out: Path) -> str:
    return f"{len(list(Path(out).glob(f'*/{META}')))} finished checkpoint(s) in {out} are safe"


def read_meta(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / META).read_text())


def latest(out: Path) -> Path | None:
    """The most advanced resumable checkpoint under `out` (by tokens seen)."""
    best, best_tokens = None, -1
    for meta_file in Path(out).glob(f"*/{META}"):
        if not (meta_file.parent / STATE).exists():
            continue
        seen = json.loads(meta_file.read_text()).get("tokens", {}).get("seen", 0)
        if seen > best_tokens:
            best, best_tokens = meta_file.parent, seen
    return best


def resolve_resume(resume: str | bool, out: Path, recipe: str) -> Path:
    """The folder to resume from (explicit path, or the latest under --out), checked against the recipe."""
    folder = latest(out) if resume is True else Path(resume)
    if folder is None:
        raise ConfigError(f"--resume: no resumable checkpoint (folder with {STATE}) under {out}")
    if not (folder / META).exists() or not (folder / STATE).exists():
        raise ConfigError(f"--resume {folder}: not a biobench pretrain checkpoint (needs {META} and {STATE})")
    meta = read_meta(folder)
    if meta.get("recipe") != recipe:
        raise ConfigError(f"--resume {folder} was written by recipe '{meta.get('recipe')}', not '{recipe}': "
                          f"resume with --recipe {meta.get('recipe')} or start a fresh --out")
    return folder


def load_state(folder: Path) -> dict[str, Any]:
    return torch.load(Path(folder) / STATE, map_location="cpu", weights_only=False)
