"""The test suite's own rule (issue 47): builders shared by several test modules live in tests/support.py (beside
conftest.py's fixtures and the generators hostile_corpus.py, fake_hub.py, slurm_cluster.py); no test module
imports another, so a test file can be split, moved or renamed without breaking its neighbours. A test about one
package lives in tests/<package>/ (tests/training/test_token_store.py tests training/token_store.py); tests/
itself keeps the ones that cross packages (the README, the architecture, hostile input end to end)."""

from __future__ import annotations

import ast
import os
import re
import subprocess
import sys
from pathlib import Path

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
# biobench's packages, by the folder each test folder mirrors: bench/<name>/ and the top-level package folders
PACKAGES = {p.name for p in (ROOT / "bench").iterdir() if (p / "__init__.py").exists()} | {
    "tasks", "heads", "training", "leaderboard"}


def imported_test_modules(path: Path) -> list[str]:
    """The test modules (test_*) that `path` imports, however it spells the import."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module] + [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        found += [n for n in names if n.split(".")[0].startswith("test_")
                  or (n.split(".")[0] == "tests" and len(n.split(".")) > 1 and n.split(".")[1].startswith("test_"))]
    return found


def test_imported_test_modules_are_found_however_spelled(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("import os\nfrom tests import support, test_a\nfrom tests.test_b import x\nimport test_c\n"
                     "from tests.support import drain\n", encoding="utf-8")
    assert imported_test_modules(probe) == ["tests.test_a", "tests.test_b", "tests.test_b.x", "test_c"]


def test_no_test_module_imports_another():
    offenders = {str(path.relative_to(TESTS)): found for path in sorted(TESTS.rglob("test_*.py"))
                 if (found := imported_test_modules(path))}
    assert offenders == {}, "move what these import into tests/support.py and import it from there"


def test_test_folders_mirror_the_packages():
    folders = {p.name for p in TESTS.iterdir() if p.is_dir() and p.name not in ("fixtures", "__pycache__")}
    assert folders <= PACKAGES, f"a test folder names no biobench package: {sorted(folders - PACKAGES)}"
    assert {"training", "eval", "store", "tasks"} <= folders  # the move happened (a test that could not fail, else)


def test_no_two_test_files_share_a_name():
    """Test folders are no packages (no __init__.py): pytest imports each test file by its base name, and a second
    tests/<package>/test_config.py beside tests/training/test_config.py is an 'import file mismatch' error that
    fails the whole run (it did, once two branches each added one)."""
    names: dict[str, list[str]] = {}
    for path in TESTS.rglob("test_*.py"):
        names.setdefault(path.name, []).append(str(path.relative_to(TESTS)))
    assert {n: p for n, p in names.items() if len(p) > 1} == {}, "rename one: tests/<package>/test_<package>_<x>.py"


def test_a_test_named_after_a_package_lives_in_its_folder():
    """tests/test_training_foo.py belongs in tests/training/test_foo.py: the flat layout must not grow back."""
    misplaced = [p.name for p in TESTS.glob("test_*.py")
                 if any(p.stem.startswith(f"test_{package}_") for package in PACKAGES)]
    assert misplaced == [], f"move these into tests/<package>/: {misplaced}"


def test_a_costly_fixtures_tests_share_one_worker_under_xdist(tmp_path):
    """scripts/test.sh runs pytest-xdist with the groups of tests/conftest.py: the tests that use a costly session
    fixture run in the one worker that built it. This failed silently with pytest 9.2 (xdist's loadgroup writes
    the group where pytest 9.2 no longer reads it, pytest-dev/pytest-xdist#1386: the real-data fixture would be
    built in each worker): 12 tests of two modules using the fixture, 12 that do not, three workers."""
    (tmp_path / "conftest.py").write_text(
        "import os\nfrom pathlib import Path\n\nimport pytest\n"
        "from tests.conftest import pytest_cmdline_main, pytest_collection_modifyitems  # noqa: F401\n\n\n"
        "@pytest.fixture(scope='session')\n"
        "def submitted_and_evaluated():\n"
        "    (Path(os.environ['BUILT']) / os.environ['PYTEST_XDIST_WORKER']).touch()\n")
    for module in ("a", "b"):
        (tmp_path / f"test_{module}.py").write_text(
            "import pytest\n\n\n@pytest.mark.parametrize('i', range(6))\n"
            "def test_uses_it(submitted_and_evaluated, i):\n    pass\n\n\n"
            "@pytest.mark.parametrize('i', range(6))\ndef test_alone(i):\n    pass\n")
    built = tmp_path / "built"
    built.mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "3", "-v", "-p", "no:cacheprovider", "--rootdir",
                           str(tmp_path), str(tmp_path)], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                          env={**os.environ, "BUILT": str(built), "PYTHONPATH": str(ROOT)})
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    workers = {line.split("]")[0].lstrip("[") for line in done.stdout.splitlines()
               if "PASSED" in line and "test_uses_it" in line}
    alone = {line.split("]")[0].lstrip("[") for line in done.stdout.splitlines()
             if "PASSED" in line and "test_alone" in line}
    assert done.stdout.count("PASSED") == 24 and len(workers) == 1 and len(alone) > 1, done.stdout
    assert [p.name for p in built.iterdir()] == list(workers)  # built once, where its tests ran


def test_every_test_file_a_doc_or_a_comment_names_exists():
    """Docs and comments cite the test that holds a claim (docs/ are the project's truth); when tests moved into
    tests/<package>/ a rewrite of those citations doubled 30 of them (`tests/api/api/test_api.py`)."""
    cited = re.compile(r"(?<![\w/.])tests/(?:\w+/)*\w+\.py")
    tracked = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    missing = []
    for name in tracked:
        if not name.endswith((".py", ".md", ".sh", ".toml")) or name == "tests/test_suite_layout.py":
            continue
        path = ROOT / name
        if not path.is_file():
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        missing += [f"{name}: {m[0]}" for m in cited.finditer(text) if not (ROOT / m[0]).is_file()]
    assert not missing, missing


# Modules no test file imports (issue 61 part 6: 35 of 174 at cb197c1). The list may only shrink: a module that
# gets a test of its own folder leaves it, and a new module comes with its test. The commands are run through
# `biobench.cli.main` by tests across the suite; the perf scripts by tests/perf/test_scripts.py as processes.
UNTESTED_MODULES = {
    "biobench.analysis.plots", "biobench.api.study_inputs", "biobench.commands.card",
    "biobench.commands.contamination", "biobench.commands.corpus", "biobench.commands.demo",
    "biobench.commands.prefetch", "biobench.commands.queue",
    "biobench.commands.results", "biobench.commands.space", "biobench.commands.study", "biobench.commands.tasks",
    "biobench.commands.worker", "biobench.perf.contamination_speed", "biobench.perf.slurm_drain",
    "biobench.perf.span_head_speed",
}


def library_modules() -> dict[str, Path]:
    """biobench module name -> its file, for every module that is not a package's __init__."""
    from biobench.runtime.checkout import package_dirs

    found = {}
    for package, folder in package_dirs(ROOT).items():  # bench/ -> biobench, tasks/ -> biobench.tasks, ...
        for path in (ROOT / folder).rglob("*.py"):
            if path.name != "__init__.py":
                found[".".join([*package.split("."), *path.relative_to(ROOT / folder).with_suffix("").parts])] = path
    return found


def modules_imported_by(path: Path, modules: set[str]) -> set[str]:
    """The modules of `modules` a test file names in an import (`from pkg import module` included)."""
    named = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            named.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            named.update([node.module, *(f"{node.module}.{alias.name}" for alias in node.names)])
    found = set()
    for name in named:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        found.update([name] if name else [])
    return found


def test_the_modules_no_test_imports_are_the_listed_ones_and_no_more():
    modules = library_modules()
    assert "biobench.heads.base" in modules and "biobench.runtime.files" in modules and len(modules) > 150
    imported = set().union(*(modules_imported_by(p, set(modules)) for p in TESTS.rglob("*.py")))
    untested = set(modules) - imported
    assert sorted(untested - UNTESTED_MODULES) == [], "a new module without a test of its own folder"
    assert sorted(UNTESTED_MODULES - untested) == [], "tested now: take it off UNTESTED_MODULES"


def test_a_from_import_of_a_module_counts_as_importing_it(tmp_path):
    probe = tmp_path / "test_probe.py"
    probe.write_text("from biobench.heads import base\nimport biobench.tasks.formats as f\nfrom biobench.store import x\n")
    modules = {"biobench.heads.base", "biobench.tasks.formats", "biobench.store.pairing", "biobench.store"}
    assert modules_imported_by(probe, modules) == {"biobench.heads.base", "biobench.tasks.formats", "biobench.store"}
