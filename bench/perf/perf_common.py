"""Shared helpers of the performance scripts (finetune_speed, pretrain_speed, scaling, gpu_check.sh).

Why these choices: performance claims are *ratios measured in one run on the same machine*, so each measured
arm runs in its own fresh process (spawn) — no warm caches or allocator state shared between arms, and a CPU
peak-memory figure that belongs to that arm alone. Peak memory is torch.cuda.max_memory_allocated on CUDA and
the process RSS sampled by a background thread on CPU (tracemalloc does not see torch's allocator). Every
script prints its table, writes its JSON with --out, and prints `ratio: X.XX` as its last line.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import os
import platform
import sys
import threading
import time
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.runtime.files import atomic_write

OFFLINE_ENVIRONMENT = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1",
                       "TOKENIZERS_PARALLELISM": "false"}


def offline_environment() -> None:
    """Called by each script's main() (never on import, so importing a script changes nothing): no hub
    look-ups, no tokenizer thread pools; values the user set win. Spawned arms inherit them."""
    for name, value in OFFLINE_ENVIRONMENT.items():
        os.environ.setdefault(name, value)


def shape_params(shape: str) -> dict[str, Any]:
    """ModernBertConfig keyword arguments of a named shape (biobench.training.presets.SHAPES: tiny, small,
    base)."""
    from biobench.training.presets import SHAPES

    if shape not in SHAPES:
        raise SystemExit(f"unknown shape {shape!r}; choose one of {', '.join(SHAPES)}")
    return dict(SHAPES[shape])


@dataclass(frozen=True)
class VocabSpec:
    """Stands in for a tokenizer where only ids matter (synthetic inputs): biobench.training.presets.modernbert_config
    reads len() and the special-token ids. Ids 0-4 are [PAD] [UNK] [CLS] [SEP] [MASK] as in biobench.training.presets."""

    size: int
    pad_token_id: int = 0
    cls_token_id: int = 2
    sep_token_id: int = 3
    mask_token_id: int = 4

    def __len__(self) -> int:
        return self.size

    @property
    def all_special_ids(self) -> list[int]:
        return [0, 1, 2, 3, 4]


def build_modernbert(shape: str, tokenizer: Any = None, seed: int = 0, **overrides):
    """A freshly initialised ModernBertForMaskedLM of a named shape; `tokenizer` None = synthetic vocabulary
    of the shape's size."""
    import torch
    from biobench.training.presets import modernbert_config
    from transformers import ModernBertForMaskedLM

    vocab = tokenizer if tokenizer is not None else VocabSpec(shape_params(shape)["vocab_size"])
    torch.manual_seed(seed)
    return ModernBertForMaskedLM(modernbert_config(vocab, shape, **overrides))


