"""Getting a task's data into the documented layout: download (open data), add (a file the user downloaded),
and status (what is there, and the one command that fixes what is not).

Each task spec's `fetch` entry is data, not code:

    "fetch": {"licence": "...", "gated": false, "convert": "files" | "extract" | "repack" | "join" | null,
              "files": [{"url": ..., "sha256": hex or null, "sha256_note": why null, "to": layout path, "name": ...}],
              "options": {...converter options..., "expect": {layout path: sha256 of its (gunzipped) content}},
              "note": "why there is no converter / no download"}

Why the care: a download that is cut short or does not match its pinned sha256 must never leave a file in
the data folder that a later `biobench eval` would read. Everything is downloaded and converted in a staging
folder inside the data folder (same file system), and only a complete, verified result is moved into place
(`os.replace`, one file at a time, after all checks passed). A sha256 is pinned only where a byte-identical
copy of the file was at hand when the spec was written; otherwise the spec and the output say it is not.

Gated / credentialed data (PhysioNet, n2c2, DiaMED's terms) is never downloaded: `add` takes the archive as
it is distributed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import functools
import gzip
import hashlib
import http.client
import io
import os
import shutil
import tarfile
import tempfile
import urllib.error
import urllib.request
import zipfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.tasks.loading import locate, resolve_path
from biobench.tasks.options import CONVERTER_OPTIONS
from biobench.tasks.registry import TaskSpec

CONVERTERS = tuple(CONVERTER_OPTIONS)  # each converter's options: tasks/options.py
CHUNK = 1 << 20
SKIPPED_MEMBERS = ("__MACOSX/", ".DS_Store")
NESTED_SUFFIXES = (".zip", ".tar.gz", ".tgz", ".tar")
Log = Callable[[str], None]


# ---------------------------------------------------------------------------------------------- spec access
def fetch_info(spec: TaskSpec) -> Mapping[str, Any]:
    """The spec's `fetch` entry; a task without one has no known source to fetch from."""
    if not spec.fetch:
        raise DataError(f"task '{spec.id}': its spec names no download source. {spec.access}".strip())
    convert = spec.fetch.get("convert")
    if convert is not None and convert not in CONVERTERS:
        raise DataError(f"task '{spec.id}': fetch.convert {convert!r} is not one of {', '.join(CONVERTERS)}")
    return spec.fetch


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as fh:
        for chunk in iter(lambda: fh.read(CHUNK), b""):
            digest.update(chunk)
    return digest.hexdigest()


def content_sha256(path: Path) -> str:
    """sha256 of a layout file's content: of the decompressed bytes for `.gz` (so a pinned original matches
    whether it is stored gzipped or not), else of the file."""
    if path.suffix != ".gz":
        return _sha256_file(path)
    digest = hashlib.sha256()
    try:
        with gzip.open(path, "rb") as fh:
            for chunk in iter(lambda: fh.read(CHUNK), b""):
                digest.update(chunk)
    except (OSError, EOFError) as err:
        raise DataError(f"{path}: not a readable gzip file ({err})") from err
    return digest.hexdigest()


def expected_contents(info: Mapping[str, Any]) -> dict[str, str]:
    """layout path -> pinned sha256 of its content (downloaded files stored as they are + converter outputs)."""
    out = {f["to"]: f["sha256"] for f in info.get("files", ()) if f.get("to") and f.get("sha256")}
    out.update(info.get("options", {}).get("expect", {}))
    return out


