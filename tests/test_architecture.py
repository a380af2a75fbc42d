"""The import rules of docs/ARCHITECTURE.md, checked on the source: every `import` statement, at module level or
inside a function (a lazy import is still a dependency), mapped to the biobench module it names."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
from biobench.runtime.checkout import package_dirs

ROOT = Path(__file__).resolve().parents[1]
# the folder each import name lives in (pyproject's package-dir); biobench.* that is not a subpackage is bench/
PACKAGE_DIRS = package_dirs(ROOT)


def module_name(path: Path) -> str:
    """biobench.x.y for a source file, through the package-dir mapping."""
    rel = path.relative_to(ROOT)
    for package, folder in PACKAGE_DIRS.items():
        if rel.parts[0] == folder:
            parts = [*package.split("."), *rel.with_suffix("").parts[1:]]
            if parts[-1] == "__init__":
                parts.pop()
            return ".".join(parts)
    raise AssertionError(f"{rel} is outside the package folders")


def source_files() -> list[Path]:
    return sorted(p for folder in set(PACKAGE_DIRS.values()) for p in (ROOT / folder).rglob("*.py"))


def imports_of(path: Path, name: str | None = None) -> set[str]:
    """The absolute module names a file imports (relative imports resolved against `name`, by default the
    file's own module name)."""
    name = name or module_name(path)
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names)
    return found


def project_imports(path: Path, name: str | None = None) -> set[str]:
    return {m for m in imports_of(path, name) if m == "biobench" or m.startswith("biobench.")}


def files_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_module_names_follow_the_package_dirs():
    assert module_name(ROOT / "bench/runtime/files.py") == "biobench.runtime.files"
    assert module_name(ROOT / "tasks/readers/__init__.py") == "biobench.tasks.readers"
    assert "biobench.runtime.files.atomic_write" in imports_of(ROOT / "bench/store/result_files.py")


@pytest.mark.parametrize("folder", ["leaderboard", "tasks"])
def test_leaderboard_and_tasks_never_import_training(folder):
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in project_imports(p) if m.startswith("biobench.training"))
                 for p in files_under(folder)}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_the_runtime_layer_imports_no_project_package():
    allowed = {"biobench.errors"}
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in project_imports(p)
                                                  if not m.startswith("biobench.runtime") and m not in allowed
                                                  and not m.startswith("biobench.errors."))
                 for p in files_under("bench/runtime")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_names_do_not_reach_into_the_model_loader():
    assert not {m for m in project_imports(ROOT / "bench/names.py") if m.startswith(("biobench.models", "biobench.eval"))}
    assert "biobench.aliases.ALIASES" in project_imports(ROOT / "bench/names.py")


def test_the_runtime_modules_left_training():
    for name in ("files", "device", "progress", "reporting", "compiling"):
        assert not (ROOT / "training" / f"{name}.py").exists()
        assert (ROOT / "bench/runtime" / f"{name}.py").is_file()


def test_the_checker_sees_lazy_and_relative_imports(tmp_path):
    """The rules above mean something only if a lazy import inside a function and a relative import are seen.
    The probe is read as if it were biobench.leaderboard._probe; nothing is written into the checkout."""
    fake = tmp_path / "_architecture_probe.py"
    fake.write_text("def f():\n    from ..training import trainer\n    import biobench.training.recipes\n")
    found = project_imports(fake, "biobench.leaderboard._architecture_probe")
    assert {"biobench.training", "biobench.training.trainer", "biobench.training.recipes"} <= found


# No import circle: the command line finds its commands through a registry of module names (bench/cli.py's
# COMMANDS), so `biobench demo` importing biobench.cli to run each step is no circle.
ALLOWED_CIRCLES: list[list[str]] = []


def import_graph() -> dict[str, set[str]]:
    """biobench module -> the biobench modules it imports (lazy imports included; `from pkg import name`
    counts as importing pkg, or pkg.name when that is a module)."""
    modules = {module_name(p): p for p in source_files()}

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    return {m: {r for i in project_imports(p) if (r := resolve(i)) and r != m} for m, p in modules.items()}


