"""The pretraining loop: two phases of a recipe over a packed corpus, one optimiser for both.

Each global step reads `batch_size` packed sequences at consecutive data positions (split over ranks, then
into micro-batches with gradient accumulation), normalises the summed token loss by the global number of
labelled tokens (so 1 process and N processes compute the same gradient), clips, sets the lr from the phase
schedule and steps the decoupled AdamW. Between phases only the schedule, the objective, the attention mask
and the frozen layers change; the optimiser (moments, step counts) carries over.
"""

from __future__ import annotations

import contextlib
import json
import math
import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from biobench.errors import ConfigError, TrainingDivergedError
from biobench.runtime.batching import AUTO, micro_batch_size
from biobench.runtime.compiling import compile_in_place
from biobench.runtime.device import attention_implementation, autocast
from biobench.runtime.files import append_line, atomic_write
from biobench.runtime.interrupts import SIGNALS, WALL_CLOCK_SIGNALS, StopRequest, stop_on_signal
from biobench.runtime.jsonfile import UnsafeJSONError, iter_jsonl
from biobench.runtime.ownership import remove_owned
from biobench.runtime.progress import log_line, progress_bar, quiet_library_bars
from biobench.runtime.randomness import rng_state, set_rng_state
from biobench.runtime.reporting import NoReport, Reporter, make_reporter, report_dir
from biobench.training import card, checkpoint, corpus, distributed, freezing, loading, optim, schedules
from biobench.training.batches import LABELS, BatchBuilder, Masker, step_stream
from biobench.training.causal import attention_masks, is_decoder, phase_attention
from biobench.training.config import PretrainConfig
from biobench.training.corpus_input import check_corpus, corpus_record, packed_corpus
from biobench.training.flops import mfu, table_peak_flops
from biobench.training.objectives import IGNORE, LMLoss, encoder_of
from biobench.training.packing import document_positions, stack_rows, step_digest
from biobench.training.recipes import Objective, Phase, Recipe, get_recipe

VALIDATION_MASK_SEED = 0x5EED  # the held-out sequences' MLM masks: fixed, so every evaluation of every run masks alike
STOP_SIGNALS = tuple(dict.fromkeys((*SIGNALS, *WALL_CLOCK_SIGNALS)))  # SIGINT, SIGTERM, SIGUSR1
ROLLING = "resume-"  # <out>/resume-<tokens>/: the timer's and a signal's checkpoint (only the latest is kept)


class Stopped(KeyboardInterrupt):
    """The run stopped on a signal after saving a resumable checkpoint (the command says which)."""


@dataclass
class Plan:
    tokens_per_step: int
    steps: tuple[int, int]
    warmup: int
    accumulation: int
    micro: int
    batch_size: int  # global, in sequences: the config's, a number by now (api.pretraining.resolve_geometry)