# ---------------------------------------------------------------------------------------------- download
def download(url: str, dest: Path, sha256: str | None, *, timeout: float = 60.0, log: Log = print) -> str:
    """Stream `url` to `dest`; a short body (fewer bytes than Content-Length) or another sha256 than the
    pinned one is an error. Returns the sha256 of what was received."""
    request = urllib.request.Request(url, headers={"User-Agent": "biobench-data-fetch"})
    digest, received = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response, dest.open("wb") as out:
            expected_len = response.headers.get("Content-Length")
            for chunk in iter(lambda: response.read(CHUNK), b""):
                out.write(chunk)
                digest.update(chunk)
                received += len(chunk)
    except http.client.IncompleteRead as err:
        raise DataError(f"download truncated: {url}: the connection closed after {received + len(err.partial):,} "
                        f"bytes of {received + len(err.partial) + (err.expected or 0):,}; nothing was written to the data "
                        "folder, run the command again") from err
    except (urllib.error.URLError, TimeoutError, OSError, http.client.HTTPException) as err:
        if isinstance(err, urllib.error.HTTPError):
            raise DataError(f"download failed: {url}: HTTP {err.code} {err.reason}") from err
        reason = getattr(err, "reason", err)
        raise DataError(f"download failed: {url}: {reason}. Check the network (or download it yourself and use "
                        "`biobench data add`)") from err
    if expected_len is not None and received != int(expected_len):
        raise DataError(f"download truncated: {url}: got {received} of {expected_len} bytes; nothing was written "
                        "to the data folder, run the command again")
    got = digest.hexdigest()
    if sha256 and got != sha256:
        raise DataError(f"checksum mismatch: {url}: sha256 {got}, expected {sha256}; the file changed at the "
                        "source or the download is corrupt; nothing was written to the data folder")
    log(f"  downloaded {url} ({received:,} bytes, sha256 {got[:12]}…"
        + (", verified)" if sha256 else ", NOT verified: no sha256 is pinned for this file)"))
    return got


# ---------------------------------------------------------------------------------------------- archives
@dataclass(frozen=True)
class Member:
    name: str  # path inside the archive (or the file's own name for a plain file)
    read: Callable[[], bytes]


def _members(path: Path, stack: contextlib.ExitStack) -> list[Member]:
    """The files of a zip / tar(.gz) archive, or the file itself; what was given decides, not its suffix.
    A zip stays open in `stack` (members read on demand); a tar is read in one pass (it cannot seek)."""
    if zipfile.is_zipfile(path):
        zf = stack.enter_context(zipfile.ZipFile(path))
        members = [Member(i.filename, functools.partial(zf.read, i.filename)) for i in zf.infolist() if not i.is_dir()]
    elif _is_tar(path):
        members = []
        try:
            with tarfile.open(path, "r:*") as tar:
                for info in tar:
                    if info.isfile():
                        data = tar.extractfile(info).read()
                        members.append(Member(info.name.removeprefix("./"), functools.partial(bytes, data)))
        except (OSError, EOFError, tarfile.TarError) as err:
            raise DataError(f"{path}: archive is damaged or truncated ({err}); download it again") from err
    else:
        members = [Member(path.name, path.read_bytes)]
    members = [m for m in members if not any(s in m.name for s in SKIPPED_MEMBERS)]
    return [inner for m in members for inner in _expand_nested(m, stack)]


def _expand_nested(member: Member, stack: contextlib.ExitStack, depth: int = 2) -> list[Member]:
    """A zip / tar(.gz) member opened in place, its files named `outer/inner`; any other member as it is.
    Why: Zenodo's whole-record download (`/api/records/N/files-archive`) is a zip of the record's files,
    which are often zips themselves (FRASIMED)."""
    if depth == 0 or not member.name.lower().endswith(NESTED_SUFFIXES):
        return [member]
    data = member.read()
    try:
        if zipfile.is_zipfile(io.BytesIO(data)):
            zf = stack.enter_context(zipfile.ZipFile(io.BytesIO(data)))
            found = [Member(f"{member.name}/{i.filename}", functools.partial(zf.read, i.filename))
                     for i in zf.infolist() if not i.is_dir()]
        else:
            found = []
            with tarfile.open(fileobj=io.BytesIO(data), mode="r:*") as tar:
                for info in tar:
                    if info.isfile():
                        found.append(Member(f"{member.name}/{info.name.removeprefix('./')}",
                                            functools.partial(bytes, tar.extractfile(info).read())))
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise DataError(f"{member.name}: archive inside the download is damaged or truncated ({err}); "
                        "download it again") from err
    found = [m for m in found if not any(s in m.name for s in SKIPPED_MEMBERS)]
    return [inner for m in found for inner in _expand_nested(m, stack, depth - 1)]


def _is_tar(path: Path) -> bool:
    try:
        return tarfile.is_tarfile(path)
    except (OSError, EOFError, tarfile.TarError):
        return False


