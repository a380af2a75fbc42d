"""Where a request queue (and the worker's view of it) lives: a folder or a Hugging Face dataset, behind one
small interface of five calls.

Why so small: the queue needs to list files, read one, replace one, and *create one only if it does not exist yet*
— the last is what makes a claim atomic when two workers race. A folder does it with O_CREAT|O_EXCL; a hub dataset
with a commit whose `parent_commit` is the revision the absence was checked at (the hub refuses the commit when
someone committed in between: optimistic concurrency, huggingface_hub's documented `create_commit` argument).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import time
from collections.abc import Callable, Iterator
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from biobench.errors import BiobenchError, ConfigError, DiskFullError, ResultsError
from biobench.runtime.files import atomic_write, create_new, disk_full_message, is_disk_full
from biobench.runtime.jsonfile import read_bytes
from biobench.runtime.paths import HF_DATASETS

MAX_FILE_BYTES = 256 * 1024  # a request is a few KiB; a lease 100 bytes; anything larger is not ours


class Storage(Protocol):
    label: str

    def list(self, prefix: str) -> list[str]:
        """Paths (relative, '/'-separated) of the files under `prefix`, sorted."""

    def read(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        """The file's bytes, None when it does not exist; UnsafeJSONError when it is not a regular file of at
        most `max_bytes` (a FIFO, a device, /dev/zero: refused without blocking)."""

    def write(self, path: str, data: bytes) -> None:
        """Create or replace the file in one step (readers see the old or the new bytes, never a mix)."""

    def create(self, path: str, data: bytes) -> bool:
        """Create the file only if it does not exist: True when this call created it, False when it existed."""


def _relative(path: str) -> str:
    """A storage path from data: relative, no '..', no empty parts (a request id never climbs out of the queue)."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or any(p in ("..", ".", "") for p in parts):
        raise ConfigError(f"bad queue path {path!r}: expected a relative path without '..'")
    return "/".join(parts)


