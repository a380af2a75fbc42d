"""Atomic file writes for everything biobench leaves on disk: results, predictions, analysis JSON, caches,
checkpoints.

Why one helper: results folders are shared (a SLURM array filling one folder, a team's leaderboard), runs are
killed, and disks fill up. A write goes to a temporary file in the target folder, is fsynced, then renamed
over the target, so readers see the old file or the whole new one, never half of it. The temporary file gets
the mode `open()` would give (0666 minus the umask: 0644 by default) instead of mkstemp's private 0600, so the
rest of the team can read the results. A full disk (or quota) becomes one `DiskFullError` line naming the
folder, the bytes that were about to be written and what is already safe on disk; no partial file is left.

Torch-free and free of bench/ imports other than bench/errors: bench/, training/ and the leaderboard use it.
"""

from __future__ import annotations

import contextlib
import errno
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from biobench.errors import ConfigError, DiskFullError

_FULL = (errno.ENOSPC, errno.EDQUOT)

# How far a compressed input biobench did not write may expand when written out or read (an archive `data add`
# installs, tasks/archives.Limits; a results dataset the board writes back as files, board/dataset.materialize):
# at most EXPAND_RATIO x its size, but never less than EXPAND_FLOOR (small text compresses arbitrarily well).
# One pair of numbers so a bomb is measured the same way wherever it arrives.
EXPAND_RATIO = 100.0
EXPAND_FLOOR = 32 << 20


def file_mode() -> int:
    """The mode `open()` gives a new file under the current umask (0644 under the usual 022)."""
    umask = os.umask(0o022)  # reading the umask means setting it; restore it at once
    os.umask(umask)
    return 0o666 & ~umask


# numpy's np.save / tofile on a full disk: "OSError: 1048576 requested and 4096 written" (no errno)
_SHORT_WRITE = re.compile(r"\b\d+ requested and \d+ written\b")


