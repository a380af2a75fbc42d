"""Scaling with sequence length: seconds and peak memory per training step of a small ModernBERT as the
sequence grows from 512 to 8192 tokens, for the three steps biobench runs:

- eval: fine-tuning step of the classification head (biobench.heads CLS linear) — forward, backward, AdamW;
- mlm:  pretraining MLM step (30% masking, only masked positions through the head: biobench.training LMLoss);
- clm:  pretraining CLM step of the detour (causal mask via biobench.training.causal, next-token labels).

Inputs are random token ids of a synthetic vocabulary (the cost does not depend on the text). The ratio
printed last is the MLM step's time per token at the longest length over that at the shortest (1.00 =
linear in length; attention makes it grow).

    .venv/bin/python -m biobench.perf.scaling --quick
"""

from __future__ import annotations

import contextlib
from typing import Any

from biobench.heads import get_head
from biobench.perf.perf_common import (
    ARM_WINDOWS,
    ArmClock,
    PeakMemory,
    VocabSpec,
    base_parser,
    build_modernbert,
    environment,
    finish,
    init_arm,
    median,
    offline_environment,
    print_table,
    script,
    shape_params,
    time_call,
)
from biobench.runtime.device import autocast, resolve_device
from biobench.training.causal import causal_attention

MODES = ("eval", "mlm", "clm")
LENGTHS = (512, 1024, 2048, 4096, 8192)


def make_step(mode: str, model: Any, seq_len: int, batch_size: int, device: str, bf16: bool, seed: int):
    """A zero-argument callable running one optimiser step of `mode` on fixed random inputs."""
    import torch

    # lazy: loads torch
    from biobench.training.batches import mlm_mask

    # lazy: loads torch
    from biobench.training.objectives import LMLoss, clm_labels

    vocab = VocabSpec(model.config.vocab_size)
    g = torch.Generator().manual_seed(seed)
    ids = torch.randint(5, vocab.size, (batch_size, seq_len), generator=g)
    ids[:, 0], ids[:, -1] = vocab.cls_token_id, vocab.sep_token_id
    mask = torch.ones_like(ids)
    context: Any = contextlib.nullcontext  # a factory: generator context managers are single-use
    if mode == "eval":
        net = get_head("linear", "classification").build(model.model, ["a", "b"], []).to(device)
        batch = {"input_ids": ids.to(device), "attention_mask": mask.to(device),
                 "labels": torch.zeros(batch_size, dtype=torch.long, device=device)}
        loss_of = lambda: net(batch)["loss"]  # noqa: E731
    else:
        net = LMLoss(model).to(device)
        if mode == "mlm":
            inputs, labels = mlm_mask(ids, 0.30, vocab.all_special_ids, vocab.mask_token_id, vocab.size, g)
        else:
            inputs, labels = ids, clm_labels(ids, mask)
            context = lambda: causal_attention(model)  # noqa: E731
        tensors = {"input_ids": inputs.to(device), "labels": labels.to(device), "attention_mask": mask.to(device)}

        def loss_of():
            total, count = net(**tensors)
            return total / count

    optimizer = torch.optim.AdamW([p for p in net.parameters() if p.requires_grad], lr=1e-5)
    precision = "bf16" if bf16 else "fp32"

    def step() -> None:
        with context(), autocast(device, precision):
            loss = loss_of()
        loss.backward()
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)

    return step


def measure(mode: str, seq_len: int, args, device: str) -> dict[str, Any]:
    import gc

    import torch

    model = build_modernbert(args.shape, None, seed=args.seed, max_position_embeddings=max(8192, seq_len))
    if args.attn:
        model.set_attn_implementation(args.attn)
    model.to(device).train()
    step = make_step(mode, model, seq_len, args.batch_size, device, device.startswith("cuda"), args.seed)
    try:
        with PeakMemory(device) as memory, ArmClock() as clock:
            times = time_call(step, device, args.repeats, args.warmup)
        assert clock.window is not None
        ARM_WINDOWS.append((f"{mode} {seq_len}", clock.window))
        row = {"mode": mode, "seq_len": seq_len, "step_s": median(times), "times_s": [round(t, 4) for t in times],
               "tokens_per_s": args.batch_size * seq_len / median(times), "peak_mb": memory.peak_mb,
               "added_mb": memory.peak_mb - memory.start_mb, "memory": memory.to_dict(),
               "cpu": clock.window.to_dict(), "flag": clock.window.flag}
    except torch.OutOfMemoryError:
        row = {"mode": mode, "seq_len": seq_len, "error": "out of memory"}
    del model, step
    gc.collect()
    if device.startswith("cuda"):
        torch.cuda.empty_cache()
    return row


def parse_args(argv: list[str] | None = None):
    parser = base_parser(__doc__.split("\n\n")[0])
    parser.add_argument("--shape", default="small", help="ModernBERT shape: tiny, small or base")
    parser.add_argument("--lengths", default=",".join(map(str, LENGTHS)),
                        help="comma-separated sequence lengths (quick: up to 2048)")
    parser.add_argument("--modes", default=",".join(MODES), help=f"subset of {', '.join(MODES)}")
    parser.add_argument("--batch-size", type=int, default=1, help="sequences per step")
    parser.add_argument("--repeats", type=int, default=2, help="timed steps per point (median reported)")
    parser.add_argument("--warmup", type=int, default=1, help="untimed steps per point")
    parser.add_argument("--attn", default=None, help="attention implementation (default: transformers' choice)")
    args = parser.parse_args(argv)
    args.lengths = sorted(int(x) for x in args.lengths.split(","))
    if args.quick:
        args.lengths = [n for n in args.lengths if n <= 2048] or [512]
    args.modes = args.modes.split(",")
    if set(args.modes) - set(MODES):
        parser.error(f"unknown mode(s) {sorted(set(args.modes) - set(MODES))}; choose from {', '.join(MODES)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    offline_environment()
    device = resolve_device(args.device)
    init_arm(args.threads)
    rows = []
    for seq_len in args.lengths:
        for mode in args.modes:
            rows.append(measure(mode, seq_len, args, device))
            r = rows[-1]
            print(f"{mode} {seq_len}: " + (r.get("error") or f"{r['step_s']:.3f} s/step, {r['peak_mb']:,.0f} MiB"),
                  flush=True)
    print_table(rows, [("mode", "mode", ""), ("seq_len", "seq len", "d"), ("step_s", "s/step", ".3f"),
                       ("tokens_per_s", "tokens/s", ",.0f"), ("peak_mb", "peak MiB", ",.0f"),
                       ("added_mb", "added MiB", ",.0f"), ("error", "error", ""), ("flag", "disturbed", "")])
    per_token = {r["seq_len"]: r["step_s"] / r["seq_len"] for r in rows if r["mode"] == "mlm" and "step_s" in r}
    ratio = per_token[max(per_token)] / per_token[min(per_token)] if len(per_token) > 1 else None
    report = {"script": "scaling", "shape": args.shape, "params": shape_params(args.shape),
              "batch_size": args.batch_size, "rows": rows, "environment": environment(device),
              "ratio_definition": "mlm seconds per token at the longest length / at the shortest"}
    if ratio is not None:
        print(f"ratio (MLM time per token, {max(per_token)} vs {min(per_token)} tokens): {ratio:.2f}")
    return finish(report, args.out, ratio)


if __name__ == "__main__":
    raise SystemExit(script(main))
