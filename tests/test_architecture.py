"""The import rules of docs/ARCHITECTURE.md, checked on the source: every `import` statement, at module level or
inside a function (a lazy import is still a dependency), mapped to the biobench module it names."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# the folder each import name lives in (pyproject's package-dir); biobench.* that is not a subpackage is bench/
PACKAGE_DIRS = {"biobench.tasks": "tasks", "biobench.heads": "heads", "biobench.training": "training",
                "biobench.leaderboard": "leaderboard", "biobench": "bench"}


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


def imports_of(path: Path) -> set[str]:
    """The absolute module names a file imports (relative imports resolved)."""
    name = module_name(path)
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


def project_imports(path: Path) -> set[str]:
    return {m for m in imports_of(path) if m == "biobench" or m.startswith("biobench.")}


def files_under(folder: str) -> list[Path]:
    return sorted((ROOT / folder).rglob("*.py"))


def test_module_names_follow_the_package_dirs():
    assert module_name(ROOT / "bench/runtime/files.py") == "biobench.runtime.files"
    assert module_name(ROOT / "tasks/readers/__init__.py") == "biobench.tasks.readers"
    assert "biobench.runtime.files.atomic_write" in imports_of(ROOT / "bench/store/storage.py")


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
    assert not {m for m in project_imports(ROOT / "bench/names.py") if m.startswith("biobench.models")}
    assert "biobench.aliases.ALIASES" in project_imports(ROOT / "bench/names.py")


def test_the_runtime_modules_left_training():
    for name in ("files", "device", "progress", "reporting", "compiling"):
        assert not (ROOT / "training" / f"{name}.py").exists()
        assert (ROOT / "bench/runtime" / f"{name}.py").is_file()


def test_the_checker_sees_lazy_and_relative_imports():
    """The rules above mean something only if a lazy import inside a function and a relative import are seen."""
    fake = ROOT / "leaderboard" / "_architecture_probe.py"
    fake.write_text("def f():\n    from ..training import trainer\n    import biobench.training.recipes\n")
    try:
        found = project_imports(fake)
    finally:
        fake.unlink()
    assert {"biobench.training", "biobench.training.trainer", "biobench.training.recipes"} <= found
