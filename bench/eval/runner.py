"""The evaluation grid: tasks x seeds for one model -> result files, then a per-task summary.

Why plan first, then run: every run's key (model revision, data checksum, protocol hash, seed) is known
before any training, so finished runs are skipped without loading the model, and a results file that belongs
to another run stops the grid before hours are spent (instead of being overwritten). Sharding splits the
same deterministic grid across processes (SLURM array, one process per GPU) that share one results folder.
"""

from __future__ import annotations

import contextlib
import copy
import os
import platform
import re
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from biobench import __version__
from biobench.errors import BiobenchError, ConfigError, DataError, ResultsError, StoppedError
from biobench.eval.claims import (
    ABANDON_LIMIT,
    DEFAULT_CLAIM_S,
    HEARTBEATS_PER_CLAIM,
    WALL_CLOCK,
    RunClaims,
    abandoned_count,
    read_claim,
    too_long,
)
from biobench.eval.encoder import load_encoder
from biobench.heads import get_head
from biobench.metrics import EXTRA_METRICS, extra_metrics
from biobench.models import ModelIdentity, ModelInfo, identify_model
from biobench.protocols import (
    Protocol,
    protocol_overrides,
    protocol_steps,
    quick_overrides,
    resolve_task_protocol,
    task_seeds,
)
from biobench.runtime.device import resolve_device
from biobench.runtime.interrupts import WALL_CLOCK_SIGNALS, Abandoned, StopRequest, stop_on_signal
from biobench.runtime.progress import finished_line, progress_bar, quiet_library_bars
from biobench.runtime.reporting import make_reporter, report_dir
from biobench.runtime.slurm import WARNING_SIGNAL, requeue_self, requeue_target
from biobench.store import Result, decide, new_result, read_result, result_path, run_key, write_result
from biobench.store.layout import rename_results, results_slug
from biobench.store.result_files import Decision
from biobench.store.summary import TaskScores, language_average, summary_row
from biobench.store.trust import degenerate, degenerate_note, degenerate_text, describe_overrides, overrides
from biobench.tasks.registry import TaskSpec, list_specs
from biobench.tasks.schema import TaskData

if TYPE_CHECKING:  # torch: imported when a grid runs, not when it is planned
    from biobench.eval.finetune import FinetuneOutcome, PreparedTask

Loader = Callable[[TaskSpec], TaskData]


def parse_shard(text: str | None) -> tuple[int, int]:
    """'i/n' (0 <= i < n) -> (i, n); SLURM arrays: --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT."""
    if not text:
        return 0, 1
    match = re.fullmatch(r"\s*(\d+)\s*/\s*(\d+)\s*", text)
    if not match or not 0 <= int(match[1]) < int(match[2]):
        raise ConfigError(f"bad --shard value {text!r}: use i/n with 0 <= i < n, e.g. 0/4 ... 3/4")
    return int(match[1]), int(match[2])


# where a planned run stands in this process: still to run, finished here, or found finished (skipped)
RunState = Literal["pending", "done", "skipped", "held"]  # held: another process's claim


@dataclass
class PlannedRun:
    task: TaskSpec
    seed: int
    path: Path
    key: dict[str, Any]
    protocol: Protocol
    default: Protocol | None = None  # the task's own protocol (no overrides): what a smoke run departs from
    quick: bool = False  # planned with --quick (protocols.QUICK): recorded, so a ⚠ can say what to run next
    decision: Decision = "new"
    status: RunState = "pending"
    macro_f1: float | None = None


@dataclass
class GridPlan:
    model: ModelIdentity  # resolved once, when the plan is made; the runs load exactly this model
    results_dir: Path
    grid: list[PlannedRun]  # the whole grid (for the summary)
    runs: list[PlannedRun]  # this shard's part
    data: dict[str, TaskData]
    unavailable: dict[str, str] = field(default_factory=dict)
    shard: tuple[int, int] = (0, 1)
    # task id -> fields every run of the task records beside its scores (e.g. `contamination`, the n-gram overlap
    # of the task with the checkpoint's pretraining corpus): measured once per grid, not part of any run key
    annotations: dict[str, dict[str, Any]] = field(default_factory=dict)
    planned_at: float = field(default_factory=time.time)  # a result written after this is another process's
    # what a ⚠ line in this terminal tells the user to run (their own command with only what changes:
    # commands.eval.own_fix); None: store.trust.fix_command, the public form that hides server paths
    fix: Callable[[Result], str] | None = None
    notes: list[str] = field(default_factory=list)  # one line each, said before the runs (a --name rename)

    @property
    def name(self) -> str:
        """The display name (names.display_name, or --name): recorded in each result, not part of its key."""
        return self.model.name

    @property
    def slug(self) -> str:
        """The results sub-folder (store.layout.results_folder): display name + 8 digits of the revision."""
        return self.model.slug

    def model_record(self, info: ModelInfo | None = None) -> dict[str, Any]:
        return self.model.record(info)


