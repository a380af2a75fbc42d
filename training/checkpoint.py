"""Checkpoints: Hugging Face model folders (safetensors + tokenizer) that `biobench eval --model DIR` and
AutoModelForMaskedLM / AutoModel load, plus biobench_pretrain.json (docs/FORMATS.md) and, for resuming,
resume/trainer_state.safetensors (optimiser, phase, step, data position, RNG). Written to a temporary folder then
renamed, so a crash never leaves a half-written checkpoint that --resume would pick.

The resume state holds no pickle: users resume from folders they downloaded, and unpickling runs whatever
code the file names. Its tensors (optimiser moments, RNG states) are safetensors entries; everything else
(TrainState, optimiser hyper-parameters, config, Python RNG) is one JSON tree in the file's metadata, with
each tensor replaced by a reference to its entry. Loading parses data only, and round-trips bit for bit."""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Literal

import torch
from biobench.errors import ConfigError
from biobench.runtime.files import disk_full_guard
from biobench.runtime.ownership import mark_created, remove_owned, replace_owned

META = "biobench_pretrain.json"
# In a subfolder: a weights file of its own, never globbed as the model's (`*.safetensors` at the top level is
# what a local model's revision hash and the hub read as weights).
STATE = "resume/trainer_state.safetensors"
LEGACY_STATE = "trainer_state.pt"  # pickled by biobench before the safetensors state; refused, never unpickled
SCHEMA = "biobench.pretrain/1"
STATE_SCHEMA = "biobench.trainer_state/1"
STATE_KEY = "biobench"  # the safetensors metadata entry holding the JSON tree
# JSON tags for what plain JSON cannot say: a tensor entry, a tuple, a dict with non-string keys.
TENSOR, TUPLE, ITEMS = "__tensor__", "__tuple__", "__items__"


def save(folder: Path, model, tokenizer, meta: dict[str, Any], state: dict[str, Any] | None,
         model_state: dict[str, Any] | None = None) -> Path:
    """Write one checkpoint folder atomically. `model_state` overrides the weights (gathered FSDP state)."""
    folder = Path(folder)
    tmp = folder.with_name(folder.name + ".tmp")
    remove_owned(tmp)  # a save a killed process left (marked first); a folder of the user's is refused
    needed = _tensor_bytes(model_state if model_state is not None else model.state_dict()) + _tensor_bytes(state)
    with disk_full_guard(folder.parent, needed, lambda: finished(folder.parent),
                         cleanup=lambda: remove_owned(tmp)):
        mark_created(tmp, "pretraining checkpoint")
        model.save_pretrained(tmp, state_dict=model_state)
        tokenizer.save_pretrained(tmp)
        full = {"schema": SCHEMA, **meta, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")}
        (tmp / META).write_text(json.dumps(full, indent=1))
        if state is not None:
            save_state(tmp / STATE, state)
        replace_owned(tmp, folder, legacy_checkpoint)
    return folder


def legacy_checkpoint(folder: Path) -> bool:
    """A checkpoint a biobench before the ownership marker wrote: its biobench_pretrain.json has this schema."""
    try:
        return read_meta(folder).get("schema") == SCHEMA
    except (OSError, ValueError, AttributeError):
        return False


def _tensor_bytes(obj: Any) -> int:
    """Bytes of the tensors in a (nested) state: what a checkpoint is about to write."""
    if isinstance(obj, torch.Tensor):
        return obj.numel() * obj.element_size()
    if isinstance(obj, dict):
        return sum(_tensor_bytes(v) for v in obj.values())
    if isinstance(obj, list | tuple):
        return sum(_tensor_bytes(v) for v in obj)
    return 0


def finished(out: Path) -> str:
    """What a full disk cannot harm: the finished checkpoints of a run folder (for DiskFullError lines)."""
    return f"{len(list(Path(out).glob(f'*/{META}')))} finished checkpoint(s) in {out} are safe"


def read_meta(folder: Path) -> dict[str, Any]:
    return json.loads((Path(folder) / META).read_text())


def latest(out: Path) -> Path | None:
    """The most advanced resumable checkpoint under `out` (by tokens seen)."""
    best, best_tokens = None, -1
    for meta_file in Path(out).glob(f"*/{META}"):
        if not any((meta_file.parent / name).exists() for name in (STATE, LEGACY_STATE)):
            continue  # a legacy state still counts: resolve_resume then says why it cannot be used
        seen = json.loads(meta_file.read_text()).get("tokens", {}).get("seen", 0)
        if seen > best_tokens:
            best, best_tokens = meta_file.parent, seen
    return best


def resolve_resume(resume: str | Literal[True], out: Path, recipe: str) -> Path:
    """The folder to resume from (explicit path, or the latest under --out), checked against the recipe."""
    folder = latest(out) if resume is True else Path(resume)
    if folder is None:
        raise ConfigError(f"--resume: no resumable checkpoint (folder with {STATE}) under {out}")
    if (folder / META).exists() and not (folder / STATE).exists() and (folder / LEGACY_STATE).exists():
        raise ConfigError(_legacy_message(folder / LEGACY_STATE))
    if not (folder / META).exists() or not (folder / STATE).exists():
        raise ConfigError(f"--resume {folder}: not a biobench pretrain checkpoint (needs {META} and {STATE})")
    meta = read_meta(folder)
    if meta.get("recipe") != recipe:
        raise ConfigError(f"--resume {folder} was written by recipe '{meta.get('recipe')}', not '{recipe}': "
                          f"resume with --recipe {meta.get('recipe')} or start a fresh --out")
    return folder


def _legacy_message(path: Path) -> str:
    folder = path.parent
    return (f"--resume: {path} was written by an older biobench as a pickle, which is no longer loaded "
            f"(unpickling a file can run any code); it cannot resume the run exactly: finish it with the biobench "
            f"version that wrote it, or continue from its weights as a new run (--model {folder} and a fresh --out)")


def _not_state_message(path: Path, reason: str) -> str:
    return (f"--resume: {path} is not a biobench trainer state file ({reason}); it may be corrupt, replaced, or "
            f"written by an older biobench: resume from a checkpoint this version wrote, or start a fresh --out")


def save_state(path: Path, state: Mapping[str, Any]) -> None:
    """Write the resume state: tensors as safetensors entries, the rest as JSON in the file's metadata."""
    from safetensors.torch import save_file

    tensors: dict[str, torch.Tensor] = {}
    tree = _encode(dict(state), tensors, "state")
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(path), metadata={"format": "pt", STATE_KEY: json.dumps({"schema": STATE_SCHEMA, "state": tree})})


