"""mypy over the library packages that pyproject.toml's [tool.mypy] lists (scripts/typecheck.sh): in the test
suite, so that every change to those packages is type-checked where the tests run. About 30 s of CPU the first
time; mypy's cache (.mypy_cache) makes a rerun take seconds."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.mark.slow  # mypy over the whole library: ~40 s cold
def test_the_listed_packages_type_check():
    pytest.importorskip("mypy", reason="mypy (part of the 'dev' extra) is not installed")
    done = subprocess.run(["bash", str(ROOT / "scripts/typecheck.sh")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "Success: no issues found" in done.stdout
