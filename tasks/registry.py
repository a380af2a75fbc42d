"""Task registry: every task is declarative data (a JSON/TOML spec), never a class.

Built-in specs live in `tasks/specs/*.json` (the paper's 19 tasks, plus extras such as `cantemist-es` and the
generated demo tasks). Users add their own with `--task-file SPEC`: the same fields, with local paths
relative to the spec file. A `TaskCatalogue` holds both, read once, and is what commands pass down;
`get_spec` / `list_specs` look up the built-ins alone.
"""

from __future__ import annotations

import argparse
import difflib
import json
import tomllib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json, parse_toml, read_bytes
from biobench.tasks.options import check_fetch, check_keys, check_source
from biobench.tasks.schema import PROTOCOL_NAMES, TASK_KINDS, ProtocolName, TaskKind

# The paper's 19 tasks in paper order. The same list is `"paper_task": true` in specs/*.json and the task
# column of bench/standings/reference/paper_results.csv: tests/tasks/test_registry.py checks the three agree.
PAPER_TASKS: tuple[str, ...] = (
    "diamed", "meddialog-fr", "fracco-30", "fracco-100", "cantemist", "distemist", "quaero-emea",
    "quaero-medline", "chemprot", "phenotyping", "cos", "social-history", "deid", "anatem", "bc5cdr",
    "jnlpba", "ncbi-disease", "gad", "hoc",
)
SOURCE_TYPES = ("local", "hub", "generated")
SPLITS = ("train", "dev", "test")


@dataclass(frozen=True)
class Source:
    """One place a task's data can come from, in the spec's order of preference.

    - local: `splits` maps train/dev/test to a path (or list of paths, concatenated) relative to the data
      dir (built-in specs) or to the spec file (`--task-file`); `format` names a reader; `options` are the
      reader's and loader's knobs (column names, IOB scheme, split file, top-k label filter...).
    - hub: `dataset` + `revision` (must hold parquet, e.g. `refs/convert/parquet`: datasets>=4 runs no
      loading scripts), optional `config`; `splits` maps our split names to the hub's; `options.columns`
      maps our fields to the hub's columns.
    - generated: `generator` names a function in biobench.tasks.synthetic (no data needed).
    """

    type: str
    format: str = ""
    splits: Mapping[str, Any] = field(default_factory=dict)
    options: Mapping[str, Any] = field(default_factory=dict)
    dataset: str | None = None
    revision: str | None = None
    config: str | None = None
    generator: str | None = None
    version: str = ""  # which release of the data this source holds (recorded in results), e.g. "blue-reconstructed"

    def describe(self) -> str:
        if self.type == "hub":
            rev = f"@{self.revision}" if self.revision else ""
            return f"hub:{self.dataset}{rev}" + (f" ({self.config})" if self.config else "")
        if self.type == "generated":
            return f"generated:{self.generator}"
        return f"local:{self.format}"


@dataclass(frozen=True)
class TaskSpec:
    """A task as data: what it is, how it is scored, where its examples come from."""

    id: str
    lang: str
    kind: TaskKind
    max_length: int
    protocol: ProtocolName
    sources: tuple[Source, ...]
    seeds: tuple[int, ...] = ()  # the spec's own seeds; () = its protocol's (biobench.protocols.task_seeds)
    metric: str = "macro_f1"  # headline test metric (biobench.metrics.METRICS)
    dev_metric: str | None = None  # checkpoint selection on dev; None = the protocol's (docs/PROTOCOL.md)
    head: str | None = None  # biobench.heads.HEAD_SPECS entry; None = the protocol's
    labels: tuple[str, ...] | None = None
    citation: str = ""
    license: str = ""
    credentialed: bool = False
    access: str = ""
    paper_task: bool = False
    description: str = ""
    extra_metrics: tuple[str, ...] = ()  # named extra metrics (biobench.metrics.EXTRA_METRICS) stored in results
    fetch: Mapping[str, Any] | None = None  # where `biobench data fetch/add` gets the data (tasks/fetch.py)
    base_dir: str | None = None  # set for --task-file specs: local paths are relative to it
    origin: str = ""  # the spec file, for error messages

    def to_dict(self) -> dict[str, Any]:
        return _jsonable(asdict(self))


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


