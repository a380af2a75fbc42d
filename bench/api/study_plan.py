"""What a study will cost before a GPU is reserved (`biobench study plan`, issue 60 item 5): per step and in total,
the tokens (pretraining) or runs (evaluation), the training FLOPs, the GPU-hours at a stated throughput, the wall
time on N GPUs along the dependency graph, and the disk for checkpoints and token stores.

The arithmetic, stated once so a reader can redo it:
- pretraining: 6 x parameters x tokens (forward 2, backward 4 FLOPs per parameter and token; attention's own
  FLOPs left out, as in the usual estimate), tokens = phase 1 + the decay (tokens x (1 + decay_ratio));
- fine-tuning, per run: 6 x parameters x optimiser steps x batch x max length (the protocol's; every sequence
  counted at the task's max length, so an upper bound), steps = the protocol's step budget, else epochs x
  ceil(train examples / batch) when the task's data is here to count (else the runs are listed without FLOPs);
  dev and test passes are left out (forward only, a few percent);
- analyses: not counted (forward passes over at most a few thousand texts: minutes, not hours);
- GPU-hours = FLOPs / (the GPU's published dense bf16 peak x MFU); MFU is an assumption (`--mfu`, default 0.40)
  since no GPU measured it here: say so beside any figure taken from this plan;
- wall time: the steps in dependency order on N GPUs, a pretraining on all N (data parallel), an evaluation or
  an analysis on one; a step starts when what it needs is done and its GPUs are free;
- disk: per checkpoint the fp32 weights and Adam's two fp32 moments (12 bytes a parameter: the resumable
  state; an upper bound, a bf16 checkpoint is smaller), per run its phase1/, final/ and every save_every
  step; per token store the tokens the longest run of it reads (2 bytes a token under a 65,536-entry vocabulary,
  4 above), a lower bound for a corpus larger than the run needs.
"""

from __future__ import annotations

import math
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biobench.aliases import ALIASES
from biobench.api.study import Step, Study, order, parse_ref
from biobench.errors import BiobenchError, ConfigError
from biobench.eval.grid import grid_specs
from biobench.protocols import protocol_steps, resolve_task_protocol, task_seeds
from biobench.runtime.jsonfile import UnsafeJSONError, open_regular, parse_json
from biobench.tasks.loading import load_task, locate, resolve_data_dir

Gpu = Literal["h100", "h200", "a100"]
# Dense bf16 tensor-core peak without sparsity, TFLOPS, from NVIDIA's data sheets (SXM parts). H200 has H100's
# compute with more, faster memory: the same peak.
PEAK_TFLOPS: dict[str, float] = {"h100": 989.0, "h200": 989.0, "a100": 312.0}
GPU_NAMES = {"h100": "H100 SXM", "h200": "H200 SXM", "a100": "A100 SXM"}
DEFAULT_MFU = 0.40
CHECKPOINT_BYTES_PER_PARAM = 12  # fp32 weights + Adam's two fp32 moments

# Parameters of the hub models the example studies start from or evaluate, as published (model cards, the
# ModernBERT and Gemma 3 reports); a local folder is counted from its safetensors headers instead.
PARAMS: dict[str, float] = {
    "almanach/moderncamembert-base": 150e6, "almanach/ModernCamemBERT-bio-base": 150e6,
    "almanach/moderncamembert-large": 350e6, "almanach/ModernCamemBERT-bio-large": 350e6,
    "answerdotai/ModernBERT-base": 149e6, "almanach/ModernBERT-bio-base": 149e6,
    "answerdotai/ModernBERT-large": 395e6, "almanach/ModernBERT-bio-large": 395e6,
    "thomas-sounack/BioClinical-ModernBERT-base": 150e6, "thomas-sounack/BioClinical-ModernBERT-large": 396e6,
    "google/gemma-3-270m": 268e6,
    "almanach/camembert-base": 110e6, "almanach/camembert-bio-base": 110e6, "Dr-BERT/DrBERT-7GB": 110e6,
    "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext": 110e6,
    "microsoft/BiomedNLP-BiomedBERT-large-uncased-abstract": 335e6,
    "dmis-lab/biobert-v1.1": 110e6, "allenai/scibert_scivocab_uncased": 110e6,
    "sentence-transformers/all-MiniLM-L6-v2": 22.7e6,
}
# vocabulary sizes (tokens of a store: 2 bytes each up to 65,536 entries)
LARGE_VOCAB = {"google/gemma-3-270m"}
# a Large model that shares its Base's tokenizer shares its token store (stores are keyed by tokenizer)
SAME_TOKENIZER = {"answerdotai/ModernBERT-large": "answerdotai/ModernBERT-base",
                  "almanach/moderncamembert-large": "almanach/moderncamembert-base"}