def make_plan(cfg: PretrainConfig, world: int) -> Plan:
    assert isinstance(cfg.batch_size, int)  # the CLI's 'auto' is resolved to a number before a run
    tokens_per_step = cfg.batch_size * cfg.seq_len
    steps1, steps2 = schedules.phase_steps(cfg.tokens, cfg.batch_size, cfg.seq_len, cfg.decay_ratio)
    if cfg.batch_size % world:
        raise ConfigError(f"--batch-size {cfg.batch_size} is not divisible by the {world} processes")
    per_rank = cfg.batch_size // world
    # None: the whole per-process batch; AUTO: that too, until the model is on its device (Trainer.__init__)
    micro = min(cfg.micro_batch_size or per_rank, per_rank) if isinstance(cfg.micro_batch_size, int) else per_rank
    if per_rank % micro:
        raise ConfigError(f"per-process batch {per_rank} is not a multiple of --micro-batch-size {micro}")
    warmup = schedules.warmup_steps(steps1, tokens_per_step, cfg.warmup_tokens)
    return Plan(tokens_per_step, (steps1, steps2), warmup, per_rank // micro, micro, cfg.batch_size)


def _hardware(device: torch.device) -> str:
    """What trained the model, for its card: GPU name(s) or the CPU."""
    import platform

    if device.type == "cuda":
        return f"{torch.cuda.device_count()} x {torch.cuda.get_device_name(device)}"
    return f"CPU ({platform.machine()}, {torch.get_num_threads()} threads)"


def _mfu(model: torch.nn.Module, tokens_per_s: float, seq_len: int, device: torch.device,
         causal: bool) -> float | None:
    """MFU of a logged step against the GPU's datasheet peak (biobench.training.flops); None on CPU."""
    peak = table_peak_flops(device)
    if peak is None:
        return None
    n_params = sum(p.numel() for p in model.parameters())
    return mfu(n_params, model.config, seq_len, tokens_per_s, peak, causal=causal)


@dataclass
class TrainState:
    """Where a run stands: everything besides weights, optimiser and RNG that resuming must restore exactly.

    `step` counts within the current phase (the schedule restarts each phase); `global_step` and `position`
    (the next packed-sequence index) run across phases so the data never repeats."""

    phase: int = 0
    step: int = 0
    position: int = 0
    global_step: int = 0
    # tokens seen in all, per phase (phase1, phase2, ...) and per objective (clm, mlm, ...): a key appears with
    # the first step of its phase or objective (biobench.lineage reads them by that scheme)
    tokens: dict[str, int] = field(default_factory=lambda: {"seen": 0})

    def advance(self, phase_index: int, objective: Objective, tokens: int, sequences: int) -> None:
        """Account for one finished global step."""
        self.step += 1
        self.global_step += 1
        self.position += sequences
        for key in ("seen", f"phase{phase_index + 1}", objective):
            self.tokens[key] = self.tokens.get(key, 0) + tokens

    def finish_phase(self, phase_index: int) -> None:
        self.phase = phase_index + 1
        self.step = 0

    def to_json(self) -> dict[str, Any]:
        return {**asdict(self), "tokens": dict(self.tokens)}

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> TrainState:
        return cls(phase=int(data["phase"]), step=int(data["step"]), position=int(data["position"]),
                   global_step=int(data["global_step"]), tokens={k: int(v) for k, v in data["tokens"].items()})


class Trainer:
    """Setup reads as four steps (model, data, optimiser, resume); `run` walks the phases and `_run_phase`
    is the loop."""

    def __init__(self, cfg: PretrainConfig):
        self.cfg = cfg
        self.recipe: Recipe = get_recipe(cfg.recipe, cfg.freeze)
        self.dist = distributed.setup(cfg.device)
        self.plan = make_plan(cfg, self.dist.world)
        self.out = Path(cfg.out)
        self.attn = cfg.attn or attention_implementation(self.dist.device)
        self.data_seed = cfg.seed if cfg.data_seed is None else cfg.data_seed
        self.resume_from = self._resume_folder()
        check_corpus(cfg)  # a mistyped folder, a corpus too large to build here: one line, before any model
        self._setup_model()
        if cfg.micro_batch_size == AUTO:  # the largest micro-batch that fits, now that the model is on its device
            micro = micro_batch_size(AUTO, self.plan.micro * self.plan.accumulation, self.dist.device.type,
                                     self._try_micro_batch)
            self.plan = replace(self.plan, micro=micro, accumulation=self.plan.micro * self.plan.accumulation // micro)
        self._setup_data()
        self._setup_optimizer()
        self.state = self._restore()
        self.report: NoReport | Reporter = NoReport()  # run() opens the --report-to writer
        self.stop = StopRequest()  # run() connects it to SIGINT/SIGTERM
        self.saved_seen = self.state.tokens["seen"] if self.resume_from is not None else -1  # last resumable save
        self.saved_at = time.monotonic()
        resumed = self.resume_from
        self.rolling = resumed if resumed is not None and resumed.parent == self.out and \
            resumed.name.startswith(ROLLING) else None  # the timer's last checkpoint: replaced by the next one

    # ---------------------------------------------------------------- setup
    def _resume_folder(self) -> Path | None:
        """The checkpoint to resume from, its state read (and so checked) before anything is loaded; refuses to
        start a fresh run over an existing one."""
        self.saved_state: dict[str, Any] | None = None
        if self.cfg.resume:
            folder = checkpoint.resolve_resume(self.cfg.resume, self.out, self.recipe.name)
            self.saved_state = checkpoint.load_state(folder)
            return folder
        if self.out.is_dir() and any(m.parent.name != "init" for m in self.out.glob(f"*/{checkpoint.META}")):
            raise ConfigError(f"{self.out} already holds checkpoints of a pretraining run: pass --resume to "
                              f"continue it, or a fresh --out")
        return None

    def _setup_model(self) -> None:
        """Load (or build) the model and tokenizer, check the recipe's freezes and masks fit it."""
        cfg = self.cfg
        if self.resume_from is not None:
            self.model, self.tokenizer = loading.load_checkpoint(self.resume_from, self.attn, str(self.dist.device),
                                                                 cfg.max_model_gb, cfg.fsdp)
        else:
            tok_dir = self.out / "tokenizer" if cfg.model.startswith("preset:") else None
            if tok_dir is not None and self.dist.main:
                tok_dir.parent.mkdir(parents=True, exist_ok=True)
                self.model, self.tokenizer = self._load_source(tok_dir, train_tokenizer=True)
            distributed.barrier(self.dist)
            if not self.dist.main or tok_dir is None:
                self.model, self.tokenizer = self._load_source(tok_dir, train_tokenizer=False)
        if cfg.gradient_checkpointing:
            if hasattr(self.model, "activation_checkpointing_enable"):  # the name in recent transformers 5.x
                self.model.activation_checkpointing_enable(activation_checkpointing_kwargs={"use_reentrant": False})
            else:
                self.model.gradient_checkpointing_enable(gradient_checkpointing_kwargs={"use_reentrant": False})
        self.model.to(self.dist.device)
        if cfg.compile:  # in place: parameter names (checkpoints, freezing, optimiser groups) stay unchanged
            compile_in_place(encoder_of(self.model), self.dist.device.type, dynamic=False)
        freezing.validate_freezes(self.model, list(self.recipe.freezes))
        if cfg.doc_mask and self.model.config.model_type != "modernbert":
            raise ConfigError("--doc-mask builds ModernBERT mask mappings; it needs a ModernBERT model")

    def _try_micro_batch(self, n: int) -> None:
        """One forward/backward pass of `n` full-length sequences (`--micro-batch-size auto`), gradients dropped."""
        ids = torch.randint(0, len(self.tokenizer), (n, self.cfg.seq_len), device=self.dist.device)
        try:
            with autocast(self.dist.device, self.cfg.precision):
                loss = self.model(input_ids=ids, attention_mask=torch.ones_like(ids), labels=ids).loss
            loss.backward()
        finally:
            self.model.zero_grad(set_to_none=True)

    def _load_source(self, tok_dir, train_tokenizer: bool):
        cfg = self.cfg
        return loading.load(cfg.model, recipe_name=self.recipe.name, needs_causal=self.recipe.needs_causal,
                            attn=self.attn, corpus_documents=lambda: corpus.iter_documents(cfg.corpus, cfg.text_field),
                            seed=cfg.seed, tokenizer_dir=tok_dir, train_tokenizer=train_tokenizer,
                            decoder=self.recipe.decoder, device=str(self.dist.device), max_model_gb=cfg.max_model_gb,
                            sharded=cfg.fsdp)

    def _setup_data(self) -> None:
        """The corpus as packed sequences: a built token store, a mix of stores (training/mixture.py), or raw text
        built into a store first (training/corpus_input.py; the other ranks wait on its completion marker)."""
        cfg = self.cfg
        total = sum(self.plan.steps) * self.plan.batch_size
        self.packed, self.corpus_summary, self.validation = packed_corpus(
            cfg, self.tokenizer, self.dist.main, total, self.data_seed, self._print)
        self.special_ids = sorted(set(self.tokenizer.all_special_ids))
        masker = Masker(self.special_ids, self.tokenizer.mask_token_id, len(self.tokenizer), cfg.seed)
        self.batches = BatchBuilder(self.packed, masker, self.plan.batch_size, self.plan.micro, self.dist.rank, self.dist.world)
        self.last_validation: dict[str, Any] | None = None  # the latest held-out evaluation (checkpoint metadata)

    def _setup_optimizer(self) -> None:
        """One optimiser for every phase (FSDP2 must wrap the model before the optimiser sees its parameters)."""
        cfg = self.cfg
        self.model.train()
        self.sharded = None
        if cfg.fsdp and self.dist.world > 1:
            if cfg.resume:
                raise ConfigError("--resume with --fsdp is not supported yet (sharded optimiser state); use DDP")
            self.sharded = distributed.wrap(LMLoss(self.model), self.dist, fsdp=True)
        self.optimizer = optim.build_optimizer(self.model, cfg.lr, cfg.betas, cfg.eps, cfg.weight_decay)

    def _restore(self) -> TrainState:
        """A fresh state, or the optimiser, RNG and position saved in the resume checkpoint."""
        state = TrainState()
        saved, self.saved_state = self.saved_state, None  # the optimiser copies it; do not hold it twice
        if saved is not None:
            try:
                self.optimizer.load_state_dict(saved["optimizer"])
                state = TrainState.from_json(saved["trainer"])
                set_rng_state(saved["rng"])
            except (KeyError, TypeError, ValueError, RuntimeError) as err:
                assert self.resume_from is not None  # the saved state was read from it
                raise ConfigError(f"--resume: {self.resume_from / checkpoint.STATE} does not fit this run's model and "
                                  f"optimiser ({type(err).__name__}: {str(err).splitlines()[0] if str(err) else ''}); "
                                  f"resume from the checkpoint folder it was written with") from err
        if self.dist.main:
            self._trim_log(state.global_step)
        return state

    # ---------------------------------------------------------------- batches
    def _step_stream(self, phase, total: int):
        """This phase's remaining steps, built ahead by `loader_workers` processes (labels depend only on the
        data position and seed, so the split over ranks, micro-batches and workers does not change the data)."""
        cuda = self.dist.device.type == "cuda"
        workers = self.cfg.loader_workers if self.cfg.loader_workers is not None else (2 if cuda else 0)
        return step_stream(self.batches, self.state.position, total - self.state.step, phase.objective,
                           phase.mask_rate, workers=workers, pin_memory=cuda)

    def _forward_inputs(self, b: dict[str, torch.Tensor], causal: bool) -> dict[str, Any]:
        dev = self.dist.device
        inputs: dict[str, Any] = {"input_ids": b["input_ids"].to(dev, non_blocking=True),
                                  "labels": b["labels"].to(dev, non_blocking=True)}
        mask: torch.Tensor | dict[str, Any] = b["attention_mask"].to(dev, non_blocking=True)
        if self.cfg.doc_mask:
            inputs["position_ids"] = document_positions(b["document_ids"]).to(dev)
            if self.attn != "flash_attention_2":  # flash: positions restart, attention still crosses documents
                mask = attention_masks(self.model, mask, *b["attention_mask"].shape, causal=causal,
                                       document_ids=b["document_ids"], device=dev)
        inputs["attention_mask"] = mask
        return inputs

    # ---------------------------------------------------------------- loop
    def run(self) -> Path | None:
        quiet_library_bars()  # before the first checkpoint write (init/)
        if self.resume_from is not None and (self.out / "final" / checkpoint.META).exists():
            self._print(f"{self.out / 'final'} exists: the run is complete")
            return self.out / "final"
        if self.resume_from is not None:  # which checkpoint, and where in the run: the user can check it is theirs
            self._print(f"resuming from {self.resume_from} (step {self.state.global_step:,}, "
                        f"{self.state.tokens['seen']:,} tokens seen)")
        if self.dist.main:
            self.out.mkdir(parents=True, exist_ok=True)  # a hub/local --model never created it before the log
        passes = self.corpus_passes()["planned"]
        if passes > 1:  # said, and recorded in each checkpoint's metadata (`corpus_passes`): issue 52 item 7
            self._print(f"corpus: {len(self.packed.tokens):,} tokens ({self.packed.n_sequences:,} sequences of "
                        f"{self.cfg.seq_len}); this run reads it {passes:.1f} times (each pass in another order): "
                        "a bigger corpus or fewer --tokens repeats less")
        if self.resume_from is None and self.state.global_step == 0:
            # The start model (preset init; a decoder with its <mask> token added) for start-vs-end analyses (CKA).
            self._save(self.out / "init", "init", with_state=False)
        bar = None
        if self.cfg.progress and self.dist.main:
            bar = progress_bar(True, total=sum(self.plan.steps), initial=self.state.global_step, unit="step")
        self.report = make_reporter(self.cfg.report_to if self.dist.main else None,
                                    report_dir(self.out, self.cfg.report_to), name=f"pretrain {self.out.name}",
                                    config={"recipe": self.cfg.recipe, "model": self.cfg.model,
                                            "tokens": self.cfg.tokens, "out": str(self.out)})
        try:
            # Ctrl-C, and what a scheduler sends before the wall clock ends a job: SIGTERM, or SIGUSR1 where the
            # job asked for a warning (`#SBATCH --signal=B:USR1@120`); the command requeues a SLURM job after it
            with stop_on_signal(self._print if self.dist.main else lambda _: None, signals=STOP_SIGNALS) as self.stop:
                for phase_index in range(self.state.phase, len(self.recipe.phases)):
                    if not self._run_phase(phase_index, bar):
                        return None
            return self.out / "final"
        finally:
            self.report.close()
            if bar is not None:
                bar.close()

    def _run_phase(self, phase_index: int, bar) -> bool:
        phase = self.recipe.phases[phase_index]
        total = self.plan.steps[phase_index]
        frozen = freezing.apply_freezes(self.model, self.recipe.frozen_layers(phase_index))
        trainable = [p for p in self.model.parameters() if p.requires_grad]
        wrapped = self.sharded or distributed.wrap(LMLoss(self.model), self.dist)
        causal = phase.causal
        context = phase_attention(self.model, causal)  # decoders keep the phase's mask for its checkpoint
        if self.dist.main:
            self._print(f"phase {phase_index + 1}/{len(self.recipe.phases)}: {phase.title()}"
                        f", {total} step{'' if total == 1 else 's'}, schedule {phase.schedule}"
                        + (f", frozen layers {frozen[0]}-{frozen[-1]}" if frozen else ""))
        stream = self._step_stream(phase, total)
        with context:
            while self.state.step < total:
                if self.cfg.stop_after_steps is not None and self.state.global_step >= self.cfg.stop_after_steps:
                    return False
                stop, timer = self._agreed_flags()
                if stop:
                    self._save_rolling()
                    raise Stopped(self.stop.signal_name or "a signal")
                if timer:
                    self._save_rolling()
                t0 = time.perf_counter()
                loss, grad_norm, lr = self._step(next(stream), wrapped, trainable, phase, total, causal)
                elapsed = time.perf_counter() - t0
                tokens = self.plan.tokens_per_step
                self.state.advance(phase_index, phase.objective, tokens, self.plan.batch_size)
                every = self.cfg.eval_every
                validation = None
                if self.validation and ((every and self.state.global_step % every == 0) or self.state.step == total):
                    validation = self._validate(phase_index, phase, causal)
                if self.dist.main:
                    self._log_step(phase_index, phase, loss, grad_norm, lr, tokens / elapsed, bar, validation)
                seen, every = self.state.tokens["seen"], self.cfg.save_every
                if every and seen // every > (seen - tokens) // every and self.state.step < total:
                    self._save(self.out / f"step-{seen}", "step", with_state=True)
        self.state.finish_phase(phase_index)
        last = phase_index == len(self.recipe.phases) - 1
        self._save(self.out / phase.name, phase.name, with_state=not last)
        return True

    def _step(self, micro, wrapped, trainable, phase, total: int, causal: bool) -> tuple[float, float, float]:
        count = torch.tensor(float(sum(int(b["n_labels"]) for b in micro)), device=self.dist.device)
        count = distributed.all_reduce_sum(count, self.dist).clamp(min=1.0)
        scale = self.dist.world / count
        loss_sum = torch.zeros((), device=self.dist.device)
        for i, b in enumerate(micro):
            sync = i == len(micro) - 1 or not hasattr(wrapped, "no_sync")
            with (contextlib.nullcontext() if sync else wrapped.no_sync()), autocast(self.dist.device, self.cfg.precision):
                part, _ = wrapped(**self._forward_inputs(b, causal))
            (part * scale).backward()
            loss_sum += part.detach().float()
        loss = distributed.all_reduce_sum(loss_sum, self.dist) / count
        clip = self.cfg.grad_clip if self.cfg.grad_clip else math.inf
        grad_norm = torch.nn.utils.clip_grad_norm_(trainable, clip) if trainable else torch.zeros(())
        if not (math.isfinite(float(loss)) and math.isfinite(float(grad_norm))):
            # before the optimiser step: the weights stay those of the last good step, and no checkpoint of
            # NaN tensors is written (the rolling and step checkpoints on disk are the last good ones)
            self.optimizer.zero_grad(set_to_none=True)
            raise TrainingDivergedError(
                f"the loss became {float(loss)} (gradient norm {float(grad_norm)}) at step {self.state.global_step + 1}"
                f" (phase {phase.name}); stopped before updating the weights. {self._last_good()}; lower --lr "
                "or set --grad-clip, then resume")
        lr = self.cfg.lr * schedules.multiplier(phase.schedule, self.state.step, total, self.plan.warmup)
        for group in self.optimizer.param_groups:
            group["lr"] = lr
        self.optimizer.step()
        self.optimizer.zero_grad(set_to_none=True)
        return float(loss), float(grad_norm), lr

    def _validate(self, phase_index: int, phase: Phase, causal: bool) -> dict[str, float | None]:
        """The mean token loss of each source's held-out sequences (self.validation) under the phase's objective,
        the model in eval mode without gradients. MLM masks are drawn from VALIDATION_MASK_SEED and the sequence's
        index, so every evaluation masks the same tokens and losses compare across steps and runs. Each rank
        evaluates every world-th sequence and the sums are reduced (all ranks run the same number of forward
        passes, padding rows carry no label: FSDP's gathers stay in step); the model goes back to train mode,
        and no random state is drawn, so training reads and computes as it would without evaluations."""
        rank, world, micro = self.dist.rank, self.dist.world, self.plan.micro
        masker = Masker(self.special_ids, self.tokenizer.mask_token_id, len(self.tokenizer), VALIDATION_MASK_SEED)
        model = self.sharded or LMLoss(self.model)
        losses: dict[str, float | None] = {}
        self.model.eval()
        try:
            with torch.no_grad():
                for name, packed in self.validation:
                    builder = BatchBuilder(packed, masker, micro, micro)
                    n = packed.n_sequences
                    per_rank = -(-n // world)
                    sums = torch.zeros(2, dtype=torch.float64, device=self.dist.device)
                    for start in range(0, per_rank, micro):
                        index = np.arange(start, min(start + micro, per_rank)) * world + rank
                        b = stack_rows([packed.sequence(int(i) if i < n else 0) for i in index])
                        LABELS[phase.objective](builder, b, index, phase.mask_rate)
                        b["labels"][torch.from_numpy(index >= n)] = IGNORE  # padding rows: no loss
                        with autocast(self.dist.device, self.cfg.precision):
                            part, count = model(**self._forward_inputs(b, causal))
                        sums += torch.stack([part.detach().double(), count.double()])
                    total, count = distributed.all_reduce_sum(sums, self.dist).tolist()
                    losses[name] = round(total / count, 6) if count else None
        finally:
            self.model.train()
        self.last_validation = {"step": self.state.global_step, "phase": phase_index + 1,
                                "objective": phase.objective, "loss": dict(losses)}
        return losses

    def _last_good(self) -> str:
        folder = checkpoint.latest(self.out) if self.out.is_dir() else None
        return f"the last good checkpoint is {folder}" if folder is not None else "no checkpoint was written yet"

    def _log_step(self, phase_index: int, phase: Phase, loss: float, grad_norm: float, lr: float,
                  tokens_per_s: float, bar, validation: dict[str, float | None] | None = None) -> None:
        objective = phase.objective
        record: dict[str, Any] = {"step": self.state.global_step, "phase": phase_index + 1, "objective": objective,
                  "tokens": self.state.tokens["seen"], "loss": round(loss, 6), "lr": lr,
                  "grad_norm": round(grad_norm, 6), "tokens_per_s": round(tokens_per_s, 1),
                  "mfu": _mfu(self.model, tokens_per_s, self.cfg.seq_len, self.dist.device, phase.causal),
                  "data_digest": step_digest(self.packed, self.state.position - self.plan.batch_size, self.plan.batch_size)}
        if validation is not None:  # the held-out loss per source, at the steps it is evaluated (--eval-every)
            record["validation"] = validation
            self.report.scalars({f"validation/{name}/loss": value for name, value in validation.items()},
                                record["step"])
            self._print(f"step {record['step']} phase {phase_index + 1} {objective} validation loss: "
                           + ", ".join(f"{name} {'n/a' if v is None else format(v, '.4f')}"
                                       for name, v in validation.items()))
        append_line(self.out / "train_log.jsonl", json.dumps(record), lambda: checkpoint.finished(self.out))
        self.report.scalars({f"train/{k}": record[k] for k in ("loss", "lr", "grad_norm", "tokens_per_s", "mfu")},
                            record["step"])
        if bar is not None:
            bar.set_postfix(phase=phase_index + 1, loss=f"{loss:.3f}", lr=f"{lr:.2e}", tok_s=f"{tokens_per_s:,.0f}")
            bar.update(1)
            every = max(1, sum(self.plan.steps) // 20)  # a log file gets a line per 5% of the run
            if self.state.global_step % every == 0 or self.state.global_step == sum(self.plan.steps):
                log_line(True, f"step {self.state.global_step}/{sum(self.plan.steps)} phase {phase_index + 1} "
                               f"{objective}: loss {loss:.4f}, lr {lr:.2e}, {tokens_per_s:,.0f} tokens/s")

    # ---------------------------------------------------------------- checkpoints
    def metadata(self, phase_name: str) -> dict[str, Any]:
        cfg = self.cfg
        return {"recipe": self.recipe.name, "phase": phase_name, "base_model": cfg.model,
                "tokens": dict(self.state.tokens),
                "frozen": [f.to_json() for f in self.recipe.freezes], "decay_ratio": cfg.decay_ratio,
                "seq_len": cfg.seq_len, "batch_size": cfg.batch_size, "corpus": str(cfg.corpus),
                "doc_mask": cfg.doc_mask, "seed": cfg.seed, "data_seed": self.data_seed, "world_size": self.dist.world,
                "attention": {p.name: "causal" if p.causal else "bidirectional" for p in self.recipe.phases},
                "decoder": is_decoder(self.model),
                "mask_token": getattr(self.model.config, "biobench_mask_token", None),
                "optimizer": {"name": "DecoupledAdamW", "lr": cfg.lr, "betas": list(cfg.betas), "eps": cfg.eps,
                              "weight_decay": cfg.weight_decay, "grad_clip": cfg.grad_clip},
                "schedule": {"warmup_steps": self.plan.warmup, "steps": list(self.plan.steps),
                             "tokens_per_step": self.plan.tokens_per_step, "micro_batch_size": self.plan.micro,
                             "accumulation_steps": self.plan.accumulation},
                "attn_implementation": self.model.config._attn_implementation or self.attn,
                "hardware": _hardware(self.dist.device), "compute": self._compute(),
                "corpus_record": self._corpus_record(), "corpus_passes": self.corpus_passes(),
                **({"validation": self.last_validation} if self.validation else {})}

    def corpus_passes(self) -> dict[str, Any]:
        """How many times the run reads its corpus: planned sequences over the corpus's packed sequences (a
        small corpus is repeated, each pass in another order: packing.PackedCorpus), and how far it got."""
        planned = sum(self.plan.steps) * self.plan.batch_size
        return {"corpus_tokens": len(self.packed.tokens), "corpus_sequences": self.packed.n_sequences,
                "planned": round(planned / self.packed.n_sequences, 2),
                "done": round(self.state.position / self.packed.n_sequences, 2)}

    def _corpus_record(self) -> dict[str, Any]:
        """The corpus files (paths, sizes, sha256), hashed once per run (training.corpus.corpus_record)."""
        if getattr(self, "_corpus", None) is None:
            self._corpus = corpus_record(self.cfg, self.corpus_summary)
        return self._corpus

    def _compute(self) -> dict[str, Any]:
        """Training time so far, summed from train_log.jsonl (each step's tokens / its tokens/s; a resumed run's
        log is trimmed to its checkpoint, so this never double-counts), and device-hours over all processes: the
        leaderboard's efficiency columns read them from the lineage."""
        train_s = 0.0
        log = self.out / "train_log.jsonl"
        if log.is_file():
            for line in log.read_text().splitlines():
                tps = json.loads(line).get("tokens_per_s")
                if isinstance(tps, int | float) and tps > 0:
                    train_s += self.plan.tokens_per_step / tps
        return {"train_s": round(train_s, 1), "devices": self.dist.world, "device_type": self.dist.device.type,
                "device_hours": round(train_s * self.dist.world / 3600, 4)}

    def _agreed_flags(self) -> tuple[bool, bool]:
        """(stop requested, rolling checkpoint due), the same on every rank: a signal or a clock seen by one
        process makes all of them save (a checkpoint written by some ranks only would hang the others)."""
        minutes = self.cfg.save_minutes
        flags = [self.stop.requested, bool(minutes and time.monotonic() - self.saved_at >= 60 * minutes)]
        if self.dist.world > 1:
            total = distributed.all_reduce_sum(torch.tensor([float(f) for f in flags], device=self.dist.device), self.dist)
            flags = [bool(v > 0) for v in total.tolist()]
        return flags[0], flags[1]

    def _save_rolling(self) -> None:
        """A resumable checkpoint of where the run stands (unless one was just written, e.g. phase1/), replacing
        the previous rolling one; nothing before the first step (a fresh run starts over just as fast)."""
        seen = self.state.tokens["seen"]
        if seen == self.saved_seen or self.state.global_step == 0:
            self.saved_at = time.monotonic()
            return
        folder = self.out / f"{ROLLING}{seen}"
        self._save(folder, "resume", with_state=True)
        if self.dist.main and self.rolling is not None and self.rolling != folder:
            remove_owned(self.rolling, checkpoint.legacy_checkpoint)
        self.rolling = folder

    def _save(self, folder: Path, phase_name: str, with_state: bool) -> None:
        if with_state:
            self.saved_seen, self.saved_at = self.state.tokens["seen"], time.monotonic()
        model_state = None
        if self.cfg.fsdp and self.dist.world > 1:
            from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

            model_state = get_model_state_dict(self.model, options=StateDictOptions(full_state_dict=True, cpu_offload=True))
        if not self.dist.main:
            distributed.barrier(self.dist)
            return
        state = None
        if with_state:
            state = {"optimizer": self.optimizer.state_dict(), "trainer": self.state.to_json(), "rng": rng_state(),
                     "config": self.cfg.to_json()}
        meta = self.metadata(phase_name)
        checkpoint.save(folder, self.model, self.tokenizer, meta, state, model_state)
        if phase_name in {p.name for p in self.recipe.phases}:  # phase1/ and final/: publishable folders
            card.write_card(folder, meta, self.out / "train_log.jsonl", _hardware(self.dist.device),
                            self.cfg.language, self.cfg.license)
        distributed.barrier(self.dist)

    def _trim_log(self, last_step: int) -> None:
        """Drop log lines past the checkpoint a run resumes from (a fresh run starts an empty log)."""
        log = self.out / "train_log.jsonl"
        if log.exists() or log.is_symlink():

            try:  # bounded and regular files only: a FIFO or junk in --out is one line, never a hang or traceback
                records = [record for _, record in iter_jsonl(log, max_bytes=1 << 30)]
                if not all(isinstance(r, dict) and isinstance(r.get("step"), int) for r in records):
                    raise UnsafeJSONError(log, "a record without a step")
            except (UnsafeJSONError, OSError, EOFError) as err:
                reason = err.reason if isinstance(err, UnsafeJSONError) else str(err)
                raise ConfigError(f"{log} is not a biobench training log ({reason}); move it out of --out or choose "
                                  "another --out") from None
            lines = [line for line in log.read_text(encoding="utf-8").splitlines() if line.strip()]  # checked above
            keep = [line for line, record in zip(lines, records, strict=True) if record["step"] <= last_step]
            atomic_write(log, "".join(line + "\n" for line in keep))

    def _print(self, message: str) -> None:
        if self.dist.main:
            print(message, flush=True)


def train(cfg: PretrainConfig) -> Path | None:
    """Run (or resume) a recipe; returns <out>/final, or None when stopped early by stop_after_steps."""
    trainer = Trainer(cfg.check())
    try:
        return trainer.run()
    finally:
        distributed.cleanup(trainer.dist)
