"""Reading the archives `biobench data fetch|add` installs from, as if a stranger had made them.

Why a module of its own: an archive from the internet can be a decompression bomb (a 400 KB zip holding a
400 MB file), hold members named `x/../../../y` or `/etc/y`, nest archives in archives, or be cut short.
So here:
- members are listed, not read: a member is opened (streamed, never read whole) only when a converter wants
  it, and a nested archive is spilled to the staging folder through the same caps before it is opened;
- every byte expanded counts against `Limits`: per member and in total, relative to the compressed size and
  absolute (configurable: `--max-ratio` / `--max-bytes`, or BIOBENCH_MAX_EXPAND_RATIO / _BYTES);
- a member name that is absolute or holds `..` refuses the archive (biobench.runtime.paths.safe_member);
- every failure is one DataError line naming the archive (the URL for a download) and the fix.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import os
import shutil
import tarfile
import zipfile
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from biobench.errors import DataError
from biobench.runtime.files import EXPAND_FLOOR, EXPAND_RATIO
from biobench.runtime.paths import UnsafePathError, safe_member

CHUNK = 1 << 20
SKIPPED_MEMBERS = ("__MACOSX/", ".DS_Store")
NESTED_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
READ_ERRORS = (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile, zlib.error)
LIMITS_FIX = "if the file is genuine, raise the limit (--max-ratio / --max-bytes, or BIOBENCH_MAX_EXPAND_RATIO / _BYTES)"


def one_line(err: object, limit: int = 160) -> str:
    """An exception's text on one line (urllib's and tarfile's messages span several), cut at `limit`."""
    return " ".join(str(err).split())[:limit] or type(err).__name__


@dataclass(frozen=True)
class Limits:
    """How far archives may expand: each member at most `ratio` x its compressed size (x the archive's size
    when the format does not say) and `member_bytes`; all members together at most `ratio` x the inputs' size
    and `total_bytes`. Below `floor` bytes the ratio is not applied (small text compresses arbitrarily well)."""

    ratio: float = EXPAND_RATIO  # the project's one expansion bound (biobench.runtime.files)
    member_bytes: int = 4 << 30
    total_bytes: int = 16 << 30
    floor: int = EXPAND_FLOOR

    @classmethod
    def from_env(cls, ratio: float | None = None, max_bytes: int | None = None) -> Limits:
        """The defaults, overridden by BIOBENCH_MAX_EXPAND_RATIO / BIOBENCH_MAX_EXPAND_BYTES, then by the
        arguments (the CLI flags). `max_bytes` caps a member and the total alike."""
        env_ratio, env_bytes = os.environ.get("BIOBENCH_MAX_EXPAND_RATIO"), os.environ.get("BIOBENCH_MAX_EXPAND_BYTES")
        try:
            ratio = ratio if ratio is not None else float(env_ratio) if env_ratio else cls.ratio
            max_bytes = max_bytes if max_bytes is not None else int(env_bytes) if env_bytes else None
        except ValueError:
            raise DataError(f"BIOBENCH_MAX_EXPAND_RATIO={env_ratio!r} / BIOBENCH_MAX_EXPAND_BYTES={env_bytes!r}: "
                            "expected a number and a whole number of bytes") from None
        if max_bytes is None:
            return cls(ratio=ratio)
        return cls(ratio=ratio, member_bytes=max_bytes, total_bytes=max_bytes, floor=min(cls.floor, max_bytes))

    def cap(self, compressed: int, absolute: int) -> int:
        return min(absolute, max(self.floor, int(self.ratio * compressed)))


class Budget:
    """What one install may expand in all (Limits.total_bytes, and `ratio` x the size of what was given)."""

    def __init__(self, limits: Limits, compressed: int):
        self.limits, self.limit, self.used = limits, limits.cap(compressed, limits.total_bytes), 0

    def take(self, n: int, what: str) -> None:
        self.used += n
        if self.used > self.limit:
            raise DataError(f"{what}: the archive(s) expand beyond {self.limit:,} bytes in all (a decompression "
                            f"bomb or the wrong file?); nothing was installed; {LIMITS_FIX}")


class Capped(io.RawIOBase):
    """A member's stream that stops at its cap and the budget, and turns read errors into one DataError line."""

    def __init__(self, raw: IO[bytes] | io.BufferedIOBase, cap: int, budget: Budget, what: str):
        super().__init__()
        self.raw, self.cap, self.budget, self.what, self.done = raw, cap, budget, what, 0

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        try:
            data = self.raw.read(min(len(buffer), CHUNK))
        except READ_ERRORS as err:
            raise DataError(f"{self.what} is damaged or truncated ({one_line(err)}); download it again") from None
        n = len(data)
        self.done += n
        if self.done > self.cap:
            raise DataError(f"{self.what} expands beyond {self.cap:,} bytes (a decompression bomb or the wrong "
                            f"file?); nothing was installed; {LIMITS_FIX}")
        self.budget.take(n, self.what)
        buffer[:n] = data
        return n

    def close(self) -> None:
        with contextlib.suppress(*READ_ERRORS):
            self.raw.close()
        super().close()


@dataclass(frozen=True)
class Member:
    """One file of an archive: its name inside it (`outer/inner` when nested), where it came from (for
    messages), its size as the archive declares it and a way to open it (capped, streamed)."""

    name: str
    source: str
    size: int
    cap: int
    opener: Callable[[], IO[bytes]]
    budget: Budget

    @property
    def what(self) -> str:
        return f"{self.source}: member {self.name}"

    def open(self) -> io.BufferedReader:
        if self.size > self.cap:
            raise DataError(f"{self.what} declares {self.size:,} bytes, more than the {self.cap:,} allowed (a "
                            f"decompression bomb or the wrong file?); nothing was installed; {LIMITS_FIX}")
        try:
            raw = self.opener()
        except READ_ERRORS as err:
            raise DataError(f"{self.what} is damaged or truncated ({one_line(err)}); download it again") from None
        return io.BufferedReader(Capped(raw, self.cap, self.budget, self.what), CHUNK)


