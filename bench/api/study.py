"""A study file: the paper's chain — pretraining runs, the evaluation of their checkpoints, the analyses and the
comparisons — as one reviewable TOML file, turned into steps (each a biobench command line) with dependencies.

Why a file of steps rather than a new engine: every piece already resumes on its own (a pretraining from its
checkpoint, an eval grid by its result files and claims, an analysis by its output file), so a step is just the
command a user would type, and the study decides only the order, what is done, and where each output lives.
The same step runs in this process's child (`biobench study run`), as a SLURM job (`--launcher slurm`, the
submitit launcher of `eval --launcher slurm`, with `afterok` dependencies) or by hand.

    out = "paper-fr"                 # the study folder (relative to this file); default: the file's name
    runs = "runs"                    # pretraining outputs: <out>/<runs>/<name>/ (relative to out)
    results = "results"              # eval results (relative to out)
    data_dir = "data"                # task data (relative to this file)
    extends = "base.toml"            # optional: tables of the same name here replace the base's

    [[pretrain]]                     # a PretrainConfig: its fields by name (biobench pretrain --list)
    name = "detour"
    recipe = "detour"
    model = "almanach/moderncamembert-base"
    corpus = "corpora/fr-mix.toml"   # passed to `biobench pretrain --corpus` as given (relative to this file)
    tokens = "10B"

    [[eval]]                         # a grid entry, as in grid files (bench/eval/grid.py)
    name = "fr"
    lang = "fr"
    seeds = "42-50"
    models = [{ model = "run:detour/final" }, { model = "run:mlm/final" }]

    [[analysis]]                     # cka | cka-trajectory | needle-generate | needle: `biobench analyze KIND`
    name = "cka-final"
    kind = "cka"
    models = ["run:detour/final", "run:mlm/final"]
    texts = ["diamed"]

    [[compare]]                      # in the report: A - B per task and on the average, paired bootstrap
    a = "run:detour/final"
    b = "run:mlm/final"
    lang = "fr"
    correction = "holm"

A model given as `run:NAME/final`, `run:NAME/phase1` or `run:NAME/step-<tokens>` is a checkpoint of the
[[pretrain]] table NAME (a hub id never starts with `run:`). Everything is checked when the file is read, before
anything runs: unknown keys, a reference to no run or to a checkpoint the run never writes, the same output
twice, a cycle.
"""

from __future__ import annotations

import difflib
import math
import re
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Literal

from biobench.analysis.options import ANALYSES, Option
from biobench.api.pretraining import check_settings, parse_tokens, resolve_geometry
from biobench.errors import ConfigError
from biobench.eval.grid import grid_specs, grids_from_tables, resolved_grid_file
from biobench.ranges import finite_number, parse_seeds
from biobench.runtime.files import atomic_write
from biobench.runtime.jsonfile import UnsafeJSONError, parse_toml, read_bytes
from biobench.runtime.paths import UnsafePathError, check_text, display_text, safe_name
from biobench.standings.scan import load_reference
from biobench.tasks.synthetic import demo_corpus

MAX_STUDY_BYTES = 1 << 20
MAX_EXTENDS = 8  # a chain of base files deeper than this is a loop or a mistake
TOP_KEYS = {"extends", "out", "runs", "results", "data_dir", "task_files", "pretrain", "eval", "analysis",
            "compare", "workers", "lives"}
# how many times a step's SLURM job may start: the first start and each requeue at its time limit (submitit's
# max_num_timeout + 1; submitit's own default is 3 requeues, so a pretraining longer than 4 x --time ended FAILED)
DEFAULT_LIVES = 4
MAX_LIVES = 100
# the PretrainConfig fields a study decides itself: where the run writes, and whether it resumes
PRETRAIN_RESERVED = {"out", "resume", "stop_after_steps", "progress"}
REF = re.compile(r"run:([A-Za-z0-9][A-Za-z0-9._-]{0,99})/(final|phase1|init|step-(\d+(?:\.\d+)?[KMBGTkmbgt]?))")
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")

# analyses without a --device flag (they only copy tensors or write text)
NO_DEVICE = {kind for kind, spec in ANALYSES.items() if not spec.device}
PROBE_SEEDS = "42-44"  # `analyze probe`'s default seeds
Correction = Literal["holm", "bonferroni", "none"]
CORRECTIONS = ("holm", "bonferroni", "none")
COMPARE_KEYS = {"name", "a", "b", "tasks", "lang", "correction", "n_boot", "paper_a", "paper_b",
                "paper_a_average", "paper_b_average", "paper_source", "allow_different_protocols"}
StepKind = Literal["pretrain", "eval", "analysis"]
# `corpus = "generated:NAME"`: a corpus biobench writes from its own templates into <out>/corpus/ (no download):
# NAME -> (documents, seed). demo-fr: the demo's French clinical corpus (tasks/synthetic.demo_corpus).
GENERATED = {"demo-fr": (600, 0)}


@dataclass(frozen=True)
class RunRef:
    """`run:NAME/final|phase1|step-<tokens>`: a checkpoint a [[pretrain]] table writes (`init`: the start model
    as the run saved it, e.g. the start of a CKA trajectory from a preset, which has no weights of its own)."""

    run: str
    checkpoint: str  # final | phase1 | init | step-<tokens as written>
    tokens: int | None = None  # step-<tokens>: the token count asked for

    @property
    def text(self) -> str:
        return f"run:{self.run}/{self.checkpoint}"


