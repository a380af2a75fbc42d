"""The generic fine-tuning loop: one loop for every task kind, talking to a HeadSpec (biobench.heads.base).

Why it looks like this: a benchmark grid runs the same task with many seeds, so features are built once per
task (`prepare_task`) and each seed gets a fresh encoder copy; the best dev state is kept in memory (a
state_dict copy, no checkpoint files), then restored for the test predictions. Batches are length-grouped with
dynamic padding (long clinical documents next to short sentences otherwise waste most of the compute), except
for a head that trains on random batches as its harness does (`train_order = "random"`: the span heads).
"""

from __future__ import annotations

import math
import random
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
from biobench.errors import DataError
from biobench.heads.base import HeadModel, HeadSpec, to_device
from biobench.metrics import score
from biobench.protocols import Protocol
from biobench.runtime.batching import LengthGroupedSampler, micro_batch_size
from biobench.runtime.compiling import compile_in_place
from biobench.runtime.device import autocast
from biobench.runtime.progress import Ticker, log_line, progress_bar
from biobench.runtime.reporting import Reporter
from biobench.tasks.schema import TaskData
from torch import nn

SPLITS = ("train", "dev", "test")
NO_DECAY = ("bias", "norm")  # parameter-name fragments without weight decay (biases, LayerNorm weights)


@dataclass
class PreparedTask:
    """A task's examples, gold values and tokenised features, built once and reused by every seed."""

    task_id: str
    kind: str
    head: HeadSpec
    labels: list[str]
    examples: dict[str, list]
    features: dict[str, list[dict[str, Any]]]
    gold: dict[str, list]
    unseen_test_labels: list[str] = field(default_factory=list)


def train_subset(examples: Sequence[Any], limit: int | None) -> list:
    """A fixed random subset of `limit` examples (same for every seed, original order kept): the train split
    under --limit-train, dev and test under --limit-eval."""
    if not limit or limit >= len(examples):
        return list(examples)
    keep = sorted(random.Random(0).sample(range(len(examples)), limit))
    return [examples[i] for i in keep]


def _labels_of(kind: str, gold: Any) -> set[str]:
    if kind == "ner":
        return {span[2] for span in gold}
    return set(gold) if kind == "multilabel" else {gold}


def prepare_task(head: HeadSpec, data: TaskData, tokenizer: Any, protocol: Protocol) -> PreparedTask:
    """Check the splits, apply --limit-train and --limit-eval, tokenise every split once."""
    for split in SPLITS:
        if not data.splits.get(split):
            fix = ("checkpoints are chosen on dev, so a dev split is required: add one to the data "
                   "(or carve it out of train in the task spec)" if split == "dev" else "check the data folder")
            raise DataError(f"task '{data.task_id}': the {split} split is empty ({data.source or 'no source'}); {fix}")
    examples = {split: list(data.splits[split]) for split in SPLITS}
    examples["train"] = train_subset(examples["train"], protocol.limit_train)
    for split in ("dev", "test"):
        examples[split] = train_subset(examples[split], protocol.limit_eval)
    gold = {split: [head.gold(ex) for ex in examples[split]] for split in SPLITS}
    labels = list(data.labels)
    seen = set().union(*(_labels_of(data.kind, g) for g in gold["train"]))
    if not labels:
        labels = sorted(seen)
    unseen = sorted(set().union(*(_labels_of(data.kind, g) for g in gold["test"])) - seen)
    try:
        features = {split: head.featurize(examples[split], tokenizer, protocol.max_length, labels) for split in SPLITS}
    except DataError as err:  # the head names the document; say which task and source file it is in
        raise DataError(f"task '{data.task_id}' ({data.source or 'no source'}): {err}") from err
    return PreparedTask(data.task_id, data.kind, head, labels, examples, features, gold, unseen)


@dataclass
class FinetuneOutcome:
    test_predictions: list
    dev_metrics: dict[str, Any]
    test_metrics: dict[str, Any]
    dev_score: float
    best_epoch: int
    best_step: int
    history: list[dict[str, Any]]
    timings: dict[str, float | None]  # tokens_per_s is None for a run that took no measurable time
    compiled: bool = False  # the encoder ran under torch.compile (--compile, where the compiler could run)
    micro_batch: int = 0  # examples per forward pass (--batch-size auto); the protocol's batch when equal
    accumulation: int = 1  # micro-batches per optimiser step
    steps: int = 0  # optimiser steps run