def _check_readable(path: Path) -> None:
    """Read a whole archive once so a truncated file fails here, with its name, not half-way through."""
    try:
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as zf:
                bad = zf.testzip()
            if bad:
                raise DataError(f"{path}: member {bad} is corrupt; download the archive again")
        elif path.name.endswith((".tar.gz", ".tgz", ".tar")) or _is_tar(path):
            with tarfile.open(path, "r:*") as tar:
                for info in tar:
                    if info.isfile():
                        tar.extractfile(info).read()
        elif path.suffix == ".gz":
            with gzip.open(path, "rb") as fh:
                while fh.read(CHUNK):
                    pass
    except (OSError, EOFError, tarfile.TarError, zipfile.BadZipFile) as err:
        raise DataError(f"{path}: archive is damaged or truncated ({err}); download it again") from err


def _write(dest: Path, data: bytes, source_name: str) -> None:
    """Write bytes to a layout path, gzipping when the layout wants `.gz` and the bytes are not gzip already
    (`source_name` only names the source in errors)."""
    dest.parent.mkdir(parents=True, exist_ok=True)
    if dest.suffix != ".gz" and data[:2] == b"\x1f\x8b":
        raise DataError(f"{source_name}: is gzip-compressed but the layout wants plain {dest.name}; gunzip it first")
    if dest.suffix == ".gz" and data[:2] != b"\x1f\x8b":
        data = gzip.compress(data, mtime=0)
    dest.write_bytes(data)


def _suffix_match(name: str, suffix: str) -> bool:
    return name == suffix or name.endswith("/" + suffix)


# ---------------------------------------------------------------------------------------------- converters
def _convert_files(inputs: Sequence[tuple[Mapping[str, Any], Path]], info: Mapping[str, Any], out: Path) -> None:
    for entry, path in inputs:
        _write(out / entry["to"], path.read_bytes(), path.name)


def _all_members(inputs: Sequence[tuple[Mapping[str, Any], Path]], stack: contextlib.ExitStack) -> list[Member]:
    return [m for _, path in inputs for m in _members(path, stack)]


def _missing(task_id: str, wanted: Sequence[str], members: Sequence[Member], inputs) -> DataError:
    names = [m.name for m in members]
    shown = ", ".join(names[:8]) + (f" … ({len(names)} files)" if len(names) > 8 else "")
    given = ", ".join(str(p) for _, p in inputs)
    return DataError(f"task '{task_id}': {given} does not hold {', '.join(wanted)} (found: {shown or 'nothing'}); "
                     "is it the file the task's instructions name? (`biobench data status` shows them)")


def _convert_extract(task_id: str, inputs, info: Mapping[str, Any], out: Path, stack: contextlib.ExitStack) -> None:
    members = _all_members(inputs, stack)
    wanted = info.get("options", {}).get("members", {})
    missing = []
    for suffix, target in wanted.items():
        found = [m for m in members if _suffix_match(m.name, suffix)]
        if not found:
            missing.append(suffix)
            continue
        _write(out / target, found[0].read(), found[0].name)
    if missing:
        raise _missing(task_id, missing, members, inputs)


def _convert_extract_tree(task_id: str, inputs, info: Mapping[str, Any], out: Path, stack: contextlib.ExitStack) -> None:
    """Every member whose file name matches one of `patterns` -> `to/<file name>` (a flat BRAT folder)."""
    members = _all_members(inputs, stack)
    opts = info.get("options", {})
    chosen: dict[str, Member] = {}
    for m in members:
        name = m.name.rsplit("/", 1)[-1]
        if any(fnmatch.fnmatch(name, p) for p in opts.get("patterns", ())):
            if name in chosen:
                raise DataError(f"task '{task_id}': two files named {name} ({chosen[name].name}, {m.name}); "
                                "cannot flatten them into one folder")
            chosen[name] = m
    if not chosen:
        raise _missing(task_id, list(opts.get("patterns", ())), members, inputs)
    for name, m in chosen.items():
        _write(out / opts["to"] / name, m.read(), m.name)