def load_state(folder: Path) -> dict[str, Any]:
    """Read the resume state of a checkpoint folder without unpickling anything; a file that is not one
    (a planted pickle, a legacy trainer_state.pt, a truncated write) is one ConfigError naming it."""
    from safetensors import safe_open

    path = Path(folder) / STATE
    if not path.exists() and (Path(folder) / LEGACY_STATE).exists():
        raise ConfigError(_legacy_message(Path(folder) / LEGACY_STATE))
    try:
        with safe_open(str(path), framework="pt", device="cpu") as handle:
            metadata = handle.metadata() or {}
            tensors = {name: handle.get_tensor(name) for name in handle.keys()}  # noqa: SIM118 (not a dict)
    except Exception as err:  # safetensors raises its own error type (and OSError) for anything unparsable
        reason = "a pickle" if _looks_pickled(path) else f"unreadable as safetensors: {str(err).splitlines()[0][:120]}"
        raise ConfigError(_not_state_message(path, reason)) from err
    try:
        header = json.loads(metadata[STATE_KEY])
        if header.get("schema") != STATE_SCHEMA:
            raise ValueError(f"schema {header.get('schema')!r}, expected {STATE_SCHEMA!r}")
        state = _decode(header["state"], tensors)
        missing = {"optimizer", "trainer", "rng"} - set(state)
        if missing:
            raise ValueError(f"no {', '.join(sorted(missing))}")
    except (KeyError, TypeError, ValueError, AttributeError) as err:
        raise ConfigError(_not_state_message(path, f"bad biobench metadata: {err}")) from err
    return state


def _looks_pickled(path: Path) -> bool:
    """torch.save writes a zip archive, pickle protocol 2+ starts with PROTO (0x80)."""
    try:
        with path.open("rb") as fh:
            head = fh.read(4)
    except OSError:
        return False
    return head.startswith((b"PK\x03\x04", b"\x80"))


def _encode(obj: Any, tensors: dict[str, torch.Tensor], path: str) -> Any:
    """A JSON tree of `obj`; every tensor moves to `tensors` under its tree path and is replaced by a reference."""
    if isinstance(obj, torch.Tensor):
        if path in tensors:
            raise ValueError(f"two tensors at state path {path!r}")
        tensors[path] = obj.detach().to("cpu", copy=True).contiguous()  # a copy: safetensors refuses shared storage
        return {TENSOR: path}
    if isinstance(obj, tuple):
        return {TUPLE: [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]}
    if isinstance(obj, list):
        return [_encode(v, tensors, f"{path}.{i}") for i, v in enumerate(obj)]
    if isinstance(obj, Mapping):
        if all(isinstance(k, str) for k in obj) and not (len(obj) == 1 and next(iter(obj)) in (TENSOR, TUPLE, ITEMS)):
            return {k: _encode(v, tensors, f"{path}.{k}") for k, v in obj.items()}
        if not all(isinstance(k, (str, int)) for k in obj):
            raise TypeError(f"state path {path!r}: dict keys must be str or int")
        return {ITEMS: [[k, _encode(v, tensors, f"{path}.{k}")] for k, v in obj.items()]}
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    raise TypeError(f"state path {path!r}: cannot store a {type(obj).__name__} (tensors, JSON values, tuples only)")


def _decode(node: Any, tensors: dict[str, torch.Tensor]) -> Any:
    if isinstance(node, list):
        return [_decode(v, tensors) for v in node]
    if isinstance(node, dict):
        if len(node) == 1 and TENSOR in node:
            return tensors[node[TENSOR]]
        if len(node) == 1 and TUPLE in node:
            return tuple(_decode(v, tensors) for v in node[TUPLE])
        if len(node) == 1 and ITEMS in node:
            return {k: _decode(v, tensors) for k, v in node[ITEMS]}
        return {k: _decode(v, tensors) for k, v in node.items()}
    return node
