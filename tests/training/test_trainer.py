"""End to end on a tiny corpus: phases, checkpoints, optimiser carry-over, resume, bad input."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from biobench.errors import ConfigError
from biobench.training import checkpoint
from biobench.training.trainer import PretrainConfig, Trainer, train

TEXTS = [
    "Le patient présente une fièvre à 39 degrés et une toux sèche depuis trois jours.",
    "Traitement par amoxicilline 1 g trois fois par jour pendant sept jours.",
    "Antécédents : diabète de type 2, hypertension artérielle, allergie à la pénicilline.",
    "Scanner thoracique : nodule pulmonaire de 12 mm du lobe supérieur droit.",
    "Carcinome canalaire infiltrant du sein gauche, grade II, récepteurs hormonaux positifs.",
]

@pytest.fixture(scope="module")
def tiny_corpus(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("corpus") / "docs.jsonl"
    path.write_text("".join(json.dumps({"text": f"{t} Observation {i}."}) + "\n" for i in range(40) for t in TEXTS))
    return path


def _cfg(corpus: Path, out: Path, **kw) -> PretrainConfig:
    base = dict(recipe="detour", model="preset:tiny", corpus=str(corpus), out=out, tokens=6 * 4 * 64,
                batch_size=4, seq_len=64, micro_batch_size=2, decay_ratio=0.5, progress=False,
                cache_dir=out.parent / "cache", lr=1e-3)
    base.update(kw)
    return PretrainConfig(**base)


def _weights(folder: Path) -> dict[str, torch.Tensor]:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


def test_detour_writes_loadable_checkpoints_and_log(tiny_corpus, tmp_path):
    from transformers import AutoModel, AutoModelForMaskedLM

    final = train(_cfg(tiny_corpus, tmp_path / "run"))
    assert final == tmp_path / "run" / "final"
    meta = checkpoint.read_meta(final)
    assert meta["schema"] == "biobench.pretrain/1" and meta["recipe"] == "detour" and meta["phase"] == "final"
    assert meta["tokens"] == {"phase1": 1536, "phase2": 768, "clm": 1536, "mlm": 768, "seen": 2304}
    assert checkpoint.read_meta(tmp_path / "run" / "phase1")["tokens"]["seen"] == 1536
    assert AutoModelForMaskedLM.from_pretrained(final).config.model_type == "modernbert"
    assert type(AutoModel.from_pretrained(final)).__name__ == "ModernBertModel"
    log = [json.loads(line) for line in (tmp_path / "run" / "train_log.jsonl").read_text().splitlines()]
    assert [r["phase"] for r in log] == [1] * 6 + [2] * 3
    assert {"tokens", "loss", "lr", "grad_norm", "tokens_per_s", "mfu"} <= set(log[0])
    # phase 1: warmup (10% of 6 steps -> 1 step) then constant; phase 2 restarts at the peak and decays to 10%
    assert [r["lr"] for r in log[:6]] == [1e-3] * 6
    assert [round(r["lr"], 9) for r in log[6:]] == [1e-3, round(1e-3 * (0.1 + 0.9 * (1 - 0.5 ** 0.5)), 9), 1e-4]
    assert all(r["loss"] > 0 for r in log)


def test_optimizer_state_carries_across_phases(tiny_corpus, tmp_path):
    trainer = Trainer(_cfg(tiny_corpus, tmp_path / "run", tokens=2 * 4 * 64, weight_decay=0.0))
    assert trainer._run_phase(0, None)
    params = list(trainer.model.parameters())
    moments = [trainer.optimizer.state[p]["exp_avg"].clone() for p in params]
    steps = [float(trainer.optimizer.state[p]["step"]) for p in params]
    assert steps == [2.0] * len(params)
    assert trainer.state.step == 0 and trainer.state.phase == 1  # only the schedule resets
    # the first phase-2 step starts from the phase-1 moments: exp_avg = beta1 * m + (1 - beta1) * g
    grads = {}
    hook = trainer.optimizer.register_step_pre_hook(
        lambda opt, args, kwargs: grads.update({i: p.grad.clone() for i, p in enumerate(params)}))
    trainer.cfg.stop_after_steps = 3
    trainer._run_phase(1, None)
    hook.remove()
    assert float(trainer.optimizer.state[params[0]]["step"]) == 3.0
    i = max(grads, key=lambda k: params[k].numel())
    expected = 0.9 * moments[i] + 0.1 * grads[i]
    torch.testing.assert_close(trainer.optimizer.state[params[i]]["exp_avg"], expected, rtol=1e-4, atol=1e-7)


def test_resume_reproduces_uninterrupted_run(tiny_corpus, tmp_path, capsys):
    budget = dict(recipe="mlm", tokens=4 * 4 * 64)  # 4 + 2 steps
    full = train(_cfg(tiny_corpus, tmp_path / "full", **budget))
    stopped = train(_cfg(tiny_corpus, tmp_path / "cut", save_every=3 * 4 * 64, stop_after_steps=3, **budget))
    assert stopped is None and (tmp_path / "cut" / "step-768" / checkpoint.STATE).exists()
    capsys.readouterr()
    resumed = train(_cfg(tiny_corpus, tmp_path / "cut", resume=True, **budget))
    assert f"resuming from {tmp_path / 'cut' / 'step-768'} (step 3, 768 tokens seen)" in capsys.readouterr().out
    a, b = _weights(full), _weights(resumed)
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    with pytest.raises(ConfigError, match=r"was written by recipe 'mlm', not 'detour'"):
        Trainer(_cfg(tiny_corpus, tmp_path / "cut", recipe="detour", resume=str(tmp_path / "cut" / "step-768")))


def test_bad_input_messages(tiny_corpus, tmp_path):
    with pytest.raises(ConfigError, match=r"--tokens 100 is smaller than one batch \(4 sequences x 64 tokens = 256\)"):
        Trainer(_cfg(tiny_corpus, tmp_path / "a", tokens=100))
    with pytest.raises(ConfigError, match=r"freeze range 0-7@clm is outside the model's 4 layers \(0-3\)"):
        Trainer(_cfg(tiny_corpus, tmp_path / "b", recipe="detour-freeze-low"))
    with pytest.raises(ConfigError, match=r"--resume: no resumable checkpoint"):
        Trainer(_cfg(tiny_corpus, tmp_path / "c", resume=True))


def test_detour_refuses_a_non_modernbert_model(tiny_corpus, tmp_path, minilm_dir):
    with pytest.raises(ConfigError, match=r"recipe 'detour' trains with a causal mask.*ModernBERT.*is 'bert'"):
        Trainer(_cfg(tiny_corpus, tmp_path / "d", model=str(minilm_dir)))


def test_cli_list_and_token_suffixes(capsys):
    from biobench.cli import main
    from biobench.commands.pretrain import parse_tokens

    assert parse_tokens("2M") == 2_000_000 and parse_tokens("1.5B") == 1_500_000_000 and parse_tokens("500k") == 500_000
    assert main(["pretrain", "--list"]) == 0
    out = capsys.readouterr().out
    assert "detour-freeze-low-decay" in out and "phase 2: MLM 15%, sqrt-decay" in out
    assert main(["pretrain", "--recipe", "detour"]) == 2
    assert "needs --model, --corpus, --tokens, --out" in capsys.readouterr().err


def test_bf16_autocast_and_doc_mask_paths(tiny_corpus, tmp_path):
    """The GPU code paths that a CPU can exercise: bf16 autocast, per-document positions and masks."""
    final = train(_cfg(tiny_corpus, tmp_path / "bf16", tokens=4 * 64, precision="bf16", doc_mask=True))
    meta = checkpoint.read_meta(final)
    assert meta["doc_mask"] is True and meta["tokens"]["seen"] == 2 * 4 * 64
    log = [json.loads(line) for line in (tmp_path / "bf16" / "train_log.jsonl").read_text().splitlines()]
    assert all(r["loss"] == r["loss"] and r["loss"] > 0 for r in log)  # finite
    with pytest.raises(ConfigError, match="already holds checkpoints of a pretraining run: pass --resume"):
        Trainer(_cfg(tiny_corpus, tmp_path / "bf16", tokens=4 * 64))


def test_unreachable_hub_model_is_a_clear_error(tiny_corpus, tmp_path, monkeypatch):
    from biobench.errors import ModelLoadError

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(ModelLoadError, match=r"cannot load hub model 'someone/no-such-model'.*HF_HUB_OFFLINE=1"):
        Trainer(_cfg(tiny_corpus, tmp_path / "hub", model="someone/no-such-model"))


def test_continues_from_a_local_checkpoint_folder_into_a_new_out(tiny_corpus, tmp_path):
    """A local --model (e.g. a previous run's phase1/) must work with an --out that does not exist yet."""
    base = train(_cfg(tiny_corpus, tmp_path / "base", recipe="mlm", tokens=2 * 4 * 64))
    final = train(_cfg(tiny_corpus, tmp_path / "new" / "detour", model=str(base), tokens=2 * 4 * 64))
    assert final == tmp_path / "new" / "detour" / "final"
    assert checkpoint.read_meta(final)["base_model"] == str(base)
    assert (tmp_path / "new" / "detour" / "train_log.jsonl").exists()


def test_gradient_checkpointing_gives_the_same_weights(tiny_corpus, tmp_path):
    """Recomputing activations in backward is a memory trade, not a different optimisation."""
    plain = train(_cfg(tiny_corpus, tmp_path / "plain", tokens=2 * 4 * 64))
    ckpt = train(_cfg(tiny_corpus, tmp_path / "ckpt", tokens=2 * 4 * 64, gradient_checkpointing=True))
    a, b = _weights(plain), _weights(ckpt)
    assert a.keys() == b.keys()
    assert all(torch.allclose(a[k], b[k], atol=1e-6) for k in a)


@pytest.mark.slow
def test_compile_gives_the_same_loss_curve(tiny_corpus, tmp_path):
    """--compile changes kernels, not the maths: same losses within float tolerance, same checkpoint names."""
    plain = train(_cfg(tiny_corpus, tmp_path / "plain", recipe="mlm"))
    compiled = train(_cfg(tiny_corpus, tmp_path / "compiled", recipe="mlm", compile=True))
    losses = [[json.loads(line)["loss"] for line in (f.parent / "train_log.jsonl").read_text().splitlines()]
              for f in (plain, compiled)]
    assert len(losses[0]) == len(losses[1]) == 9
    assert losses[0] == pytest.approx(losses[1], rel=1e-3, abs=1e-4)
    assert set(_weights(plain)) == set(_weights(compiled))  # no _orig_mod. prefixes


def test_loader_workers_give_the_same_run(tiny_corpus, tmp_path):
    inline = train(_cfg(tiny_corpus, tmp_path / "inline", recipe="mlm", loader_workers=0))
    workers = train(_cfg(tiny_corpus, tmp_path / "workers", recipe="mlm", loader_workers=2))
    a, b = _weights(inline), _weights(workers)
    assert all(torch.equal(a[k], b[k]) for k in a)


def test_progress_is_plain_lines_off_a_terminal(tiny_corpus, tmp_path, capsys):
    """In a log file (stderr not a TTY): no bar frames, one plain line per 5% of the run."""
    train(_cfg(tiny_corpus, tmp_path / "run", recipe="mlm", progress=True))
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("step ")]
    assert lines[-1].startswith("step 9/9 phase 2 mlm: loss ") and len(lines) == 9  # 9 steps: every step
    assert "\r" not in err and "it/s" not in err


