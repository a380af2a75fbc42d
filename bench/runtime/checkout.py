"""The source checkout biobench runs from, and where each of its import packages lives in it.

Why one home: pyproject.toml's `[tool.setuptools] package-dir` is the one statement of which folder holds
which import package (biobench -> bench/, biobench.heads -> heads/, ...). The Space's wheel build, the perf
scripts that time an older revision's tree and the architecture test all read it here instead of restating it.
"""

from __future__ import annotations

from pathlib import Path

from biobench.runtime.jsonfile import UnsafeJSONError, read_toml

ROOT = Path(__file__).resolve().parents[2]  # bench/runtime/checkout.py -> the checkout (when run from one)


def _pyproject(root: Path) -> dict:
    path = root / "pyproject.toml"
    try:
        return read_toml(path) if path.is_file() else {}  # the one bounded TOML reader
    except (OSError, UnsafeJSONError):
        return {}


def source_root() -> Path | None:
    """The checkout this biobench runs from (the folder with its pyproject.toml), None for an installed wheel."""
    return ROOT if _pyproject(ROOT).get("project", {}).get("name") == "biobench" else None


def package_dirs(root: Path | None = None) -> dict[str, str]:
    """Import package -> its folder in the checkout, as pyproject.toml's package-dir maps them
    ({'biobench': 'bench', 'biobench.heads': 'heads', ...}); {} outside a checkout."""
    return dict(_pyproject(root or ROOT).get("tool", {}).get("setuptools", {}).get("package-dir", {}))
