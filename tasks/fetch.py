"""Getting a task's data into the documented layout: download (open data), add (a file the user downloaded),
and status (what is there, and the one command that fixes what is not).

Each task spec's `fetch` entry is data, not code:

    "fetch": {"licence": "...", "gated": false, "convert": "files" | "extract" | "repack" | "join" | null,
              "files": [{"url": ..., "sha256": hex or null, "sha256_note": why null, "to": layout path, "name": ...}],
              "options": {...converter options..., "expect": {layout path: sha256 of its (gunzipped) content}},
              "note": "why there is no converter / no download"}

Why the care: a download that is cut short or does not match its pinned sha256 must never leave a file in
the data folder that a later `biobench eval` would read. Everything is downloaded and converted in a staging
folder `.biobench-<task>-*` inside the data folder (same file system; one a killed run left is removed by the
next run), and only a complete, verified result is moved into place, all files or none (every destination is
checked first, a replaced file is set aside and put back if a move fails). Archives are read as if a stranger
made them (tasks/archives.py: capped expansion, members streamed and read only when needed, no `..` names). A sha256 is pinned only where a byte-identical
copy of the file was at hand when the spec was written; otherwise the spec and the output say it is not.

Gated / credentialed data (PhysioNet, n2c2, DiaMED's terms) is never downloaded: `add` takes the archive as
it is distributed.
"""

from __future__ import annotations

import contextlib
import fnmatch
import gzip
import hashlib
import http.client
import io
import os
import socket
import tarfile
import tempfile
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.runtime.files import disk_full_guard, is_disk_full
from biobench.runtime.ownership import mark_created, owned, remove_owned
from biobench.runtime.paths import UnsafePathError, safe_member
from biobench.tasks.archives import CHUNK, Limits, Member, Unpacker, check_readable, one_line, write_stream
from biobench.tasks.hub import DEFAULT_ENDPOINT, datasets_cached, endpoint, offline_reason, offline_requested
from biobench.tasks.loading import locate, resolve_path
from biobench.tasks.options import CONVERTER_OPTIONS
from biobench.tasks.readers import meddialog
from biobench.tasks.registry import TaskSpec

CONVERTERS = tuple(CONVERTER_OPTIONS)  # each converter's options: tasks/options.py
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


def add_info(info: Mapping[str, Any]) -> Mapping[str, Any]:
    """The fetch entry `data add` uses: `info` with its `add` entry (convert, options, note) in place, if any."""
    add = info.get("add")
    if not add:
        return info
    return {**{k: v for k, v in info.items() if k not in ("add", "files", "options")}, "files": [], **add}


def hub_url(url: str) -> str:
    """A download URL on the Hugging Face hub, moved to $HF_ENDPOINT when that names another endpoint (a mirror,
    or the loopback hub of the tests), as the hub libraries do for `datasets.load_dataset`."""
    if url.startswith(DEFAULT_ENDPOINT + "/") and endpoint() != DEFAULT_ENDPOINT:
        return endpoint() + url[len(DEFAULT_ENDPOINT):]
    return url


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
        if is_disk_full(err):
            raise
        fix = "download it yourself (a browser) and install it with `biobench data add`"
        if isinstance(err, urllib.error.HTTPError):
            if 300 <= err.code < 400:
                raise DataError(f"download failed: {url}: the server redirects in a loop or without a target "
                                f"(HTTP {err.code}); {fix}") from None
            raise DataError(f"download failed: {url}: HTTP {err.code} {one_line(err.reason)}; check the URL or {fix}") from None
        reason = getattr(err, "reason", err)
        raise DataError(f"download failed: {url}: {one_line(reason)}. Check the network (or {fix})") from None
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


# ---------------------------------------------------------------------------------------------- converters
def _write(dest: Path, member: Member) -> None:
    with member.open() as src:
        write_stream(dest, src, member.what)


def _suffix_match(name: str, suffix: str) -> bool:
    return name == suffix or name.endswith("/" + suffix)


def _layout(out: Path, rel: str) -> Path:
    """Where a spec's layout path goes under the staging folder (a spec naming `../x` is refused)."""
    try:
        return safe_member(out, rel)
    except UnsafePathError as err:
        raise DataError(f"task spec: layout path {err}") from None


