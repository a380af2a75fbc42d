"""`biobench eval`: fine-tune and score a model on tasks x seeds; results go to the results store."""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from biobench.api.contamination import attach_to_plan
from biobench.api.evaluation import (
    dry_run_evaluation,
    dry_run_grids,
    execute_plan,
    plan_evaluation,
    plan_grid_model,
)
from biobench.errors import ConfigError
from biobench.eval.claims import DEFAULT_CLAIM_S, MIN_CLAIM_S, RunClaims
from biobench.eval.grid import UNRESOLVED, cannot_plan, grid_catalogue, select_grids
from biobench.eval.grid_launch import ArraySettings, launch_grid
from biobench.eval.parallel import parallel_value
from biobench.eval.runner import STOP_MESSAGE, Execution, stopped, summarize
from biobench.protocols import OVERRIDES, add_protocol_arguments, overrides_from_args
from biobench.runtime import launch
from biobench.runtime.console import console as terminal_console
from biobench.runtime.device import check_device
from biobench.runtime.interrupts import WALL_CLOCK_SIGNALS, stop_on_signal
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json
from biobench.runtime.launch import add_launcher_arguments
from biobench.runtime.leases import MAX_LEASE_S
from biobench.runtime.memory import add_max_model_gb_argument, operator_limit_gb
from biobench.store.metadata import check_metadata
from biobench.store.trust import DEGENERATE_MARK, SMOKE_MARK, is_smoke
from biobench.tasks.loading import resolve_data_dir
from biobench.tasks.registry import TaskCatalogue, add_task_arguments

EPILOG = """examples:
  biobench eval --model ModernCamemBERT-bio --lang fr --seeds 42-50
  biobench eval --model all-MiniLM-L6-v2 --tasks gad --seeds 42 --epochs 1 --limit-train 2000 --max-length 128
  biobench eval --model runs/detour/final --lang en --shard $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT
  biobench eval --config examples/grids/paper-fr.toml --dry-run   # every run of the grid file, done or not
  biobench eval --model DrBERT --lang fr --seeds 42-50 --parallel   # on a GPU: as many seeds at once as fit

A finished (model revision, data, protocol, seed) run is skipped, so rerunning a killed grid resumes it."""