class FolderStorage:
    """A queue in a local (or shared network) folder. Every path stays inside it: a request id or a lease
    name never climbs out (`_relative`), and no folder or file on the way may be a symlink (`leases/` linked
    to another folder would put claims there). Reads are bounded and refuse FIFOs and devices; an OS error is
    one ConfigError line, a full disk one DiskFullError line."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.label = str(self.root)
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"queue {root} is not a folder (a file, FIFO or device); give a folder (it is "
                              "created when missing) or hf://datasets/ORG/NAME")

    def _path(self, path: str) -> Path:
        rel = _relative(path)
        target = self.root
        for part in rel.split("/"):
            target = target / part
            if target.is_symlink():
                raise ConfigError(f"queue {self.label}: {target.relative_to(self.root).as_posix()} is a symlink; "
                                  "every folder and file of a queue must be a real one inside it — replace it")
        return target

    def check_layout(self, folders: tuple[str, ...]) -> None:
        """Each of the queue's sub-folders that exists is a real folder inside it (ConfigError otherwise)."""
        for name in folders:
            with self._os_errors("check", name):
                path = self._path(name)
            if path.exists() and not path.is_dir():
                raise ConfigError(f"queue {self.label}: {name} is not a folder; remove it (the worker creates it)")

    @contextlib.contextmanager
    def _os_errors(self, doing: str, path: str, size: int = 0) -> Iterator[None]:
        """An OSError in the block as one line naming the queue (full disk: the promised DiskFullError)."""
        try:
            yield
        except BiobenchError:
            raise
        except OSError as err:
            if is_disk_full(err):
                raise DiskFullError(disk_full_message(self.root, size, "the queue's other files are safe")) from None
            raise ConfigError(f"queue {self.label}: cannot {doing} {path} ({err.strerror or err}); the queue must "
                              "be a folder this user may read and write") from None

    def list(self, prefix: str) -> list[str]:
        with self._os_errors("list", prefix):
            base = self._path(prefix)
            if not base.is_dir():
                if base.exists():
                    raise ConfigError(f"queue {self.label}: {prefix} is not a folder; remove it")
                return []
            out = []
            for folder, dirs, names in os.walk(base):  # never follows a symlinked folder
                dirs[:] = [d for d in dirs if not d.startswith(".")]
                out += [(Path(folder) / n).relative_to(self.root).as_posix() for n in names if not n.startswith(".")]
            return sorted(out)

    def read(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        with self._os_errors("read", path):
            target = self._path(path)
            try:
                return read_bytes(target, max_bytes)
            except (FileNotFoundError, NotADirectoryError):
                return None

    def write(self, path: str, data: bytes) -> None:
        with self._os_errors("write", path, len(data)):
            target = self._path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            self._path(path)  # re-checked: no folder on the way was a symlink
            atomic_write(target, data)

    def create(self, path: str, data: bytes) -> bool:
        """Create the file only if it does not exist (runtime.files.create_new: a temporary file hard-linked
        to the name, so a reader never sees it before its bytes are complete)."""
        with self._os_errors("create", path, len(data)):
            target = self._path(path)
            target.parent.mkdir(parents=True, exist_ok=True)
            self._path(path)
            return create_new(target, data)


class HubStorage:
    """A queue in a Hugging Face dataset repo. `api` is an `HfApi` (or anything with its methods: tests pass
    an in-memory one). With `dry_run` (a folder) nothing is sent: the files live in that folder and every
    operation that would have been committed is appended to `<dry_run>/operations.jsonl`."""

    def __init__(self, repo_id: str, api: Any = None, dry_run: str | Path | None = None,
                 retries: int = 5, clock: Callable[[], float] = time.time) -> None:
        self.repo_id = repo_id
        self.label = f"{HF_DATASETS}{repo_id}" + (f" (dry run in {dry_run})" if dry_run else "")
        self.dry_run = FolderStorage(dry_run) if dry_run else None
        self.retries = retries
        self.clock = clock
        if api is None and dry_run is None:
            from huggingface_hub import HfApi

            api = HfApi()
        self.api = api

    def _record(self, operation: str, path: str, **extra: Any) -> None:
        assert self.dry_run is not None
        log = self.dry_run.root / "operations.jsonl"
        log.parent.mkdir(parents=True, exist_ok=True)
        entry = {"call": "HfApi.create_commit", "repo_id": self.repo_id, "repo_type": "dataset",
                 "operation": operation, "path_in_repo": path, **extra}
        with log.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(entry, sort_keys=True) + "\n")

    def _head(self) -> str:
        return self.api.repo_info(self.repo_id, repo_type="dataset").sha

    def list(self, prefix: str) -> list[str]:
        if self.dry_run:
            return self.dry_run.list(prefix)
        prefix = _relative(prefix).rstrip("/") + "/"
        with self._hub_errors("list its files"):
            files = self.api.list_repo_files(self.repo_id, repo_type="dataset")
        return sorted(f for f in files if f.startswith(prefix))

    @contextlib.contextmanager
    def _hub_errors(self, doing: str) -> Iterator[None]:
        """A hub that cannot be reached (offline, no token, no such dataset) as one line, not a traceback."""
        try:
            yield
        except BiobenchError:
            raise
        except Exception as err:  # huggingface_hub / httpx / requests errors share no base class
            if is_disk_full(err):
                raise DiskFullError(disk_full_message(Path.home(), 0, "nothing was committed")) from None
            text = " ".join(str(err).split())[:200]
            raise ConfigError(f"{self.label}: could not {doing} ({type(err).__name__}: {text}); check the network, "
                              "HF_TOKEN and that the dataset exists") from None

    def read(self, path: str, max_bytes: int = MAX_FILE_BYTES) -> bytes | None:
        if self.dry_run:
            return self.dry_run.read(path, max_bytes)
        from huggingface_hub.errors import EntryNotFoundError

        with self._hub_errors(f"read {path}"):
            try:
                local = self.api.hf_hub_download(self.repo_id, _relative(path), repo_type="dataset")
            except EntryNotFoundError:
                return None
            return read_bytes(local, max_bytes)

    def _commit(self, path: str, data: bytes, parent: str | None, message: str) -> None:
        from huggingface_hub import CommitOperationAdd

        self.api.create_commit(self.repo_id, repo_type="dataset", commit_message=message, parent_commit=parent,
                               operations=[CommitOperationAdd(path_in_repo=_relative(path), path_or_fileobj=data)])

    def write(self, path: str, data: bytes) -> None:
        if self.dry_run:
            self._record("add", path, bytes=len(data))
            return self.dry_run.write(path, data)
        with self._hub_errors(f"write {path}"):
            self._commit(path, data, None, f"biobench queue: update {path}")

    def create(self, path: str, data: bytes) -> bool:
        if self.dry_run:
            created = self.dry_run.create(path, data)
            self._record("add" if created else "refused (exists)", path, bytes=len(data), parent_commit="HEAD")
            return created
        from huggingface_hub.errors import HfHubHTTPError

        for _ in range(self.retries):
            with self._hub_errors(f"create {path}"):
                head = self._head()
                if _relative(path) in self.api.list_repo_files(self.repo_id, repo_type="dataset", revision=head):
                    return False
                try:
                    self._commit(path, data, head, f"biobench queue: create {path}")
                    return True
                except HfHubHTTPError as err:  # 412: someone committed since `head`; look again
                    if getattr(getattr(err, "response", None), "status_code", None) not in (409, 412):
                        raise
        raise ResultsError(f"{self.label}: could not create {path} after {self.retries} tries (the dataset is "
                           "changing too fast); try again")


def open_storage(where: str, dry_run: str | Path | None = None, api: Any = None) -> Storage:
    """`hf://datasets/ORG/NAME` -> HubStorage, anything else -> a folder."""
    if where.startswith(HF_DATASETS):
        repo = where.removeprefix(HF_DATASETS).strip("/")
        if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]{0,95}/[A-Za-z0-9][A-Za-z0-9._-]{0,95}", repo):
            raise ConfigError(f"{where[:120]}: expected hf://datasets/ORG/NAME")
        if api is None and dry_run is None and os.environ.get("HF_HUB_OFFLINE", "").lower() in {"1", "true", "yes", "on"}:
            raise ConfigError(f"{where}: the hub is switched off here (HF_HUB_OFFLINE); use a queue folder, or "
                              "--dry-run DIR to see what would be committed")
        try:
            return HubStorage(repo, api=api, dry_run=dry_run)
        except ImportError:
            raise ConfigError(f"{where}: a hub queue needs huggingface_hub (pip install huggingface_hub)") from None
    if dry_run:
        raise ConfigError(f"--dry-run is for a hub queue (hf://datasets/ORG/NAME); {where} is a folder")
    return FolderStorage(where)
