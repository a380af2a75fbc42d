"""What biobench may delete or replace: only files and folders it created (issue 57, docs/RELIABILITY.md
"Ownership").

A folder biobench creates carries a marker it writes first, before any content: `.biobench-folder.json`, a small
JSON saying what the folder is, when it was made and by which biobench command. A folder is biobench's when it
holds that marker, when this process created it, or (folders made by biobench versions before the marker) when
the caller's `legacy` test recognises it by files only biobench writes (a token store's plan or manifest, a run's
settings file). Everything else is the user's: an output folder that exists, is not empty and is not
biobench's is refused in one line (naming the closest free name), and `remove_owned` refuses to delete it.
`/`, the home folder, a mount point and the working folder itself are refused always, marker or not.

Why a marker and not a name: a store build once took any folder holding a `work/` subfolder for an unfinished
store and removed that `work/` folder (`--out /` removed `/work`). Names are the user's too; a marker is not.

Torch-free and free of bench/ imports other than bench/errors and the runtime layer.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path

from biobench.errors import ConfigError
from biobench.runtime.files import atomic_write, output_folder
from biobench.runtime.jsonfile import UnsafeJSONError, read_json

MARKER = ".biobench-folder.json"
FORMAT = "biobench-folder"
MAX_MARKER_BYTES = 4096

Legacy = Callable[[Path], bool]  # recognises a folder an earlier biobench made (before the marker) by its own files

_CREATED: set[str] = set()  # folders this process created (resolved): ours even before (or without) a marker
_WORD = re.compile(r"[a-z][a-z-]{0,30}")


def _key(path: Path) -> str:
    return str(path.resolve())


def _command() -> str:
    """`biobench corpus build`: the subcommand words of this process's command line, never its paths or values."""
    words = []
    for arg in sys.argv[1:3]:
        if not _WORD.fullmatch(arg):
            break
        words.append(arg)
    return " ".join(["biobench", *words])


def mark_created(folder: str | Path, what: str) -> Path:
    """Create `folder` (and its parents) if needed and write its marker, unless it has one: the first thing in a
    folder biobench makes. The folder is this process's from here on. Returns the folder."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    _CREATED.add(_key(folder))
    if not (folder / MARKER).is_file():
        record = {"format": FORMAT, "what": what, "created": datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
                  "command": _command()}
        atomic_write(folder / MARKER, json.dumps(record, sort_keys=True) + "\n")
    return folder


def marker(folder: str | Path) -> dict[str, object] | None:
    """The folder's marker record, or None when it has none that biobench wrote (missing, a link, not JSON, huge)."""
    path = Path(folder) / MARKER
    if path.is_symlink() or not path.is_file():
        return None
    try:
        record = read_json(path, MAX_MARKER_BYTES)
    except (UnsafeJSONError, OSError):
        return None
    return record if isinstance(record, dict) and record.get("format") == FORMAT else None


def owned(path: str | Path, legacy: Legacy | None = None) -> bool:
    """Whether `path` is biobench's to delete or replace: created by this process, holding a marker, or (a folder
    made before markers) recognised by `legacy`. A symlink is never biobench's (removing it is the user's call)."""
    path = Path(path)
    if path.is_symlink():
        return False
    if _key(path) in _CREATED:
        return True
    if not path.is_dir():
        return False
    return marker(path) is not None or (legacy is not None and legacy(path))


def protected(path: str | Path) -> str | None:
    """Why biobench never writes into `path` whatever it holds (None when it may): the root, the home folder, a mount
    point, the working folder itself."""
    try:
        resolved = Path(path).expanduser().resolve()
    except (OSError, RuntimeError):
        return None  # cannot be resolved: output_folder says why in its own line
    if resolved == Path(resolved.anchor):
        return "the root folder"
    if resolved == Path.home().resolve():
        return "the home folder"
    if resolved == Path.cwd().resolve():
        return "the working folder itself"
    if resolved.is_dir() and os.path.ismount(resolved):
        return "a mount point"
    return None