def plan_grid(model: str, tasks: Sequence[TaskSpec], loader: Loader, results_dir: str | Path,
              seeds: Sequence[int] | None = None, overrides: dict[str, Any] | None = None,
              overwrite: bool = False, shard: tuple[int, int] = (0, 1), skip_unavailable: bool = False,
              name: str | None = None, metadata: dict[str, Any] | None = None, quick: bool = False,
              rename: bool = False) -> GridPlan:
    """Resolve the model, load every task, compute each run's key and decide new / skip / overwrite.
    With `skip_unavailable` (a --lang selection), tasks whose data cannot be loaded are listed, not fatal.
    `name` is the display name to record (default: names.display_name of the model); `metadata` the model
    metadata stated in a grid file (validated by store.metadata.check_metadata), recorded over the card's.
    `quick`: each task runs with its kind's `--quick` budget (protocols.QUICK), `overrides` winning.
    `rename` (a run, not a dry run): `name` given for weights whose results are in a folder of another name
    renames them (`store.layout.rename_results`), so their finished runs are skipped and `compare "<name>"`
    finds them; when that cannot be done, a note says why and the runs go on in the old folder."""
    identity = identify_model(model, results_dir, name, metadata)
    notes = []
    if rename and name and identity.info.revision and identity.slug != results_slug(identity.name, identity.info.revision):
        old = Path(results_dir) / identity.slug
        if old.is_dir():
            try:
                new = rename_results(results_dir, identity.slug, identity.name, identity.info.revision)
            except ResultsError as err:
                notes.append(f"--name {identity.name!r}: these weights' results stay in {old}, under their former "
                             f"name ({err}); rerun with --name once no other eval of them runs")
            else:
                notes.append(f"--name {identity.name!r}: these weights' results were under another name; renamed "
                             f"{old.name} -> {new.name}")
                identity = replace(identity, slug=new.name)
    info, slug = identity.info, identity.slug
    data: dict[str, TaskData] = {}
    unavailable: dict[str, str] = {}
    grid: list[PlannedRun] = []
    for spec in tasks:
        unknown = [m for m in getattr(spec, "extra_metrics", ()) if m not in EXTRA_METRICS]
        if unknown:
            raise ConfigError(f"task '{spec.id}': unknown extra_metrics {unknown} in its spec; known: {', '.join(EXTRA_METRICS)}")
        try:
            data[spec.id] = loader(spec)
        except BiobenchError as err:
            if not skip_unavailable:
                raise
            unavailable[spec.id] = str(err)
            continue
        task_overrides = quick_overrides(spec.protocol, spec.kind, overrides) if quick else overrides
        protocol = resolve_task_protocol(spec, task_overrides, info.context)
        default = resolve_task_protocol(spec, None, info.context) if task_overrides else protocol
        smoke = protocol.hash if protocol_overrides(default, protocol) else None  # its own file, beside the protocol's
        for seed in (seeds or task_seeds(spec)):
            key = dict(run_key(info.revision, data[spec.id].checksum, protocol.hash, seed))
            path = result_path(results_dir, slug, spec.id, seed, smoke)
            if smoke is not None and not path.exists():
                path = _older_smoke_file(result_path(results_dir, slug, spec.id, seed), key) or path
            grid.append(PlannedRun(spec, seed, path, key, protocol, default, quick))
    if not grid:
        reasons = "; ".join(f"{t}: {why}" for t, why in unavailable.items())
        raise DataError(f"no task could be loaded ({reasons})" if reasons else "no task selected")
    for folder in sorted({run.path.parent for run in grid}):
        for part in (folder.parent, folder):  # <results>/<model slug>, <results>/<model slug>/<task>
            # a file there made every claim fail ("held by other processes", exit 0), or a traceback at the write
            if part.exists() and not part.is_dir():
                raise ConfigError(f"--results {results_dir}: {part} is a file (or FIFO, device), where this model's "
                                  "results folder goes; move it away or give another --results folder")
    index, count = shard
    runs = grid[index::count]
    for run in runs:
        run.decision = decide(run.path, run.key, overwrite, run.protocol.to_dict())
        if run.decision == "skip":
            run.status, run.macro_f1 = "skipped", read_result(run.path).macro_f1
    return GridPlan(identity, Path(results_dir), grid, runs, data, unavailable, shard, notes=notes)