_FIELDS = {f for f in TaskSpec.__dataclass_fields__}
_SOURCE_FIELDS = {f for f in Source.__dataclass_fields__}


def spec_from_dict(data: Mapping[str, Any], origin: str, base_dir: str | None = None) -> TaskSpec:
    """Validate a raw spec mapping (from JSON/TOML) and build a TaskSpec; errors name `origin`."""
    check_keys(data, _FIELDS, origin, "spec field")
    for key in ("id", "lang", "kind", "max_length", "protocol", "sources"):
        if key not in data:
            raise ConfigError(f"{origin}: missing required field '{key}'")
    if data["kind"] not in TASK_KINDS:
        raise ConfigError(f"{origin}: kind '{data['kind']}' is not one of {', '.join(TASK_KINDS)}")
    if data["protocol"] not in PROTOCOL_NAMES:
        raise ConfigError(f"{origin}: protocol '{data['protocol']}' must be 'fr' or 'en'")
    sources = []
    for i, raw in enumerate(data["sources"]):
        check_keys(raw, _SOURCE_FIELDS, f"{origin}: source #{i + 1}")  # a typo ('formt') names the key it meant
        if raw.get("type") not in SOURCE_TYPES:
            raise ConfigError(f"{origin}: source #{i + 1}: type {str(raw.get('type'))[:40]!r} is not one of "
                              f"{', '.join(SOURCE_TYPES)}")
        check_source(raw, i + 1, origin)
        sources.append(Source(**raw))
    if not sources:
        raise ConfigError(f"{origin}: 'sources' is empty; give at least one local, hub or generated source")
    if data.get("fetch"):
        check_fetch(data["fetch"], origin)
    fields = dict(data)
    fields["sources"] = tuple(sources)
    fields["seeds"] = tuple(data.get("seeds") or ())
    fields["labels"] = tuple(data["labels"]) if data.get("labels") else None
    fields["max_length"] = int(data["max_length"])
    fields["extra_metrics"] = tuple(data.get("extra_metrics") or ())
    if base_dir is not None:
        fields["base_dir"] = base_dir
    fields["origin"] = origin
    return TaskSpec(**fields)


def read_spec_file(path: str | Path) -> TaskSpec:
    """A user's task spec (.json or .toml); local paths in it are relative to the file."""
    path = Path(path)
    if not path.exists():
        raise ConfigError(f"task file {path} does not exist (pass --task-file PATH to a .json or .toml spec)")

    try:  # bounded, regular files only: a FIFO or /dev/zero as --task-file is refused, never read forever
        raw = read_bytes(path, 4 * 2**20)
        data = parse_toml(raw, path) if path.suffix == ".toml" else parse_json(raw, path)
    except UnsafeJSONError as err:
        raise ConfigError(f"task file {path}: {err.reason}") from None
    except UnicodeDecodeError as err:
        raise ConfigError(f"task file {path} is not UTF-8 text ({err.reason})") from None
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as err:
        raise ConfigError(f"task file {path} is not valid {path.suffix.lstrip('.') or 'JSON'}: {err}") from err
    if isinstance(data, Mapping) and "extends" in data:  # a variant of a built-in task
        data = resolve_extends(data, {task_id: raw for task_id, (_, raw) in _builtin_raw().items()}, str(path))
    return spec_from_dict(data, str(path), base_dir=str(path.resolve().parent))


# `extends`: a variant spec states only what differs from the spec it names. These are the places where the
# variant's mapping is merged key by key into the parent's; anywhere else a value the variant gives replaces
# the parent's whole (a split entry, a label list, fetch's `sets`: their keys are data, not fields, so merging
# them would mix the parent's data into the variant's). "*" is each source, by position.
MERGED_MAPPINGS: tuple[tuple[str, ...], ...] = (
    (), ("sources", "*"), ("sources", "*", "options"), ("sources", "*", "options", "random_split"), ("fetch",),
)


