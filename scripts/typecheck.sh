#!/usr/bin/env bash
# Type-checks biobench's library packages with mypy, at the strictness pyproject.toml's [tool.mypy] sets.
# mypy cannot follow pyproject's package-dir mapping (biobench -> bench/, biobench.heads -> heads/, ...), so the
# import tree is laid out as symbolic links in a temporary folder first (from the same package-dir table).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
tree=$(mktemp -d)
trap 'rm -rf "$tree"' EXIT
.venv/bin/python - "$root" "$tree" <<'PY'
import sys
from pathlib import Path

from biobench.runtime.checkout import package_dirs

root, tree = Path(sys.argv[1]), Path(sys.argv[2])
dirs = package_dirs(root)
top = tree / "biobench"
top.mkdir()
nested = {package.split(".", 1)[1] for package in dirs if package != "biobench"}
for entry in (root / dirs["biobench"]).iterdir():
    if entry.name not in nested and entry.name != "__pycache__":
        (top / entry.name).symlink_to(entry)
for package, folder in dirs.items():
    if package != "biobench":
        (top / package.split(".", 1)[1]).symlink_to(root / folder)
PY
cd "$tree"
exec "$root/.venv/bin/python" -m mypy --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache"