def _older_smoke_file(protocol_path: Path, key: dict[str, Any]) -> Path | None:
    """`protocol_path` when it holds this very smoke run (same key), as biobench wrote smoke runs before they got
    a file of their own (`store.result_path`): the run is finished there and is skipped, not redone."""
    try:
        return protocol_path if protocol_path.exists() and decide(protocol_path, key) == "skip" else None
    except BiobenchError:  # another run or an unreadable file there: the smoke run's own file decides
        return None


def versions(**extra: str) -> dict[str, str]:
    """The library versions a result records (`extra`: more libraries, e.g. scikit-learn for probes)."""
    import torch
    import transformers

    return {"biobench": __version__, "torch": torch.__version__, "transformers": transformers.__version__,
            **extra, "python": platform.python_version()}


def _result(plan: GridPlan, run: PlannedRun, info: ModelInfo, task: PreparedTask, outcome: FinetuneOutcome,
            device: str) -> Result:
    """The result record of a finished run: what it measured, how (protocol, overrides against the task's
    protocol, steps run against the protocol's) and, when its test predictions are degenerate, why likely."""
    data = plan.data[run.task.id]
    default = run.default or run.protocol
    n_train = len(data.splits["train"])
    result = new_result(
        model=plan.model_record(info),
        task={"id": run.task.id, "lang": run.task.lang, "kind": run.task.kind,
              "data_checksum": data.checksum, "source": data.source, "data_version": data.data_version,
              "n_train": len(task.examples["train"]), "n_dev": len(task.examples["dev"]),
              "n_test": len(task.examples["test"]), "unseen_test_labels": task.unseen_test_labels,
              "labels": task.labels},
        seed=run.seed,
        protocol=run.protocol.to_dict(),
        key=run.key,
        metrics={"test": {**outcome.test_metrics, **extra_metrics(getattr(run.task, "extra_metrics", ()),
                                                                  task.gold["test"], outcome.test_predictions)},
                 "dev": outcome.dev_metrics},
        details={
            "head": {"name": run.protocol.head, **run.protocol.head_config},
            "dev_metric": run.protocol.dev_metric,
            "dev_score": outcome.dev_score,
            "best_epoch": outcome.best_epoch,
            "best_step": outcome.best_step,
            "history": outcome.history,
            "budget": {"steps": outcome.steps, "protocol_steps": protocol_steps(default, n_train),
                       "protocol_train": n_train},
            **({"overrides": overrides_found} if (overrides_found := protocol_overrides(default, run.protocol)) else {}),
            **({"quick": True} if run.quick and overrides_found else {}),
            "timings": outcome.timings,
            "versions": versions(),
            "device": device,
            **({"compile": True} if outcome.compiled else {}),  # execution detail: absent (not false) when off
            **plan.annotations.get(run.task.id, {}),
        },
    )
    note = degenerate_note(result, outcome.test_predictions, task.gold["test"])
    if note is not None:
        result.details["degenerate"] = note
    return result


def run_line(result: Result, fix: Callable[[Result], str] | None = None) -> str:
    """What the console line of a finished run adds to its score: the smoke marker with its overrides and,
    for degenerate test predictions, the finding and its likely reason ('' for a sound protocol run)."""
    found = overrides(result)
    note = degenerate(result, fix)
    return ((f" [smoke run: {describe_overrides(found)}]" if found else "")
            + (f" — {degenerate_text(note)}" if note else ""))


@dataclass(frozen=True)
class Execution:
    """How runs use the machine; none of it is part of a run's key, so results with or without any of it are
    the same runs (skipped alike). `compile_encoder` is --compile, `report_to` "tensorboard" / "wandb" also
    reports each run's scalars (<task folder>/<backend>/seed-<n>/), `micro_batch` is --batch-size auto."""

    device: str | None = None
    trust_remote_code: bool = False
    compile_encoder: bool = False
    report_to: str | None = None
    micro_batch: int | str | None = None
    max_model_gb: float | None = None  # --max-model-gb: the operator's cap on a model's float32 weights


