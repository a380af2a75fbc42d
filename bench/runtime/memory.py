"""A model's memory, estimated from its config.json before it is built, and the memory there is to hold it.

Why: a model folder or hub id is untrusted input, and transformers believes its config. `vocab_size` 2,000,000
allocated 3.3 GB before a traceback, 2e9 tried a 3 TB allocation, 100,000 layers built modules for minutes.
The parameter count of the encoders biobench evaluates follows from a handful of config keys, so it is counted
here (no torch, no allocation) and a model that cannot fit is refused in one line before anything is built:
by `biobench eval` and `load_encoder` (bench/eval/encoder.py), by `biobench pretrain` (training/loading.py) and
by the queue worker before it runs a request (bench/service/worker.py).

What counts: BERT, RoBERTa, CamemBERT, XLM-RoBERTa, ELECTRA, DistilBERT and ModernBERT are counted exactly (the
parameters of transformers' AutoModel for them, pooler included: tests/runtime/test_memory.py builds each from a
config and compares). Any other architecture that states vocab_size / hidden_size / num_hidden_layers /
intermediate_size is counted by its embedding and weight matrices alone: a lower bound, so the check never
refuses a model that would fit. One without those keys is not estimated (`ParamEstimate.params` None, with a
note) and loads as before. Fine-tuning keeps float32 weights, their gradients and AdamW's two moments: 16 bytes
per parameter on the training device (activations come on top, so the check is a floor, not a promise).

It lives in the runtime layer (torch imported lazily, only for a CUDA device's free memory) so that eval,
training and the service share it; docs/RELIABILITY.md states the promise.
"""

from __future__ import annotations

import math
import os
import re
import subprocess
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biobench.errors import ConfigError, ModelLoadError

GB = 10**9
LIMIT_ENV = "BIOBENCH_MAX_MODEL_GB"
MAX_LAYERS = 1_000  # the deepest encoders have 48-96 layers; 100,000 layers built for minutes before failing
FP32, TRAIN_BYTES = 4, 16  # bytes per parameter: float32 weights; weights + gradients + AdamW's two moments
BERT_LIKE = {"bert", "roberta", "camembert", "xlm-roberta", "xlm_roberta", "electra", "roberta-prelayernorm"}
KEYS = ("vocab_size", "hidden_size", "num_hidden_layers", "intermediate_size")
MAX_PARAMS_PER_BYTE = 2  # 4-bit quantised weights; no encoder checkpoint stores its parameters in fewer bits
Exactness = Literal["exact", "lower bound", "unknown"]


@dataclass(frozen=True)
class ParamEstimate:
    """The parameter count a config implies: `exact` for the architectures above, a `lower bound` for other
    architectures with the usual keys, `unknown` (params None) otherwise; `note` says which."""

    params: int | None
    exactness: Exactness
    note: str

    def bytes(self, per_param: int) -> int:
        return (self.params or 0) * per_param


def _whole(config: dict[str, Any], key: str, where: str) -> int | None:
    """A config value that must be a positive whole number (2e9 in JSON is a float: accepted when whole); a
    negative, fractional, non-finite or textual one is refused in one line, as transformers would crash on it.
    None when the key is absent."""
    value = config.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float) or (
            isinstance(value, float) and (not math.isfinite(value) or not value.is_integer())) or value < 0:
        raise ModelLoadError(f"{where}: {key} {str(value)[:40]!r} is not a whole number of 0 or more; "
                             "fix the model's config.json")
    return int(value)


def _whole_or(config: dict[str, Any], key: str, where: str, default: int) -> int:
    value = _whole(config, key, where)
    return default if value is None else value


def _sizes(config: dict[str, Any], keys: tuple[str, str, str, str], where: str,
           layers: str) -> tuple[int, int, int, int] | None:
    """vocabulary, width, layers, feed-forward width (each checked; the layer count bounded), or None when one
    of them is absent."""
    v, h, n, i = (_whole(config, k, where) for k in keys)
    if n is not None:
        _check_layers(n, where, layers)
    if v is None or h is None or n is None or i is None:
        return None
    return v, h, n, i