def is_disk_full(err: BaseException | None) -> bool:
    """The one test for "this error is a full disk": ENOSPC / EDQUOT, also when a library wraps it in another
    exception type or message (safetensors, torch, pyarrow) or chains it, and numpy's short-write OSError."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, OSError) and err.errno in _FULL:
            return True
        text = str(err)
        if "No space left on device" in text or "Disk quota exceeded" in text or _SHORT_WRITE.search(text):
            return True
        err = err.__cause__ or err.__context__
    return False


def disk_full_message(folder: Path, needed: int, safe: str) -> str:
    existing = next((p for p in (folder, *folder.parents) if p.exists()), None)
    free_text = f", {shutil.disk_usage(existing).free:,} free" if existing is not None else ""
    need_text = f"{needed:,} bytes needed{free_text}" if needed else free_text.removeprefix(", ")
    return (f"disk full writing to {folder}: {need_text or 'no space left'}; {safe}; nothing half-written was "
            "left behind: free some space (or choose another folder) and rerun")


@contextlib.contextmanager
def disk_full_guard(folder: str | Path, needed: int, safe: Callable[[], str] | None = None,
                    cleanup: Callable[[], None] | None = None) -> Iterator[None]:
    """Turn a full disk inside the block into one DiskFullError (after `cleanup`, which removes partial
    output). `safe()` says what is already complete on disk, e.g. '3 finished results in results/ are safe'."""
    try:
        yield
    except BaseException as err:
        if cleanup is not None:
            cleanup()
        if not isinstance(err, Exception) or not is_disk_full(err):
            raise
        raise DiskFullError(disk_full_message(Path(folder), needed, safe() if safe else "earlier files are safe")) from None


def atomic_write(path: str | Path, data: str | bytes, safe: Callable[[], str] | None = None,
                 durable: bool = True) -> None:
    """Write `data` (text as UTF-8) to `path` atomically, with the umask's mode; DiskFullError when full.
    `durable=False` skips the fsync: for cache files a crash may lose (still never half-written: the rename is
    atomic), where the fsync cost more than the file (3.3 ms each here: 19 s for a 300-model board's scores)."""
    path = Path(path)
    payload = data.encode("utf-8") if isinstance(data, str) else data
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    with disk_full_guard(path.parent, len(payload), safe, cleanup=lambda: Path(tmp).unlink(missing_ok=True)):
        with os.fdopen(fd, "wb") as handle:
            os.fchmod(handle.fileno(), file_mode())
            handle.write(payload)
            handle.flush()
            if durable:
                os.fsync(handle.fileno())
        os.replace(tmp, path)


def create_new(path: str | Path, data: bytes) -> bool:
    """Create `path` holding `data` only if no file of that name exists: True when this call created it.
    Why link(2): the bytes go to a temporary file first, which is then hard-linked to the name; link() fails
    when the name exists (atomic on a local disk and on NFS/Lustre, where O_EXCL was not always), and a reader
    never sees the file before its bytes are complete (an empty lease would read as expired). The one exclusive
    create of biobench: the queue's leases and eval's run claims both go through it (runtime.leases)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.")
    try:
        with disk_full_guard(path.parent, len(data)):
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, file_mode())
        os.link(tmp, path)
    except FileExistsError:
        return False
    finally:
        os.unlink(tmp)
    return True


def append_line(path: str | Path, line: str, safe: Callable[[], str] | None = None) -> None:
    """Append one line (a JSON log record) whole or not at all: when the disk fills half-way the file is cut
    back to its previous length and DiskFullError says so (a log never ends in half a record)."""
    path = Path(path)
    data = (line.rstrip("\n") + "\n").encode("utf-8")
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, file_mode())
    try:
        size = os.fstat(fd).st_size
        with disk_full_guard(path.parent, len(data), safe, cleanup=lambda: os.ftruncate(fd, size)):
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
    finally:
        os.close(fd)


def output_folder(path: str | Path, option: str) -> Path:
    """`path` as a folder a command may write into: refused in one line (ConfigError) when it is a file, a FIFO
    or a device, or cannot be created — instead of a FileExistsError traceback from the first mkdir."""
    folder = Path(path)
    if folder.exists() and not folder.is_dir():
        raise ConfigError(f"{option} {folder} is not a folder (a file, FIFO or device); give a folder")
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        if is_disk_full(err):
            raise
        raise ConfigError(f"{option} {folder}: cannot create it ({err.strerror or err}); give a folder this user "
                          "may write") from None
    return folder


@contextlib.contextmanager
def empty_folders_removed_on_error(*paths: str | Path) -> Iterator[None]:
    """Folders among `paths` (and their parents) that do not exist when the block starts and are empty when it
    raises are removed again, deepest first: a command refused half-way leaves no empty folder it made (issue 62
    item 6: an sbatch refusal left `./biobench-slurm/` and an empty results folder). Only folders missing
    before the block are touched, and only while empty (rmdir), so nothing another process wrote is lost."""
    missing: list[Path] = []
    for path in paths:
        folder = Path(path).absolute()
        while not folder.exists() and folder != folder.parent:
            missing.append(folder)
            folder = folder.parent
    try:
        yield
    except BaseException:
        for folder in sorted(set(missing), key=lambda p: len(p.parts), reverse=True):
            with contextlib.suppress(OSError):
                folder.rmdir()
        raise


def cache_home(name: str) -> Path:
    """biobench's cache folder for one kind of thing ($BIOBENCH_CACHE/<name>, default ~/.cache/biobench/<name>):
    tokens, tasks, leaderboard, results, worker — one root, so one variable moves them all."""
    return Path(os.environ.get("BIOBENCH_CACHE", Path.home() / ".cache" / "biobench")) / name


# What a spreadsheet reads as the start of a formula (OWASP "CSV Injection": =, +, -, @, tab, carriage return).
_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def formula_safe(value: object) -> object:
    """A cell a spreadsheet shows as text: a string starting with a formula character gets a leading `'`, as
    OWASP's CSV-injection guidance says (a model named `=HYPERLINK(...)` would otherwise be a live link in the
    exported table); numbers and other values are unchanged."""
    return f"'{value}" if isinstance(value, str) and value.startswith(_FORMULA_START) else value


def csv_text(frame) -> str:  # noqa: ANN001 - a pandas DataFrame (pandas is imported by the caller)
    """The CSV every biobench CSV writer writes (`leaderboard --export x.csv`, the board's download): no index,
    every text cell and header through `formula_safe`."""
    safe = frame.rename(columns=formula_safe).map(formula_safe) if len(frame.columns) else frame
    return safe.to_csv(index=False)