def _merge(parent: Any, child: Any, where: tuple[str, ...], origin: str) -> Any:
    if where in MERGED_MAPPINGS and isinstance(parent, Mapping) and isinstance(child, Mapping):
        return {**parent, **{k: _merge(parent.get(k), v, (*where, k), origin) if k in parent else v
                             for k, v in child.items()}}
    if where == ("sources",) and isinstance(parent, list) and isinstance(child, list):
        if len(child) != len(parent):
            raise ConfigError(f"{origin}: 'sources' of a spec that extends another merges source by source, so it "
                              f"needs as many entries as the parent's ({len(parent)}; give {{}} to keep one as it is)")
        return [_merge(p, c, ("sources", "*"), origin) for p, c in zip(parent, child, strict=True)]
    return child


def resolve_extends(data: Mapping[str, Any], parents: Mapping[str, Mapping[str, Any]], origin: str,
                    seen: tuple[str, ...] = ()) -> dict[str, Any]:
    """The whole spec of a variant: `extends` names the spec (by id, in `parents`) whose fields it starts from;
    the variant's own fields are merged in (MERGED_MAPPINGS) and its `id` is required. Chains are followed;
    a circle or an unknown parent is one error naming the file."""
    if "extends" not in data:
        return dict(data)
    name = data["extends"]
    if not isinstance(name, str) or name not in parents:
        close = difflib.get_close_matches(str(name), list(parents), n=1, cutoff=0.6)
        hint = f" (did you mean '{close[0]}'?)" if close else ""
        raise ConfigError(f"{origin}: 'extends' names no known task spec: {name!r}{hint}")
    if "id" not in data:
        raise ConfigError(f"{origin}: a spec that extends '{name}' still needs its own 'id'")
    chain = (*seen, str(data["id"]))
    if name in chain:
        raise ConfigError(f"{origin}: 'extends' goes round in a circle: {' -> '.join([*chain, name])}")
    parent = resolve_extends(parents[name], parents, origin, chain)
    child = {k: v for k, v in data.items() if k != "extends"}
    return _merge(parent, child, (), origin)


@cache
def _builtin_raw() -> dict[str, tuple[str, dict[str, Any]]]:
    """Each built-in spec as written: id -> (origin, the file's mapping)."""
    raw = {}
    for entry in sorted(resources.files("biobench.tasks").joinpath("specs").iterdir(), key=lambda p: p.name):
        if entry.name.endswith(".json"):
            data = json.loads(entry.read_text(encoding="utf-8"))
            raw[str(data.get("id", entry.name))] = (f"tasks/specs/{entry.name}", data)
    return raw


@cache
def _builtin() -> dict[str, TaskSpec]:
    parents = {task_id: data for task_id, (_, data) in _builtin_raw().items()}
    return {task_id: spec_from_dict(resolve_extends(data, parents, origin), origin)
            for task_id, (origin, data) in _builtin_raw().items()}


def _check_unknown(task_id: str, specs: Mapping[str, TaskSpec]) -> ConfigError:
    """The error for an id no spec has: the closest id when it looks like a typo, else every id."""
    close = difflib.get_close_matches(task_id.lower(), list(specs), n=1, cutoff=0.75)  # a typo, not any id
    if close:
        return ConfigError(f"unknown task '{task_id}': did you mean '{close[0]}'? `biobench tasks --all` lists "
                           "the task ids")
    ids = [t for t in PAPER_TASKS if t in specs] + [t for t in specs if t not in PAPER_TASKS]
    return ConfigError(f"unknown task '{task_id}'; the task ids are: {', '.join(ids)} (`biobench tasks --all` "
                       "shows where their data is)")