def _convert_repack(task_id: str, inputs, info: Mapping[str, Any], out: Path, stack: contextlib.ExitStack) -> None:
    """Each set folder (found at any depth, its name compared case-insensitively) -> one .tar.gz whose member
    names start with the folder's name as the spec writes it."""
    members = _all_members(inputs, stack)
    sets = info.get("options", {}).get("sets", {})
    missing = []
    for folder, target in sets.items():
        chosen = []
        for m in members:
            parts = m.name.split("/")
            folded = [p.casefold() for p in parts[:-1]]
            if folder.casefold() in folded:
                chosen.append(("/".join([folder, *parts[folded.index(folder.casefold()) + 1:]]), m))
        if not chosen:
            missing.append(folder + "/")
            continue
        dest = out / target
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w:gz") as tar:
            for name, m in sorted(chosen, key=lambda c: c[0]):
                data = m.read()
                tinfo = tarfile.TarInfo(name)
                tinfo.size = len(data)
                tar.addfile(tinfo, io.BytesIO(data))
    if missing:
        raise _missing(task_id, missing, members, inputs)


def _convert_join(task_id: str, inputs, info: Mapping[str, Any], out: Path, stack: contextlib.ExitStack) -> None:
    """Concatenate the members matching a pattern, in name order, into one layout file."""
    members = _all_members(inputs, stack)
    missing = []
    for target, pattern in info.get("options", {}).get("join", {}).items():
        chosen = sorted((m for m in members if fnmatch.fnmatch(m.name, pattern) or fnmatch.fnmatch(m.name, "*/" + pattern)),
                        key=lambda m: m.name)
        if not chosen:
            missing.append(pattern)
            continue
        _write(out / target, b"".join(m.read() for m in chosen), "joined")
    if missing:
        raise _missing(task_id, missing, members, inputs)


def _convert(spec: TaskSpec, info: Mapping[str, Any], inputs, out: Path) -> None:
    convert = info.get("convert")
    converters = {"extract": _convert_extract, "extract_tree": _convert_extract_tree, "repack": _convert_repack,
                  "join": _convert_join}
    if convert == "files":
        _convert_files(inputs, info, out)
    elif convert in converters:
        with contextlib.ExitStack() as stack:
            converters[convert](spec.id, inputs, info, out, stack)
    else:
        raise DataError(f"task '{spec.id}': no converter for its data: {info.get('note') or spec.access}")


# ---------------------------------------------------------------------------------------------- install
def _staging(data_dir: Path, task_id: str) -> Path:
    data_dir.mkdir(parents=True, exist_ok=True)
    return Path(tempfile.mkdtemp(prefix=f".biobench-{task_id}-", dir=data_dir))


def _outputs(out: Path) -> Iterator[Path]:
    return (p for p in sorted(out.rglob("*")) if p.is_file())


def _install(spec: TaskSpec, info: Mapping[str, Any], out: Path, data_dir: Path, log: Log) -> list[Path]:
    """Check pinned contents in staging, then move every output into the data folder."""
    produced = {p.relative_to(out).as_posix(): p for p in _outputs(out)}
    for rel, sha in expected_contents(info).items():
        if rel in produced and content_sha256(produced[rel]) != sha:
            raise DataError(f"checksum mismatch: {rel} of task '{spec.id}' has content sha256 "
                            f"{content_sha256(produced[rel])}, expected {sha}; nothing was written to the data folder")
    placed = []
    for rel, path in produced.items():
        dest = data_dir / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        os.replace(path, dest)
        placed.append(dest)
        log(f"  wrote {dest}")
    return placed


