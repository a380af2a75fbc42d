"""Pretraining speed: biobench pretrain (biobench.training: packed sequences, sparse MLM prediction, bf16 and
flash-attention on CUDA) vs a plain Hugging Face Trainer + DataCollatorForLanguageModeling run (one document
per row, truncated to the sequence length, padded per batch), same model weights, tokenizer, corpus, sequence
length, batch size, masking rate and optimiser learning rate, side by side.

Tokens/s counts real (non-pad) input tokens over steady-state steps (the first `--warmup-steps` of each arm
are not timed: allocator and kernel warm-up). Each arm runs in its own fresh process; peak memory is that
process's RSS on CPU and torch.cuda.max_memory_allocated on CUDA. On CUDA the MFU of each arm is reported
against a measured bf16 matmul peak (biobench.training.flops, via perf_common.mfu_report).

    .venv/bin/python -m biobench.perf.pretrain_speed --quick
"""

from __future__ import annotations

import gzip
import json
import random
import tempfile
import time
from pathlib import Path
from typing import Any

from biobench.perf.perf_common import (
    PeakMemory,
    base_parser,
    build_modernbert,
    check_arms,
    environment,
    finish,
    init_arm,
    matmul_peak_flops,
    mfu_report,
    offline_environment,
    print_table,
    run_arms,
    run_isolated,
    safe_ratio,
    script,
    shape_params,
)
from biobench.runtime.device import resolve_device
from biobench.tasks.loading import resolve_data_dir
from biobench.training.corpus import iter_documents
from biobench.training.presets import train_tokenizer
from biobench.training.recipes import get_recipe

CORPUS_FOLDER = "pretrain-fr"  # under the data root ($BIOBENCH_DATA), as in ../shared/data
TOKENIZER_DOCS = 2000


def mlm_rate() -> float:
    """The masking rate of the `mlm` recipe's phase 1 (what the biobench arm runs); the baseline uses it too."""
    return get_recipe("mlm").phases[0].mask_rate


def generated_corpus(path: Path, n_docs: int = 2000, seed: int = 0) -> Path:
    """A JSONL.gz corpus for machines without ../shared/data: pseudo-words from a 40k-word syllable lexicon
    drawn with Zipf frequencies (so a 50k BPE vocabulary can be trained on it), documents of log-normal
    length (median ~600 words, long tail) — what matters for speed is the spread of document lengths."""
    rng = random.Random(seed)
    syllables = [c + v for c in "bcdfglmnprstvz" for v in ("a", "e", "i", "o", "u", "ou", "an", "in")]
    lexicon = sorted({"".join(rng.choices(syllables, k=rng.randint(1, 4))) for _ in range(60000)})[:40000]
    rng.shuffle(lexicon)
    weights = [1 / (rank + 1) for rank in range(len(lexicon))]
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt", encoding="utf-8") as fh:
        for i in range(n_docs):
            n = max(20, min(20000, int(rng.lognormvariate(6.4, 1.0))))
            fh.write(json.dumps({"id": i, "text": " ".join(rng.choices(lexicon, weights, k=n))}) + "\n")
    return path


def default_corpus(fallback: Path) -> str:
    """The data root's pretrain-fr corpus when $BIOBENCH_DATA has one, else a generated corpus at `fallback`."""
    root = resolve_data_dir(None)
    if root is not None and (root / CORPUS_FOLDER).is_dir():
        return str(root / CORPUS_FOLDER)
    return str(generated_corpus(fallback))


def documents(corpus: str, limit: int | None) -> list[str]:
    from itertools import islice


    return list(islice(iter_documents(corpus), limit))


def prepare_model(setup: dict[str, Any], folder: Path) -> dict[str, Any]:
    """Train the tokenizer on the corpus, build the shape's ModernBERT, save both: the one starting point of
    both arms (same weights, same vocabulary). A folder that already holds a model is reused as is."""

    if (folder / "config.json").is_file():
        from transformers import AutoModelForMaskedLM, AutoTokenizer

        model = AutoModelForMaskedLM.from_pretrained(folder)
        return {"params": sum(p.numel() for p in model.parameters()), "vocab": len(AutoTokenizer.from_pretrained(folder))}
    vocab = setup["vocab_size"] or shape_params(setup["shape"])["vocab_size"]
    tokenizer = train_tokenizer(documents(setup["corpus"], TOKENIZER_DOCS), vocab_size=vocab)
    model = build_modernbert(setup["shape"], tokenizer, seed=setup["seed"])
    model.save_pretrained(folder)
    tokenizer.save_pretrained(folder)
    return {"params": sum(p.numel() for p in model.parameters()), "vocab": len(tokenizer)}


