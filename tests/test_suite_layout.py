"""The test suite's own rule (issue 47): builders shared by several test modules live in tests/support.py (beside
conftest.py's fixtures and the generators hostile_corpus.py, fake_hub.py, slurm_cluster.py); no test module
imports another, so a test file can be split, moved or renamed without breaking its neighbours. A test about one
package lives in tests/<package>/ (tests/training/test_token_store.py tests training/token_store.py); tests/
itself keeps the ones that cross packages (the README, the architecture, hostile input end to end)."""

from __future__ import annotations

import ast
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


def test_a_test_named_after_a_package_lives_in_its_folder():
    """tests/test_training_foo.py belongs in tests/training/test_foo.py: the flat layout must not grow back."""
    misplaced = [p.name for p in TESTS.glob("test_*.py")
                 if any(p.stem.startswith(f"test_{package}_") for package in PACKAGES)]
    assert misplaced == [], f"move these into tests/<package>/: {misplaced}"