@dataclass
class PlanRow:
    step: str
    kind: str
    work: str  # "11.0B tokens" | "72 runs" | "analysis"
    params: float | None
    flops: float | None
    gpu_hours: float | None
    gpus: int  # GPUs the step runs on
    disk_bytes: float
    note: str = ""
    start_h: float = 0.0
    end_h: float = 0.0


@dataclass
class StudyPlan:
    rows: list[PlanRow]
    gpu: str
    gpus: int
    mfu: float
    stores: dict[str, float]  # corpus -> bytes of its token store
    wall_h: float
    critical_path: list[str]

    @property
    def throughput(self) -> float:
        return PEAK_TFLOPS[self.gpu] * 1e12 * self.mfu


def _safetensors_params(folder: Path) -> float | None:
    """Parameters of a local model folder: the element counts its safetensors headers declare (no weights read)."""
    total = 0
    files = sorted(folder.glob("*.safetensors"))
    if not files:
        return None
    for path in files:
        try:
            with open_regular(path, 1 << 45) as fh:
                (size,) = struct.unpack("<Q", fh.read(8))
                if size > 100 << 20:
                    return None
                header = parse_json(fh.read(size), path)
        except (OSError, UnsafeJSONError, struct.error):
            return None
        if not isinstance(header, dict):
            return None
        for name, entry in header.items():
            if name != "__metadata__" and isinstance(entry, dict) and isinstance(entry.get("shape"), list):
                total += math.prod(int(n) for n in entry["shape"])
    return float(total)


def model_params(study: Study, model: str, seen: tuple[str, ...] = ()) -> float | None:
    """Parameters of a model as a study names it: a run reference is its run's start model."""
    ref = parse_ref(model, "")
    if ref is not None:
        if ref.run in seen or ref.run not in study.pretrain:
            return None
        return model_params(study, str(study.pretrain[ref.run]["model"]), (*seen, ref.run))
    alias = next((a for a in ALIASES if a.name == model), None)
    hub = alias.hub_id if alias is not None and alias.hub_id else model
    if hub in PARAMS:
        return PARAMS[hub]
    folder = Path(model).expanduser()
    return _safetensors_params(folder) if folder.is_dir() else None


def _start_model(study: Study, model: str) -> str:
    ref = parse_ref(model, "")
    while ref is not None and ref.run in study.pretrain:
        model = str(study.pretrain[ref.run]["model"])
        ref = parse_ref(model, "")
    return model