def _steady(step_seconds: list[float], step_tokens: list[int], warmup: int) -> dict[str, Any]:
    timed_s, timed_tokens = sum(step_seconds[warmup:]), sum(step_tokens[warmup:])
    return {"steps": len(step_seconds), "timed_steps": len(step_seconds) - warmup, "timed_tokens": timed_tokens,
            "timed_s": round(timed_s, 3), "tokens_per_s": timed_tokens / timed_s if timed_s else None,
            "step_s": [round(s, 3) for s in step_seconds], "step_tokens": step_tokens}


def _with_mfu(result: dict[str, Any], setup: dict[str, Any], folder: Path) -> dict[str, Any]:
    if setup.get("peak_flops") and result.get("tokens_per_s"):
        from transformers import AutoConfig

        config = AutoConfig.from_pretrained(folder)
        result.update(mfu_report(setup["params"], config, setup["seq_len"], result["tokens_per_s"], setup["peak_flops"]))
    return result


# ---------------------------------------------------------------- arms
def biobench_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """`biobench pretrain --recipe mlm` phase 1 (MLM 30%) through biobench.training.trainer, stopped after
    `steps` steps (the phase budget is one step longer, so no phase checkpoint is written in the timing)."""
    # lazy: loads torch
    from biobench.training.trainer import PretrainConfig, train

    init_arm(setup["threads"])
    folder, steps = Path(setup["model_dir"]), setup["steps"]
    with tempfile.TemporaryDirectory(prefix="bb-pretrain-") as tmp:
        cfg = PretrainConfig(
            recipe="mlm", model=str(folder), corpus=setup["corpus"], out=Path(tmp) / "run",
            tokens=(steps + 1) * setup["batch_size"] * setup["seq_len"], batch_size=setup["batch_size"],
            seq_len=setup["seq_len"], micro_batch_size=setup["micro_batch_size"], lr=setup["lr"],
            cache_dir=Path(tmp) / "cache", device=setup["device"], progress=False, stop_after_steps=steps,
            max_documents=setup["max_documents"], seed=setup["seed"], compile=setup.get("compile", False))
        cfg.out.mkdir(parents=True, exist_ok=True)  # older Trainers created it only for preset: models
        started = time.perf_counter()
        with PeakMemory(setup["device"]) as memory:
            train(cfg)
        wall = time.perf_counter() - started
        log = [json.loads(line) for line in (cfg.out / "train_log.jsonl").read_text().splitlines()]
    tokens_per_step = setup["batch_size"] * setup["seq_len"]
    result = _steady([tokens_per_step / r["tokens_per_s"] for r in log], [tokens_per_step] * len(log),
                     setup["warmup_steps"])
    result.update(arm="biobench-compile" if setup.get("compile") else "biobench", wall_s=round(wall, 3), memory=memory.to_dict(),
                  final_loss=log[-1]["loss"], mask_rate=setup["mask_rate"])
    return _with_mfu(result, setup, folder)


def biobench_compile_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """The biobench arm with `--compile` (torch.compile of the encoder); compilation happens in the untimed
    warm-up steps, so use --warmup-steps >= 2."""
    return biobench_arm({**setup, "compile": True})


