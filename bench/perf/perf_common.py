"""Shared helpers of the performance scripts (finetune_speed, pretrain_speed, scaling, gpu_check.sh).

Why these choices: performance claims are *ratios measured in one run on the same machine*, so each measured
arm runs in its own fresh process (spawn) — no warm caches or allocator state shared between arms, and a CPU
peak-memory figure that belongs to that arm alone. Peak memory is torch.cuda.max_memory_allocated on CUDA and
the process RSS sampled by a background thread on CPU (tracemalloc does not see torch's allocator). Every
script prints its table, writes its JSON with --out, and prints `ratio: X.XX` as its last line.

The machine is shared, so every arm measured through `run_isolated` also records its own CPU time and the
machine's busy CPU over its window (/proc/stat): an arm during which other processes used more than
DISTURBED_SHARE of the cores is flagged, the flag is printed next to its figure and next to the final ratio,
and `run_arms` alternates arms (A B, B A, ...) and reports each arm's median over repeats.
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

from biobench.errors import BiobenchError
from biobench.runtime.console import HelpFormatter
from biobench.runtime.files import atomic_write
from biobench.training import flops
from biobench.training.presets import SHAPES, modernbert_config

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
    from transformers import ModernBertForMaskedLM

    vocab = tokenizer if tokenizer is not None else VocabSpec(shape_params(shape)["vocab_size"])
    torch.manual_seed(seed)
    return ModernBertForMaskedLM(modernbert_config(vocab, shape, **overrides))


# ---------------------------------------------------------------- command line, environment, output
def base_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=description, formatter_class=HelpFormatter)
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
    try:
        rc = main()
        return rc if isinstance(rc, int) else 0
    except BiobenchError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2


def finish(report: dict[str, Any], out: Path | None, ratio: float | None) -> int:
    """Write the JSON (when asked) and print the load average, then the headline ratio as the very last line,
    with the disturbance flag beside it when an arm of this run was disturbed (`disturbance_summary`)."""
    report["ratio"] = ratio
    flag = disturbance_summary()
    report["disturbance"] = {"flag": flag, "loadavg": [round(x, 2) for x in os.getloadavg()],
                             "arms": [{"arm": name, **w.to_dict()} for name, w in ARM_WINDOWS]}
    if out is not None:
        atomic_write(out, json.dumps(report, indent=2, default=str))  # a full disk: one line, no .tmp left
        print(f"wrote {out}")
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}")
    text = f"ratio: {ratio:.2f}" if ratio is not None else "ratio: nan"
    print(f"{text}  {flag}" if flag else text, flush=True)
    return 0 if ratio is not None else 1


# ---------------------------------------------------------------- disturbance
# Why: this machine is shared. One busy neighbour turned a 1.69x fine-tuning lead into 0.31x (issue 42), and a
# disturbed figure read later looks exactly like a regression. So every arm records its own CPU time and the
# machine's busy CPU over its window; what the others used is the difference, as a share of all cores.
DISTURBED_SHARE = 0.10  # others using more than this share of the cores during an arm flags it


def proc_stat_ticks(text: str | None = None) -> tuple[int, int] | None:
    """(busy, total) clock ticks of all cores since boot from the `cpu` line of /proc/stat (`text`: its
    content, for tests); None where there is no /proc/stat. Idle is idle + iowait; guest time is already
    inside user and nice, so only the first eight fields are summed."""
    if text is None:
        try:
            text = Path("/proc/stat").read_text()
        except OSError:
            return None
    for line in text.splitlines():
        fields = line.split()
        if fields and fields[0] == "cpu":
            ticks = [int(v) for v in fields[1:9]]
            total = sum(ticks)
            return total - ticks[3] - (ticks[4] if len(ticks) > 4 else 0), total
    return None


def own_cpu_s() -> float:
    """CPU seconds of this process and of its children that were waited for (a spawned arm, its workers)."""
    import resource

    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))


@dataclass(frozen=True)
class CpuWindow:
    """One arm's window: wall seconds, the arm's own CPU seconds, and the CPU seconds all cores were busy
    (None where /proc/stat is missing)."""

    wall_s: float
    own_cpu_s: float
    machine_busy_s: float | None
    cores: int

    @property
    def others_share(self) -> float | None:
        """The share of all cores used by other processes during the window (0-1)."""
        if self.machine_busy_s is None or self.wall_s <= 0:
            return None
        return max(0.0, self.machine_busy_s - self.own_cpu_s) / (self.wall_s * self.cores)

    @property
    def disturbed(self) -> bool:
        share = self.others_share
        return share is not None and share > DISTURBED_SHARE

    @property
    def flag(self) -> str:
        """'' for a quiet arm, else what disturbed it, printed next to its figure."""
        share = self.others_share
        if share is None:
            return "(disturbance unknown: no /proc/stat)"
        return f"DISTURBED (others used {share:.0%} of {self.cores} cores)" if self.disturbed else ""

    def to_dict(self) -> dict[str, Any]:
        share = self.others_share
        return {"wall_s": round(self.wall_s, 3), "own_cpu_s": round(self.own_cpu_s, 3),
                "machine_busy_s": None if self.machine_busy_s is None else round(self.machine_busy_s, 3),
                "cores": self.cores, "others_share": None if share is None else round(share, 3),
                "disturbed": self.disturbed}


class ArmClock:
    """Measures one arm's CpuWindow: `with ArmClock() as clock: ...; clock.window`. `ticks` and `cpu` read
    /proc/stat and this process's CPU time (replaced by fakes in tests)."""

    def __init__(self, ticks: Callable[[], tuple[int, int] | None] = proc_stat_ticks,
                 cpu: Callable[[], float] = own_cpu_s, clock: Callable[[], float] = time.perf_counter,
                 cores: int | None = None, hz: int | None = None):
        self.ticks, self.cpu, self.clock = ticks, cpu, clock
        self.cores = cores or os.cpu_count() or 1
        self.hz = hz or (os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100)
        self.window: CpuWindow | None = None

    def __enter__(self) -> ArmClock:
        self._start = (self.clock(), self.cpu(), self.ticks())
        return self

    def __exit__(self, *exc: Any) -> None:
        wall0, cpu0, ticks0 = self._start
        wall1, cpu1, ticks1 = self.clock(), self.cpu(), self.ticks()
        busy = None if ticks0 is None or ticks1 is None else (ticks1[0] - ticks0[0]) / self.hz
        self.window = CpuWindow(wall1 - wall0, cpu1 - cpu0, busy, self.cores)