@dataclass(frozen=True)
class Step:
    """One command of the study. `argv`: the biobench command line (without `biobench`) it runs; `needs`: the
    steps that must finish first; `done_file`: the file whose presence means the step is done (None: an eval
    step, done when every run of its grid has its result)."""

    id: str
    kind: StepKind
    argv: tuple[str, ...]
    needs: tuple[str, ...]
    source: str
    done_file: Path | None = None
    grid_file: Path | None = None  # an eval step's one-model grid, written when the study runs
    # a probe: done when each pattern (a glob under done_dir, one per seed: */<task>/seed-<n>.json) has a file
    done_dir: Path | None = None
    done_patterns: tuple[str, ...] = ()
    analysis: str | None = None  # an analysis step's kind (ANALYSES)


@dataclass(frozen=True)
class Compare:
    name: str
    a: str  # a model as the eval tables name it: a run reference or an alias / hub id / folder
    b: str
    tasks: tuple[str, ...] | None
    lang: str | None
    correction: Correction
    n_boot: int
    paper_a: str | None  # a model row of the paper's tables (bench/standings/reference) shown beside A
    paper_b: str | None
    allow_different_protocols: bool
    source: str
    # the paper's average for A / B where it gives no Table 1-2 row (Table 7's F1 over 3 tasks), and where from
    paper_a_average: float | None = None
    paper_b_average: float | None = None
    paper_source: str = ""


@dataclass
class Study:
    path: Path
    out: Path
    runs: Path
    results: Path
    steps: list[Step]
    compares: list[Compare]
    pretrain: dict[str, dict[str, Any]]  # name -> its settings (model and corpus as they will be passed)
    grids: list[Any] = field(default_factory=list)  # the [[eval]] tables as bench.eval.grid.Grid, models resolved
    workers: int = 1  # array elements per eval step under --launcher slurm
    paper_scores: dict[str, float] = field(default_factory=dict)  # probe analysis name -> the paper's F1 (%)
    lives: int = DEFAULT_LIVES  # starts of a step's SLURM job (the study's `lives`)
    lives_of: dict[str, int] = field(default_factory=dict)  # step id -> its own (a [[pretrain]] table's `lives`)

    def step_lives(self, step_id: str) -> int:
        return self.lives_of.get(step_id, self.lives)

    def step(self, step_id: str) -> Step:
        return next(s for s in self.steps if s.id == step_id)

    def model_path(self, model: str) -> str:
        """A model as eval sees it: a run reference becomes its checkpoint folder."""
        ref = parse_ref(model, "model")
        return str(ref_path(self, ref)) if ref else model


# ------------------------------------------------------------------------------------------------ references
def parse_ref(value: Any, where: str) -> RunRef | None:
    """A run reference, None for anything that is not one (`run:` prefix); a malformed one is refused."""
    if not isinstance(value, str) or not value.startswith("run:"):
        return None
    match = REF.fullmatch(value)
    if not match:
        raise ConfigError(f"{where}: {value!r} is not a run reference; write run:NAME/final, run:NAME/phase1 or "
                          "run:NAME/step-<tokens> (e.g. run:detour/step-500M)")
    tokens = None
    if match[3]:

        tokens = parse_tokens(match[3])
    return RunRef(match[1], match[2], tokens)


def tokens_per_step(settings: dict[str, Any]) -> int:
    """Tokens of one optimiser step of a [[pretrain]] table (global batch x sequence length), with the geometry
    `biobench pretrain` resolves (the paper's 384 x 8192, 16 x 512 for a preset on a CPU)."""
    geometry = resolve_geometry(str(settings["model"]), settings.get("device"), settings.get("batch_size"),
                                settings.get("seq_len"), settings.get("micro_batch_size"))
    batch = geometry["batch_size"] if isinstance(geometry["batch_size"], int) else 384
    return int(batch) * int(geometry["seq_len"])


def ref_path(study: Study, ref: RunRef) -> Path:
    """The folder the checkpoint of `ref` is (or will be) written to. A step checkpoint is saved at the first
    optimiser step that reaches its token count: step-<that step's tokens seen>."""
    run = study.runs / ref.run
    if ref.tokens is None:
        return run / ref.checkpoint
    per_step = tokens_per_step(study.pretrain[ref.run])
    return run / f"step-{math.ceil(ref.tokens / per_step) * per_step}"


