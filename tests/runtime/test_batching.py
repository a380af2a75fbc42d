"""--batch-size auto: the largest micro-batch that fits, found by halving on out-of-memory; gradient accumulation
keeps the protocol's batch (same steps, same gradients for mean losses); the CPU takes the protocol's batch; the
result records the micro-batch and the run key does not change."""

from __future__ import annotations

import json

import pytest
import torch
from biobench.cli import main
from biobench.errors import ConfigError
from biobench.eval import finetune as ft
from biobench.runtime import batching

OOM = getattr(torch, "OutOfMemoryError", None) or torch.cuda.OutOfMemoryError


@pytest.mark.slow  # trains under simulated out-of-memory: ~5 s
def test_halves_until_it_fits_keeping_a_divisor_of_the_batch():
    tried = []

    def fits_up_to(limit):
        def try_size(n):
            tried.append(n)
            if n > limit:
                raise OOM("CUDA out of memory. Tried to allocate 2.00 GiB")
        return try_size

    assert batching.largest_fitting(16, fits_up_to(3)) == 2 and tried == [16, 8, 4, 2]
    tried.clear()
    assert batching.largest_fitting(12, fits_up_to(5)) == 3 and tried == [12, 6, 3]
    assert batching.largest_fitting(12, fits_up_to(100)) == 12
    with pytest.raises(ConfigError, match="not even one batch example fits"):
        batching.largest_fitting(4, fits_up_to(0))
    with pytest.raises(ValueError, match="not memory"):  # other errors are not taken for out-of-memory
        batching.largest_fitting(4, lambda n: (_ for _ in ()).throw(ValueError("not memory")))
    assert batching.micro_batch_size("auto", 16, "cpu", fits_up_to(0)) == 16  # CPU: the protocol's batch
    assert batching.micro_batch_size(None, 16, "cuda", fits_up_to(0)) == 16
    assert batching.micro_batch_size(4, 16, "cuda", fits_up_to(0)) == 4


def test_batch_size_value():
    assert batching.batch_size_value("auto") == "auto" and batching.batch_size_value("32") == 32
    for bad in ("0", "-2", "big"):
        with pytest.raises(ValueError, match="positive integer or 'auto'"):
            batching.batch_size_value(bad)


def test_simulated_out_of_memory_gives_accumulation_with_the_protocols_gradients(toy_classification, monkeypatch):
    """An 'accelerator' that holds at most 2 examples: batch 4 runs as 2 micro-batches of 2, and training follows
    the same path as the whole batch at once (mean losses: the accumulated gradients are the batch's)."""
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=2)
    whole = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)

    encoder, tokenizer, prepared, protocol = toy_classification(epochs=2)
    real_forward = encoder.forward

    def small_device(*args, **kwargs):
        ids = kwargs.get("input_ids", args[0] if args else None)
        if torch.is_grad_enabled() and ids is not None and ids.shape[0] > 2:  # training holds activations
            raise OOM("CUDA out of memory (simulated)")
        return real_forward(*args, **kwargs)

    monkeypatch.setattr(encoder, "forward", small_device)
    real_choice = ft.micro_batch_size
    monkeypatch.setattr(ft, "micro_batch_size", lambda req, batch, _device, probe: real_choice(req, batch, "cuda", probe))
    split = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False, micro_batch="auto")
    assert (split.micro_batch, split.accumulation) == (2, 2) and (whole.micro_batch, whole.accumulation) == (4, 1)
    assert [h["step"] for h in split.history] == [h["step"] for h in whole.history] == [2, 4]
    assert [h["train_loss"] for h in split.history] == pytest.approx([h["train_loss"] for h in whole.history], rel=1e-4)
    assert split.dev_score == pytest.approx(whole.dev_score)


def test_eval_batch_size_auto_on_cpu_records_it_and_keeps_the_run_key(tiny_mlm_dir, tmp_path, capsys):
    common = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "demo-cls", "--seeds", "3", "--epochs", "1",
              "--limit-train", "16", "--max-length", "32", "--results", str(tmp_path), "--no-progress", "--json"]
    assert main([*common, "--batch-size", "auto"]) == 0
    capsys.readouterr()
    (path,) = tmp_path.glob("*/demo-cls/seed-3.smoke-*.json")  # --epochs 1: a smoke run
    result = json.loads(path.read_text())
    batch = result["protocol"]["batch_size"]
    assert result["batching"] == {"batch_size": batch, "micro_batch_size": batch, "accumulation_steps": 1,
                                  "requested": "auto"}
    assert main(common) == 0  # without auto: the same run (the protocol's batch), so it is skipped
    assert "1 already done" in capsys.readouterr().err


def test_pretrain_micro_batch_auto_with_a_simulated_out_of_memory(tmp_path, monkeypatch):
    """Pretraining: 'auto' on an 'accelerator' that holds one sequence runs the global batch of 4 as 4
    micro-batches, records them in the checkpoint metadata, and logs the losses of the whole-batch run."""
    from biobench.training import trainer as tr

    corpus = tmp_path / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"Le patient {i} présente une toux sèche et une fièvre."}) + "\n"
                              for i in range(120)))

    def cfg(out, micro):
        return tr.PretrainConfig(recipe="mlm", model="preset:tiny", corpus=str(corpus), out=tmp_path / out,
                                 tokens=2 * 4 * 64, batch_size=4, seq_len=64, micro_batch_size=micro, decay_ratio=0.5,
                                 progress=False, cache_dir=tmp_path / "cache", seed=1)

    tr.train(cfg("cpu-auto", "auto"))  # CPU: the whole batch at once
    meta = json.loads((tmp_path / "cpu-auto" / "final" / "biobench_pretrain.json").read_text())
    assert (meta["schedule"]["micro_batch_size"], meta["schedule"]["accumulation_steps"]) == (4, 1)

    tried = []

    def one_sequence_fits(self, n):
        tried.append(n)
        if n > 1:
            raise OOM("CUDA out of memory (simulated)")

    monkeypatch.setattr(tr.Trainer, "_try_micro_batch", one_sequence_fits)
    real_choice = tr.micro_batch_size
    monkeypatch.setattr(tr, "micro_batch_size", lambda req, batch, _device, probe: real_choice(req, batch, "cuda", probe))
    tr.train(cfg("gpu-auto", "auto"))
    assert tried == [4, 2, 1]
    meta = json.loads((tmp_path / "gpu-auto" / "final" / "biobench_pretrain.json").read_text())
    assert (meta["schedule"]["micro_batch_size"], meta["schedule"]["accumulation_steps"]) == (1, 4)
    losses = [[json.loads(line)["loss"] for line in (tmp_path / run / "train_log.jsonl").read_text().splitlines()]
              for run in ("cpu-auto", "gpu-auto")]
    assert losses[1] == pytest.approx(losses[0], rel=1e-4)