class RunSession:
    """What the runs of a plan share in one process: the pristine encoder (loaded once, copied per seed), its
    tokenizer, and the features of the current task (built once per task, one task in memory at a time).
    The sequential grid holds one; each process of a parallel grid (biobench.eval.parallel) holds its own."""

    def __init__(self, plan: GridPlan, execution: Execution, log: Callable[[str], None]):
        import torch

        self.plan, self.execution, self.log = plan, execution, log
        self.device = resolve_device(execution.device)
        self.pristine, self.tokenizer, self.info = load_encoder(
            plan.model.ref, "cpu", dtype=torch.float32, trust_remote_code=execution.trust_remote_code,
            attn_device=self.device)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.prepared: dict[tuple[str, str], PreparedTask] = {}

    def task(self, run: PlannedRun) -> PreparedTask:
        # lazy: loads torch
        from biobench.eval.finetune import prepare_task

        cache_key = (run.task.id, run.protocol.hash)
        if cache_key not in self.prepared:
            self.prepared.clear()  # one task's features in memory at a time
            head = get_head(run.protocol.head, run.task.kind, run.protocol.head_config)
            self.prepared[cache_key] = prepare_task(head, self.plan.data[run.task.id], self.tokenizer, run.protocol)
            if self.prepared[cache_key].unseen_test_labels:
                self.log(f"{run.task.id}: test labels never seen in train {self.prepared[cache_key].unseen_test_labels} "
                         "cannot be predicted; they count as misses in the metrics")
        return self.prepared[cache_key]

    def run(self, run: PlannedRun, progress: bool = False, stop: StopRequest | None = None) -> float:
        """Train one run, write its result and predictions, mark it done; returns its training seconds. With
        `stop`, a stop signal during the training abandons it (`Abandoned`: nothing written); one during the
        writing lets the writing finish."""
        # lazy: loads torch
        from biobench.eval.finetune import finetune

        plan, execution, task = self.plan, self.execution, self.task(run)
        report = make_reporter(execution.report_to, report_dir(run.path.parent, execution.report_to, run.path),
                               name=f"{plan.name} · {run.task.id} · seed {run.seed}",
                               config={"model": plan.name, "model_revision": self.info.revision,
                                       "task": run.task.id, "seed": run.seed, "protocol": run.protocol.to_dict()})
        try:
            with stop.abandonable() if stop is not None else contextlib.nullcontext():
                outcome = finetune(task, copy.deepcopy(self.pristine), self.pad_id, run.protocol, run.seed,
                                   self.device, progress, compile_encoder=execution.compile_encoder, report=report,
                                   micro_batch=execution.micro_batch)
        finally:
            report.close()
        rows = [{"id": ex.id, "gold": gold, "pred": pred}
                for ex, gold, pred in zip(task.examples["test"], task.gold["test"], outcome.test_predictions,
                                          strict=True)]
        result = _result(plan, run, self.info, task, outcome, self.device)
        if execution.micro_batch is not None:  # an execution detail (the effective batch is the protocol's): recorded, not keyed
            result.details["batching"] = {"batch_size": run.protocol.batch_size, "micro_batch_size": outcome.micro_batch,
                                          "accumulation_steps": outcome.accumulation,
                                          "requested": execution.micro_batch}
        write_result(run.path, result, rows)
        run.status, run.macro_f1 = "done", outcome.test_metrics["macro_f1"]
        train_s = outcome.timings["train_s"]
        assert train_s is not None  # only tokens_per_s may be None
        return train_s


def finished_message(plan: GridPlan, run: PlannedRun, done: int, total: int, train_s: float) -> str:
    """The one line printed per finished run, by the sequential and the parallel grid alike; the smoke and
    degenerate marks come from the result just written (a parallel run wrote it in another process). The score
    in percent with two decimals, as eval's table and the leaderboard print it (42.07, not 0.4207)."""
    assert run.macro_f1 is not None  # set when the run finished
    return (f"[{done}/{total}] {plan.name} · {run.task.id} seed {run.seed}: test macro-F1 {100 * run.macro_f1:.2f} "
            f"({train_s:.0f} s training){run_line(read_result(run.path), plan.fix)}")