def _optimizer(model: HeadModel, protocol: Protocol) -> torch.optim.Optimizer:
    """AdamW; the head gets its own learning rate; biases and norms get no weight decay."""
    head_ids = {id(p) for p in model.head_parameters()}
    groups: dict[tuple[bool, bool], list[nn.Parameter]] = {}
    for name, param in model.named_parameters():
        if param.requires_grad:
            key = (id(param) in head_ids, any(tag in name.lower() for tag in NO_DECAY))
            groups.setdefault(key, []).append(param)
    # fused: one kernel for all tensors instead of a python loop over them (the Trainer's default since
    # torch 2.8; profiled at 12-15% of a MiniLM step on CPU unfused).
    return torch.optim.AdamW([
        {"params": params, "lr": protocol.head_lr if is_head else protocol.lr,
         "weight_decay": 0.0 if no_decay else protocol.weight_decay}
        for (is_head, no_decay), params in groups.items()
    ], fused=True)


def _length(feature: dict[str, Any]) -> int:
    return len(feature.get("input_ids", ()))


def predict(model: HeadModel, head: HeadSpec, features: Sequence[dict[str, Any]], n_examples: int,
            batch_size: int, pad_token_id: int, device: str, head_metrics: dict[str, float] | None = None,
            progress: str | None = None) -> list:
    """Per-example predictions of a split (features batched by length, order restored, merged by the head).
    A head that computes its own dev metrics from its per-feature outputs (`selection_metrics`, e.g. the
    span head's sampled-span F1) adds them to `head_metrics` when given. `progress` (a label) shows how far
    scoring is: a bar on a terminal, a line every ~30 s in a log (a large test set takes minutes on a CPU)."""
    model.eval()
    order = sorted(range(len(features)), key=lambda i: _length(features[i]))
    feature_predictions: list[Any] = [None] * len(features)
    ticker = Ticker(progress is not None, progress or "", len(features))
    with torch.no_grad(), autocast(device):
        for start in range(0, len(order), batch_size):
            chunk = order[start:start + batch_size]
            batch = to_device(head.collate([features[i] for i in chunk], pad_token_id), device)
            for i, prediction in zip(chunk, model.predict(batch), strict=True):
                feature_predictions[i] = prediction
            ticker.update(start + len(chunk))
    ticker.close()
    if head_metrics is not None and hasattr(head, "selection_metrics"):
        head_metrics.update(head.selection_metrics(feature_predictions))
    return head.merge(features, feature_predictions, n_examples)


def _seed_everything(seed: int) -> None:
    from transformers import set_seed

    set_seed(seed)


def _accumulate(model: nn.Module, head: HeadSpec, features: list[dict[str, Any]], micro: int, pad_token_id: int,
                device: str) -> torch.Tensor:
    """Forward and backward of one protocol batch, in micro-batches of `micro` examples whose losses are weighted
    by their share of the batch (gradients add up to the whole batch's for per-example mean losses); returns the
    batch loss, detached. A batch that fits in one micro-batch runs exactly as without accumulation."""
    total: torch.Tensor | None = None
    for start in range(0, len(features), micro):
        chunk = features[start:start + micro]
        with autocast(device):
            loss = model(to_device(head.collate(chunk, pad_token_id), device))["loss"]
            if len(chunk) < len(features):
                loss = loss * (len(chunk) / len(features))
        loss.backward()
        total = loss.detach() if total is None else total + loss.detach()
    assert total is not None  # a batch holds one feature at least
    return total


def _try_micro_batch(model: nn.Module, task: PreparedTask, n: int, pad_token_id: int, device: str) -> None:
    """One forward/backward pass on the `n` longest training inputs (the memory worst case), gradients dropped."""
    longest = sorted(task.features["train"], key=_length, reverse=True)[:n]
    try:
        with autocast(device):
            loss = model(to_device(task.head.collate(longest, pad_token_id), device))["loss"]
        loss.backward()
    finally:
        model.zero_grad(set_to_none=True)


# A `.item()` makes the host wait for the device: reading the running loss every step serialises a GPU loop
# (the next batch cannot be queued while the current one runs). It is read every LOSS_READ_EVERY steps and
# at each evaluation; the average itself is kept on the device, so the logged values are unchanged.
LOSS_READ_EVERY = 50


@dataclass
class DevSelection:
    """The dev evaluations of one fine-tuning run: their history and the model state best on dev by the
    protocol's `dev_metric`, kept in memory as a CPU state_dict copy. The first of equal scores wins, as the
    harnesses' Trainer keeps it (`load_best_model_at_end`: a later checkpoint must be strictly better), except
    at a score of 0: there a later state with a higher headline metric on dev (`metric`: exact-span macro-F1
    for NER) wins, so a run whose selection score stays 0 (the span head's sampled-span F1 early in training)
    does not keep a state that predicts nothing over a later one that predicts (docs/PROTOCOL.md, "Steps before the span head predicts")."""

    score: float = -1.0
    tie_break: float = -1.0  # the kept state's dev headline metric
    metrics: dict[str, Any] = field(default_factory=dict)
    epoch: int = 0
    step: int = 0
    state: dict[str, torch.Tensor] | None = None
    history: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0  # time spent evaluating dev (and later test): not training time

    def improves(self, score: float, headline: float) -> bool:
        """Whether a state scoring `score` on the selection metric (`headline` on the headline one) replaces
        the kept one."""
        if score != self.score:
            return score > self.score
        return score == 0 and headline > self.tie_break


