"""Throughput and peak memory of the contamination check (biobench.analysis.contamination) on a generated corpus.

    python -m biobench.perf.contamination_speed --gb 1 [--data-dir ../shared/data] [--out report.json]

Writes a JSONL corpus of `--gb` GB (French-like documents of 50-2,000 words drawn from a 60,000-word vocabulary,
in 128 MB files, the form of the E3C dumps `pretrain` reads) into a temporary folder, then streams it once
against the task side: the French tasks found under --data-dir (all their splits), else a generated task. Each
size runs in its own process so its peak RSS (ru_maxrss) is its own: the same peak at 0.1 and 1 GB is what
"bounded memory" means. Prints MB/s (corpus bytes on disk / seconds of the check) and the load average.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import os
import random
import resource
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.analysis.contamination import check
from biobench.api.contamination import task_texts as load
from biobench.api.evaluation import select_specs
from biobench.runtime.ownership import mark_created, remove_owned
from biobench.training.corpus import iter_documents

FILE_BYTES = 128 * 2**20


def write_corpus(folder: Path, total_bytes: int, seed: int = 0) -> int:
    """Generated documents in JSONL files; returns the bytes written."""
    rng = random.Random(seed)
    vocab = ["".join(rng.choice("abcdefghijklmnopqrstuvwxyzéèà") for _ in range(rng.randint(2, 11)))
             for _ in range(60_000)]
    written, index = 0, 0
    handle = None
    while written < total_bytes:
        if handle is None or handle.tell() >= FILE_BYTES:
            if handle is not None:
                handle.close()
            handle = (folder / f"part-{index:04d}.jsonl").open("w", encoding="utf-8")
            index += 1
        words = rng.choices(vocab, k=rng.randint(50, 2000))
        line = json.dumps({"text": " ".join(words) + "."}, ensure_ascii=False) + "\n"
        handle.write(line)
        written += len(line.encode("utf-8"))
    if handle is not None:
        handle.close()
    return written


def task_texts(data_dir: str | None) -> tuple[dict, str]:

    if data_dir:
        specs, _ = select_specs(lang="fr")
        texts, _ = load(specs, data_dir, lenient=True)
        if texts:
            return texts, "French tasks under " + Path(data_dir).name
    rng = random.Random(1)
    texts = {("generated", split): [(str(i), " ".join(f"w{rng.randint(0, 9999)}" for _ in range(30)))
                                    for i in range(n)] for split, n in (("train", 5000), ("test", 1000))}
    return texts, "a generated task (6,000 examples)"


def measure(corpus: str, data_dir: str | None, queue: Any) -> None:
    texts, what = task_texts(data_dir)
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    started = time.perf_counter()

    report = check(texts, iter_documents(corpus))
    seconds = time.perf_counter() - started
    queue.put({"tasks": what, "examples": sum(len(v) for v in texts.values()), "seconds": seconds,
               "documents": report["corpus"]["documents"], "words": report["corpus"]["words"],
               "rss_before_mb": base_rss, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024})


def run_size(corpus: Path, data_dir: str | None) -> dict[str, Any]:
    context = multiprocessing.get_context("spawn")
    queue = context.Queue()
    process = context.Process(target=measure, args=(str(corpus), data_dir, queue))
    process.start()
    out = queue.get()
    process.join()
    out["bytes"] = sum(p.stat().st_size for p in corpus.glob("*.jsonl"))
    out["mb_per_s"] = out["bytes"] / 1e6 / out["seconds"]
    return out


def main() -> int:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--gb", type=float, nargs="+", default=[0.1, 1.0], help="corpus sizes in GB (default 0.1 1)")
    parser.add_argument("--data-dir", help="task data (default: generated task)")
    parser.add_argument("--tmp", help="where to write the corpus (default: the system's temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the report as JSON")
    args = parser.parse_args()
    rows = []
    for gb in args.gb:
        folder = mark_created(tempfile.mkdtemp(prefix="contamination-corpus-", dir=args.tmp), "contamination benchmark")
        try:
            written = write_corpus(folder, int(gb * 1e9))
            row = run_size(folder, args.data_dir)
        finally:
            remove_owned(folder)
        row["gb"] = round(written / 1e9, 3)
        rows.append(row)
        print(f"{row['gb']:.2f} GB ({row['documents']:,} documents, {row['words']:,} words) against {row['tasks']} "
              f"({row['examples']:,} examples): {row['seconds']:.1f} s, {row['mb_per_s']:.1f} MB/s, peak RSS "
              f"{row['peak_rss_mb']:.0f} MB (task side loaded: {row['rss_before_mb']:.0f} MB)", flush=True)
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    print(f"load average: {' '.join(load)}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    if args.out:
        args.out.write_text(json.dumps({"rows": rows, "loadavg": load}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