def finished_elsewhere(plan: GridPlan, run: PlannedRun) -> bool:
    """After claiming a run: whether another process wrote its result since this plan was made (with
    --overwrite, a result older than the plan is the one to replace). Marks the run skipped when so."""
    try:
        written = run.path.stat().st_mtime
    except OSError:
        return False
    if run.decision == "overwrite" and written < plan.planned_at:
        return False
    try:
        result = read_result(run.path)
    except ResultsError:
        return False
    if result.key != run.key:
        return False
    run.status, run.macro_f1 = "skipped", result.macro_f1
    return True


STOP_MESSAGE = ("stopping: the run in flight is abandoned (its claim released, nothing of it written); "
                "send it again to stop at once")


def stopped(plan: GridPlan, stop: StopRequest, log: Callable[[str], None]) -> StoppedError:
    """The error that ends an eval stopped by a signal, after asking SLURM to requeue the job when inside one
    (runtime.slurm.requeue_self): what is kept and how it resumes, in one line. In a `--launcher slurm` worker
    (runtime.launch marks its eval child with BIOBENCH_REQUEUED_BY=submitit) the wall-clock warning's requeue is
    submitit's: the line says so, instead of "requeued by submitit ..., not here" followed by "rerun the same
    command" (issue 62 item 6), which told the user to do what submitit was already doing."""
    job = requeue_target()
    if (job is not None and stop.signal_name == WARNING_SIGNAL
            and os.environ.get("BIOBENCH_REQUEUED_BY") == "submitit"):
        how = f"submitit requeues SLURM job {job} (its checkpoint) and its next life resumes it"
    else:
        how = "the requeued job resumes it" if requeue_self(log, stop.signal_name) else "rerun the same command to resume"
    kept = sum(r.status in ("done", "skipped") for r in plan.grid)
    return StoppedError(f"stopped by {stop.signal_name}: {kept} finished result(s) of {plan.name} in "
                        f"{plan.results_dir / plan.slug} are kept, no run was left half-written; {how}",
                        stop.signum or 15)


def held_line(plan: GridPlan, claims: RunClaims | None) -> str | None:
    """What a process says about the runs other processes hold when it has nothing left to claim."""
    held = [r for r in plan.runs if r.status == "held"]
    if not held:
        return None
    lease = claims.lease_s if claims is not None else DEFAULT_CLAIM_S
    return (f"{len(held)} run(s) of {plan.name} are held by other processes, which finish them (a holder that died "
            f"leaves a claim that expires {lease:.0f} s after its last renewal; the next eval on this grid redoes "
            "it); `biobench eval ... --dry-run` shows who holds what")


def with_stop_request(plan: GridPlan, claims: RunClaims | None, stop: StopRequest | None,
                      log: Callable[[str], None],
                      train: Callable[[StopRequest], list[PlannedRun]]) -> list[PlannedRun]:
    """What execute and parallel.execute_parallel do before training, in one place: tidy the leftover claim
    folders of finished runs (claims rule 1), return at once when nothing is pending (no signal handler for a
    grid that is done), and call `train` with the caller's stop request or, without one, with this call's own
    (stop_on_signal on the wall-clock signals, restored when `train` returns or raises)."""
    if claims is not None:
        for run in plan.runs:
            if run.status == "skipped":
                claims.tidy(run.path)
    if not any(r.status == "pending" for r in plan.runs):
        return plan.runs
    if stop is not None:
        return train(stop)
    with stop_on_signal(log, WALL_CLOCK_SIGNALS, STOP_MESSAGE) as own:
        return train(own)


def execute(plan: GridPlan, device: str | None = None, progress: bool = True, trust_remote_code: bool = False,
            log: Callable[[str], None] | None = None, compile_encoder: bool = False,
            report_to: str | None = None, micro_batch: int | str | None = None,
            claims: RunClaims | None = None, stop: StopRequest | None = None) -> list[PlannedRun]:
    """Train and write every pending run of the plan; features are built once per task. `compile_encoder`
    (--compile) changes kernels, not the protocol: the run keys, hence skipping, do not depend on it.
    One run after the other in this process; biobench.eval.parallel runs several at once in their own.

    With `claims` (eval's default), each run is claimed before it trains (bench/eval/claims.py): a run another
    process holds is left to it (status 'held'), one it finished meanwhile is skipped. `stop`: the request of
    the command's stop_on_signal (SIGTERM/SIGUSR1); without one, this call installs its own. On a stop signal
    the run in flight is abandoned, its claim released, the job requeued when inside SLURM, and StoppedError
    raised."""
    execution = Execution(device, trust_remote_code, compile_encoder, report_to, micro_batch)
    say = log or (lambda msg: print(msg, file=sys.stderr))
    return with_stop_request(plan, claims, stop, say,
                             lambda request: _execute(plan, execution, progress, say, claims, request))


