"""The test suite's own rule (issue 47): builders shared by several test modules live in tests/support.py (beside
conftest.py's fixtures and the generators hostile_corpus.py, fake_hub.py, slurm_cluster.py); no test module
imports another, so a test file can be split, moved or renamed without breaking its neighbours."""

from __future__ import annotations

import ast
from pathlib import Path

TESTS = Path(__file__).resolve().parent


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