def _pretrain_row(study: Study, step: Step, gpus: int) -> tuple[PlanRow, str, float]:
    name = step.id.split("/", 1)[1]
    settings = study.pretrain[name]
    tokens = float(settings["tokens"]) * (1 + float(settings.get("decay_ratio", 0.10)))
    params = model_params(study, str(settings["model"]))
    flops = 6 * params * tokens if params else None
    every = settings.get("save_every")
    checkpoints = 2 + (int(tokens // every) if every else 0)  # phase1/, final/ and the step checkpoints
    disk = checkpoints * CHECKPOINT_BYTES_PER_PARAM * (params or 0)
    start = _start_model(study, str(settings["model"]))
    start = SAME_TOKENIZER.get(start, start)
    store = tokens * (4 if start in LARGE_VOCAB else 2)
    note = "" if params else f"parameters of {settings['model']} unknown (a hub id not in study_plan.PARAMS)"
    return (PlanRow(step.id, "pretrain", f"{tokens / 1e9:.2f}B tokens", params, flops, None, gpus, disk, note),
            f"{settings['corpus']} ({start})", store)


def _eval_row(study: Study, step: Step, grid: Any) -> PlanRow:
    entry = grid.models[0]
    params = model_params(study, _source_model(study, entry.model))
    runs, flops, unknown = 0, 0.0, []
    for spec in grid_specs(grid):
        seeds = len(grid.seeds) if grid.seeds else len(task_seeds(spec))
        runs += seeds
        protocol = resolve_task_protocol(spec, {**grid.overrides, **entry.overrides})
        n_train = None if protocol.max_steps else _train_examples(spec, grid.data_dir)
        if protocol.max_steps is None and n_train is None:
            unknown.append(spec.id)
            continue
        steps = protocol_steps(protocol, n_train or 0)
        if params:
            flops += seeds * 6 * params * steps * protocol.batch_size * protocol.max_length
    note = f"no local data to count the training examples of {', '.join(unknown)}" if unknown else ""
    if not params:
        note = "parameters unknown"
    # an eval step is an array of `workers` elements that claim its runs: on that many GPUs at most
    return PlanRow(step.id, "eval", f"{runs} runs", params, flops if params else None, None, 1, 0.0, note)


def _source_model(study: Study, model: str) -> str:
    """An eval entry's model as the file named it: its checkpoint folder back to its run reference."""
    for name in study.pretrain:
        run = study.runs / name
        if model.startswith(str(run) + "/"):
            return f"run:{name}/final"
    return model


def _train_examples(spec: Any, data_dir: Any) -> int | None:
    """Training examples of a task whose data is here (loaded once per process), None otherwise."""
    source, _ = locate(spec, resolve_data_dir(data_dir))
    if source is None:  # not here (a hub copy is not downloaded to count it)
        return None
    try:
        return len(load_task(spec, data_dir).splits.get("train", []))
    except (BiobenchError, OSError, ValueError, KeyError, EOFError):  # data that does not load: not counted
        return None


def study_plan(study: Study, gpu: str = "h100", gpus: int = 4, mfu: float = DEFAULT_MFU) -> StudyPlan:
    if gpu not in PEAK_TFLOPS:
        raise ConfigError(f"--gpu {gpu}: give one of {', '.join(PEAK_TFLOPS)}")
    if not 1 <= gpus <= 4096:
        raise ConfigError(f"--gpus {gpus}: give 1 to 4096")
    if not (0 < mfu <= 1) or math.isnan(mfu):
        raise ConfigError(f"--mfu {mfu}: give a fraction in (0, 1]")
    throughput = PEAK_TFLOPS[gpu] * 1e12 * mfu
    rows: dict[str, PlanRow] = {}
    stores: dict[str, float] = {}
    grids = iter(study.grids)
    for step in study.steps:
        if step.kind == "pretrain":
            row, corpus, store = _pretrain_row(study, step, gpus)
            stores[corpus] = max(stores.get(corpus, 0.0), store)
        elif step.kind == "eval":
            row = _eval_row(study, step, next(grids))
            row.gpus = min(study.workers, gpus)
        else:
            row = PlanRow(step.id, "analysis", step.analysis or "analysis", None, None, None, 1, 0.0)
        if row.flops is not None:
            row.gpu_hours = row.flops / throughput / 3600
        rows[step.id] = row
    wall, path = _schedule(study, rows, gpus)
    return StudyPlan([rows[s.id] for s in study.steps], gpu, gpus, mfu, stores, wall, path)


def _schedule(study: Study, rows: dict[str, PlanRow], gpus: int) -> tuple[float, list[str]]:
    """Each step's start and end (hours) on `gpus` GPUs, in dependency order, a step as soon as its needs are done
    and its GPUs are free; returns the wall time and the chain of steps that ends last (the critical path)."""
    free_at = [0.0] * gpus  # when each GPU is free
    for step in order(study):
        row = rows[step.id]
        hours = (row.gpu_hours or 0.0) / row.gpus  # a pretraining's GPU-hours spread over its GPUs
        ready = max((rows[n].end_h for n in step.needs if n in rows), default=0.0)
        free_at.sort()
        start = max(ready, free_at[row.gpus - 1])
        for i in range(row.gpus):
            free_at[i] = start + hours
        row.start_h, row.end_h = start, start + hours
    wall = max(r.end_h for r in rows.values())
    # the critical path: the chain of needs with the most hours, as if GPUs were never short
    finish: dict[str, tuple[float, list[str]]] = {}
    for step in order(study):
        row = rows[step.id]
        before = max((finish[n] for n in step.needs if n in finish), default=(0.0, []), key=lambda f: f[0])
        finish[step.id] = (before[0] + (row.gpu_hours or 0.0) / row.gpus, [*before[1], step.id])
    return wall, max(finish.values(), key=lambda f: f[0])[1]


def _si(value: float | None, unit: str = "") -> str:
    if value is None:
        return "?"
    for factor, prefix in ((1e21, "Z"), (1e18, "E"), (1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "K")):
        if abs(value) >= factor:
            return f"{value / factor:.2f} {prefix}{unit}".rstrip()
    return f"{value:.0f} {unit}".rstrip()


def _bytes(value: float) -> str:
    for factor, prefix in ((1 << 40, "TiB"), (1 << 30, "GiB"), (1 << 20, "MiB")):
        if value >= factor:
            return f"{value / factor:.1f} {prefix}"
    return "–" if not value else f"{value:.0f} B"


def plan_lines(plan: StudyPlan) -> list[str]:
    """The plan as the command prints it: the stated throughput, one row per step, the totals."""
    lines = [f"throughput: {GPU_NAMES[plan.gpu]} published dense bf16 peak {PEAK_TFLOPS[plan.gpu]:.0f} TFLOPS x "
             f"MFU {plan.mfu:.2f} (assumed, not measured) = {plan.throughput / 1e12:.0f} TFLOPS per GPU; "
             f"{plan.gpus} GPU(s); FLOPs = 6 x parameters x tokens (study_plan.py states the rest)"]
    header = ("step", "work", "params", "train FLOPs", "GPU-h", "GPUs", "start h", "end h", "disk")
    table = [header] + [(r.step, r.work, _si(r.params) if r.kind != "analysis" else "–",
                         _si(r.flops) if r.kind != "analysis" else "–",
                         ("?" if r.kind != "analysis" else "–") if r.gpu_hours is None else f"{r.gpu_hours:,.1f}",
                         str(r.gpus), f"{r.start_h:,.1f}", f"{r.end_h:,.1f}",
                         _bytes(r.disk_bytes)) for r in plan.rows]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    for row in table:
        lines.append("  ".join(cell.ljust(w) if i < 2 else cell.rjust(w) for i, (cell, w) in
                               enumerate(zip(row, widths, strict=True))).rstrip())
    grouped: dict[str, list[str]] = {}
    for r in plan.rows:
        if r.note and r.kind != "analysis":
            grouped.setdefault(r.note, []).append(r.step)
    if grouped:
        lines.append("notes:")
        lines += [f"  {steps[0] if len(steps) == 1 else f'{steps[0]} and {len(steps) - 1} more'}: {note}"
                  for note, steps in grouped.items()]
    lines.append("analyses: not counted (forward passes over at most a few thousand texts)")
    tokens = sum(float(r.work.split("B")[0]) for r in plan.rows if r.kind == "pretrain")
    runs = sum(int(r.work.split()[0]) for r in plan.rows if r.kind == "eval")
    flops = sum(r.flops or 0 for r in plan.rows)
    hours = sum(r.gpu_hours or 0 for r in plan.rows)
    pretrain_h = sum(r.gpu_hours or 0 for r in plan.rows if r.kind == "pretrain")
    disk = sum(r.disk_bytes for r in plan.rows) + sum(plan.stores.values())
    lines.append(f"total: {tokens:.2f}B pretraining tokens, {runs} fine-tuning runs; {_si(flops)}FLOPs; "
                 f"{hours:,.0f} GPU-hours ({pretrain_h:,.0f} of them pretraining); wall time on {plan.gpus} "
                 f"{GPU_NAMES[plan.gpu]}: {plan.wall_h:,.1f} h ({plan.wall_h / 24:,.1f} days)")
    path_h = sum((r.gpu_hours or 0.0) / r.gpus for r in plan.rows if r.step in plan.critical_path)
    lines.append(f"critical path (the longest chain of needs, GPUs never short): {path_h:,.1f} h: "
                 f"{' -> '.join(plan.critical_path)}")
    lines.append(f"disk: {_bytes(sum(r.disk_bytes for r in plan.rows))} of checkpoints, "
                 + ", ".join(f"{_bytes(b)} token store {c}" for c, b in plan.stores.items())
                 + f"; {_bytes(disk)} in all")
    return lines