def _execute(plan: GridPlan, execution: Execution, progress: bool, log: Callable[[str], None],
             claims: RunClaims | None, stop: StopRequest) -> list[PlannedRun]:
    pending = last_the_too_long([r for r in plan.runs if r.status == "pending"], claims, log)

    quiet_library_bars()
    for name, reason in plan.unavailable.items():
        log(f"skipping task {name}: {reason}")
    session: RunSession | None = None
    bar = progress_bar(progress, iterable=pending, desc=f"grid {plan.name}")
    done_count = 0

    def attempt(run: PlannedRun, claimed: bool) -> bool:
        """Claim (unless `claimed`), train and write one run; False when a stop signal abandoned it."""
        nonlocal session, done_count
        if claims is not None and not claimed and not claims.claim(run.path):
            run.status = "held"
            return True
        finished, abandoned_by = False, None
        try:
            if claims is not None and finished_elsewhere(plan, run):
                finished = True
                return True
            bar.set_postfix(task=run.task.id, seed=run.seed)
            session = session or RunSession(plan, execution, log)
            train_s = session.run(run, progress, stop)
            finished = True
        except Abandoned as err:
            abandoned_by = err.signal_name
            return False
        finally:
            if claims is not None:
                claims.release(run.path, finished, WALL_CLOCK if abandoned_by == WARNING_SIGNAL else None)
        done_count += 1
        finished_line(finished_message(plan, run, done_count, len(pending), train_s))
        return True

    try:
        for run in bar:
            if stop.requested or not attempt(run, claimed=False):
                break
        if claims is not None and not stop.requested:
            for run in wait_for_held(plan, claims, stop, log):
                if not attempt(run, claimed=True):
                    break
    finally:
        bar.close()
    if stop.requested:
        raise stopped(plan, stop, log)
    if (line := held_line(plan, claims)) is not None:
        log(line)
    return plan.runs


def last_the_too_long(runs: list[PlannedRun], claims: RunClaims | None,
                      log: Callable[[str], None]) -> list[PlannedRun]:
    """The runs in plan order, those abandoned ABANDON_LIMIT times at the wall clock last, each said once: such
    a run is too long for its job's life, and trying it first in every life left the other runs undone."""
    if claims is None:
        return runs
    counts = {id(run): abandoned_count(run.path) for run in runs}
    for run in runs:
        if counts[id(run)] >= ABANDON_LIMIT:
            log(f"{plan_label(run)}: {too_long(counts[id(run)])} (tried after the other runs)")
    return sorted(runs, key=lambda run: counts[id(run)] >= ABANDON_LIMIT)


def plan_label(run: PlannedRun) -> str:
    return f"{run.task.id} seed {run.seed}"


LOOK_S = 2.0  # how often a process waiting for other processes' runs looks at them (wait_for_held)
LOOKS_PER_S = 20.0  # and at most this many claim folders a second