def estimate_params(config: dict[str, Any], where: str = "config.json") -> ParamEstimate:
    """The parameters of the AutoModel a config.json describes, counted without building it (module doc)."""
    kind = str(config.get("model_type") or "").lower()
    if kind == "distilbert":
        sizes = _sizes(config, ("vocab_size", "dim", "n_layers", "hidden_dim"), where, "n_layers")
        if sizes is None:
            return ParamEstimate(None, "unknown", f"{where}: a DistilBERT config without vocab_size/dim/n_layers/"
                                 "hidden_dim; its memory was not estimated")
        v, h, n, i = sizes
        p = _whole_or(config, "max_position_embeddings", where, 512)
        per_layer = 4 * h * h + 4 * h + 2 * h * i + i + h + 4 * h
        return ParamEstimate(v * h + p * h + 2 * h + n * per_layer, "exact", "DistilBERT")
    sizes = _sizes(config, KEYS, where, "num_hidden_layers")
    if sizes is None:
        return ParamEstimate(None, "unknown", f"{where}: no {'/'.join(KEYS)}; its memory was not estimated")
    v, h, n, i = sizes
    if kind in BERT_LIKE:
        p = _whole_or(config, "max_position_embeddings", where, 512)
        t = _whole_or(config, "type_vocab_size", where, 2)
        e = _whole_or(config, "embedding_size", where, h) if kind == "electra" else h
        embeddings = v * e + p * e + t * e + 2 * e + (e * h + h if e != h else 0)
        per_layer = 4 * h * h + 2 * h * i + 9 * h + i  # q, k, v, output (+biases), 2 layer norms, feed-forward
        pooler = 0 if kind == "electra" else h * h + h
        return ParamEstimate(embeddings + n * per_layer + pooler, "exact", kind)
    if kind == "modernbert":
        bias = lambda name: 1 if config.get(name, False) else 0  # noqa: E731 - ModernBERT's defaults: no biases
        norm = h * (1 + bias("norm_bias"))
        attn = 3 * h * h + 3 * h * bias("attention_bias") + h * h + h * bias("attention_bias")
        mlp = 2 * h * i + 2 * i * bias("mlp_bias") + i * h + h * bias("mlp_bias")
        # embedding norm + final norm; each layer an attention norm (layer 0's is an identity) and an MLP norm
        return ParamEstimate(v * h + 2 * norm + n * (attn + mlp + 2 * norm) - norm, "exact", "ModernBERT")
    return ParamEstimate(v * h + n * (4 * h * h + 2 * h * i), "lower bound",
                         f"{kind or 'unknown'} architecture: its embedding and weight matrices only")


def _check_layers(layers: int, where: str, key: str) -> None:
    if layers > MAX_LAYERS:
        raise ModelLoadError(f"{where}: {key} {layers:,} is over {MAX_LAYERS:,}, more than any encoder has "
                             "(building it alone would take minutes); fix the model's config.json")


def operator_limit_gb(flag: float | None) -> float | None:
    """The operator's cap on a model's float32 weights, in GB: the command's --max-model-gb, else
    $BIOBENCH_MAX_MODEL_GB, else none. A value that is not a positive finite number is refused in one line."""
    raw: Any = flag if flag is not None else os.environ.get(LIMIT_ENV) or None
    if raw is None:
        return None
    what = "--max-model-gb" if flag is not None else f"${LIMIT_ENV}"
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or value <= 0:
        raise ConfigError(f"{what} {str(raw)[:40]!r}: give a positive number of GB (the largest model's float32 "
                          "weights this machine should load)")
    return value