def check_ref(ref: RunRef, pretrain: dict[str, dict[str, Any]], where: str) -> None:
    """The run exists in the study and writes that checkpoint; one line naming the fix otherwise."""
    if ref.run not in pretrain:
        raise ConfigError(f"{where}: {ref.text} refers to no [[pretrain]] run (runs: "
                          f"{', '.join(pretrain) or 'none'})")
    if ref.tokens is None:
        return
    settings = pretrain[ref.run]
    every = settings.get("save_every")
    total = settings["tokens"] * (1 + settings.get("decay_ratio", 0.10))
    if not every:
        raise ConfigError(f"{where}: {ref.text}: run {ref.run!r} never writes step checkpoints (save_every is unset); "
                          f"add save_every = \"{ref.checkpoint[5:]}\" (or a divisor) to its [[pretrain]] table")
    if ref.tokens % every or ref.tokens <= 0:
        raise ConfigError(f"{where}: {ref.text}: run {ref.run!r} saves every {every:,} tokens, so it writes no "
                          f"checkpoint at {ref.tokens:,}; name a multiple of {every:,}")
    if ref.tokens >= total:
        raise ConfigError(f"{where}: {ref.text}: run {ref.run!r} trains {int(total):,} tokens in all, so it never "
                          f"reaches {ref.tokens:,}; name a step below that, or run:{ref.run}/final")


# ------------------------------------------------------------------------------------------------ reading
def _read_table_file(path: Path, seen: tuple[Path, ...] = ()) -> dict[str, Any]:
    """The file's tables with its `extends` chain merged: a base's tables come first, a table of the same name
    in the extending file replaces the base's; top-level keys of the extending file win."""
    try:
        raw = parse_toml(read_bytes(path, MAX_STUDY_BYTES), path)
    except FileNotFoundError:
        raise ConfigError(f"study file {path} does not exist") from None
    except UnsafeJSONError as err:
        raise ConfigError(f"{path}: {err.reason}") from None
    except OSError as err:
        raise ConfigError(f"study file {path}: unreadable ({err.strerror or err})") from None
    unknown = sorted(set(raw) - TOP_KEYS)
    if unknown and seen:  # a base named by `extends`: another file's keys are not echoed (it may not be a study)
        raise ConfigError(f"{seen[-1]}: extends {path}, which is not a study file ({len(unknown)} key(s) a study "
                          "does not have); name a study file")
    if unknown:
        shown = [display_text(k, 60) for k in unknown[:10]]
        close = difflib.get_close_matches(unknown[0], sorted(TOP_KEYS), n=1)
        raise ConfigError(f"{path}: unknown key(s) {', '.join(shown)}" + (f" (did you mean {close[0]!r}?)" if close
                          else "") + f"; allowed: {', '.join(sorted(TOP_KEYS))}")
    base_name = raw.pop("extends", None)
    if base_name is None:
        return raw
    if not isinstance(base_name, str) or not base_name:
        raise ConfigError(f"{path}: extends must be the path of another study file")
    base_path = (path.parent / check_text(base_name, f"{path}: extends", 1000)).resolve()
    if base_path in seen or base_path == path.resolve():
        raise ConfigError(f"{path}: extends {base_name} makes a loop of study files")
    if len(seen) + 1 >= MAX_EXTENDS:
        raise ConfigError(f"{path}: extends {base_name}: a chain of more than {MAX_EXTENDS} study files; "
                          "merge some of them")
    base = _read_table_file(base_path, (*seen, path.resolve()))
    # the base's relative paths (out, data_dir, task_files, corpora) stay relative to the base file
    base = _rebase(base, base_path.parent, path.parent)
    merged = {**base, **{k: v for k, v in raw.items() if k not in ("pretrain", "eval", "analysis", "compare")}}
    for key in ("pretrain", "eval", "analysis", "compare"):
        mine = raw.get(key, [])
        if not isinstance(mine, list):
            raise ConfigError(f"{path}: {key} must be [[{key}]] tables")
        names = {t.get("name") for t in mine if isinstance(t, dict)}
        merged[key] = [t for t in base.get(key, []) if not (isinstance(t, dict) and t.get("name") in names)] + mine
    return merged


def _rebase(raw: dict[str, Any], base_dir: Path, new_dir: Path) -> dict[str, Any]:
    """A base file's paths made valid from the extending file's folder (absolute, so either works)."""
    def absolute(value: Any) -> Any:
        if isinstance(value, str) and value and not Path(value).is_absolute() and (base_dir / value).exists():
            return str((base_dir / value).resolve())
        return value

    out = dict(raw)
    if "data_dir" in out:
        out["data_dir"] = str((base_dir / str(out["data_dir"])).resolve())
    if isinstance(out.get("task_files"), list):
        out["task_files"] = [str((base_dir / str(f)).resolve()) for f in out["task_files"]]
    out["pretrain"] = [{**t, **({"corpus": absolute(t["corpus"])} if "corpus" in t else {})} if isinstance(t, dict)
                       else t for t in out.get("pretrain", [])]
    return out


def _name(table: dict[str, Any], where: str, default: str | None = None) -> str:
    name = table.get("name", default)
    if not isinstance(name, str) or not NAME.fullmatch(name):
        raise ConfigError(f"{where}: name = {name!r}: give a name of letters, digits, '.', '_' or '-' "
                          "(it names the step and its folder)")
    return name


def _tables(raw: dict[str, Any], key: str, path: Path) -> list[dict[str, Any]]:
    tables = raw.get(key, [])
    if not isinstance(tables, list) or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{path}: {key} must be [[{key}]] tables")
    return tables


def _folder(base: Path, value: Any, where: str) -> Path:
    if not isinstance(value, str) or not value:
        raise ConfigError(f"{where}: expected a path string, got {value!r}")
    path = Path(value).expanduser()
    return (path if path.is_absolute() else base / path).resolve()