@dataclass
class _Run:
    """What one seed's fine-tuning needs at every step; its methods are the steps `finetune` runs in order."""

    task: PreparedTask
    model: HeadModel
    protocol: Protocol
    seed: int
    pad_token_id: int
    device: str
    progress: bool
    report: Reporter | None
    total: int
    eval_batch: int
    micro: int  # examples per forward pass: the protocol's batch, or less with gradient accumulation
    selection: DevSelection = field(default_factory=DevSelection)

    def predict(self, split: str, head_metrics: dict[str, float] | None = None) -> list:
        label = f"{self.task.task_id} seed {self.seed}: scoring {split} (inputs)" if self.progress else None
        return predict(self.model, self.task.head, self.task.features[split], len(self.task.examples[split]),
                       self.eval_batch, self.pad_token_id, self.device, head_metrics, label)

    def evaluate(self, epoch: int, step: int, loss: float) -> None:
        """Score dev, log and report it, keep the state when it is the best so far."""
        task, protocol, best = self.task, self.protocol, self.selection
        t0 = time.perf_counter()
        head_metrics: dict[str, float] = {}  # the head's own dev metrics (the span head's sampled-span F1)
        metrics = {**score(task.kind, task.gold["dev"], self.predict("dev", head_metrics), task.labels), **head_metrics}
        selected = metrics[protocol.dev_metric]
        best.history.append({"epoch": epoch, "step": step, "train_loss": loss, "dev_macro_f1": metrics["macro_f1"],
                             f"dev_{protocol.dev_metric}": selected})
        if self.report is not None:
            self.report.scalars({"train/loss": loss, f"dev/{protocol.dev_metric}": selected,
                                 "dev/macro_f1": metrics["macro_f1"]}, step)
        log_line(self.progress, f"{task.task_id} seed {self.seed} epoch {epoch} step {step}/{self.total}: train loss "
                                f"{loss:.4f}, dev {protocol.dev_metric} {selected:.4f}")
        if best.improves(selected, metrics[protocol.metric]):
            best.state = {k: v.detach().to("cpu", copy=True) for k, v in self.model.state_dict().items()}
            best.score, best.metrics, best.epoch, best.step = selected, metrics, epoch, step
            best.tie_break = metrics[protocol.metric]
        best.seconds += time.perf_counter() - t0
        self.model.train()

    def train(self, loader, optimizer, scheduler) -> int:
        """The training loop: `total` optimizer steps over epochs of `loader`, dev evaluated every
        `eval_every` steps or at each epoch's end (and always at the last step). Returns the steps run."""
        protocol, model, device = self.protocol, self.model, self.device
        bar = progress_bar(self.progress, total=self.total, desc=f"{self.task.task_id} seed {self.seed}", leave=False)
        # off a terminal, a line every ~30 s between dev evaluations too (a CPU step can take minutes)
        beat = Ticker(self.progress, f"{self.task.task_id} seed {self.seed}: training steps", self.total, bar=False)
        step, epoch, running = 0, 0, 0.0
        running_on_device: torch.Tensor | None = None  # read on the host every LOSS_READ_EVERY steps only
        model.train()
        while step < self.total:
            epoch += 1
            evaluated_at = -1
            for batch in loader:
                loss = _accumulate(model, self.task.head, batch, self.micro, self.pad_token_id, device)
                if protocol.grad_clip:
                    torch.nn.utils.clip_grad_norm_(model.parameters(), protocol.grad_clip)
                optimizer.step()
                scheduler.step()
                optimizer.zero_grad(set_to_none=True)
                step += 1
                current = loss.detach().float()
                running_on_device = current.clone() if running_on_device is None else running_on_device.mul_(0.9).add_(current, alpha=0.1)
                bar.update(1)
                beat.update(step)
                due = protocol.eval_every and step % protocol.eval_every == 0
                if due or step % LOSS_READ_EVERY == 0 or step >= self.total:
                    running = running_on_device.item()
                    bar.set_postfix(loss=f"{running:.4f}", dev=f"{max(self.selection.score, 0):.3f}")
                if due:
                    self.evaluate(epoch, step, running)
                    evaluated_at = step
                if step >= self.total:
                    break
            if evaluated_at != step and (not protocol.eval_every or step >= self.total):
                running = running_on_device.item() if running_on_device is not None else running
                self.evaluate(epoch, step, running)
        bar.close()
        return step

    def test(self) -> tuple[list, dict[str, Any]]:
        """Test predictions and metrics of the state best on dev."""
        t0 = time.perf_counter()
        # kept at the first dev evaluation (any score beats the initial -1), which every run reaches
        assert self.selection.state is not None
        self.model.load_state_dict(self.selection.state)
        preds = self.predict("test")
        metrics = score(self.task.kind, self.task.gold["test"], preds, self.task.labels)
        self.selection.seconds += time.perf_counter() - t0
        return preds, metrics