def fetch_task(spec: TaskSpec, data_dir: Path, *, timeout: float = 60.0, log: Log = print) -> list[Path]:
    """Download the task's open data from its original source, verify, convert, install; the written paths."""
    info = fetch_info(spec)
    if info.get("gated"):
        files = "; ".join(f"{f.get('name', '')} {f.get('url', '')}".strip() for f in info.get("files", ()))
        raise DataError(f"task '{spec.id}' is credentialed/gated data, which biobench never downloads: get it "
                        f"yourself ({files}), then run `biobench data add {spec.id} FILE...`. {spec.access}")
    if info.get("convert") is None or not info.get("files"):
        raise DataError(f"task '{spec.id}': nothing to fetch automatically: {info.get('note') or spec.access}")
    staging = _staging(data_dir, spec.id)
    try:
        (staging / "download").mkdir()
        inputs = []
        for i, entry in enumerate(info["files"]):
            name = Path(entry["url"].split("?")[0]).name or f"file{i}"
            if not entry.get("sha256"):
                log(f"  note: {entry.get('sha256_note') or 'no sha256 pinned for this file'}")
            dest = staging / "download" / f"{i}-{name}"
            download(entry["url"], dest, entry.get("sha256"), timeout=timeout, log=log)
            if entry.get("to") is None:
                _check_readable(dest)
            inputs.append((entry, dest))
        _convert(spec, info, inputs, staging / "out")
        return _install(spec, info, staging / "out", data_dir, log)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def add_task(spec: TaskSpec, data_dir: Path, files: Sequence[str | Path], *, log: Log = print) -> list[Path]:
    """Install data the user downloaded (archives as distributed): check, convert, install."""
    info = fetch_info(spec)
    if info.get("convert") is None:
        raise DataError(f"task '{spec.id}': no converter for its data: {info.get('note') or spec.access}")
    paths = [Path(f).expanduser() for f in files]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file (give the archive you downloaded, as distributed)")
        _check_readable(path)
    entries = list(info.get("files", ()))
    if info["convert"] == "files":  # plain files: match each given file to the spec's entry by name
        inputs = []
        for path in paths:
            match = [e for e in entries if Path(e["url"]).name == path.name.removesuffix(".gz") or Path(e["to"]).name == path.name]
            if not match:
                raise DataError(f"task '{spec.id}': {path.name} is not one of its files "
                                f"({', '.join(Path(e['url']).name for e in entries)})")
            if match[0].get("sha256") and content_sha256(path) != match[0]["sha256"]:
                raise DataError(f"checksum mismatch: {path} has content sha256 {content_sha256(path)}, expected "
                                f"{match[0]['sha256']} (the file of {match[0]['url']})")
            inputs.append((match[0], path))
    else:
        inputs = [({}, path) for path in paths]
    staging = _staging(data_dir, spec.id)
    try:
        _convert(spec, info, inputs, staging / "out")
        return _install(spec, info, staging / "out", data_dir, log)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# ---------------------------------------------------------------------------------------------- status
@dataclass(frozen=True)
class TaskStatus:
    task_id: str
    state: str  # found | missing | checksum mismatch | generated | hub
    detail: str
    fix: str  # the one command (or instruction) that fixes a state other than found


def fix_command(spec: TaskSpec, data_dir: Path | None) -> str:
    where = f" --data-dir {data_dir}" if data_dir else ""
    info = spec.fetch or {}
    if info.get("gated"):
        return f"biobench data add {spec.id} FILE...{where}   ({'; '.join(f.get('url', '') for f in info.get('files', ()))})"
    if info.get("convert") and info.get("files"):
        return f"biobench data fetch {spec.id}{where}"
    return f"see `biobench tasks --all`: {spec.access or 'no download source known'}"


def task_status(spec: TaskSpec, data_dir: Path | None) -> TaskStatus:
    source, where = locate(spec, data_dir)
    if source is not None and source.type == "generated":
        return TaskStatus(spec.id, "generated", where, "")
    if source is None:
        hubs = [s.describe() for s in spec.sources if s.type == "hub"]
        state = "hub" if hubs else "missing"
        detail = f"not local; loads from {', '.join(hubs)} when the hub is reachable" if hubs else where
        return TaskStatus(spec.id, state, detail, fix_command(spec, data_dir))
    bad = []
    base = Path(spec.base_dir) if spec.base_dir else data_dir
    for rel, sha in expected_contents(spec.fetch or {}).items():
        path = resolve_path(base, rel)
        if path.is_file() and content_sha256(path) != sha:
            bad.append(rel)
    version = f" [{source.version}]" if source.version else ""
    if bad:
        return TaskStatus(spec.id, "checksum mismatch", f"{', '.join(bad)} differ from the pinned original",
                          fix_command(spec, data_dir))
    return TaskStatus(spec.id, "found", f"{where}{version}", "")
