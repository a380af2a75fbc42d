"""`biobench pretrain`: the CLM-detour continued-pretraining recipe and its controls (paper §3.2).

Single process: `biobench pretrain ...`; several GPUs: `torchrun --nproc_per_node 8 -m biobench.cli pretrain ...`
or `accelerate launch -m biobench.cli pretrain ...` (DDP; --fsdp for large models).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
from pathlib import Path

from biobench.api.pretraining import parse_tokens
from biobench.errors import ConfigError
from biobench.runtime.batching import batch_size_value
from biobench.training.recipes import recipes_help

__all__ = ["add_parser", "parse_tokens", "run"]

def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "pretrain", help="continued pretraining: CLM detour and its controls",
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--list", action="store_true", help="show the recipes and their phases, then exit")
    p.add_argument("--recipe", default="detour", help=f"{recipes_help()} (default: detour)")
    p.add_argument("--model", help="hub id, local folder, or preset:tiny / preset:small / preset:tiny-decoder "
                   "(tokenizer trained on the corpus)")
    p.add_argument("--corpus", help="text file/folder, JSONL(.gz) with a text field, or a hub dataset id")
    p.add_argument("--text-field", default="text", help="JSON field holding the text (default: text)")
    p.add_argument("--tokens", help="phase-1 token budget, e.g. 2M, 10B; phase 2 runs --decay-ratio of it")
    p.add_argument("--out", type=Path, help="output folder: init/, phase1/, final/, step-*/, train_log.jsonl")
    p.add_argument("--decay-ratio", type=float, default=0.10, help="phase-2 length / phase-1 length (default 0.10)")
    p.add_argument("--freeze", action="append", default=[], metavar="A-B@clm|@decay",
                   help="also freeze layers A..B in the CLM (phase 1) or decay (phase 2) phase; repeatable")
    p.add_argument("--batch-size", type=batch_size_value, help="global batch in sequences (default 384; 16 for "
                   "presets on CPU); 'auto' keeps that default and sets --micro-batch-size auto")
    p.add_argument("--seq-len", type=int, help="packed sequence length (default 8192; 512 for presets on CPU)")
    p.add_argument("--micro-batch-size", type=batch_size_value, help="sequences per forward pass per process "
                   "(gradient accumulation reaches --batch-size; default: 16 on CPU, 4 on GPU); 'auto': the largest "
                   "that fits the GPU (halving on out-of-memory), the whole per-process batch on CPU")
    p.add_argument("--lr", type=float, default=2e-4, help="peak learning rate (default 2e-4)")
    p.add_argument("--weight-decay", type=float, default=1e-5, help="decoupled weight decay (default 1e-5)")
    p.add_argument("--warmup-tokens", default="100M", help="phase-1 warmup, capped at 10%% of phase 1 (default 100M)")
    p.add_argument("--grad-clip", type=float, default=1.0, help="gradient-norm clipping, 0 = off (default 1.0)")
    p.add_argument("--save-every", help="also checkpoint every N tokens (e.g. 500M) to step-<tokens>/")
    p.add_argument("--save-minutes", type=float, default=30.0, help="a resumable checkpoint every N minutes of "
                   "training to resume-<tokens>/, replacing the previous one; Ctrl-C or SIGTERM also writes one "
                   "after the current step (default 30; 0 = only on a signal)")
    p.add_argument("--resume", nargs="?", const=True, default=None, metavar="DIR",
                   help="continue from DIR, or from the latest checkpoint under --out")
    p.add_argument("--doc-mask", action="store_true",
                   help="restart positions per document and block cross-document attention (sdpa/eager)")
    p.add_argument("--seed", type=int, default=0, help="model init (presets) and MLM masking (default 0)")
    p.add_argument("--data-seed", type=int, help="order of the packed sequences (default: --seed); fix it and vary "
                   "--seed for the seed-noise control (train_log.jsonl's data_digest shows the order is identical)")
    p.add_argument("--max-documents", type=int, help="read at most this many documents of the corpus")
    p.add_argument("--cache-dir", type=Path, help="tokenised-corpus cache (default ~/.cache/biobench/tokens)")
    p.add_argument("--device", help="cpu, cuda, cuda:1 (default: cuda when available)")
    p.add_argument("--precision", choices=["auto", "bf16", "fp32"], default="auto",
                   help="auto = bf16 autocast on CUDA, fp32 on CPU")
    p.add_argument("--attn", choices=["sdpa", "eager", "flash_attention_2"],
                   help="attention backend (default: flash_attention_2 on CUDA when installed, else sdpa)")
    p.add_argument("--threads", type=int, help="CPU threads (default: the cores not already busy, "
                   "from the load average: a shared machine is faster with fewer threads)")
    p.add_argument("--fsdp", action="store_true", help="shard the model with FSDP2 instead of DDP (multi-GPU)")
    p.add_argument("--gradient-checkpointing", action="store_true",
                   help="recompute activations in the backward pass (less memory at 8192 tokens, ~30%% slower)")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--language", help="model-card language (ISO 639-1, e.g. fr)")
    p.add_argument("--license", help="model-card licence id (e.g. apache-2.0; default: none stated)")
    p.add_argument("--compile", action="store_true", help="torch.compile the encoder (first steps slower while it compiles)")
    p.add_argument("--report-to", choices=["none", "tensorboard", "wandb"], default="none",
                   help="also report loss, lr, grad norm, tokens/s and MFU per step, to <out>/tensorboard/ or "
                        "<out>/wandb/ (needs the 'tensorboard' or 'wandb' extra)")
    p.add_argument("--loader-workers", type=int, help="batch-building processes (default: 2 on CUDA, 0 on CPU)")
    p.set_defaults(func=run)


def run(args) -> int:
    from biobench.training import recipes

    if args.list:
        print(recipes.describe())
        return 0
    missing = [flag for flag, value in (("--model", args.model), ("--corpus", args.corpus),
                                        ("--tokens", args.tokens), ("--out", args.out)) if not value]
    if missing:
        raise ConfigError(f"biobench pretrain needs {', '.join(missing)} (or --list to see the recipes)")
    from biobench.api.pretraining import pretrain

    def announce(cfg, threads: int) -> None:
        print(f"biobench pretrain: recipe {cfg.recipe}, model {cfg.model}, corpus {cfg.corpus}, phase-1 budget "
              f"{cfg.tokens:,} tokens, decay ratio {cfg.decay_ratio}, global batch {cfg.batch_size} x {cfg.seq_len} "
              f"(micro-batch {cfg.micro_batch_size}), lr {cfg.lr}, {threads} CPU threads, out {cfg.out}", flush=True)

    try:
        final = pretrain(
            args.model, args.corpus, args.tokens, args.out, recipe=args.recipe, decay_ratio=args.decay_ratio,
            lr=args.lr, weight_decay=args.weight_decay, warmup_tokens=args.warmup_tokens,
            grad_clip=args.grad_clip or None, freeze=args.freeze, save_every=args.save_every,
            resume=args.resume if args.resume is not None else requeued_resume(args.out),
            save_minutes=args.save_minutes or None, doc_mask=args.doc_mask, seed=args.seed, data_seed=args.data_seed,
            text_field=args.text_field, max_documents=args.max_documents, cache_dir=args.cache_dir,
            device=args.device, precision=args.precision, attn=args.attn, fsdp=args.fsdp,
            gradient_checkpointing=args.gradient_checkpointing, progress=not args.no_progress, compile=args.compile,
            language=args.language, license=args.license, loader_workers=args.loader_workers,
            report_to=args.report_to, batch_size=args.batch_size, seq_len=args.seq_len,
            micro_batch_size=args.micro_batch_size, threads=args.threads, announce=announce)
    except KeyboardInterrupt as stop:
        print(f"interrupted; {kept(args.out)}", file=sys.stderr)
        requeue_after(stop)
        return 130
    if final is not None:
        print(f"done: {final}")
    return 0


def requeued_resume(out: Path) -> bool | None:
    """A SLURM job that was requeued (SLURM_RESTART_COUNT > 0) runs its batch script again, with the same
    command: it resumes from the latest checkpoint under --out without --resume, as if it had been given."""
    from biobench.runtime.slurm import restart_count
    from biobench.training import checkpoint

    restarts = restart_count()
    if not restarts or not out.is_dir() or checkpoint.latest(out) is None:
        return None
    print(f"SLURM job restart {restarts}: resuming from {checkpoint.latest(out)} (--resume)", flush=True)
    return True


def requeue_after(stop: KeyboardInterrupt) -> None:
    """After the checkpoint a wall-clock signal (SIGUSR1 from `#SBATCH --signal=B:USR1@120`, or SIGTERM) made
    it write, a SLURM job puts itself back in the queue (rank 0 only: one request per job); it resumes there."""
    from biobench.runtime.interrupts import WALL_CLOCK_SIGNALS
    from biobench.runtime.slurm import requeue_self
    from biobench.training.trainer import Stopped

    wall_clock = {signal.Signals(s).name for s in WALL_CLOCK_SIGNALS}
    if isinstance(stop, Stopped) and str(stop) in wall_clock and os.environ.get("RANK", "0") == "0":
        requeue_self(lambda line: print(line, file=sys.stderr, flush=True))


def kept(out: Path) -> str:
    """What an interrupted run left to resume from, in words (the latest resumable checkpoint, or none)."""
    from biobench.training import checkpoint

    folder = checkpoint.latest(out) if out.is_dir() else None
    if folder is None:
        return (f"no resumable checkpoint was written in {out} (stopped before the first training step "
                f"finished): run the same command again to start over")
    tokens = checkpoint.read_meta(folder).get("tokens", {}).get("seen", 0)
    return (f"kept {folder} ({tokens:,} tokens trained): continue with the same command and --resume")