def _cli(corpus: Path, out: Path, tokens: int, *extra: str) -> list[str]:
    """The `biobench pretrain` command line of `_cfg(corpus, out, recipe="mlm", tokens=tokens)`, on one thread."""
    return [sys.executable, "-m", "biobench.cli", "pretrain", "--recipe", "mlm", "--model", "preset:tiny",
            "--corpus", str(corpus), "--out", str(out), "--tokens", str(tokens), "--batch-size", "4", "--seq-len", "64",
            "--micro-batch-size", "2", "--decay-ratio", "0.5", "--lr", "1e-3", "--no-progress", "--device", "cpu",
            "--threads", "1", "--cache-dir", str(out.parent / "cache"), *extra]


@pytest.mark.slow
def test_sigint_keeps_a_checkpoint_that_resumes_to_the_uninterrupted_weights(tiny_corpus, tmp_path):
    tokens = 60 * 4 * 64  # 60 + 30 steps: time to be interrupted in the middle
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # the same kernels as the --threads 1 subprocess
    try:
        full = train(_cfg(tiny_corpus, tmp_path / "full", recipe="mlm", tokens=tokens))
    finally:
        torch.set_num_threads(threads)
    out = tmp_path / "cut"
    proc = subprocess.Popen(_cli(tiny_corpus, out, tokens), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    log = out / "train_log.jsonl"
    deadline = time.monotonic() + 120
    while not (log.exists() and len(log.read_text().splitlines()) >= 3) and time.monotonic() < deadline:
        assert proc.poll() is None, proc.communicate()
        time.sleep(0.02)
    proc.send_signal(signal.SIGINT)
    stdout, stderr = proc.communicate(timeout=120)
    assert proc.returncode == 130, stderr
    kept = [p for p in out.iterdir() if p.name.startswith("resume-")]
    assert len(kept) == 1 and (kept[0] / checkpoint.STATE).exists() and not (out / "final").exists()
    assert f"interrupted; kept {kept[0]} (" in stderr and "--resume" in stderr
    assert "SIGINT: stopping after this step to save a resumable checkpoint" in stdout
    seen = checkpoint.read_meta(kept[0])["tokens"]["seen"]
    assert 3 * 4 * 64 <= seen < 90 * 4 * 64
    done = subprocess.run(_cli(tiny_corpus, out, tokens, "--resume"), capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert f"resuming from {kept[0]} (step " in done.stdout
    a, b = _weights(full), _weights(out / "final")
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)


def test_rolling_checkpoints_replace_each_other_and_a_stop_request_saves_one(tiny_corpus, tmp_path, monkeypatch):
    from biobench.training import trainer as trainer_module

    clock = iter(range(0, 10**6, 100))  # every read of the clock is 100 s later: a checkpoint is due each step
    monkeypatch.setattr(trainer_module.time, "monotonic", lambda: float(next(clock)))
    trainer = Trainer(_cfg(tiny_corpus, tmp_path / "run", recipe="mlm", tokens=4 * 4 * 64, save_minutes=1.0))
    assert trainer._run_phase(0, None)
    names = sorted(p.name for p in (tmp_path / "run").iterdir() if p.is_dir())
    assert names == ["cache", "phase1", "resume-768", "tokenizer"] or names == ["phase1", "resume-768", "tokenizer"]
    trainer.stop.signal_name = "SIGTERM"
    with pytest.raises(trainer_module.Stopped):
        trainer._run_phase(1, None)  # phase1/ already holds this position: nothing new is written
    assert not (tmp_path / "run" / "resume-1024").exists() and (tmp_path / "run" / "resume-768").exists()


def test_interrupted_message_says_what_was_kept(tmp_path):
    from biobench.commands.pretrain import kept

    assert "no resumable checkpoint was written" in kept(tmp_path / "none")