def _train_loader(task: PreparedTask, protocol: Protocol, seed: int):
    """Batches of the train features in an order drawn from `seed` (lists of features, collated per
    micro-batch): length-grouped, or uniformly shuffled for a head whose `train_order` is "random" (the span
    heads: Rian-T/tabib trains them with the Trainer's default RandomSampler, `group_by_length` unset)."""
    from torch.utils.data import DataLoader, RandomSampler

    train = task.features["train"]
    generator = torch.Generator().manual_seed(seed)
    if getattr(task.head, "train_order", "length") == "random":
        sampler: Iterable[int] = RandomSampler(train, generator=generator)
    else:
        sampler = LengthGroupedSampler(protocol.batch_size, lengths=[_length(f) for f in train], generator=generator)
    # a list is a map-style dataset (__getitem__, __len__); torch's annotation asks for a Dataset
    return DataLoader(train, batch_size=protocol.batch_size, sampler=sampler, collate_fn=list)  # type: ignore[arg-type]


def finetune(task: PreparedTask, encoder: nn.Module, pad_token_id: int, protocol: Protocol, seed: int,
             device: str = "cpu", progress: bool = True, compile_encoder: bool = False,
             report: Reporter | None = None, micro_batch: int | str | None = None) -> FinetuneOutcome:
    """Train a head on `encoder` (consumed: pass a fresh copy), keep the state best on dev by
    `protocol.dev_metric` (the first of equal scores), predict test with it. `compile_encoder` (--compile)
    runs the encoder under torch.compile with dynamic shapes (batches are padded to their own length); an
    execution detail like the thread count, so not part of the protocol. `report` gets the train loss and
    the dev scores at each evaluation (`--report-to tensorboard`). `micro_batch` ("auto" or a number,
    `--batch-size auto`) splits each protocol batch into micro-batches with gradient accumulation; the
    protocol's batch, steps and schedule stay as they are (biobench.runtime.batching)."""
    from transformers import get_linear_schedule_with_warmup

    started = time.perf_counter()
    _seed_everything(seed)
    model = task.head.build(encoder, task.labels, task.examples["train"]).to(device)
    compiled = compile_encoder and compile_in_place(model.encoder, torch.device(device).type, dynamic=True)
    loader = _train_loader(task, protocol, seed)
    micro = micro_batch_size(micro_batch, protocol.batch_size, torch.device(device).type,
                             lambda n: _try_micro_batch(model, task, n, pad_token_id, device))
    steps_per_epoch = len(loader)
    total = protocol.max_steps or (protocol.epochs or 1) * steps_per_epoch
    optimizer = _optimizer(model, protocol)
    scheduler = get_linear_schedule_with_warmup(optimizer, math.ceil(protocol.warmup_ratio * total), total)
    eval_batch = max(protocol.batch_size, 16) if micro >= protocol.batch_size else 2 * micro  # no gradients kept
    run = _Run(task, model, protocol, seed, pad_token_id, device, progress, report, total, eval_batch, micro)

    step = run.train(loader, optimizer, scheduler)
    train_s = time.perf_counter() - started - run.selection.seconds
    # input tokens (no padding) trained on: the epoch's tokens x epochs run (pro rata when max_steps cuts an epoch)
    train_tokens = round(sum(map(_length, task.features["train"])) * step / max(steps_per_epoch, 1))
    test_preds, test_metrics = run.test()
    best = run.selection
    return FinetuneOutcome(
        test_predictions=test_preds, dev_metrics=best.metrics, test_metrics=test_metrics,
        dev_score=best.score, best_epoch=best.epoch, best_step=best.step, history=best.history,
        timings={"train_s": round(train_s, 3), "eval_s": round(best.seconds, 3),
                 "total_s": round(time.perf_counter() - started, 3),
                 "train_tokens": train_tokens, "tokens_per_s": round(train_tokens / train_s, 1) if train_s > 0 else None},
        compiled=compiled, micro_batch=micro, accumulation=math.ceil(protocol.batch_size / micro), steps=step,
    )