def wait_for_held(plan: GridPlan, claims: RunClaims, stop: StopRequest, log: Callable[[str], None],
                  sleep: Callable[[float], None] = time.sleep) -> Iterator[PlannedRun]:
    """The runs other processes held when this one passed them, waited for instead of given up (issue 48: an
    element whose eval was killed with `kill -9` left its run to nobody until a new submission). Each held
    run is looked at until it is finished (skipped) or free (its holder released it, died on this machine, or
    its claim expired: claimed here and yielded, to train). A claim seen renewed is waited for still (issue 57:
    a holder killed after the last other process had left, at a grid's tail, lost its run for good): the
    holder may die after any renewal. Bounded by each claim's expiry: a run whose claim outlives the latest
    expiry seen by one look without being free or finished (it cannot be taken from here) is left to its
    holder; the wait as a whole lasts as long as a live holder renews, i.e. until its run ends. Yields only
    runs this process has claimed.
    The runs are looked at every LOOK_S seconds, not once a heartbeat (lease_s / HEARTBEATS_PER_CLAIM): a
    holder's last run finishing, or its release on a requeue, is seen within seconds (once a heartbeat, 60 s
    with the default claim, a job sat idle on its GPUs for up to a minute after the grid's last run); and at
    most LOOKS_PER_S claim folders a second, so that many elements waiting at a grid's tail do not flood a
    shared file system's metadata server."""
    # a claim not readable at the first look (being written, or renewed by a rename in flight) is given one
    # claim period from now, as a claim just taken would have
    now = time.time()
    expiry = {id(run): (info.expires if (info := read_claim(run.path)) is not None else now + claims.lease_s)
              for run in plan.runs if run.status == "held"}
    if not expiry:
        return
    every = max(0.2, claims.lease_s / HEARTBEATS_PER_CLAIM)
    log(f"{len(expiry)} run(s) of {plan.name} are held by other processes: waiting up to "
        f"{claims.lease_s + every:.0f} s past each claim's last renewal for them to finish (a holder that died "
        "leaves a claim that expires; this process then takes the run)")
    while not stop.requested:
        waiting = [run for run in plan.runs if run.status == "held" and id(run) in expiry]
        if not waiting:
            return
        for run in waiting:
            if stop.requested:
                return
            if finished_elsewhere(plan, run):
                continue
            if claims.claim(run.path):
                run.status = "pending"
                log(f"{plan_label(run)}: its claim was free (holder gone or expired); taking the run")
                yield run
                continue
            info = read_claim(run.path)
            if info is not None and info.held and info.expires > expiry[id(run)]:
                expiry[id(run)] = info.expires  # renewed (or taken by another waiter): its holder lives, for now
            elif time.time() > expiry[id(run)] + every:  # past its expiry and still not ours: left to its holder
                expiry.pop(id(run))
        if any(run.status == "held" and id(run) in expiry for run in waiting):
            sleep(min(every, max(LOOK_S, len(waiting) / LOOKS_PER_S)))


def summarize(plan: GridPlan) -> dict[str, Any]:
    """Mean, std and 95% CI of test macro-F1 over seeds per task (results of this grid's keys found on disk,
    whichever shard wrote them), and the per-language average of the task means. A task row says which
    protocol overrides made it (`overrides`: a smoke run) and which seeds' test predictions were degenerate
    (`degenerate`: seed -> finding and likely reason)."""
    tasks: list[dict[str, Any]] = []
    by_task: dict[str, list[PlannedRun]] = {}
    for run in plan.grid:
        by_task.setdefault(run.task.id, []).append(run)
    for task_id, runs in by_task.items():
        scores, labels = TaskScores(task_id, runs[0].task.lang, runs[0].task.kind), ()
        found: dict[str, Any] = {}
        notes: dict[int, str] = {}
        for run in runs:
            if run.path.exists():
                result = read_result(run.path)
                if result.key == run.key:
                    scores.metric = result.metric  # the summary's score and MDD: the task's headline metric
                    scores.add(run.seed, result.score, run.path)
                    labels = result.task.get("labels") or ()
                    found = found or overrides(result)
                    if (note := degenerate(result, plan.fix)) is not None:
                        notes[run.seed] = degenerate_text(note)
        row = summary_row(scores, expected=len(runs), labels=labels)
        if found:
            row["overrides"] = describe_overrides(found)
        elif runs[0].default is not None and runs[0].default != runs[0].protocol:
            row["overrides"] = describe_overrides(protocol_overrides(runs[0].default, runs[0].protocol))
        if notes:
            row["degenerate"] = notes
        tasks.append(row)

    languages = {lang: language_average([t for t in tasks if t["lang"] == lang], [s.id for s in list_specs(lang)])
                 for lang in sorted({t["lang"] for t in tasks})}
    return {
        "model": plan.model_record(),
        "results_dir": str(plan.results_dir),
        "shard": f"{plan.shard[0]}/{plan.shard[1]}",
        "runs": [{"task": r.task.id, "seed": r.seed, "status": r.status, "macro_f1": r.macro_f1,
                  "path": str(r.path)} for r in plan.runs],
        "tasks": tasks,
        "languages": languages,
        "unavailable": plan.unavailable,
    }