class Unpacker:
    """Lists the members of the files given to one install, nested archives opened in place (spilled to
    `scratch`, capped); keeps archives open until the `with` block ends."""

    def __init__(self, scratch: Path, limits: Limits, compressed: int):
        self.scratch, self.limits = scratch, limits
        self.budget = Budget(limits, compressed)
        self.stack = contextlib.ExitStack()

    def __enter__(self) -> Unpacker:
        return self

    def __exit__(self, *exc) -> None:
        self.stack.close()

    def members(self, path: Path, label: str, depth: int = 2) -> list[Member]:
        """The files of a zip / tar(.gz) archive, or the file itself; what was given decides, not its suffix."""
        found = [m for m in self._list(path, label) if not any(s in m.name for s in SKIPPED_MEMBERS)]
        out = []
        for m in found:
            if depth and m.name.lower().endswith(NESTED_SUFFIXES):
                out += [Member(f"{m.name}/{inner.name}", label, inner.size, inner.cap, inner.opener, self.budget)
                        for inner in self.members(self._spill(m), f"{label}: member {m.name}", depth - 1)]
            else:
                out.append(m)
        return out

    def _spill(self, member: Member) -> Path:
        """A nested archive copied (through its caps) to the scratch folder, so it is opened from disk."""
        self.scratch.mkdir(parents=True, exist_ok=True)
        target = self.scratch / f"{len(list(self.scratch.iterdir()))}-{Path(member.name).name}"
        with member.open() as src, target.open("wb") as out:
            shutil.copyfileobj(src, out, CHUNK)
        return target

    def _member(self, name: str, label: str, size: int, compressed: int, opener) -> Member:
        try:
            safe_member("/", name)
        except UnsafePathError as err:
            raise DataError(f"{label}: {err}; such an archive is refused (nothing was installed): "
                            "get the file from its original source") from None
        return Member(name, label, size, self.limits.cap(compressed, self.limits.member_bytes), opener, self.budget)

    def _list(self, path: Path, label: str) -> list[Member]:
        """The archive's file members (headers only: nothing is decompressed into memory). What the archive
        declares in all may not pass Limits.total_bytes, even for members no converter will open."""
        size = path.stat().st_size
        try:
            if zipfile.is_zipfile(path):
                zf = self.stack.enter_context(zipfile.ZipFile(path))
                infos: list[tuple[Any, str, int, int]] = [(i, i.filename, i.file_size, i.compress_size)
                                                          for i in zf.infolist() if not i.is_dir()]
                opener: Callable = zf.open
            elif is_tar(path):
                tar = self.stack.enter_context(tarfile.open(path, "r:*"))
                infos = [(i, i.name.removeprefix("./"), i.size, size) for i in tar if i.isfile()]
                opener = tar.extractfile
            elif _head(path) == b"PK\x03\x04":
                raise zipfile.BadZipFile("a zip without its central directory")
            else:
                name = Path(label.split("?")[0]).name or path.name
                return [Member(name, label, size, max(size, self.limits.cap(size, self.limits.member_bytes)),
                               lambda: path.open("rb"), self.budget)]
        except READ_ERRORS as err:
            raise DataError(f"{label}: archive is damaged or truncated ({one_line(err)}); download it again") from None
        declared = sum(info[2] for info in infos)
        if declared > self.limits.total_bytes:
            raise DataError(f"{label}: its members declare {declared:,} bytes in all, more than the "
                            f"{self.limits.total_bytes:,} allowed; nothing was installed; {LIMITS_FIX}")
        return [self._member(name, label, n, packed, lambda i=i: opener(i)) for i, name, n, packed in infos]


def _head(path: Path) -> bytes:
    with path.open("rb") as fh:
        return fh.read(4)


def is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except READ_ERRORS:
        return False


def check_readable(path: Path, label: str, limits: Limits) -> None:
    """List an archive (a cut-off zip or tar fails here, named by `label`) and stream a plain .gz through its
    caps; member contents are read only when a converter needs them."""
    if zipfile.is_zipfile(path) or is_tar(path):
        with Unpacker(path.parent / ".check", limits, path.stat().st_size) as unpacker:
            unpacker._list(path, label)
    elif path.name.endswith((".tar.gz", ".tgz", ".tar", ".zip")):
        raise DataError(f"{label}: archive is damaged or truncated (not a readable {path.suffix} file); download it again")
    elif path.suffix == ".gz":
        budget = Budget(limits, path.stat().st_size)
        try:
            raw = gzip.open(path, "rb")
        except READ_ERRORS as err:
            raise DataError(f"{label}: not a readable gzip file ({one_line(err)}); download it again") from None
        with io.BufferedReader(Capped(raw, budget.limit, budget, label), CHUNK) as fh:
            while fh.read(CHUNK):
                pass


def write_stream(dest: Path, src: IO[bytes], source_name: str) -> None:
    """Copy a stream to a layout path, gzipping when the layout wants `.gz` and the bytes are not gzip already
    (`source_name` names the source in errors); never holds more than a chunk in memory."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    head = src.read(2)
    if dest.suffix != ".gz" and head == b"\x1f\x8b":
        raise DataError(f"{source_name}: is gzip-compressed but the layout wants plain {dest.name}; gunzip it first")
    with dest.open("wb") as raw:
        out = gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) if dest.suffix == ".gz" and head != b"\x1f\x8b" else raw
        with out if out is not raw else contextlib.nullcontext():
            out.write(head)
            shutil.copyfileobj(src, out, CHUNK)