def circles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found = []
    for root in sorted(graph):
        if root in index:
            continue
        work = [(root, iter(sorted(graph[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1:
                    found.append(sorted(component))
    return sorted(found)


def test_no_import_circle_except_the_named_one():
    assert circles(import_graph()) == ALLOWED_CIRCLES


def test_the_circle_finder_finds_circles():
    assert circles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert circles({"a": {"b"}, "b": set()}) == []


def test_the_results_store_sits_on_the_runtime_layer_without_torch():
    """The leaderboard reads results through biobench.store, so the store imports no torch and nothing above it."""
    allowed = ("biobench.store", "biobench.runtime", "biobench.errors", "biobench.stats")
    for path in files_under("bench/store"):
        assert {m for m in project_imports(path) if not m.startswith(allowed)} == set(), path
        assert not {m for m in imports_of(path) if m.split(".")[0] in ("torch", "transformers")}, path


# docs/ARCHITECTURE.md's table: what each layer may import from the project (a prefix allows its submodules)
LAYERS = {
    "bench/runtime": ("biobench.runtime", "biobench.errors"),
    "tasks": ("biobench.tasks", "biobench.runtime", "biobench.errors"),
    # heads score their dev selection with the one F1 (biobench.metrics: numpy only, no project import)
    "heads": ("biobench.heads", "biobench.tasks", "biobench.metrics", "biobench.runtime", "biobench.errors"),
    # training writes the lineage record the store reads (biobench_pretrain.json): its Freeze is biobench.lineage's
    # ... and states its config's bounds with the one bounds type (biobench.ranges.Bounds)
    "training": ("biobench.training", "biobench.lineage", "biobench.runtime", "biobench.errors", "biobench.ranges"),
    # the evaluation engine: protocols, model loading, the fine-tuning loop, the grid and its parallel runs; it
    # writes results through the store and never imports the board, the service, the commands or the UI
    "bench/eval": ("biobench.eval", "biobench.protocols", "biobench.models", "biobench.tasks", "biobench.heads",
                   "biobench.store", "biobench.stats", "biobench.metrics", "biobench.names", "biobench.aliases",
                   "biobench.ranges", "biobench.runtime", "biobench.errors"),
    "bench/store": ("biobench.store", "biobench.runtime", "biobench.errors", "biobench.stats"),
    # the board model: computations over results folders, below the UI and the service (docs/ARCHITECTURE.md);
    # biobench.models (torch-free) to match a local model folder to its results by its weights' hash; never the
    # evaluation engine
    "bench/standings": ("biobench.standings", "biobench.store", "biobench.stats", "biobench.metrics", "biobench.names",
                        "biobench.aliases", "biobench.lineage", "biobench.models", "biobench.runtime", "biobench.errors"),
    # the service: requests, queue, queue_storage, worker; it resolves protocols and models (torch-free, below the
    # engine), runs `eval` as a command line and publishes through the board model, and never imports the UI
    "bench/service": ("biobench.service", "biobench.standings", "biobench.store", "biobench.protocols",
                      "biobench.ranges", "biobench.models", "biobench.names", "biobench.aliases", "biobench.tasks",
                      "biobench.runtime", "biobench.errors"),
    # the Python API: what the commands call (evaluation, results, comparison, pretraining, contamination); above
    # the engine, the board model and training, below the commands; never the UI, the service or the commands
    "bench/api": ("biobench.api", "biobench.analysis", "biobench.eval", "biobench.protocols", "biobench.models",
                  "biobench.lineage", "biobench.tasks", "biobench.standings", "biobench.store",
                  "biobench.training", "biobench.stats", "biobench.metrics", "biobench.names", "biobench.aliases",
                  "biobench.ranges", "biobench.runtime", "biobench.errors"),
    "leaderboard": ("biobench.leaderboard", "biobench.standings", "biobench.store", "biobench.stats", "biobench.names",
                    "biobench.aliases", "biobench.lineage", "biobench.runtime", "biobench.errors",
                    # the Submit tab and its Queue view: the request queue, not the worker that runs evaluations
                    "biobench.service.queue", "biobench.service.queue_storage", "biobench.service.submission"),
}


@pytest.mark.parametrize("folder", LAYERS)
def test_each_layer_imports_only_what_the_architecture_page_allows(folder):
    allowed = LAYERS[folder]
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in project_imports(p) if m not in ("biobench", "biobench.__version__")
                                                  and not any(m == a or m.startswith(a + ".") for a in allowed))
                 for p in files_under(folder)}
    assert {k: v for k, v in offenders.items() if v} == {}


LIBRARY_FOLDERS = ["bench/runtime", "bench/store", "bench/standings", "bench/service", "bench/analysis", "bench/eval", "bench/api",
                   "tasks", "heads", "training"]


# bench/'s root modules, each with what it may import from the project (a prefix allows its submodules). The
# shared ones sit on the runtime layer beside `errors` (and on one another); the fine-tuning protocol and a
# model's identity sit above tasks, heads and the store and below the engine, the board and the service, which
# all read them: torch-free, so the board and the service never import the engine (docs/ARCHITECTURE.md).
SHARED_ROOT = ("biobench.errors", "biobench.metrics", "biobench.stats", "biobench.names", "biobench.aliases",
               "biobench.ranges", "biobench.lineage", "biobench.runtime")
ROOT_MODULES = {
    "__init__": ("biobench.errors",),  # the API through import_module on first use (PEP 562)
    **{name: SHARED_ROOT for name in ("errors", "metrics", "stats", "names", "aliases", "ranges", "lineage")},
    "protocols": (*SHARED_ROOT, "biobench.tasks", "biobench.heads"),
    "models": (*SHARED_ROOT, "biobench.tasks", "biobench.store"),
    "cli": ("biobench",),  # the command line: everything
}


def test_the_package_root_keeps_only_what_every_layer_shares():
    """bench/ itself holds the shared pieces, the protocol, model identity and the command line; the evaluation
    engine lives in bench/eval/."""
    assert {p.stem for p in (ROOT / "bench").glob("*.py")} == set(ROOT_MODULES)


@pytest.mark.parametrize("name", sorted(ROOT_MODULES))
def test_each_root_module_imports_only_what_the_architecture_page_allows(name):
    allowed = ROOT_MODULES[name]
    imported = project_imports(ROOT / "bench" / f"{name}.py")
    assert sorted(m for m in imported if m not in ("biobench", "biobench.__version__")
                  and not any(m == a or m.startswith(a + ".") for a in allowed)) == []


def test_the_root_module_check_sees_a_forbidden_import(tmp_path):
    """names.py once imported the store at import time (its lineage record): the check above would now say so."""
    probe = tmp_path / "names.py"
    probe.write_text("from biobench.store.lineage import Lineage\n")
    imported = project_imports(probe, "biobench.names")
    assert [m for m in imported if not any(m == a or m.startswith(a + ".") for a in ROOT_MODULES["names"])]


def test_the_board_and_the_service_never_import_the_engine():
    for folder in ("bench/standings", "bench/service"):
        for path in files_under(folder):
            assert not {m for m in project_imports(path) if m.startswith("biobench.eval")}, path


def job_name_strings(path: Path) -> list[str]:
    """String constants of a file shaped like a "biobench.module:function" job name: a dependency the import
    checker cannot see."""
    return [node.value for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
            if isinstance(node, ast.Constant) and isinstance(node.value, str)
            and re.fullmatch(r"biobench(\.\w+)+:\w+", node.value)]


def test_board_workers_are_given_functions_not_names():
    """The board's worker jobs (standings/process_pool.py) name their function by reference, so the import
    checker sees the dependency; a "module:function" string in the source would hide it."""
    from biobench.standings import cache, process_pool, scan

    assert {str(p.relative_to(ROOT)): found for p in source_files() if (found := job_name_strings(p))} == {}
    assert process_pool.job_name(cache._compute) == "biobench.standings.cache:_compute"
    assert process_pool.job_name(scan.read_rows) == "biobench.standings.scan:read_rows"
    for bad in (lambda: None, len, "biobench.standings.scan:read_rows"):
        with pytest.raises((ValueError, AttributeError)):
            process_pool.job_name(bad)


@pytest.mark.parametrize("folder", LIBRARY_FOLDERS)
def test_no_library_package_imports_the_ui(folder):
    """Data flows down: the leaderboard (the UI) imports the library, never the other way round. Only the
    commands (which launch the app and write Spaces) and the perf scripts (which time the app) import it."""
    offenders = {str(p.relative_to(ROOT)): sorted(m for m in project_imports(p) if m.startswith("biobench.leaderboard"))
                 for p in files_under(folder)}
    assert {k: v for k, v in offenders.items() if v} == {}
    top_level = [p for p in (ROOT / "bench").glob("*.py") if p.name not in ("cli.py",)]
    assert not {str(p.name) for p in top_level if any(m.startswith("biobench.leaderboard") for m in project_imports(p))}


def test_the_board_model_and_the_service_import_no_torch():
    for folder in ("bench/standings", "bench/service", "leaderboard"):
        for path in files_under(folder):
            assert not {m for m in imports_of(path) if m.split(".")[0] in ("torch", "transformers")}, path


def test_no_two_public_classes_share_a_name():
    """Names that explain themselves (docs/ARCHITECTURE.md, Names): two `Problem`s, two `Lease`s and two `Scan`s
    once meant different things in different packages; a public class name now means one thing."""
    homes: dict[str, list[str]] = {}
    for path in source_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            if isinstance(node, ast.ClassDef) and not node.name.startswith("_"):
                homes.setdefault(node.name, []).append(module_name(path))
    assert {name: where for name, where in homes.items() if len(where) > 1} == {}


# Module-level names that once meant several things (issue 61 part 4) and the one module each now lives in:
# the hub id pattern was three different regular expressions; SETTINGS was also a queue's file name (now
# SETTINGS_FILE) and the comparison's own list of settings (now the protocol record's fields, issue 57).
ONE_HOME = {"HUB_ID": ["biobench.runtime.paths"], "SETTINGS": ["biobench.protocols"]}


def test_a_name_that_meant_several_things_has_one_home():
    homes: dict[str, list[str]] = {name: [] for name in ONE_HOME}
    for path in source_files():
        for node in ast.parse(path.read_text(encoding="utf-8")).body:
            targets = (node.targets if isinstance(node, ast.Assign) else [node.target]
                       if isinstance(node, ast.AnnAssign) else [])
            homes.update({t.id: [*homes[t.id], module_name(path)] for t in targets
                          if isinstance(t, ast.Name) and t.id in ONE_HOME})
    assert homes == ONE_HOME


def test_no_module_is_named_like_its_package():
    """`board/board.py` read as the package itself; a module says what it does inside its package."""
    assert [str(p.relative_to(ROOT)) for p in source_files() if p.stem == p.parent.name] == []


# The libraries worth hiding an import for (issue 61): what a command's start would otherwise load for nothing.
HEAVY = ("torch", "transformers", "gradio", "pandas")
LAZY_REASON = re.compile(r"# lazy: loads ((?:{0})(?:, (?:{0}))*)$".format("|".join(HEAVY)))


@dataclass(frozen=True)
class LazyImport:
    file: str
    line: int
    modules: tuple[str, ...]  # the biobench modules it imports
    reason: str | None  # the `# lazy: ...` comment on the line above or beside it, None without one
    claims: tuple[str, ...]  # the heavy libraries the reason says the modules load; () when it says none


def lazy_project_imports(path: Path, name: str | None = None) -> list[LazyImport]:
    """The project imports inside functions of a file, each with its reason. Issue 61: an import stays inside a
    function only when the module it imports loads torch, transformers, gradio or pandas, and says which
    (`# lazy: loads torch`); everything else goes to the top of its module. `name`: the file's module name
    (default: from its place in the checkout)."""
    name = name or module_name(path)
    modules = {module_name(p) for p in source_files()}
    package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
    lines = path.read_text(encoding="utf-8").splitlines()
    label = str(path.relative_to(ROOT)) if path.is_relative_to(ROOT) else path.name
    found: dict[int, LazyImport] = {}
    for fn in ast.walk(ast.parse("\n".join(lines))):
        if not isinstance(fn, ast.FunctionDef | ast.AsyncFunctionDef):
            continue
        for node in ast.walk(fn):
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*anchor, base] if base else anchor)
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            if not all(t == "biobench" or t.startswith("biobench.") for t in targets):
                continue
            above, beside = lines[node.lineno - 2].strip(), lines[node.lineno - 1]
            reason = above if above.startswith("# lazy") else ("# lazy" + beside.split("# lazy", 1)[1]
                                                               if "# lazy" in beside else None)
            claim = LAZY_REASON.match(reason.strip()) if reason else None
            found[node.lineno] = LazyImport(label, node.lineno, tuple(sorted(set(targets))), reason, tuple(claim.group(1).split(", ")) if claim else ())
    return [found[k] for k in sorted(found)]


def all_lazy_project_imports() -> list[LazyImport]:
    return [lazy for p in source_files() for lazy in lazy_project_imports(p)]


def test_every_lazy_project_import_names_the_heavy_library_it_avoids():
    offenders = [(lazy.file, lazy.line, lazy.reason) for lazy in all_lazy_project_imports() if not lazy.claims]
    assert offenders == [], ("move these imports to the top of their module, or say which of "
                             f"{', '.join(HEAVY)} the module loads (# lazy: loads torch) above them")


def test_imports_inside_functions_stay_few():
    """Issue 61 took them from 207 to 43: an import hidden in a function is a dependency the reader does not see
    at the top, kept only where it spares a command's start a heavy library."""
    assert len(all_lazy_project_imports()) <= 60


def test_the_lazy_reason_check_reads_the_comment(tmp_path):
    """A reason that names no heavy library, or none at all, is refused; a `# noqa` is no reason. The probe is
    read as if it were biobench._lazy_probe; nothing is written into the checkout."""
    probe = tmp_path / "_lazy_probe.py"
    probe.write_text("def f():\n    # lazy: startup time\n    from biobench import stats\n\n\ndef g():\n"
                     "    from biobench import names  # noqa\n\n\ndef h():\n    # lazy: loads torch, pandas\n"
                     "    from biobench.eval import finetune\n")
    found = lazy_project_imports(probe, "biobench._lazy_probe")
    assert [(lazy.line, lazy.modules, lazy.claims) for lazy in found] == [
        (3, ("biobench.stats",), ()), (7, ("biobench.names",), ()),
        (12, ("biobench.eval.finetune",), ("torch", "pandas"))]


# A fresh interpreter imports the modules with a finder that notes each heavy library as its import starts, and
# exits as soon as every claimed one has started: whether a module loads torch is known at torch's first line,
# so no check pays for torch itself (44 full imports took ~50 s of the suite; most now stop within biobench).
CLAIM_PROBE = """
import importlib, importlib.abc, os, sys
heavy, claims, modules = set(sys.argv[1].split()), set(sys.argv[2].split()), sys.argv[3:]
seen = set()

class Watch(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.partition(".")[0] in heavy:
            seen.add(name.partition(".")[0])
            if claims <= seen:
                print(" ".join(sorted(seen)), flush=True)
                os._exit(0)
        return None

sys.meta_path.insert(0, Watch())
for module in modules:
    importlib.import_module(module)
print(" ".join(sorted(seen | (heavy & set(sys.modules)))), flush=True)
"""


def heavy_libraries_loaded_by(modules: tuple[str, ...], claims: tuple[str, ...]) -> set[str]:
    """The heavy libraries a fresh interpreter starts to load while importing `modules` alone: all it loads when
    it loads fewer than `claims`, else at least `claims` (it stops there)."""
    done = subprocess.run([sys.executable, "-c", CLAIM_PROBE, " ".join(HEAVY), " ".join(claims), *modules],
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    return set(done.stdout.split())


@pytest.mark.slow
def test_every_lazy_reason_is_true():
    """Each `# lazy: loads X` checked: a fresh interpreter importing the modules hidden in the function loads X.
    A reason that has gone stale (the modules no longer load it) fails here, and the import moves to the top."""
    lazies = [lazy for lazy in all_lazy_project_imports() if lazy.claims]
    stale = [(lazy.file, lazy.line, lazy.reason) for lazy in lazies
             if not set(lazy.claims) <= heavy_libraries_loaded_by(lazy.modules, lazy.claims)]
    assert stale == []


def test_the_claim_probe_sees_what_a_module_loads_and_what_it_does_not():
    """The probe itself: the fine-tuning engine starts torch; the result store loads none of the heavy libraries,
    so a claim that it loads pandas is found stale (the check fails as it should)."""
    assert heavy_libraries_loaded_by(("biobench.eval.finetune",), ("torch",)) >= {"torch"}
    assert "pandas" not in heavy_libraries_loaded_by(("biobench.store.record",), ("pandas",))


def test_the_command_line_starts_without_heavy_libraries():
    """`biobench --help` imports no command module and no numerical library; each command's `--help` imports
    its own module, whose imports sit at the top unless they load a heavy library (issue 61), so none of
    torch, transformers, gradio or pandas."""
    code = ("import contextlib, io, sys\nfrom biobench import cli\nfor argv in (['--help'], *([c, '--help'] for c in cli.COMMANDS)):\n"
            "    with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):\n        cli.main(argv)\n"
            "    print(sorted(m for m in ('torch', 'transformers', 'gradio', 'numpy', 'pandas', 'pyarrow', 'scipy', 'datasets')"
            " if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    first, *commands = done.stdout.strip().splitlines()
    assert first == "[]"
    assert not [line for line in commands if set(eval(line)) & set(HEAVY)], commands


def test_a_module_of_the_api_loads_without_the_front_door():
    """`biobench corpus plan` needs biobench.api.corpus alone; importing it ran the package's `__init__`, which
    imported the whole front door (the evaluation engine, studies, the contamination check: ~1 s of every
    command's start). The package now hands the front door's names out on first use, and they are the same
    objects either way."""
    code = ("import sys\nimport biobench.api.corpus\nprint(sorted(m for m in ('biobench.api.front', "
            "'biobench.api.evaluation', 'biobench.api.study', 'biobench.analysis.contamination') if m in sys.modules))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.strip() == "[]"

    import biobench
    import biobench.api
    import biobench.api.contamination  # the module of the same name, imported first
    from biobench.api import front

    assert biobench.api.evaluate is front.evaluate is biobench.evaluate
    assert biobench.contamination is front.contamination and callable(biobench.contamination)
    assert biobench.study is front.study