@dataclass
class _Reading:
    """What the loaders of the four table kinds share while a study file is read."""

    path: Path
    base: Path  # the study file's folder: relative paths in it are relative to it
    raw: dict[str, Any]
    study: Study
    outputs: dict[Path, str] = field(default_factory=dict)  # folder -> the table that writes it
    inside: dict[Path, str] = field(default_factory=dict)  # every folder above a claimed one -> its owner
    step_ids: dict[str, Step] = field(default_factory=dict)
    evaluated: dict[str, str] = field(default_factory=dict)  # model (as written) -> its eval step id

    def claim_output(self, folder: Path, where: str) -> None:
        """One owner per output folder, none inside another's. Linear in the steps: each folder is looked up
        with its parents (a path's depth), never compared with every earlier folder."""
        folder = folder.resolve()
        owner = next((self.outputs[p] for p in (folder, *folder.parents) if p in self.outputs), None) \
            or self.inside.get(folder)
        if owner is not None:
            raise ConfigError(f"{where}: writes to {folder}, which {owner} writes too; give it its own name")
        self.outputs[folder] = where
        for parent in folder.parents:
            if parent in self.inside:
                break  # its parents are there already
            self.inside[parent] = where

    def add_step(self, step: Step) -> None:
        self.study.steps.append(step)
        self.step_ids[step.id] = step


def load_study(path: str | Path, out: str | Path | None = None,
               adjust: Callable[[dict[str, Any]], None] | None = None) -> Study:
    """The study file `path` validated and turned into steps; `out` overrides its study folder; `adjust` may
    change the file's tables before they are checked (the demo's options). ConfigError in one line, naming the
    file and the table, on anything wrong."""
    path = Path(path)
    raw = _read_table_file(path)
    if adjust is not None:
        adjust(raw)
    base = path.parent
    study_out = _folder(Path.cwd(), str(out), "--out") if out else _folder(base, raw.get("out", path.stem), f"{path}: out")
    runs = _folder(study_out, raw.get("runs", "runs"), f"{path}: runs")
    results = _folder(study_out, raw.get("results", "results"), f"{path}: results")
    workers = raw.get("workers", 1)
    if not isinstance(workers, int) or isinstance(workers, bool) or not 1 <= workers <= 10_000:
        raise ConfigError(f"{path}: workers = {workers!r}: give the number of array elements per eval step (1-10000)")
    lives = raw.get("lives", DEFAULT_LIVES)
    if not isinstance(lives, int) or isinstance(lives, bool) or not 1 <= lives <= MAX_LIVES:
        raise ConfigError(f"{path}: lives = {lives!r}: give how many times a SLURM job may start (1-{MAX_LIVES}: "
                          "the first start and each requeue at its time limit)")
    reading = _Reading(path, base, raw, Study(path, study_out, runs, results, [], [], {}, workers=workers, lives=lives))
    _load_pretrain(reading)
    _load_eval(reading)
    _load_analyses(reading)
    _load_compares(reading)
    if not reading.study.steps:
        raise ConfigError(f"{path}: no [[pretrain]], [[eval]] or [[analysis]] table: nothing to run")
    _finish_pretrain_argv(reading.study)
    return reading.study


def _load_pretrain(reading: _Reading) -> None:
    """[[pretrain]]: a PretrainConfig each (bench/api/pretraining.check_settings, as `pretrain --config`)."""
    path, base, study = reading.path, reading.base, reading.study
    sources: dict[str, str] = {}
    for n, table in enumerate(_tables(reading.raw, "pretrain", path), 1):
        where = f"{path} [[pretrain]] #{n}"
        name = _name(table, where)
        where = f"{path} pretrain {name!r}"
        if name in study.pretrain:
            raise ConfigError(f"{where}: the name {name!r} is used by two [[pretrain]] tables (each names its run folder)")
        settings = {k: v for k, v in table.items() if k not in ("name", "lives")}
        reserved = sorted(PRETRAIN_RESERVED & {k.replace("-", "_") for k in settings})
        if reserved:
            raise ConfigError(f"{where}: {', '.join(reserved)} is decided by the study (the run writes to "
                              f"{study.runs / name} and resumes on its own); drop it")
        if "lives" in table:
            study.lives_of[f"pretrain/{name}"] = _lives(table["lives"], where)
        settings = check_settings(settings, where)
        missing = [k for k in ("model", "corpus", "tokens") if settings.get(k) in (None, "")]
        if missing:
            raise ConfigError(f"{where}: needs {', '.join(missing)}")
        if not parse_ref(settings["model"], where):
            local = base / str(settings["model"])
            if not Path(str(settings["model"])).is_absolute() and (local.exists() or
                                                                   str(settings["model"]).startswith(("./", "../"))):
                settings["model"] = str(local.resolve())
        corpus = str(settings["corpus"])
        if parse_ref(corpus, f"{where} corpus") is not None or corpus.startswith("analysis:"):
            # a checkpoint (or an analysis folder) is a model, not text: `pretrain --corpus` would fail after
            # every step this one waits on
            raise ConfigError(f"{where}: corpus = {corpus!r} names a study output, not text; give a folder of "
                              ".txt/.jsonl, a token store, a mix file or a hub dataset")
        if corpus.startswith("generated:"):
            if corpus[len("generated:"):] not in GENERATED:
                raise ConfigError(f"{where}: corpus = {corpus!r}: generated corpora: "
                                  f"{', '.join('generated:' + g for g in GENERATED)}")
            settings["corpus"] = str(generated_corpus_path(study.out, corpus[len("generated:"):]))
        elif not Path(corpus).is_absolute() and ((base / corpus).exists() or corpus.startswith(("./", "../"))):
            # a path is relative to this file, there or not yet (the input check names where it is expected)
            settings["corpus"] = str((base / corpus).resolve())
        if settings.get("cache_dir") is not None and not Path(settings["cache_dir"]).is_absolute():
            settings["cache_dir"] = (base / settings["cache_dir"]).resolve()
        study.pretrain[name] = settings
        sources[name] = where
        reading.claim_output(study.runs / name, where)
    for name, settings in study.pretrain.items():  # references between runs, now that every run is known
        if (ref := parse_ref(settings["model"], sources[name])) is not None:
            check_ref(ref, study.pretrain, sources[name])
    needs_of = {name: [ref.run] if (ref := parse_ref(s["model"], "")) else [] for name, s in study.pretrain.items()}
    _refuse_cycles(needs_of, path)
    for name, settings in study.pretrain.items():
        ref = parse_ref(settings["model"], "")
        reading.add_step(Step(f"pretrain/{name}", "pretrain", (), tuple(f"pretrain/{r}" for r in needs_of[name]),
                              sources[name], done_file=study.runs / name / "final" / "biobench_pretrain.json"))
        if ref is not None:
            settings["model"] = ref.text  # resolved to its folder when the command line is made