# ---------------------------------------------------------------- command line, environment, output
def base_parser(description: str) -> argparse.ArgumentParser:
    from biobench.runtime.console import (
        HelpFormatter,  # biobench's: a default shown once, and only when there is one
    )

    parser = argparse.ArgumentParser(description=description, formatter_class=HelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small sizes: a few minutes on 2 CPU cores")
    parser.add_argument("--out", type=Path, default=None, help="write the measurements to this JSON file")
    parser.add_argument("--device", default="auto", help="cpu, cuda, cuda:N or auto (cuda when available)")
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads (default: torch's)")
    parser.add_argument("--seed", type=int, default=42, help="random seed of the generated data and models")
    return parser


def check_arms(parser: argparse.ArgumentParser, arms: str, known) -> list[str]:
    """The comma-separated --arms value as a list; an unknown arm is a usage error naming the choices."""
    chosen = [a for a in arms.split(",") if a]
    unknown = set(chosen) - set(known)
    if unknown:
        parser.error(f"unknown arm(s) {sorted(unknown)}; choose from {', '.join(known)}")
    return chosen


def init_arm(threads: int | None) -> None:
    """Start of every measured process: torch threads, and transformers' load reports / bars silenced.

    On an oversubscribed CPU (load above the core count) pass --threads 1: OpenMP workers that wait for a
    descheduled sibling at every barrier made a tiny ModernBERT step 30-100x slower here with 2 threads."""
    import torch
    from transformers.utils import logging as hf_logging

    if threads:
        torch.set_num_threads(threads)
    hf_logging.set_verbosity_error()
    hf_logging.disable_progress_bar()


def environment(device: str) -> dict[str, Any]:
    """What the figures were measured on (versions, cores, load, accelerator)."""
    import torch
    import transformers

    env: dict[str, Any] = {
        "created": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(), "device": device,
        "loadavg": [round(x, 2) for x in os.getloadavg()], "argv": sys.argv,
    }
    if device.startswith("cuda"):
        env["gpu"] = torch.cuda.get_device_name(device)
    return env


def safe_ratio(numerator: float | None, denominator: float | None) -> float | None:
    if not numerator or not denominator:
        return None
    return numerator / denominator


def fmt(value: Any, spec: str = ",.1f") -> str:
    if value is None:
        return "-"
    if isinstance(value, float) and math.isnan(value):
        return "nan"
    return format(value, spec) if isinstance(value, int | float) else str(value)


def print_table(rows: Sequence[dict[str, Any]], columns: Sequence[tuple[str, str, str]]) -> None:
    """A plain-text table: columns are (key, header, format spec)."""
    cells = [[header for _, header, _ in columns]]
    cells += [[fmt(row.get(key), spec) for key, _, spec in columns] for row in rows]
    widths = [max(len(line[i]) for line in cells) for i in range(len(columns))]
    for n, line in enumerate(cells):
        print("  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)))
        if n == 0:
            print("  ".join("-" * w for w in widths))


def script(main: Callable[[], Any]) -> int:
    """Run a perf script's main: a biobench error (a full disk, a missing file) is one `error:` line, exit 2."""
    from biobench.errors import BiobenchError

    try:
        rc = main()
        return rc if isinstance(rc, int) else 0
    except BiobenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def finish(report: dict[str, Any], out: Path | None, ratio: float | None) -> int:
    """Write the JSON (when asked) and print the headline ratio as the very last line."""
    report["ratio"] = ratio
    if out is not None:
        atomic_write(out, json.dumps(report, indent=2, default=str))  # a full disk: one line, no .tmp left
        print(f"wrote {out}")
    print(f"ratio: {ratio:.2f}" if ratio is not None else "ratio: nan", flush=True)
    return 0 if ratio is not None else 1


# ---------------------------------------------------------------- isolation, memory
def run_isolated(fn: Callable[..., dict[str, Any]], *args: Any, isolate: bool = True, **kwargs: Any) -> dict[str, Any]:
    """fn(*args, **kwargs) in a fresh spawned process (fn must be importable by name), so each arm starts
    cold and its peak RSS is its own. `isolate=False` runs it here (tests, debugging)."""
    if not isolate:
        return fn(*args, **kwargs)
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
        return pool.submit(fn, *args, **kwargs).result()


def rss_mb() -> float:
    import psutil

    return psutil.Process().memory_info().rss / 2**20


class PeakMemory:
    """Peak memory of the enclosed block, in MiB: CUDA allocated bytes on a GPU, sampled process RSS on CPU
    (every `interval` s; `start_mb` is the RSS when the block began, so `peak_mb - start_mb` is what the
    block itself added)."""

    def __init__(self, device: str, interval: float = 0.005):
        self.device = str(device)
        self.interval = interval
        self.start_mb = self.peak_mb = 0.0
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self) -> PeakMemory:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)
            torch.cuda.reset_peak_memory_stats(self.device)
            self.start_mb = torch.cuda.memory_allocated(self.device) / 2**20
        else:
            self.start_mb = self.peak_mb = rss_mb()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self) -> None:
        while not self._stop.wait(self.interval):
            self.peak_mb = max(self.peak_mb, rss_mb())

    def __exit__(self, *exc: Any) -> None:
        if self.device.startswith("cuda"):
            import torch

            torch.cuda.synchronize(self.device)
            self.peak_mb = torch.cuda.max_memory_allocated(self.device) / 2**20
        else:
            self._stop.set()
            assert self._thread is not None
            self._thread.join()
            self.peak_mb = max(self.peak_mb, rss_mb())

    def to_dict(self) -> dict[str, Any]:
        kind = "cuda_max_allocated" if self.device.startswith("cuda") else "process_rss"
        return {"kind": kind, "start_mb": round(self.start_mb, 1), "peak_mb": round(self.peak_mb, 1),
                "added_mb": round(self.peak_mb - self.start_mb, 1)}


def synchronize(device: str) -> None:
    if str(device).startswith("cuda"):
        import torch

        torch.cuda.synchronize(device)


def time_call(fn: Callable[[], Any], device: str, repeats: int, warmup: int = 1) -> list[float]:
    """Wall seconds of each of `repeats` calls of fn (after `warmup` untimed calls)."""
    for _ in range(warmup):
        fn()
    synchronize(device)
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        synchronize(device)
        times.append(time.perf_counter() - t0)
    return times


def median(values: Iterable[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


# ---------------------------------------------------------------- FLOPs and MFU
def matmul_peak_flops(device: str, dtype: str = "bfloat16", n: int = 8192, seconds: float = 2.0) -> float:
    """Measured dense matmul FLOP/s (n x n x n products of `dtype`), the denominator of our MFU."""
    import torch

    torch_dtype = getattr(torch, dtype)
    a = torch.randn(n, n, device=device, dtype=torch_dtype)
    b = torch.randn(n, n, device=device, dtype=torch_dtype)
    for _ in range(3):
        a @ b
    synchronize(device)
    iters, t0 = 0, time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        for _ in range(10):
            a @ b
        iters += 10
        synchronize(device)
    return 2 * n**3 * iters / (time.perf_counter() - t0)


def mfu_report(n_params: int, config: Any, seq_len: int, tokens_per_s: float, peak_flops: float,
               causal: bool = False) -> dict[str, float]:
    """The MFU fields of an arm's JSON, in biobench's convention (biobench.training.flops, the formula the
    pretraining log uses too), plus `mfu_dense_attention` (every layer over the full sequence, PaLM's
    12·L·d·n) for comparison with published figures that count attention that way."""
    from biobench.training import flops

    dense = 6 * n_params + flops.dense_attention_flops_per_token(config, seq_len)
    return {"flops_per_token": flops.flops_per_token(n_params, config, seq_len, causal),
            "mfu": flops.mfu(n_params, config, seq_len, tokens_per_s, peak_flops, causal),
            "mfu_dense_attention": dense * tokens_per_s / peak_flops}