def available_ram() -> int:
    """Bytes this process may still allocate: MemAvailable, capped by a cgroup v2 memory limit (a container)."""
    available = os.sysconf("SC_AVPHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                available = int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        limit = Path("/sys/fs/cgroup/memory.max").read_text().strip()
        if limit != "max":
            used = int(Path("/sys/fs/cgroup/memory.current").read_text().strip())
            available = min(available, int(limit) - used)
    except (OSError, ValueError):
        pass
    return max(available, 0)


def _cuda_index(device: str) -> int:
    match = re.fullmatch(r"cuda(?::(\d+))?", device)
    return int(match[1] or 0) if match else 0


def cuda_memory_smi(device: str) -> int | None:
    """The total memory of a CUDA device read from nvidia-smi, None without one. For the queue worker, which
    must not create a CUDA context (it would hold memory its eval child needs); CUDA_VISIBLE_DEVICES is
    followed when it lists indices."""
    index = _cuda_index(device)
    visible = [v.strip() for v in os.environ.get("CUDA_VISIBLE_DEVICES", "").split(",") if v.strip()]
    if visible:
        if index >= len(visible) or not visible[index].isdigit():
            return None
        index = int(visible[index])
    try:
        out = subprocess.run(["nvidia-smi", f"--id={index}", "--query-gpu=memory.total",
                              "--format=csv,noheader,nounits"], capture_output=True, text=True, timeout=20, check=True)
        return int(out.stdout.split()[0]) * 2**20  # MiB
    except (OSError, subprocess.SubprocessError, ValueError, IndexError):
        return None


def device_without_torch(name: str | None) -> str:
    """The device a --device value means, decided without importing torch (the worker's): an explicit one as
    given; none or "auto": "cuda" when nvidia-smi sees a GPU, else "cpu"."""
    if name not in (None, "", "auto"):
        return str(name)
    return "cuda" if cuda_memory_smi("cuda") else "cpu"


def device_memory(device: str, use_torch: bool = True) -> tuple[int, str] | None:
    """(bytes free for a model on `device`, how it was measured), None when unknown. CPU: available RAM. CUDA:
    torch.cuda.mem_get_info's free memory, or (use_torch False: the worker) nvidia-smi's total."""
    if device.startswith("cuda"):
        if not use_torch:
            total = cuda_memory_smi(device)
            return (total, f"{device} has {total / GB:.1f} GB") if total else None
        import torch

        if not torch.cuda.is_available():
            return None
        free, _ = torch.cuda.mem_get_info(_cuda_index(device))
        return free, f"{device} has {free / GB:.1f} GB free"
    if device in ("cpu", ""):
        ram = available_ram()
        return ram, f"this machine has {ram / GB:.1f} GB of RAM available"
    return None  # mps and others: no dependable figure


def check_model_memory(config: dict[str, Any], where: str, device: str, *, training: bool = True,
                       limit_gb: float | None = None, use_torch: bool = True,
                       weight_bytes: int | None = None) -> ParamEstimate:
    """Refuse (ModelLoadError, one line) a model whose config implies more than the operator's limit
    (float32 weights over `limit_gb`, or $BIOBENCH_MAX_MODEL_GB) or than `device` can hold: 16 bytes per
    parameter to fine-tune (`training`), 4 to load, plus its float32 copy in RAM when the device is a GPU (the
    grid keeps a pristine CPU copy). `weight_bytes`, the size of a local folder's weight files: a config that
    claims more parameters than they can hold (over 2 per byte: 4-bit weights at most) does not describe them
    and is refused before transformers allocates the claimed size (vocab_size 2,000,000 over MiniLM's weights
    fit in RAM, allocated 3.3 GB, then failed with a traceback). Returns the estimate."""
    estimate = estimate_params(config, where)
    if estimate.params is None:
        return estimate
    weights = estimate.bytes(FP32)
    count = f"{estimate.params:,} parameters" + (" at least" if estimate.exactness == "lower bound" else "")
    if weight_bytes is not None and estimate.params > MAX_PARAMS_PER_BYTE * weight_bytes:
        raise ModelLoadError(f"{where}: the config describes {count}, but the weight files hold "
                             f"{weight_bytes / GB:,.3f} GB, room for far fewer: the config does not describe these "
                             "weights; not loaded (fix its config.json)")
    cap = operator_limit_gb(limit_gb)
    if cap is not None and weights > cap * GB:
        raise ModelLoadError(f"{where}: the model has {count} ({weights / GB:,.1f} GB in float32), over this "
                             f"machine's limit of {cap:g} GB (--max-model-gb / ${LIMIT_ENV}); not loaded")
    per_param = TRAIN_BYTES if training else FP32
    needs = [(device, estimate.bytes(per_param))]
    if device.startswith("cuda"):
        needs.append(("cpu", weights))
    else:
        needs = [("cpu", estimate.bytes(per_param + (FP32 if training else 0)))]
    for where_, need in needs:
        have = device_memory(where_, use_torch)
        if have is not None and need > have[0]:
            what = "fine-tune" if training else "load"
            raise ModelLoadError(
                f"{where}: the model has {count}; to {what} it needs about {need / GB:,.1f} GB"
                f"{' (weights, gradients and AdamW moments in float32)' if training and where_ == device else ''}"
                f" and {have[1]}; not loaded (a smaller model, another device, or fix its config.json)")
    return estimate


def add_max_model_gb_argument(parser: Any) -> None:
    """--max-model-gb, one wording for eval, pretrain and the worker (checked by `operator_limit_gb`)."""
    parser.add_argument("--max-model-gb", metavar="GB", default=None,
                        help="refuse a model whose float32 weights exceed GB, estimated from its config.json before "
                        f"it is built (default ${LIMIT_ENV}, else only the device's memory bounds it)")