def add_parser(subparsers) -> None:
    parser = subparsers.add_parser(
        "eval", description="Fine-tune a model on each task with the paper's protocol, once per seed, and score it "
        "on test with the checkpoint that is best on dev. One result JSON per (model, task, seed).",
        epilog=EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    what = parser.add_mutually_exclusive_group(required=True)
    what.add_argument("--model", help="alias (`biobench models`), hub id org/name, or a local Hugging Face model "
                      "folder")
    what.add_argument("--config", metavar="GRID.toml", help="a grid file: [[grid]] tables of models (with names), "
                      "tasks, seeds and protocol overrides, run one after the other (examples/grids/)")
    parser.add_argument("--grid", action="append", default=[], metavar="NAME",
                        help="with --config: only the grid(s) of this name (repeatable; default: every grid)")
    parser.add_argument("--dry-run", action="store_true", help="list every run (of --model, or of the grids "
                        "of --config) and whether its result is already there ('revision unresolved' when the model "
                        "cannot be read here, e.g. offline); train nothing")
    parser.add_argument("--verbose", action="store_true", help="with --dry-run: also one line per run (grid, model, "
                        "task, seed, status, claim holder) and why each unresolved model cannot be read")
    parser.add_argument("--name", help="display name on the leaderboard (default: the alias, or for a `biobench "
                        "pretrain` checkpoint 'recipe · base model · tokens', else the folder name or hub id)")
    parser.add_argument("--metadata", metavar="JSON", help="model metadata to state, as a grid file's `metadata` "
                        "table in JSON, e.g. '{\"license\": \"mit\", \"params\": 110000000}' (fields: params, context, "
                        "license, base_model, training_data, open_weights); recorded over the model card's, marked "
                        "as stated (what `biobench worker` passes for a request's metadata)")
    which = parser.add_mutually_exclusive_group()
    which.add_argument("--tasks", help="comma-separated task ids (`biobench tasks`)")
    which.add_argument("--lang", choices=["fr", "en"], help="every paper task of a language")
    parser.add_argument("--seeds", help="e.g. 42-50 or 42,44 (default: the task's protocol seeds)")
    parser.add_argument("--results", default=None, metavar="DIR", help="results folder (default: ./results; with "
                        "--config the grid file's `results`)")
    parser.add_argument("--overwrite", action="store_true", help="redo runs that already have a result")
    parser.add_argument("--shard", metavar="I/N", help="run the I-th of N deterministic parts of the grid "
                        "(0-based, e.g. $SLURM_ARRAY_TASK_ID/$SLURM_ARRAY_TASK_COUNT)")
    parser.add_argument("--no-claims", action="store_true", help="do not claim runs (by default each run is "
                        "claimed next to its result before it trains, so any number of eval processes on one grid "
                        "— a SLURM array, two terminals — do every run exactly once, each taking the next "
                        "unfinished run)")
    parser.add_argument("--claim-seconds", type=claim_seconds, default=None, metavar="S",
                        help="how long a claim lives without renewal (default 300; renewed every S/5 while the run "
                        "trains): a killed process's run is redone after at most S seconds; give every process of "
                        "a grid the same S (a claim expiring more than 3*S ahead is not one a holder wrote)")
    parser.add_argument("--device", help="cuda, cuda:1, cpu (default: cuda when available)")
    parser.add_argument("--threads", type=int, help="CPU threads for torch (default on a CPU: the cores not "
                        "already busy, from the load average, as pretrain; 1 is fastest on a machine shared by many "
                        "jobs); with --parallel N, shared: each run gets threads/N")
    parser.add_argument("--parallel", type=parallel_value, nargs="?", const="auto", default=None, metavar="N",
                        help="train up to N runs at once on the device, each in its own process (same results, "
                        "byte-identical predictions); alone or 'auto': as many as fit the GPU, measured on the "
                        "first run (one at a time on a CPU). Default 1, or the grid file's `parallel`")
    parser.add_argument("--compile", action="store_true", help="torch.compile the encoder, dynamic shapes (first "
                        "batches slower while it compiles; same protocol, so existing results still count)")
    parser.add_argument("--trust-remote-code", action="store_true", help="allow a hub model's own code")
    add_max_model_gb_argument(parser)
    parser.add_argument("--check-contamination", action="store_true", help="for a `biobench pretrain` checkpoint: "
                        "before training, measure each task's shared word 13-grams with the corpus its model card "
                        "records (`biobench contamination`) and store the result in each run's record")
    parser.add_argument("--json", action="store_true", help="print the summary as JSON on stdout")
    parser.add_argument("--no-progress", action="store_true", help="no progress bars")
    parser.add_argument("--report-to", choices=["none", "tensorboard", "wandb"], default="none",
                        help="also report train loss and dev scores per evaluation, to <results>/<model>/<task>/"
                             "<tensorboard|wandb>/seed-<n>/ (needs the 'tensorboard' or 'wandb' extra; one W&B "
                             "run per seed, project $WANDB_PROJECT or biobench)")
    add_task_arguments(parser)
    add_protocol_arguments(parser, quick=True)
    add_launcher_arguments(parser)
    parser.set_defaults(func=run)


def claim_seconds(text: str) -> float:
    """argparse type of --claim-seconds: a finite number of seconds within the lease bounds."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and MIN_CLAIM_S <= value <= MAX_LEASE_S):
        raise argparse.ArgumentTypeError(f"expected seconds from {MIN_CLAIM_S:.0f} to {MAX_LEASE_S:.0f}, got {text!r}")
    return value


def make_claims(args: argparse.Namespace):
    """The run claims of this process (None with --no-claims)."""
    if args.no_claims:
        return None
    return RunClaims(args.claim_seconds or DEFAULT_CLAIM_S)


@contextlib.contextmanager
def wall_clock(args: argparse.Namespace):
    """The whole eval under SIGTERM/SIGUSR1 stop handling and this process's claims (released on the way out)."""
    claims = make_claims(args)
    try:
        with stop_on_signal(None, WALL_CLOCK_SIGNALS, STOP_MESSAGE) as stop:
            args.stop, args.claims = stop, claims
            yield
    finally:
        if claims is not None:
            claims.close()


def check_arguments(args: argparse.Namespace) -> None:
    """What can be refused before anything loads: threads, device, a results path that is not a folder."""

    if args.threads is not None and args.threads < 1:
        raise ConfigError(f"--threads {args.threads}: give a positive number of CPU threads")
    if args.workers is not None and args.launcher is None:  # it was ignored without a word (issue 62 item 6)
        raise ConfigError(f"--workers {args.workers} goes with --launcher local (processes on this machine, as "
                          "--parallel) or --launcher slurm (elements of a SLURM array)")
    if args.workers is not None and args.workers < 1 and args.launcher == "local":
        raise ConfigError(f"--workers {args.workers}: give a positive number of processes")
    check_device(args.device)
    launch.check_options(args)  # --slurm-arg, --time: refused under --dry-run as the submit refuses them
    args.max_model_gb = operator_limit_gb(args.max_model_gb)  # a bad --max-model-gb or $BIOBENCH_MAX_MODEL_GB: one line
    if args.config and args.results is not None:
        raise ConfigError("with --config, each grid's results folder comes from the grid file (results = \"DIR\", "
                          "default ./results); drop --results or set it there")
    if args.config and args.metadata:
        raise ConfigError("with --config, each model's metadata comes from the grid file (metadata = { ... }); "
                          "drop --metadata")
    if not args.config and args.results is None:
        args.results = "results"
    results = Path(args.results) if args.results else None
    if results is not None and results.exists() and not results.is_dir():
        raise ConfigError(f"--results {results} is not a folder (a file, FIFO or device); give a results folder")


def run(args: argparse.Namespace) -> int:
    check_arguments(args)
    if args.launcher == "slurm" and not args.dry_run:
        return launch_slurm(args)
    if args.launcher == "local" and args.workers:  # the same workers on this machine: today's --parallel
        args.parallel = parallel_value(str(args.workers))
    if args.config:
        return run_config(args)
    if args.grid:

        raise ConfigError("--grid goes with --config GRID.toml (it names grids of that file)")
    overrides = overrides_from_args(args)  # checked now: a dry run with a bad override is an error too
    selection: dict[str, Any] = dict(lang=args.lang, seeds=args.seeds, data_dir=args.data_dir, results=args.results,
                                     name=args.name, shard=args.shard, overrides=overrides,
                                     quick=args.quick, metadata=metadata_option(args.metadata))
    try:
        selection["catalogue"] = TaskCatalogue.build(args.task_file)
    except ConfigError as err:
        if not args.dry_run:
            raise
        # a dry run lists what it cannot plan, a broken --task-file too: the model's one row says why
        return print_dry_run([cannot_plan("-", args.name or args.model, err)], args, 0)
    if args.dry_run:
        return print_dry_run(dry_run_evaluation(args.model, args.tasks, **selection), args, 0)
    with wall_clock(args):
        grid_plan = plan_evaluation(args.model, args.tasks, overwrite=args.overwrite, rename=True, **selection)
        grid_plan.fix = own_fix(getattr(args, "argv", None))
        run_plan(grid_plan, args, f"{grid_plan.name} ({grid_plan.model.info.id})", "in this shard")
    return 0


# what a fix line drops from the user's command: the selection it replaces and the budget it changes
_SELECTION = ("--tasks", "--lang", "--seeds")


@dataclass(frozen=True)
class OwnFix:
    """own_fix's answer: the user's `eval` words (`base`) turned into the ⚠ line's fix for one result. A
    module-level class, not a closure, because the plan that carries it is pickled for `--parallel`'s worker
    processes (a local function was "Can't pickle local object 'own_fix.<locals>.fix'")."""

    base: tuple[str, ...]

    def __call__(self, result: Any) -> str:
        import shlex


        base = list(self.base)
        run = ["biobench", *base, "--tasks", result.task_id, "--seeds", str(result.seed)]
        if not is_smoke(result):
            # `data status` with the user's data folder and task files: a task of their own is listed only with
            # its --task-file (issue 62 item 5: the fix said `biobench data status`, which never lists it)
            data = [word for flag in ("--data-dir", "--task-file") for word in _option_words(base, flag)]
            return (f"{shlex.join(['biobench', 'data', 'status', *data])} (is {result.task_id}'s data whole?), "
                    f"then {shlex.join(run)} --head <another head>")
        return shlex.join(run if result.details.get("quick") else [*run, "--quick"])


def _option_words(words: list[str], flag: str) -> list[str]:
    """Every `flag VALUE` or `flag=VALUE` of `words`, as typed (a repeatable flag keeps each)."""
    found: list[str] = []
    for i, word in enumerate(words):
        if word == flag and i + 1 < len(words):
            found += [word, words[i + 1]]
        elif word.startswith(f"{flag}="):
            found.append(word)
    return found


def own_fix(argv: list[str] | None, config: dict[str, Any] | None = None) -> OwnFix | None:
    """The ⚠ line's fix as this terminal's user can paste it (issue 52 item 1: the public form said
    `--model path/to/final` and lost `--data-dir`): their own `eval` command, their model as typed and every
    other option kept, with only what changes: `--tasks`/`--seeds` of the degenerate run, the protocol overrides
    dropped and `--quick` added (a smoke run below the quick budget), or `--quick` dropped (a quick run: the
    protocol's budget). A protocol run's fix is a look at the task's data, then another head. `config`: an
    `eval --config` grid's model, with the options that command would need (`--model`, `--name`, `--data-dir`,
    `--results`, `--task-file`). None (no command line, e.g. the Python API): the public `fix_command`."""

    if config is not None:
        base = ["eval", "--model", str(config["model"])]
        for flag in ("--name", "--data-dir", "--results"):
            if config.get(flag):
                base += [flag, str(config[flag])]
        for task_file in config.get("--task-file") or ():
            base += ["--task-file", str(task_file)]
    elif argv and argv[0] == "eval":
        commands = argparse.ArgumentParser(allow_abbrev=False).add_subparsers()
        add_parser(commands)  # this command's own options: which take a value, which are switches
        eval_parser = commands.choices["eval"]
        switches = {flag for action in eval_parser._actions if action.nargs == 0 for flag in action.option_strings}
        drop = {*_SELECTION, *(flag for flag in OVERRIDES if flag != "--batch-size"), "--quick", "--dry-run"}
        base, words = ["eval"], list(argv[1:])
        while words:
            word = words.pop(0)
            flag = word.split("=", 1)[0]
            takes_value = flag.startswith("--") and "=" not in word and flag not in switches
            value = [words.pop(0)] if takes_value and words else []
            if flag == "--batch-size" and (value or [word.partition("=")[2]])[0].lower() != "auto":
                continue  # a batch size is a protocol override; `auto` an execution choice, kept
            if flag not in drop:
                base += [word, *value]
    else:
        return None

    return OwnFix(tuple(base))


def metadata_option(text: str | None) -> dict[str, Any]:
    """--metadata JSON as the stated metadata (biobench.store.metadata.check_metadata, the grid file's
    validator); ConfigError in one line for text that is not a JSON object of known, valid fields."""
    if text is None:
        return {}
    if len(text) > 16_384:
        raise ConfigError(f"--metadata: {len(text):,} characters, over the 16,384 a metadata table needs")
    try:
        raw = parse_json(text, "--metadata")
    except UnsafeJSONError as err:
        raise ConfigError(f"--metadata: {err.reason}; give a JSON object, e.g. '{{\"license\": \"mit\"}}'") from None
    return check_metadata(raw, "--metadata")


def print_dry_run(rows, args: argparse.Namespace, n_grids: int) -> int:
    """The dry run: first what a person reads at a glance (per grid a task x model table of done / claimed /
    left, the tasks with no data here and how to get them, models whose revision cannot be resolved and how
    to fetch them, who holds claims, the totals), then with --verbose one line per run (tab-separated)."""
    if args.json:
        print(json.dumps([row.__dict__ for row in rows], indent=2))
        return 0
    print_grid_summary(rows, args)
    if args.verbose:
        said = set()
        for row in rows:
            seed = f"seed {row.seed}" if row.seed is not None else "-"
            detail = f"  ({row.detail})" if row.detail and row.status != UNRESOLVED else ""
            held = f"  (by {row.holder}, until {row.expires})" if row.status == "claimed" else ""
            print(f"{row.grid}\t{row.model}\t{row.task}\t{seed}\t{row.status}{held}{detail}")
            if row.status == UNRESOLVED and (row.grid, row.model) not in said:
                said.add((row.grid, row.model))
                print(f"{row.model}: {UNRESOLVED}, so whether its runs are done is unknown: {row.detail}",
                      file=sys.stderr)
    else:
        print("one line per run (status, claim holder, why a model is unresolved): --verbose; all of it: --json")
    return 0


def _cell(statuses: list[str]) -> str:
    """One task x model cell: done/claimed/left, '?/N' when the model is unresolved (N runs, done or not
    unknown), 'no data' when the task cannot run here."""
    if "no data" in statuses:
        return "no data"
    if UNRESOLVED in statuses:
        return f"?/{len(statuses)}"
    done, claimed = statuses.count("done"), statuses.count("claimed")
    return f"{done}/{claimed}/{len(statuses) - done - claimed}"


def print_grid_summary(rows, args: argparse.Namespace) -> None:
    """Per grid a table, tasks down and models across ([1], [2], ... named below it: display names are long),
    each cell done/claimed/left; then the tasks with no data here, the unresolved models, claim holders and
    the totals. Stdout: this is the dry run's answer."""
    grids = list(dict.fromkeys(row.grid for row in rows))
    for grid in grids:
        mine = [row for row in rows if row.grid == grid]
        models = list(dict.fromkeys(row.model for row in mine))
        tasks = list(dict.fromkeys(row.task for row in mine if row.task != "*"))
        cells = {(task, model): _cell([r.status for r in mine if r.task == task and r.model == model])
                 for task in tasks for model in models}
        heads = [f"[{i}]" for i in range(1, len(models) + 1)]
        widths = [max([len(heads[i]), *(len(cells[t, m]) for t in tasks)]) for i, m in enumerate(models)]
        first = max([4, *(len(t) for t in tasks)])
        label = f"{grid}: " if grid != "-" else ""
        print(f"{label}{len(models)} model(s) x {len(tasks)} task(s); each cell done/claimed/left "
              "(?/N: N runs of a model whose revision is unresolved here, done or not unknown)")
        print("  " + "task".ljust(first) + "".join("  " + h.rjust(w) for h, w in zip(heads, widths, strict=True)))
        for task in tasks:
            print("  " + task.ljust(first) + "".join("  " + cells[task, m].rjust(w)
                                                    for m, w in zip(models, widths, strict=True)))
        for i, model in enumerate(models, 1):
            runs = [r for r in mine if r.model == model and r.seed is not None]
            cannot = next((r.detail for r in mine if r.model == model and r.status == "cannot plan"), None)
            state = (f"cannot plan: {cannot}" if cannot is not None else
                     "no task with data here" if not runs else
                     f"{len(runs)} run(s), revision unresolved" if any(r.status == UNRESOLVED for r in runs) else
                     f"{sum(r.status == 'done' for r in runs)} of {len(runs)} run(s) done")
            print(f"  [{i}] {model}: {state}")
    missing = list(dict.fromkeys(row.task for row in rows if row.status == "no data"))
    all_tasks = {row.task for row in rows if row.task != "*"}
    where = f" --data-dir {args.data_dir}" if getattr(args, "data_dir", None) else ""
    if missing:

        given = resolve_data_dir(getattr(args, "data_dir", None)) is not None or getattr(args, "config", None)
        here = "here" if given else ("here (no data folder given: pass --data-dir DIR, set BIOBENCH_DATA or create "
                                     "./data)")
        print(f"no data {here} ({len(missing)} of {len(all_tasks)} task(s), their runs cannot start): {', '.join(missing)}"
              f" — `biobench data status{where}` says how to get each (`biobench data fetch TASK` for open data, "
              "`biobench data add TASK FILE...` for files you downloaded)")
    unresolved = list(dict.fromkeys(row.model for row in rows if row.status == UNRESOLVED))
    if unresolved:
        what = f"--config {args.config}" if getattr(args, "config", None) else f"--model {args.model}"
        print(f"revision unresolved for {len(unresolved)} model(s) (not readable here: offline and not in the Hugging "
              f"Face cache, or not found): `biobench prefetch {what}` where the hub is reachable fetches them; "
              "--verbose says why for each")
    holders: dict[str, list] = {}
    for row in rows:
        if row.status == "claimed":
            holders.setdefault(row.holder, []).append(row)
    for holder, held in holders.items():
        held_runs = ", ".join(f"{r.task} seed {r.seed}" for r in held[:4]) + (" ..." if len(held) > 4 else "")
        print(f"claimed by {holder}: {held_runs} (until {max(r.expires for r in held)} unless renewed)")
    for row in rows:  # what a claim says of a run still to do: junk at its path, a dead holder, too long a run
        if row.status in ("to run", "claimed") and row.detail:
            print(f"{row.grid + ': ' if row.grid != '-' else ''}{row.model} · {row.task} seed {row.seed}: {row.detail}")
    done = sum(r.status == "done" for r in rows)
    claimed = sum(r.status == "claimed" for r in rows)
    conflicts = sum(r.status == "conflict" for r in rows)
    n_runs = sum(r.seed is not None for r in rows)
    n_unresolved = sum(r.status == UNRESOLVED for r in rows)
    n_cannot = sum(r.status == "cannot plan" for r in rows)
    n_models = len({(r.grid, r.model) for r in rows})
    grid_count = f" in {len(grids)} grid(s)" if getattr(args, "config", None) else ""
    print(f"{n_runs} run(s){grid_count}: {done} done, {n_runs - done} to run"
          + (f" ({claimed} claimed now)" if claimed else "")
          + (f" ({n_unresolved} with the revision unresolved)" if n_unresolved else "")
          + (f" ({conflicts} conflict(s) with another run's result: --verbose lists them)" if conflicts else "")
          + (f"; {len(missing)} task(s) with no data" if missing else "")
          + (f"; {n_cannot} model(s) could not be planned" if n_cannot else "")
          + f"; {n_models} model(s) x {len(all_tasks)} task(s)")


def run_plan(plan, args: argparse.Namespace, title: str, scope: str = "", parallel: int | str | None = None) -> None:
    """Say what the plan will do, run its pending runs (`parallel` of them at once: --parallel, else the grid
    file's, else 1), print the summary (table or --json): one home for `eval --model` and each model of an
    `eval --config` grid. What it will do is said once execute_plan has checked the model fits (its one memory
    check), so a model too big is refused before anything is said or run."""
    def say_what_runs(threads: int) -> None:
        skipped = sum(r.status == "skipped" for r in plan.runs)
        if not args.json or skipped:
            print(f"{title}: {len(plan.runs)} run(s){' ' + scope if scope else ''}, {skipped} already done, "
                  f"{threads} CPU thread(s) (results: {plan.results_dir / plan.slug})", file=sys.stderr)
        if getattr(args, "check_contamination", False) and any(r.status == "pending" for r in plan.runs):

            report = attach_to_plan(plan)
            for task, splits in report["tasks"].items():
                test = splits.get("test", {})
                print(f"contamination {task}: {test.get('contaminated', 0)}/{test.get('examples', 0)} test examples "
                      f"share a {report['n']}-gram with the corpus (longest run {test.get('longest', 0)} words)",
                      file=sys.stderr)

    for note in plan.notes:  # a --name that renamed these weights' results (or why it could not)
        print(note, file=sys.stderr)
    execute_plan(plan, Execution(args.device, args.trust_remote_code, args.compile, args.report_to, micro_batch(args),
                                 getattr(args, "max_model_gb", None)),
                 parallel=args.parallel or parallel or 1, threads=args.threads, progress=not args.no_progress,
                 claims=getattr(args, "claims", None), stop=getattr(args, "stop", None), before_runs=say_what_runs)
    summary = summarize(plan)
    if args.json:
        print(json.dumps(json_safe(summary), indent=2))
    else:
        print_summary(summary)


def micro_batch(args: argparse.Namespace) -> str | None:
    """`--batch-size auto`: micro-batches with gradient accumulation (a number is a protocol override instead)."""
    return "auto" if str(args.batch_size).strip().lower() == "auto" else None


def launch_slurm(args: argparse.Namespace) -> int:
    """`eval --config G --launcher slurm`: submit the grid as one SLURM array (eval.grid_launch), print where to
    look."""
    if not args.config:
        raise ConfigError("--launcher slurm goes with --config GRID.toml (the grid its workers share)")
    options = vars(args)
    launched = launch_grid(args.config, args.grid, ArraySettings.from_options(options), options,
                           overrides=overrides_from_args(args), catalogue=TaskCatalogue.build(args.task_file),
                           data_dir=args.data_dir,
                           shard=args.shard)
    print(f"submitted SLURM array {launched.job}: {launched.workers} worker(s) on {launched.models} model(s) of "
          f"{launched.grids} grid(s), each claiming the next unfinished run")
    print(f"logs: {launch.log_files(launched.log_dir, launched.job, launched.workers)} and .err (launch.json and the "
          "resolved grid.toml beside them)")
    print(f"progress: biobench eval --config {launched.grid_file} --dry-run")
    return 0


def run_config(args: argparse.Namespace) -> int:
    """`eval --config GRID.toml`: every (grid, model) of the file as its own `eval --model` run
    (api.evaluation.plan_grid_model), or with --dry-run the list of runs and whether each is done."""
    if args.tasks or args.lang or args.seeds:
        raise ConfigError("with --config, tasks, lang and seeds come from the grid file; drop --tasks/--lang/--seeds")
    try:
        catalogue = TaskCatalogue.build(args.task_file)
    except ConfigError as err:
        if not args.dry_run:
            raise
        grids = select_grids(args.config, args.grid)  # a broken --task-file: each model's one row says why
        return print_dry_run([cannot_plan(grid.name, entry.name or entry.model, err) for grid in grids
                              for entry in grid.models], args, len(grids))
    grids = select_grids(args.config, args.grid, catalogue)
    options: dict[str, Any] = dict(data_dir=args.data_dir, overrides=overrides_from_args(args), shard=args.shard,
                                   quick=args.quick)
    if args.dry_run:
        return print_dry_run(dry_run_grids(grids, catalogue=catalogue, **options), args, len(grids))
    with wall_clock(args):
        for grid in grids:
            tasks = grid_catalogue(grid, catalogue)  # the grid's task files read once for all its models
            for entry in grid.models:
                plan = plan_grid_model(grid, entry, catalogue=tasks, overwrite=args.overwrite, rename=True, **options)
                plan.fix = own_fix(None, {"model": entry.model, "--name": entry.name,
                                          "--data-dir": grid.data_dir or args.data_dir, "--results": grid.results,
                                          "--task-file": [*grid.task_files, *args.task_file]})
                if args.stop.requested:  # a signal while this model was planned
                    raise stopped(plan, args.stop, lambda line: print(line, file=sys.stderr))
                run_plan(plan, args, f"[{grid.name}] {plan.name}", parallel=grid.parallel)
    return 0


def json_safe(value: Any) -> Any:
    """NaN (e.g. the CI of a single seed) -> null, so the output is strict JSON."""
    if isinstance(value, float) and math.isnan(value):
        return None
    if isinstance(value, dict):
        return {k: json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    return value


def _pct(value: float | None) -> str:
    return "–" if value is None or (isinstance(value, float) and math.isnan(value)) else f"{100 * value:.2f}"


def print_summary(summary: dict[str, Any]) -> None:
    """The final table: test macro-F1 per task (mean, std, 95% CI over seeds) and per-language averages."""
    from rich.table import Table

    table = Table(title=f"{summary['model']['name']} — test macro-F1 (%)", title_justify="left")
    columns: tuple[tuple[str, Literal["left", "right"]], ...] = (
        ("task", "left"), ("lang", "left"), ("kind", "left"), ("seeds", "right"), ("mean", "right"), ("std", "right"),
        ("95% CI", "right"), ("MDD", "right"))
    for column, justify in columns:
        table.add_column(column, justify=justify)
    for row in summary["tasks"]:
        ci = f"[{_pct(row.get('ci_low'))}, {_pct(row.get('ci_high'))}]" if row["n"] > 1 else "–"
        mdd = f"{_pct(row.get('mdd'))} (≥{_pct(row.get('mdd_many_seeds'))})" if "mdd" in row else "–"
        marks = (f" {SMOKE_MARK}" if row.get("overrides") else "") + (f" {DEGENERATE_MARK}" if row.get("degenerate") else "")
        table.add_row(row["task"] + marks, row["lang"], row["kind"], f"{row['n']}/{row['seeds_expected']}",
                      _pct(row.get("mean")), _pct(row.get("std")) if row["n"] > 1 else "–", ci, mdd)
    for lang, avg in summary["languages"].items():
        table.add_row(f"average {lang}", lang, "", f"{avg['n_tasks']}/{avg['tasks_expected']} tasks",
                      _pct(avg["mean"]), "", "", "", style="bold")
    console = terminal_console()
    console.print(table)
    if any("mdd" in row for row in summary["tasks"]):
        console.print("MDD: the smallest A - B (points) a two-sided test at 5% detects with 80% power, from the seed "
                      "variance and the bootstrap over test examples; (≥ x): the floor more seeds cannot lower",
                      highlight=False)
    for row in summary["tasks"]:
        if row.get("overrides"):
            console.print(f"[yellow]{SMOKE_MARK} smoke run[/] {row['task']}: protocol overrides {row['overrides']}; "
                          "not the protocol's score (the leaderboard ranks it only with \"include smoke runs\")",
                          highlight=False)
        for seed, text in sorted((row.get("degenerate") or {}).items()):
            console.print(f"[red]{DEGENERATE_MARK}[/] {row['task']} seed {seed}: {text}", highlight=False)
    for task, reason in summary["unavailable"].items():
        console.print(f"[yellow]not run[/] {task}: {reason}", highlight=False)
    for lang, avg in summary["languages"].items():
        if avg.get("benchmark") and avg.get("missing"):
            name = {"fr": "French", "en": "English"}.get(lang, lang)
            console.print(f"[yellow]no {name} average[/]: the paper's average is over its {avg['tasks_expected']} "
                          f"{name} tasks; missing: {', '.join(avg['missing'])} (no result for the protocol's seeds; "
                          "`biobench data status` shows how to get a task's data)", highlight=False)