def hf_arm(setup: dict[str, Any]) -> dict[str, Any]:
    """Trainer + DataCollatorForLanguageModeling: documents truncated to seq_len, dynamic padding."""
    import torch
    from datasets import Dataset
    from transformers import (
        AutoModelForMaskedLM,
        AutoTokenizer,
        DataCollatorForLanguageModeling,
        Trainer,
        TrainerCallback,
        TrainingArguments,
    )

    init_arm(setup["threads"])
    folder = Path(setup["model_dir"])
    tokenizer = AutoTokenizer.from_pretrained(folder)
    docs = documents(setup["corpus"], setup["max_documents"])
    enc = tokenizer(docs, truncation=True, max_length=setup["seq_len"])
    dataset = Dataset.from_dict({"input_ids": enc["input_ids"], "attention_mask": enc["attention_mask"]})
    collate = DataCollatorForLanguageModeling(tokenizer, mlm_probability=setup["mask_rate"])
    step_tokens: list[int] = []
    padded = [0]

    def counting_collator(features):
        batch = collate(features)
        step_tokens.append(int(batch["attention_mask"].sum()))
        padded[0] += batch["input_ids"].numel()
        return batch

    ends: list[float] = []

    class StepClock(TrainerCallback):
        def on_step_begin(self, args, state, control, **kwargs):
            if not ends:
                ends.append(time.perf_counter())  # the first step starts here (after dataloader setup)

        def on_step_end(self, args, state, control, **kwargs):
            if str(setup["device"]).startswith("cuda"):
                torch.cuda.synchronize()
            ends.append(time.perf_counter())

    torch.manual_seed(setup["seed"])
    model = AutoModelForMaskedLM.from_pretrained(folder)
    with tempfile.TemporaryDirectory(prefix="hf-pretrain-") as tmp:
        args = TrainingArguments(
            output_dir=tmp, max_steps=setup["steps"], per_device_train_batch_size=setup["batch_size"],
            gradient_accumulation_steps=setup["batch_size"] // (setup["micro_batch_size"] or setup["batch_size"]),
            learning_rate=setup["lr"], adam_beta2=0.98, weight_decay=1e-5, max_grad_norm=1.0,
            save_strategy="no", report_to="none", disable_tqdm=True, logging_strategy="no",
            use_cpu=setup["device"] == "cpu", bf16=str(setup["device"]).startswith("cuda"), seed=setup["seed"])
        if args.gradient_accumulation_steps > 1:
            args.per_device_train_batch_size = setup["micro_batch_size"]
        trainer = Trainer(model=model, args=args, train_dataset=dataset, data_collator=counting_collator,
                          callbacks=[StepClock()])
        started = time.perf_counter()
        with PeakMemory(setup["device"]) as memory:
            trainer.train()
        wall = time.perf_counter() - started
    accumulation = args.gradient_accumulation_steps
    per_step = [sum(step_tokens[i:i + accumulation]) for i in range(0, len(step_tokens), accumulation)]
    seconds = [b - a for a, b in zip(ends, ends[1:], strict=False)]
    result = _steady(seconds, per_step[:len(seconds)], setup["warmup_steps"])
    real = sum(len(ids) for ids in enc["input_ids"])
    result.update(arm="hf-trainer", wall_s=round(wall, 3), memory=memory.to_dict(), mask_rate=setup["mask_rate"],
                  padding_fraction=round(1 - sum(step_tokens) / max(padded[0], 1), 4),
                  corpus_tokens_truncated=real, attn_implementation=model.config._attn_implementation)
    return _with_mfu(result, setup, folder)


ARMS = {"biobench": biobench_arm, "hf-trainer": hf_arm, "biobench-compile": biobench_compile_arm}