@dataclass(frozen=True)
class TaskCatalogue:
    """Every task a command can name: the built-in specs plus the user's task files, each file read and
    validated once when the catalogue is built (`TaskCatalogue.build`), so a lookup is a dict lookup. A command
    (or an API call) builds one from its --task-file options and passes it down to what selects tasks; a grid's
    own task files extend it (`extended`). Tests give one built from specs in memory (`of`) instead of patching
    the registry."""

    specs: Mapping[str, TaskSpec]  # id -> spec: the built-ins, then the user's in the order given
    files: tuple[Path, ...] = ()  # the user's task files it was built from (a SLURM array's grid file names them)

    @classmethod
    def build(cls, task_files: Sequence[str | Path] = ()) -> TaskCatalogue:
        """The built-in specs plus those of `task_files` (each read and checked now; one ConfigError naming the
        file otherwise)."""
        return builtin_catalogue().extended(task_files)

    @classmethod
    def of(cls, *specs: TaskSpec) -> TaskCatalogue:
        """The built-ins plus `specs` as given (no file read): the seam tests use to add tasks."""
        return cls({**_builtin(), **{spec.id: spec for spec in specs}})

    def extended(self, task_files: Sequence[str | Path], first: bool = False) -> TaskCatalogue:
        """This catalogue plus the specs of `task_files` not already in it (a file the catalogue was built from
        is not read again). `first`: the tasks of `task_files` are listed before the user's other tasks (a grid's
        own task files before the command line's, as if given first); a task id given twice keeps the spec of the
        file given last."""
        paths = list(dict.fromkeys(Path(f) for f in task_files))
        if not first and all(path in self.files for path in paths):
            return self
        builtin = {k: v for k, v in self.specs.items() if k in _builtin()}
        mine = {k: v for k, v in self.specs.items() if k not in builtin}
        front: dict[str, TaskSpec] = {}
        for path in paths:
            if path in self.files:  # held already: its tasks move to the front, nothing is read
                front.update((k, v) for k, v in mine.items() if v.origin == str(path))
                continue
            spec = read_spec_file(path)
            if spec.id in _builtin():
                raise ConfigError(f"{path}: task id '{spec.id}' is a built-in task; give your task another id")
            front[spec.id] = spec
        new = tuple(path for path in paths if path not in self.files)
        if first:
            return TaskCatalogue({**builtin, **front, **mine}, (*new, *self.files))
        return TaskCatalogue({**builtin, **mine, **front}, (*self.files, *new))

    def get(self, task_id: str) -> TaskSpec:
        """The spec for `task_id`; an unknown id suggests the closest one."""
        spec = self.specs.get(task_id)
        if spec is None:
            raise _check_unknown(task_id, self.specs)
        return spec

    def tasks(self, lang: str | None = None, include_extra: bool = False) -> list[TaskSpec]:
        """Paper tasks in paper order, then (with include_extra) the extra built-ins, then the user's tasks."""
        builtin = _builtin()
        specs = [self.specs[t] for t in PAPER_TASKS]  # this catalogue's (`of` may stand in for a built-in)
        if include_extra:
            specs += [self.specs[t] for t, s in builtin.items() if not s.paper_task]
        specs += self.own()
        return [s for s in specs if lang is None or s.lang == lang]

    def own(self, lang: str | None = None) -> list[TaskSpec]:
        """The user's tasks only (those not built in), in the order their files were given."""
        builtin = _builtin()
        return [s for s in self.specs.values() if s.id not in builtin and (lang is None or s.lang == lang)]


@cache
def builtin_catalogue() -> TaskCatalogue:
    """The built-in specs alone (read once per process: they ship with the package)."""
    return TaskCatalogue(dict(_builtin()))


def get_spec(task_id: str) -> TaskSpec:
    """The built-in spec for `task_id`; unknown ids suggest the closest one (a user's tasks: TaskCatalogue)."""
    return builtin_catalogue().get(task_id)


def list_specs(lang: str | None = None, include_extra: bool = False) -> list[TaskSpec]:
    """The built-in specs: paper tasks in paper order, then (with include_extra) the extra ones."""
    return builtin_catalogue().tasks(lang, include_extra)


def add_task_arguments(parser: argparse.ArgumentParser) -> None:
    """--data-dir and --task-file, shared by `biobench tasks` and `biobench eval`."""
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        default=None,
        help="folder holding task data in the documented layout (default: $BIOBENCH_DATA)",
    )
    parser.add_argument(
        "--task-file",
        metavar="SPEC",
        action="append",
        default=[],
        help="your own task spec (.json/.toml, same fields as the built-in specs); repeatable",
    )