ARM_WINDOWS: list[tuple[str, CpuWindow]] = []  # every arm run_isolated measured in this process, in order


def disturbance_summary(windows: Sequence[tuple[str, CpuWindow]] | None = None) -> str:
    """'' when every arm was quiet, else 'DISTURBED: 2 of 5 arms (cold 35%, warm 12%)'."""
    windows = ARM_WINDOWS if windows is None else windows
    bad = [(name, w) for name, w in windows if w.disturbed]
    if not bad:
        return ""
    shown = ", ".join(f"{name} {w.others_share:.0%}" for name, w in bad)
    return f"DISTURBED: {len(bad)} of {len(windows)} arms (others' share of the cores: {shown})"


def alternating(arms: Sequence[str], repeats: int) -> list[str]:
    """The order to run `arms` `repeats` times: as given, then reversed, and so on (A B, B A, A B ...), so
    that a load that drifts during the run weighs on every arm alike; report each arm's median."""
    rounds = [list(arms) if r % 2 == 0 else list(reversed(arms)) for r in range(max(1, repeats))]
    return [arm for round_ in rounds for arm in round_]


def median_run(runs: Sequence[dict[str, Any]], key: str) -> dict[str, Any]:
    """The run whose `key` is the median of the runs (the lower middle of an even count), with every run's value
    and how many of them were disturbed."""
    ordered = sorted(runs, key=lambda r: (r.get(key) is None, r.get(key) or 0))
    out = dict(ordered[(len(ordered) - 1) // 2])
    out[f"{key}_all"] = [r.get(key) for r in runs]
    out["disturbed_runs"] = sum(bool(r.get("cpu", {}).get("disturbed")) for r in runs)
    return out


def arm_flag(out: dict[str, Any]) -> str:
    """The disturbance flag of an arm's result dict (its `cpu` window, as run_isolated adds it)."""
    cpu = out.get("cpu") or {}
    if cpu.get("others_share") is None:
        return ""
    return f"DISTURBED (others used {cpu['others_share']:.0%} of {cpu['cores']} cores)" if cpu["disturbed"] else ""


def run_arms(arms: Sequence[str], run: Callable[[str], dict[str, Any]], repeats: int, key: str) -> dict[str, Any]:
    """Each arm `repeats` times in `alternating` order (`run(arm)` measures one, through run_isolated); each
    run is printed with its disturbance flag; per arm the `median_run` by `key`."""
    runs: dict[str, list[dict[str, Any]]] = {arm: [] for arm in arms}
    for arm in alternating(arms, repeats):
        out = run(arm)
        runs[arm].append(out)
        print(f"  {arm}: {key} {fmt(out.get(key), ',.2f')} {arm_flag(out)}".rstrip(), flush=True)
    return {arm: median_run(outs, key) for arm, outs in runs.items()}


# ---------------------------------------------------------------- isolation, memory
def run_isolated(fn: Callable[..., dict[str, Any]], *args: Any, isolate: bool = True, arm_name: str | None = None,
                 **kwargs: Any) -> dict[str, Any]:
    """fn(*args, **kwargs) in a fresh spawned process (fn must be importable by name), so each arm starts
    cold and its peak RSS is its own. `isolate=False` runs it here (tests, debugging). The arm's CpuWindow
    (its own CPU time, the machine's busy CPU, whether others disturbed it) is added to a dict result as
    `cpu` and kept in ARM_WINDOWS under `arm_name` (default: fn's name) for `finish`."""
    with ArmClock() as clock:
        if not isolate:
            out = fn(*args, **kwargs)
        else:
            import multiprocessing
            from concurrent.futures import ProcessPoolExecutor

            with ProcessPoolExecutor(max_workers=1, mp_context=multiprocessing.get_context("spawn")) as pool:
                out = pool.submit(fn, *args, **kwargs).result()
    assert clock.window is not None
    ARM_WINDOWS.append((arm_name or str(getattr(fn, "__name__", "arm")), clock.window))
    if isinstance(out, dict):
        out = {**out, "cpu": clock.window.to_dict()}
    return out


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
    dense = 6 * n_params + flops.dense_attention_flops_per_token(config, seq_len)
    return {"flops_per_token": flops.flops_per_token(n_params, config, seq_len, causal),
            "mfu": flops.mfu(n_params, config, seq_len, tokens_per_s, peak_flops, causal),
            "mfu_dense_attention": dense * tokens_per_s / peak_flops}