# ---------------------------------------------------------------- driver
def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--corpus", default=None, help="corpus file/folder (default: $BIOBENCH_DATA/pretrain-fr, "
                        "else a generated corpus)")
    parser.add_argument("--shape", default="small", help="ModernBERT shape: tiny, small or base")
    parser.add_argument("--model-dir", type=Path, default=None,
                        help="reuse (or create) the model + tokenizer folder here instead of a temporary one")
    parser.add_argument("--vocab-size", type=int, default=None, help="tokenizer vocabulary (default: the shape's)")
    parser.add_argument("--seq-len", type=int, default=1024)
    parser.add_argument("--batch-size", type=int, default=8, help="sequences per optimiser step")
    parser.add_argument("--micro-batch-size", type=int, default=None, help="per forward pass (accumulation)")
    parser.add_argument("--steps", type=int, default=10, help="optimiser steps per arm (quick: 5)")
    parser.add_argument("--warmup-steps", type=int, default=2, help="untimed first steps (quick: 1)")
    parser.add_argument("--lr", type=float, default=2e-4)
    parser.add_argument("--max-documents", type=int, default=None, help="read at most this many documents")
    parser.add_argument("--arms", default="biobench,hf-trainer")
    parser.add_argument("--peak-flops", type=float, default=None,
                        help="bf16 peak FLOP/s for MFU (measured with a big matmul when on CUDA and not given)")
    parser.add_argument("--in-process", action="store_true", help="run arms in this process (debugging)")
    parser.add_argument("--repeats", type=int, default=1, help="runs of each arm, alternating (A B, B A, ...); "
                        "medians reported")
    args = parser.parse_args(argv)
    check_arms(parser, args.arms, ARMS)
    if args.quick:
        args.steps, args.warmup_steps = min(args.steps, 5), min(args.warmup_steps, 1)
    if args.warmup_steps >= args.steps:
        parser.error("--warmup-steps must be smaller than --steps")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    offline_environment()
    device = resolve_device(args.device)
    with tempfile.TemporaryDirectory(prefix="pretrain-speed-") as tmp:
        corpus = args.corpus or default_corpus(Path(tmp) / "corpus" / "generated.jsonl.gz")
        setup: dict[str, Any] = {
            "corpus": corpus, "shape": args.shape, "vocab_size": args.vocab_size, "seq_len": args.seq_len,
            "batch_size": args.batch_size, "micro_batch_size": args.micro_batch_size, "steps": args.steps,
            "warmup_steps": args.warmup_steps, "mask_rate": mlm_rate(), "lr": args.lr,
            "max_documents": args.max_documents, "seed": args.seed, "device": device, "threads": args.threads,
            "model_dir": str(args.model_dir or Path(tmp) / "model"), "peak_flops": args.peak_flops}
        print(f"building the {args.shape} model and tokenizer on {corpus} ...", flush=True)
        setup.update(prepare_model(setup, Path(setup["model_dir"])))
        if device.startswith("cuda") and not setup["peak_flops"]:
            setup["peak_flops"] = matmul_peak_flops(device)
            print(f"measured bf16 matmul peak: {setup['peak_flops'] / 1e12:.1f} TFLOP/s", flush=True)
        print(f"running {args.arms} x {args.repeats}, alternating ...", flush=True)
        arms = run_arms(args.arms.split(","), lambda name: run_isolated(
            ARMS[name], setup, isolate=not args.in_process, arm_name=name), args.repeats, "tokens_per_s")
    ratio = safe_ratio(arms.get("biobench", {}).get("tokens_per_s"), arms.get("hf-trainer", {}).get("tokens_per_s"))
    rows = [{**arm, "peak_mb": arm["memory"]["peak_mb"], "added_mb": arm["memory"]["added_mb"]}
            for arm in arms.values()]
    print_table(rows, [("arm", "arm", ""), ("timed_steps", "timed steps", "d"), ("timed_tokens", "tokens", ",d"),
                       ("timed_s", "seconds", ".1f"), ("tokens_per_s", "tokens/s", ",.0f"),
                       ("mfu", "MFU", ".3f"), ("peak_mb", "peak MiB", ",.0f"), ("added_mb", "added MiB", ",.0f"),
                       ("wall_s", "wall s", ".1f")])
    compiled = safe_ratio(arms.get("biobench-compile", {}).get("tokens_per_s"), arms.get("biobench", {}).get("tokens_per_s"))
    if compiled:
        print(f"compile ratio (biobench --compile / biobench tokens/s): {compiled:.2f}")
        if "hf-trainer" not in arms:
            ratio = compiled
    report = {"script": "pretrain_speed", "setup": setup, "arms": arms, "environment": environment(device)}
    if "hf-trainer" in arms:
        print(f"ratio (biobench / Trainer padded MLM tokens/s, seq {args.seq_len}): "
              + (f"{ratio:.2f}" if ratio else "-"))
    return finish(report, args.out, ratio)


if __name__ == "__main__":
    raise SystemExit(script(main))