def _lives(value: Any, where: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not 1 <= value <= MAX_LIVES:
        raise ConfigError(f"{where}: lives = {value!r}: give how many times its SLURM job may start (1-{MAX_LIVES})")
    return value


def _load_eval(reading: _Reading) -> None:
    """[[eval]]: grid entries (bench/eval/grid.py validates them as it validates a grid file's [[grid]] tables),
    one step per model."""
    path, raw, study = reading.path, reading.raw, reading.study
    eval_tables = _tables(raw, "eval", path)
    for n, table in enumerate(eval_tables, 1):
        if "name" in table:  # it names steps, files and lines of output: a plain name (runtime/paths.py)
            try:
                safe_name(table["name"], f"{path} [[eval]] #{n} name")
            except UnsafePathError as err:
                raise ConfigError(str(err)) from None
        for i, entry in enumerate(table.get("models") or [], 1):
            model = entry.get("model") if isinstance(entry, dict) else entry
            if isinstance(entry, dict) and entry.get("name") is not None:
                check_text(entry["name"], f"{path} [[eval]] #{n} model #{i} name")
            if (ref := parse_ref(model, f"{path} [[eval]] #{n} model #{i}")) is not None:
                check_ref(ref, study.pretrain, f"{path} [[eval]] #{n} model #{i}")
    defaults: dict[str, Any] = {"results": str(study.results), **{k: raw[k] for k in ("data_dir", "task_files") if k in raw}}
    grids = grids_from_tables(eval_tables, defaults, path, "eval") if eval_tables else []
    run_keys: dict[tuple, str] = {}
    for grid in grids:
        tasks = _grid_tasks(grid)
        for entry in grid.models:
            ref = parse_ref(entry.model, grid.source)
            label = (ref.run + ("" if ref.checkpoint == "final" else "-" + ref.checkpoint)) if ref else \
                (entry.name or Path(entry.model).name or entry.model)
            step_id = f"eval/{grid.name}/{re.sub(r'[^A-Za-z0-9._-]+', '-', label)[:80]}"
            if step_id in reading.step_ids:
                raise ConfigError(f"{grid.source}: evaluates {entry.model} twice; list each model once per [[eval]]")
            overrides = {**grid.overrides, **entry.overrides}
            for task in tasks:  # the same result files from two steps: the same output twice
                key = (entry.model, str(grid.results), task, grid.seeds and tuple(grid.seeds),
                       tuple(sorted(overrides.items(), key=str)))
                if key in run_keys:
                    raise ConfigError(f"{grid.source}: {entry.model} on {task} with these seeds and overrides is "
                                      f"already evaluated by {run_keys[key]} (the same result files twice)")
                run_keys[key] = step_id
            resolved = replace(entry, model=str(ref_path(study, ref)) if ref else entry.model)
            study.grids.append(replace(grid, models=[resolved]))
            needs = (f"pretrain/{ref.run}",) if ref else ()
            grid_file = study.out / ".study" / "grids" / f"{step_id.replace('/', '--')}.toml"
            reading.add_step(Step(step_id, "eval", ("eval", "--config", str(grid_file), "--no-progress"), needs,
                                  f"{grid.source} model {entry.model}", grid_file=grid_file))
            reading.evaluated.setdefault(entry.model, step_id)


def _load_analyses(reading: _Reading) -> None:
    """[[analysis]]: `biobench analyze KIND` with the table's keys as its options (analysis/options.py declares
    each kind's), models resolved."""
    path, raw, study = reading.path, reading.raw, reading.study
    for n, table in enumerate(_tables(raw, "analysis", path), 1):
        name = _name(table, f"{path} [[analysis]] #{n}")
        where = f"{path} analysis {name!r}"
        kind = table.get("kind")
        if kind not in ANALYSES:
            raise ConfigError(f"{where}: kind = {kind!r}; give one of {', '.join(ANALYSES)}")
        spec = ANALYSES[kind]
        folder = study.out / "analyses" / name
        reading.claim_output(folder, where)
        done_patterns: tuple[str, ...] = ()
        if kind == "probe":  # its result files under its own folder, one per seed: they say it is done
            done_patterns = _probe_patterns(table, where)
            if "data_dir" not in table and "data_dir" in raw:
                table = {**table, "data_dir": raw["data_dir"]}
        argv: list[str] = list(spec.words)
        needs: list[str] = []
        for key, value in table.items():
            if key in ("name", "kind") or kind == "probe" and key == "paper":  # paper: the report's
                continue
            option = spec.option(key)
            if option is None or option.hidden:
                known = [o.key for o in spec.options if not o.decided and not o.hidden] + \
                    (["paper"] if kind == "probe" else [])
                close = difflib.get_close_matches(str(key), known, n=1)
                raise ConfigError(f"{where}: unknown key {display_text(key, 60)!r} for kind = {kind!r}"
                                  + (f"; did you mean {close[0]!r}?" if close else "")
                                  + f" (keys: {', '.join(known)})")
            if option.decided:
                raise ConfigError(f"{where}: {key} is decided by the study (out: {folder}; results: "
                                  f"{folder / 'results'}; device: the launcher's)")
            words = _option_words(reading, option, value, f"{where} {key}", needs)
            if option.type == "flag":
                argv += [option.flag] if words else []
            elif option.repeat:
                for word in words:
                    argv += [option.flag, word]
            else:
                argv += [option.flag, *words]
        missing = [o.key for o in spec.options if o.required and not o.decided and o.key not in table]
        if missing:
            raise ConfigError(f"{where}: a {kind} analysis needs {', '.join(missing)}")
        argv += ["--results", str(folder / "results")] if kind == "probe" else ["--out", str(folder)]
        reading.add_step(Step(f"analysis/{name}", "analysis", tuple(argv), tuple(dict.fromkeys(needs)), where,
                              done_file=folder / spec.done_file if spec.done_file else None,
                              done_dir=folder / "results" if done_patterns else None, done_patterns=done_patterns,
                              analysis=kind))
        if kind == "probe" and "paper" in table:  # the paper's score for this probe (Table 3/6), shown beside it
            study.paper_scores[name] = finite_number(table["paper"], f"{where} paper", minimum=0, maximum=100)


def _option_words(reading: _Reading, option: Option, value: Any, where: str, needs: list[str]) -> list[str]:
    """The command-line words of one [[analysis]] option, checked against its declaration: its type, how many
    values, its choices; study outputs (run:..., analysis:...) resolved to their folders and added to `needs`."""
    if option.type == "flag":
        if not isinstance(value, bool):
            raise ConfigError(f"{where} = {value!r}: give true or false")
        return ["yes"] if value else []
    many = option.nargs is not None or option.repeat
    values = value if isinstance(value, list) and many else [value]
    if isinstance(value, list) and not many:
        raise ConfigError(f"{where} = {value!r}: give one value, not a list")
    if option.nargs == 2 and len(values) != 2 or not values:
        raise ConfigError(f"{where} = {value!r}: give " + ("two values" if option.nargs == 2 else "one value or more"))
    words = []
    for v in values:
        if option.type == "int" and (not isinstance(v, int) or isinstance(v, bool)):
            raise ConfigError(f"{where} = {v!r}: give a whole number")
        if option.type == "float":
            v = finite_number(v, where)
        if option.type == "text":
            if isinstance(v, bool) or not isinstance(v, str | int):
                raise ConfigError(f"{where} = {v!r}: give text")
            v = check_text(str(v), where, 1000)
        if option.choices and v not in option.choices:
            raise ConfigError(f"{where} = {v!r}: give one of {', '.join(option.choices)}")
        words.append(_resolve_word(reading, option, v, where, needs))
    return words


def _resolve_word(reading: _Reading, option: Option, value: Any, where: str, needs: list[str]) -> str:
    study, base = reading.study, reading.base
    if not isinstance(value, str):
        return str(value)
    if value.startswith("analysis:"):  # another analysis' output folder (needle data, a transplant)
        other = value.split(":", 1)[1]
        earlier = reading.step_ids.get(f"analysis/{other}")
        if earlier is None:
            raise ConfigError(f"{where} = {value!r} names no earlier [[analysis]]")
        if option.role == "model" and earlier.analysis != "transplant":
            raise ConfigError(f"{where} = {value!r} is a {earlier.analysis} analysis; only a transplant's folder is "
                              "a model (kind = \"transplant\")")
        needs.append(f"analysis/{other}")
        return str(study.out / "analyses" / other)
    ref = parse_ref(value, where)
    if ref is not None:
        if option.role not in ("model", "run"):
            raise ConfigError(f"{where} = {value!r}: a checkpoint is no {option.key}; run references go to the "
                              "options that take a model")
        check_ref(ref, study.pretrain, where)
        needs.append(f"pretrain/{ref.run}")
        # cka-trajectory's --run reads the whole run folder
        return str(study.runs / ref.run) if option.role == "run" else str(ref_path(study, ref))
    if option.role == "path":
        return str(_folder(base, value, where))
    if option.role in ("model", "texts") and not Path(value).is_absolute() and (base / value).exists():
        return str((base / value).resolve())
    return value


def _load_compares(reading: _Reading) -> None:
    """[[compare]]: read by the report; both models must be evaluated by the study."""
    path, study = reading.path, reading.study
    names: set[str] = set()
    for n, table in enumerate(_tables(reading.raw, "compare", path), 1):
        where = f"{path} [[compare]] #{n}"
        unknown = sorted(set(table) - COMPARE_KEYS)
        if unknown:
            close = difflib.get_close_matches(unknown[0], sorted(COMPARE_KEYS), n=1)
            raise ConfigError(f"{where}: unknown key(s) {', '.join(display_text(k, 60) for k in unknown[:10])}"
                              + (f" (did you mean {close[0]!r}?)" if close else "")
                              + f"; allowed: {', '.join(sorted(COMPARE_KEYS))}")
        for side in ("a", "b"):
            model = table.get(side)
            if not isinstance(model, str):
                raise ConfigError(f"{where}: needs {side} = \"run:NAME/final\" (or a model an [[eval]] evaluates)")
            if (ref := parse_ref(model, f"{where} {side}")) is not None:
                check_ref(ref, study.pretrain, f"{where} {side}")
            if model not in reading.evaluated:
                raise ConfigError(f"{where}: {side} = {model!r} is evaluated by no [[eval]] table of the study")
        name = _name(table, where, f"{_short(table['a'])}-vs-{_short(table['b'])}")
        if name in names:
            raise ConfigError(f"{where}: a comparison named {name!r} exists already; give it another name")
        names.add(name)
        correction = table.get("correction", "holm")
        if correction not in CORRECTIONS:
            raise ConfigError(f"{where}: correction = {correction!r}; give one of {', '.join(CORRECTIONS)}")
        compare_tasks, lang = table.get("tasks"), table.get("lang")
        if compare_tasks is not None and (not isinstance(compare_tasks, list) or
                                          not all(isinstance(t, str) for t in compare_tasks)):
            raise ConfigError(f"{where}: tasks must be a list of task ids")
        if lang is not None and lang not in ("fr", "en"):
            raise ConfigError(f"{where}: lang must be \"fr\" or \"en\"")
        n_boot = table.get("n_boot", 1000)
        if not isinstance(n_boot, int) or isinstance(n_boot, bool) or not 1 <= n_boot <= 100_000:
            raise ConfigError(f"{where}: n_boot = {n_boot!r}: give 1 to 100000 bootstrap replicates")
        for side in ("paper_a", "paper_b"):
            if table.get(side) is not None:
                _check_paper_row(table[side], f"{where} {side}")
            if table.get(side) is not None and table.get(f"{side}_average") is not None:
                raise ConfigError(f"{where}: {side} names a paper row, which has its own average; drop "
                                  f"{side}_average")
        averages = {side: finite_number(table[f"{side}_average"], f"{where} {side}_average", minimum=0, maximum=100)
                    if table.get(f"{side}_average") is not None else None for side in ("paper_a", "paper_b")}
        paper_source = check_text(table.get("paper_source", ""), f"{where} paper_source")
        study.compares.append(Compare(name, table["a"], table["b"], tuple(compare_tasks) if compare_tasks else None, lang,
                                      correction, n_boot, table.get("paper_a"), table.get("paper_b"),
                                      bool(table.get("allow_different_protocols", False)), where,
                                      averages["paper_a"], averages["paper_b"], paper_source))


def _probe_patterns(table: dict[str, Any], where: str) -> tuple[str, ...]:
    """A probe's result files, as globs under its results folder (`<model slug>--probe-.../<task>/seed-<n>.json`:
    the slug is the model's, known once it is loaded), one per seed of the table (`analyze probe`'s default)."""
    task = table.get("task")
    if not isinstance(task, str) or not NAME.fullmatch(task):
        raise ConfigError(f"{where}: a probe needs task = \"TASK\" (a classification, relation or multilabel "
                          "task id, e.g. diamed)")
    seeds = table.get("seeds", PROBE_SEEDS)
    if isinstance(seeds, bool) or not isinstance(seeds, str | int):
        raise ConfigError(f"{where}: seeds = {seeds!r}: give seeds as \"42-44\" or \"42,43\"")
    return tuple(f"*/{task}/seed-{seed}.json" for seed in parse_seeds(str(seeds), f"{where}: seeds"))


def _short(model: str) -> str:
    ref = parse_ref(model, "")
    text = ref.run if ref and ref.checkpoint == "final" else (f"{ref.run}-{ref.checkpoint}" if ref else Path(model).name)
    return re.sub(r"[^A-Za-z0-9._-]+", "-", text)[:60] or "model"


def _grid_tasks(grid: Any) -> list[str]:
    if grid.tasks:
        return list(grid.tasks)
    return [spec.id for spec in grid_specs(grid)]


def _refuse_cycles(needs: dict[str, list[str]], path: Path) -> None:
    """One line naming the loop when pretraining runs start from each other's checkpoints in a circle."""
    state: dict[str, int] = {}

    def visit(name: str, trail: list[str]) -> None:
        if state.get(name) == 2:
            return
        if state.get(name) == 1:
            loop = trail[trail.index(name):] + [name]
            raise ConfigError(f"{path}: the [[pretrain]] runs form a cycle ({' -> '.join(loop)}): each starts from "
                              "the next one's checkpoint; start one of them from a model that exists")
        state[name] = 1
        for other in needs.get(name, []):
            visit(other, [*trail, name])
        state[name] = 2

    for name in needs:
        visit(name, [])


def paper_models() -> list[str]:
    """The model rows of the paper's Tables 1-2 (bench/standings/reference), as a [[compare]]'s paper_a/b names them."""
    return list(dict.fromkeys(row.model for row in load_reference()))


def _check_paper_row(model: Any, where: str) -> None:
    known = paper_models()
    if model not in known:
        raise ConfigError(f"{where}: {model!r} is not a model row of the paper's tables; rows: {', '.join(known)}")


def _finish_pretrain_argv(study: Study) -> None:
    """Each pretraining step's command line: `biobench pretrain --config <its settings> --no-progress`, the
    settings file written when the study runs (pretrain_settings)."""
    for i, step in enumerate(study.steps):
        if step.kind == "pretrain":
            name = step.id.split("/", 1)[1]
            config = study.out / ".study" / "pretrain" / f"{name}.toml"
            study.steps[i] = replace(step, argv=("pretrain", "--config", str(config), "--no-progress"),
                                     grid_file=config)


def pretrain_settings_text(study: Study, name: str) -> str:
    """The [[pretrain]] table `name` as a `biobench pretrain --config` file: run references resolved to their
    folders, out set to the study's run folder (JSON's strings, numbers, booleans and arrays are TOML's)."""
    import json

    settings = dict(study.pretrain[name])
    if (ref := parse_ref(settings["model"], "")) is not None:
        settings["model"] = str(ref_path(study, ref))
    settings["out"] = str(study.runs / name)
    lines = [f"# written by biobench study from {study.path} [[pretrain]] {name!r}"]
    for key, value in settings.items():
        value = str(value) if isinstance(value, Path) else list(value) if isinstance(value, tuple) else value
        lines.append(f"{key} = {json.dumps(value, ensure_ascii=False)}")
    return "\n".join(lines) + "\n"


def generated_corpus_path(out: Path, name: str) -> Path:
    return out / "corpus" / ("demo_corpus.txt" if name == "demo-fr" else f"{name}.txt")


def write_generated_corpus(path: Path, name: str) -> None:
    """A `generated:NAME` corpus, written once (documents separated by a blank line, as `pretrain` reads a .txt)."""

    if path.exists():
        return
    documents, seed = GENERATED[name]
    path.parent.mkdir(parents=True, exist_ok=True)
    docs = demo_corpus(documents, seed=seed)
    atomic_write(path, "\n\n".join(d.replace("\n\n", "\n") for d in docs) + "\n")


def write_step_files(study: Study) -> None:
    """The files the steps' command lines name: each pretraining's settings and each eval step's one-model grid
    (paths absolute, so a SLURM job reads them from anywhere), and the generated corpora they read."""
    for name in GENERATED:
        path = generated_corpus_path(study.out, name)
        if any(str(s.get("corpus")) == str(path) for s in study.pretrain.values()):
            write_generated_corpus(path, name)

    def write(path: Path, text: str) -> None:  # unchanged files keep their time: a rerun that does nothing writes nothing
        if not path.is_file() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write(path, text)

    grids = iter(study.grids)
    for step in study.steps:
        if step.kind == "pretrain" and step.grid_file is not None:
            write(step.grid_file, pretrain_settings_text(study, step.id.split("/", 1)[1]))
        elif step.kind == "eval" and step.grid_file is not None:
            write(step.grid_file, resolved_grid_file([next(grids)]))


def order(study: Study) -> list[Step]:
    """The steps with every step after those it needs (the file's order otherwise): by level, a step's level
    one more than the highest of its needs' (the steps ready together form a level), stable within a level.
    Linear in the steps and their needs."""
    known = {s.id: s for s in study.steps}
    level: dict[str, int] = {}
    for start in study.steps:
        stack: list[tuple[Step, bool]] = [(start, False)]
        visiting: set[str] = set()
        while stack:
            step, expanded = stack.pop()
            if step.id in level:
                continue
            if expanded:
                visiting.discard(step.id)
                level[step.id] = 1 + max((level[n] for n in step.needs if n in known), default=-1)
                continue
            if step.id in visiting:  # load_study refuses cycles; an analysis needing a later analysis is one
                raise ConfigError(f"{study.path}: steps {', '.join(sorted(visiting))} wait on each other")
            visiting.add(step.id)
            stack.append((step, True))
            stack.extend((known[n], False) for n in step.needs if n in known and n not in level)
    return sorted(study.steps, key=lambda s: level[s.id])