@dataclass
class Inputs:
    """The files one install converts: (spec file entry, local path, label for messages: URL or file)."""

    files: list[tuple[Mapping[str, Any], Path, str]]
    unpacker: Unpacker
    log: Log = print  # what a converter reports (rows it dropped)

    def members(self) -> list[Member]:
        return [m for _, path, label in self.files for m in self.unpacker.members(path, label)]

    def given(self) -> str:
        return ", ".join(label for _, _, label in self.files)


def _convert_files(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    for entry, path, label in inputs.files:
        with path.open("rb") as src:
            write_stream(_layout(out, entry["to"]), src, label)


def _missing(task_id: str, wanted: Sequence[str], members: Sequence[Member], inputs: Inputs) -> DataError:
    names = [m.name for m in members]
    shown = ", ".join(names[:8]) + (f" … ({len(names)} files)" if len(names) > 8 else "")
    return DataError(f"task '{task_id}': {inputs.given()} does not hold {', '.join(wanted)} (found: "
                     f"{shown or 'nothing'}); is it the file the task's instructions name? (`biobench data status` "
                     "shows them)")


def _convert_extract(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    members = inputs.members()
    wanted = info.get("options", {}).get("members", {})
    missing = []
    for suffix, target in wanted.items():
        found = [m for m in members if _suffix_match(m.name, suffix)]
        if not found:
            missing.append(suffix)
            continue
        _write(_layout(out, target), found[0])
    if missing:
        raise _missing(task_id, missing, members, inputs)


def _convert_extract_tree(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    """Every member whose file name matches one of `patterns` -> `to/<file name>` (a flat BRAT folder)."""
    members = inputs.members()
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
        _write(_layout(out, f"{opts['to']}/{name}"), m)


def _convert_repack(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    """Each set folder (found at any depth, its name compared case-insensitively) -> one .tar.gz whose member
    names start with the folder's name as the spec writes it."""
    members = inputs.members()
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
        dest = _layout(out, target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        with tarfile.open(dest, "w:gz") as tar:
            for name, m in sorted(chosen, key=lambda c: c[0]):
                tinfo = tarfile.TarInfo(name)
                tinfo.size = m.size
                with m.open() as src:
                    tar.addfile(tinfo, src)
    if missing:
        raise _missing(task_id, missing, members, inputs)


class _Joined(io.RawIOBase):
    """Several members read one after the other as one stream (the `join` converter)."""

    def __init__(self, members: Sequence[Member]):
        super().__init__()
        self.members = list(members)
        self.current: io.BufferedIOBase | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer) -> int:
        while True:
            if self.current is None:
                if not self.members:
                    return 0
                self.current = self.members.pop(0).open()
            n = self.current.readinto(buffer)
            if n:
                return n
            self.current.close()
            self.current = None


def _convert_join(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    """Concatenate the members matching a pattern, in name order, into one layout file."""
    members = inputs.members()
    missing = []
    for target, pattern in info.get("options", {}).get("join", {}).items():
        chosen = sorted((m for m in members if fnmatch.fnmatch(m.name, pattern) or fnmatch.fnmatch(m.name, "*/" + pattern)),
                        key=lambda m: m.name)
        if not chosen:
            missing.append(pattern)
            continue
        with io.BufferedReader(_Joined(chosen), CHUNK) as src:
            write_stream(_layout(out, target), src, f"{inputs.given()} (joined {pattern})")
    if missing:
        raise _missing(task_id, missing, members, inputs)


def _member_bytes(member: Member, limit: int) -> bytes:
    with member.open() as src:
        data = src.read(limit + 1)
    if len(data) > limit:
        raise DataError(f"{member.what}: over the {limit:,} bytes such a file may have; is it the release's file?")
    return data


def _convert_meddialog_release(task_id: str, inputs: Inputs, info: Mapping[str, Any], out: Path) -> None:
    """MedDialog-FR's two release files (given as they are, or inside an archive) -> the hub copy's parquet files
    (`text`, `labels_raw`; one per split), built as the harness builds them (tasks/readers/meddialog.py)."""
    from datasets import Dataset, Features, Sequence, Value

    members = inputs.members()
    wanted = {"labels": meddialog.LABELS_FILE, "texts": meddialog.TEXTS_FILE}
    found = {key: next((m for m in members if _suffix_match(m.name, name)), None) for key, name in wanted.items()}
    missing = [wanted[key] for key, m in found.items() if m is None]
    if missing:
        raise _missing(task_id, missing, members, inputs)
    labels, texts = found["labels"], found["texts"]
    assert labels is not None and texts is not None  # none missing
    where = {m.name: m.source if m.name == Path(m.source).name else m.what for m in (labels, texts)}  # a file given as is: its path
    splits = meddialog.release_splits(_member_bytes(labels, meddialog.MAX_FILE_BYTES),
                                      _member_bytes(texts, meddialog.MAX_FILE_BYTES), where[labels.name],
                                      where[texts.name], inputs.log)
    features = Features({"text": Value("string"), "labels_raw": Sequence(Value("string"))})  # the hub copy's
    for split, target in info.get("options", {}).get("splits", {}).items():
        rows = splits.get(split, [])
        if not rows:
            raise DataError(f"task '{task_id}': {where[labels.name]} gives no labelled sample to split {split!r}; "
                            "nothing was installed")
        dest = _layout(out, target)
        dest.parent.mkdir(parents=True, exist_ok=True)
        Dataset.from_list(rows, features=features).to_parquet(str(dest))


CONVERTER_FUNCTIONS = {"files": _convert_files, "extract": _convert_extract, "extract_tree": _convert_extract_tree,
                       "repack": _convert_repack, "join": _convert_join,
                       "meddialog_release": _convert_meddialog_release}


def _convert(spec: TaskSpec, info: Mapping[str, Any], inputs: Inputs, out: Path) -> None:
    convert = info.get("convert")
    if convert not in CONVERTER_FUNCTIONS:
        raise DataError(f"task '{spec.id}': no converter for its data: {info.get('note') or spec.access}")
    CONVERTER_FUNCTIONS[convert](spec.id, inputs, info, out)


# ---------------------------------------------------------------------------------------------- install
STAGING_PREFIX = ".biobench-"
OWNER = "owner"  # pid@host of the run that made a staging folder


def _stale(folder: Path) -> bool:
    """A staging folder left by a killed run: its owner process is gone. Only a folder biobench made (its
    ownership marker, or the owner file an earlier biobench wrote right after making it) is ever taken for one."""
    try:
        pid, _, host = (folder / OWNER).read_text().strip().partition("@")
    except OSError:
        return False
    if host != socket.gethostname():
        return False
    try:
        os.kill(int(pid), 0)
    except ProcessLookupError:
        return True
    except (PermissionError, ValueError):
        return False
    return False


def _legacy_staging(folder: Path) -> bool:
    """A staging folder of a biobench before the ownership marker: its owner file (pid@host) is there."""
    return (folder / OWNER).is_file()


def _staging(data_dir: Path, task_id: str, log: Log) -> Path:
    """A fresh `.biobench-<task>-*` folder in the data folder (same file system: installs are renames);
    those a killed run left for this task are removed first."""
    data_dir.mkdir(parents=True, exist_ok=True)
    for old in data_dir.glob(f"{STAGING_PREFIX}{task_id}-*"):
        if old.is_dir() and owned(old, _legacy_staging) and _stale(old):
            remove_owned(old, _legacy_staging)
            log(f"  removed {old} (left by an interrupted run)")
    folder = Path(tempfile.mkdtemp(prefix=f"{STAGING_PREFIX}{task_id}-", dir=data_dir))
    try:
        mark_created(folder, f"staging of task {task_id}")  # this process made it: removed whatever happens
        (folder / OWNER).write_text(f"{os.getpid()}@{socket.gethostname()}")
    except BaseException:
        remove_owned(folder)
        raise
    return folder


def _outputs(out: Path) -> Iterator[Path]:
    return (p for p in sorted(out.rglob("*")) if p.is_file())


def _install(spec: TaskSpec, info: Mapping[str, Any], staging: Path, data_dir: Path, log: Log) -> list[Path]:
    """Check pinned contents and every destination in staging, then move the outputs into the data folder
    as one step: a file already there is set aside first, and if any move fails, every file is put back."""
    out = staging / "out"
    produced = {p.relative_to(out).as_posix(): p for p in _outputs(out)}
    for rel, sha in expected_contents(info).items():
        if rel in produced and content_sha256(produced[rel]) != sha:
            raise DataError(f"checksum mismatch: {rel} of task '{spec.id}' has content sha256 "
                            f"{content_sha256(produced[rel])}, expected {sha}; nothing was written to the data folder")
    for rel in produced:
        dest = data_dir / rel
        blocked = next((p for p in (dest, *dest.parents) if p != data_dir and data_dir in p.parents
                        and (p.is_dir() if p == dest else p.exists() and not p.is_dir())), None)
        if blocked is not None:
            kind = "a folder" if blocked.is_dir() else "a file"
            raise DataError(f"{blocked} is {kind} where task '{spec.id}' installs {rel}: move it away and run the "
                            "command again; nothing was installed")
    moved: list[tuple[Path, Path | None]] = []  # (installed file, what it replaced, set aside in staging)
    aside = staging / "replaced"
    try:
        for i, (rel, path) in enumerate(produced.items()):
            dest = data_dir / rel
            dest.parent.mkdir(parents=True, exist_ok=True)
            old = None
            if dest.exists():
                old = aside / str(i)
                old.parent.mkdir(exist_ok=True)
                os.replace(dest, old)
            moved.append((dest, old))
            os.replace(path, dest)
    except BaseException:
        for dest, old in reversed(moved):
            with contextlib.suppress(OSError):
                if old is not None:
                    os.replace(old, dest)
                else:
                    dest.unlink(missing_ok=True)
        raise
    for dest, _ in moved:
        log(f"  wrote {dest}")
    return [dest for dest, _ in moved]


@contextlib.contextmanager
def _staged(spec: TaskSpec, data_dir: Path, log: Log) -> Iterator[Path]:
    """A staging folder for one install, removed afterwards whatever happened; a full disk is one line."""
    with disk_full_guard(data_dir, 0, lambda: "the data folder is as it was"):
        staging = _staging(data_dir, spec.id, log)
        try:
            yield staging
        finally:
            remove_owned(staging)


def fetch_task(spec: TaskSpec, data_dir: Path, *, timeout: float = 60.0, log: Log = print,
               limits: Limits | None = None) -> list[Path]:
    """Download the task's open data from its original source, verify, convert, install; the written paths."""
    info = fetch_info(spec)
    limits = limits or Limits.from_env()
    if info.get("gated"):
        named = "; ".join(f"{f.get('name', '')} {f.get('url', '')}".strip() for f in info.get("files", ()))
        raise DataError(f"task '{spec.id}' is credentialed/gated data, which biobench never downloads: get it "
                        f"yourself ({named}), then run `biobench data add {spec.id} FILE...`. {spec.access}")
    if info.get("convert") is None or not info.get("files"):
        raise DataError(f"task '{spec.id}': nothing to fetch automatically: {info.get('note') or spec.access}")
    with _staged(spec, data_dir, log) as staging:
        (staging / "download").mkdir()
        files = []
        for i, entry in enumerate(info["files"]):
            name = Path(entry["url"].split("?")[0]).name or f"file{i}"
            if not entry.get("sha256"):
                log(f"  note: {entry.get('sha256_note') or 'no sha256 pinned for this file'}")
            dest = staging / "download" / f"{i}-{name}"
            url = hub_url(entry["url"])
            download(url, dest, entry.get("sha256"), timeout=timeout, log=log)
            if entry.get("to") is None:
                check_readable(dest, url, limits)
            files.append((entry, dest, url))
        with Unpacker(staging / "nested", limits, sum(p.stat().st_size for _, p, _ in files)) as unpacker:
            _convert(spec, info, Inputs(files, unpacker, log), staging / "out")
        return _install(spec, info, staging, data_dir, log)


def add_task(spec: TaskSpec, data_dir: Path, files: Sequence[str | Path], *, log: Log = print,
             limits: Limits | None = None) -> list[Path]:
    """Install data the user downloaded (archives as distributed): check, convert, install. A spec whose
    `fetch.add` names another converter (MedDialog-FR: fetch takes the authors' hub copy, add the original
    release's files) installs the given files with that one."""
    info = add_info(fetch_info(spec))
    limits = limits or Limits.from_env()
    if info.get("convert") is None:
        raise DataError(f"task '{spec.id}': no converter for its data: {info.get('note') or spec.access}")
    paths = [Path(f).expanduser() for f in files]
    for path in paths:
        if not path.is_file():
            raise DataError(f"{path}: no such file (give the archive you downloaded, as distributed)")
        check_readable(path, str(path), limits)
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
            inputs.append((match[0], path, str(path)))
    else:
        inputs = [({}, path, str(path)) for path in paths]
    with _staged(spec, data_dir, log) as staging:
        with Unpacker(staging / "nested", limits, sum(p.stat().st_size for p in paths)) as unpacker:
            _convert(spec, info, Inputs(inputs, unpacker, log), staging / "out")
        return _install(spec, info, staging, data_dir, log)


# ---------------------------------------------------------------------------------------------- status
@dataclass(frozen=True)
class TaskStatus:
    task_id: str
    state: str  # found | missing | checksum mismatch | generated | hub | hub, offline
    detail: str
    fix: str  # the one command (or instruction) that fixes a state other than found


def fix_command(spec: TaskSpec, data_dir: Path | None) -> str:
    where = f" --data-dir {data_dir}" if data_dir else ""
    info = spec.fetch or {}
    if info.get("gated"):
        return f"biobench data add {spec.id} FILE...{where}   ({'; '.join(f.get('url', '') for f in info.get('files', ()))})"
    if info.get("convert") and info.get("files"):
        add = info.get("add")
        also = f", or biobench data add {spec.id} FILE...{where} ({add.get('note', 'files you hold')})" if add else ""
        return f"biobench data fetch {spec.id}{where}{also}"
    return f"see `biobench tasks --all`: {spec.access or 'no download source known'}"


def task_status(spec: TaskSpec, data_dir: Path | None, checksums: bool = True) -> TaskStatus:
    """Whether a task's data is here (found, generated, a usable hub copy) or what is missing and the command
    that fixes it. `checksums=False`: files found are not hashed against their pinned originals (a dry run
    asks only whether runs can start)."""
    source, where = locate(spec, data_dir)
    if source is not None and source.type == "generated":
        return TaskStatus(spec.id, "generated", where, "")
    if source is None:
        hubs = [s for s in spec.sources if s.type == "hub"]
        names = ", ".join(s.describe() for s in hubs)
        if hubs and offline_requested() and not any(s.dataset is not None and datasets_cached(s.dataset) for s in hubs):
            # offline, the hub copy is no source at all: say so instead of "hub", which reads as available
            return TaskStatus(spec.id, "hub, offline", f"not local, and {names} is not reachable offline "
                              f"({offline_reason()}) nor in the datasets cache",
                              f"{fix_command(spec, data_dir)}; or biobench prefetch --tasks {spec.id} where the hub "
                              "is reachable (then copy the Hugging Face cache here)")
        if hubs and offline_requested():
            return TaskStatus(spec.id, "hub", f"not local; {names} is in the datasets cache (read offline)", "")
        state = "hub" if hubs else "missing"
        detail = f"not local; loads from {names} when the hub is reachable" if hubs else where
        return TaskStatus(spec.id, state, detail, fix_command(spec, data_dir))
    bad = []
    base = Path(spec.base_dir) if spec.base_dir else data_dir
    for rel, sha in (expected_contents(spec.fetch or {}) if checksums else {}).items():
        assert base is not None  # a local source was located, so there is a data folder
        path = resolve_path(base, rel)
        if path.is_file() and content_sha256(path) != sha:
            bad.append(rel)
    version = f" [{source.version}]" if source.version else ""
    if bad:
        return TaskStatus(spec.id, "checksum mismatch", f"{', '.join(bad)} differ from the pinned original",
                          fix_command(spec, data_dir))
    return TaskStatus(spec.id, "found", f"{where}{version}", "")
