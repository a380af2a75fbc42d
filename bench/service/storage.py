"""Where a request queue (and the worker's view of it) lives: a folder or a Hugging Face dataset, behind one
small interface of five calls.

Why so small: the queue needs to list files, read one, replace one, and *create one only if it does not exist yet*
— the last is what makes a claim atomic when two workers race. A folder does it with O_CREAT|O_EXCL; a hub dataset
with a commit whose `parent_commit` is the revision the absence was checked at (the hub refuses the commit when
someone committed in between: optimistic concurrency, huggingface_hub's documented `create_commit` argument).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
from collections.abc import Callable
from pathlib import Path, PurePosixPath
from typing import Any, Protocol

from biobench.errors import ConfigError, ResultsError
from biobench.runtime.files import atomic_write, file_mode
from biobench.runtime.paths import HF_DATASETS


class Storage(Protocol):
    label: str

    def list(self, prefix: str) -> list[str]:
        """Paths (relative, '/'-separated) of the files under `prefix`, sorted."""

    def read(self, path: str) -> bytes | None:
        """The file's bytes, None when it does not exist."""

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
    """A queue in a local (or shared network) folder."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.label = str(self.root)

    def _path(self, path: str) -> Path:
        return self.root / _relative(path)

    def list(self, prefix: str) -> list[str]:
        base = self._path(prefix)
        if not base.is_dir():
            return []
        return sorted(p.relative_to(self.root).as_posix() for p in base.rglob("*")
                      if p.is_file() and not p.name.startswith("."))

    def read(self, path: str) -> bytes | None:
        try:
            return self._path(path).read_bytes()
        except FileNotFoundError:
            return None

    def write(self, path: str, data: bytes) -> None:
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(target, data)

    def create(self, path: str, data: bytes) -> bool:
        """Write a temporary file, then hard-link it to the name: link() fails when the name exists, and a
        reader never sees the file before its bytes are complete (an empty claim would read as expired)."""
        target = self._path(path)
        target.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
        try:
            with os.fdopen(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            os.chmod(tmp, file_mode())
            os.link(tmp, target)
        except FileExistsError:
            return False
        finally:
            os.unlink(tmp)
        return True


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
        return sorted(f for f in self.api.list_repo_files(self.repo_id, repo_type="dataset") if f.startswith(prefix))

    def read(self, path: str) -> bytes | None:
        if self.dry_run:
            return self.dry_run.read(path)
        from huggingface_hub.errors import EntryNotFoundError

        try:
            local = self.api.hf_hub_download(self.repo_id, _relative(path), repo_type="dataset")
        except EntryNotFoundError:
            return None
        return Path(local).read_bytes()

    def _commit(self, path: str, data: bytes, parent: str | None, message: str) -> None:
        from huggingface_hub import CommitOperationAdd

        self.api.create_commit(self.repo_id, repo_type="dataset", commit_message=message, parent_commit=parent,
                               operations=[CommitOperationAdd(path_in_repo=_relative(path), path_or_fileobj=data)])

    def write(self, path: str, data: bytes) -> None:
        if self.dry_run:
            self._record("add", path, bytes=len(data))
            return self.dry_run.write(path, data)
        self._commit(path, data, None, f"biobench queue: update {path}")

    def create(self, path: str, data: bytes) -> bool:
        if self.dry_run:
            created = self.dry_run.create(path, data)
            self._record("add" if created else "refused (exists)", path, bytes=len(data), parent_commit="HEAD")
            return created
        from huggingface_hub.errors import HfHubHTTPError

        for _ in range(self.retries):
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
        if repo.count("/") != 1:
            raise ConfigError(f"{where}: expected hf://datasets/ORG/NAME")
        return HubStorage(repo, api=api, dry_run=dry_run)
    if dry_run:
        raise ConfigError(f"--dry-run is for a hub queue (hf://datasets/ORG/NAME); {where} is a folder")
    return FolderStorage(where)