def free_name(path: str | Path) -> Path:
    """The closest name beside `path` that does not exist: DIR-2, DIR-3, ..."""
    path = Path(path)
    for n in range(2, 10_000):
        candidate = path.with_name(f"{path.name}-{n}")
        if not candidate.exists():
            return candidate
    return path.with_name(f"{path.name}-{os.getpid()}")


def _empty(folder: Path) -> bool:
    """No entry but a marker being written by a process that is creating the folder right now."""
    return all(p.name.startswith(f".{MARKER}.") for p in folder.iterdir())


def check_output_folder(path: str | Path, flag: str, what: str, legacy: Legacy | None = None,
                        mark: bool = True) -> Path:
    """`path` as the output folder of a command (`flag` names it in errors): created and marked when new or empty,
    taken up when biobench's (marker, or `legacy`), refused in one line (ConfigError) otherwise, and always when it
    is `protected`. `mark=False`: a folder published as it is (an export, the folder a push uploads), which the
    marker would end up in; `legacy` then recognises it by its own files, and the command deletes nothing in it.
    Returns the folder."""
    folder = Path(path)
    if (why := protected(folder)) is not None:
        inside = free_name(folder.expanduser().resolve() / f"biobench-{re.sub(r'[^a-z0-9]+', '-', what.lower())}")
        raise ConfigError(f"{flag} {path} is {why}: biobench writes only into a folder of its own; give one, "
                          f"e.g. {inside}")
    if folder.is_dir() and not folder.is_symlink() and not _empty(folder) and not owned(folder, legacy):
        raise ConfigError(f"{flag} {path} is a folder biobench did not create (it holds files and no {MARKER}); "
                          f"nothing was written: give a new folder, e.g. {free_name(folder)}")
    if folder.is_symlink() and folder.is_dir() and not _empty(folder) and not owned(folder.resolve(), legacy):
        raise ConfigError(f"{flag} {path} links to a folder biobench did not create; nothing was written: give a "
                          f"new folder, e.g. {free_name(folder)}")
    taken_up = folder.is_dir() and marker(folder) is None and not _empty(folder)  # an earlier version's (legacy)
    output_folder(folder, flag)  # a file, FIFO or device, or a folder that cannot be made: one line
    if not mark:
        return folder
    try:
        return mark_created(folder, what)
    except OSError:
        if not taken_up:
            raise
        return folder  # a read-only copy of an earlier version's folder (a finished store): read as it is


def remove_owned(path: str | Path, legacy: Legacy | None = None, missing_ok: bool = True) -> None:
    """Delete the folder (or a file this process made) at `path` only if it is biobench's (`owned`); anything else
    is refused in one line (ConfigError) and left as it is."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        if missing_ok:
            return
        raise ConfigError(f"{path} does not exist")
    if not owned(path, legacy):
        raise ConfigError(f"{path} was not created by biobench (no {MARKER}); it is left as it is: move it away "
                          "and run the command again")
    if path.is_dir():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)
    _CREATED.discard(_key(path))


def remove_inside(path: str | Path, root: str | Path, legacy: Legacy | None = None) -> None:
    """Delete `path`, a file or folder biobench names inside `root` (a store's `work/`, a benchmark's `cache/`),
    only if `root` is biobench's (`owned`, with `legacy` for `root`) and `path` lies inside it without passing
    through a link; anything else is refused in one line (ConfigError) and left as it is."""
    path, root = Path(path), Path(root)
    if not path.exists() and not path.is_symlink():
        return
    if not owned(root, legacy):
        raise ConfigError(f"{root} was not created by biobench (no {MARKER}); {path} is left as it is: move it "
                          "away and run the command again")
    inside = path.parent.resolve() == root.resolve() or root.resolve() in path.parent.resolve().parents
    if not inside:
        raise ConfigError(f"{path} is not inside {root} (a link leads elsewhere); it is left as it is")
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)  # a link: the name only, never what it points at


def replace_owned(source: str | Path, dest: str | Path, legacy: Legacy | None = None) -> None:
    """Move the folder `source` (this process made it) to `dest`, replacing what is there only if it is
    biobench's (`remove_owned`)."""
    remove_owned(dest, legacy)
    os.replace(source, dest)
    _CREATED.discard(_key(Path(source)))
