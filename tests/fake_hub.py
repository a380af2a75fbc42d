"""A loopback HTTP server that answers as the Hugging Face hub does: for `snapshot_download` of model repos
(repo info, the recursive file tree, HEAD/GET of /resolve/), for prefetch tests: HF_ENDPOINT points at it; and for
`datasets.load_dataset` of public parquet dataset repos (`/api/datasets/ORG/NAME[/revision/REV]`, the file tree one
level or recursive at `/api/datasets/ORG/NAME/tree/REV[/PATH]`, `/datasets/ORG/NAME/resolve/REV/PATH`), where a
revision is a branch such as `refs/convert/parquet` (sent URL-encoded as one path segment) or the commit the repo
info gave: the French hub routes' tests (`serving_hub` points this process's hub libraries at it)."""

from __future__ import annotations

import hashlib
import http.server
import io
import json
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin")  # stored with git-lfs on the hub: the ETag is their sha256


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324 - git's object id


class Repo:
    def __init__(self, files: dict[str, bytes], card: dict[str, Any] | None = None):
        """`card`: the README's YAML as the hub serves it parsed (cardData), e.g. {"configs": [...]}."""
        self.files = files
        self.card = card or {}
        content = hashlib.sha1()  # noqa: S324 - a commit id stand-in: the same files, the same commit
        for path in sorted(files):
            content.update(path.encode() + b"\0" + files[path])
        self.commit = content.hexdigest()

    @classmethod
    def from_folder(cls, folder: Path) -> Repo:
        return cls({p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()})

    def etag(self, path: str) -> str:
        data = self.files[path]
        return hashlib.sha256(data).hexdigest() if path.endswith(LFS_SUFFIXES) else _git_sha1(data)

    def tree(self, prefix: str = "", recursive: bool = True) -> list[dict]:
        """The files under `prefix`; not `recursive`: its direct children, sub-folders as "directory" entries."""
        out, folders = [], set()
        for path, data in sorted(self.files.items()):
            if prefix and not path.startswith(prefix + "/"):
                continue
            rest = path[len(prefix) + 1:] if prefix else path
            if "/" in rest and not recursive:
                folders.add((prefix + "/" if prefix else "") + rest.split("/")[0])
                continue
            entry = {"type": "file", "path": path, "size": len(data), "oid": _git_sha1(data)}
            if path.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            out.append(entry)
        return [{"type": "directory", "path": f, "oid": "0" * 40} for f in sorted(folders)] + out


def parquet_bytes(columns: dict[str, list[Any]], features: Any = None) -> bytes:
    """A parquet file as `datasets` writes one (its features, ClassLabel names included, in the schema)."""
    from datasets import Dataset

    buffer = io.BytesIO()
    Dataset.from_dict(columns, features=features).to_parquet(buffer)
    return buffer.getvalue()


class Handler(http.server.BaseHTTPRequestHandler):
    repos: dict[str, Repo] = {}
    corrupt: set[str] = set()  # "repo/path": served with one byte changed (a download that does not match)
    requests: list[str] = []
    static: dict[str, bytes] = {}  # other paths: plain files (a task's original data host)
    datasets: dict[tuple[str, str], Repo] = {}  # (dataset repo id, branch) -> its files

    def _dataset(self, name: str, revision: str) -> Repo | None:
        return next((repo for (repo_id, branch), repo in self.datasets.items()
                     if repo_id == name and revision in (branch, repo.commit)), None)

    def _send(self, code: int, data: bytes, headers: dict[str, str], head: bool) -> None:
        self.send_response(code)
        for key, value in headers.items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if not head:
            self.wfile.write(data)

    def _answer_dataset(self, url, head: bool) -> None:
        """A dataset repo's info, tree or file; the revision is one URL-encoded path segment."""
        parts = [unquote(p) for p in url.path.strip("/").split("/")]
        if parts[0] == "api":
            name, rest = "/".join(parts[2:4]), parts[4:]
            action = rest[0] if rest else "revision"
            repo = self._dataset(name, rest[1] if len(rest) > 1 else "main")
            if repo is None or action not in ("revision", "tree"):
                return self._send(404, b'{"error": "Repository not found"}', {"X-Error-Code": "RepoNotFound"}, head)
            if action == "tree":
                return self._json(repo.tree("/".join(rest[2:]), "recursive=true" in url.query.lower()))
            return self._json({"id": name, "sha": repo.commit, "private": False, "gated": False, "disabled": False,
                               "tags": [], "cardData": repo.card, "lastModified": "2024-01-01T00:00:00.000Z",
                               "siblings": [{"rfilename": p, "size": len(d)} for p, d in sorted(repo.files.items())]})
        at = parts.index("resolve") if "resolve" in parts else len(parts)
        repo = self._dataset("/".join(parts[1:at]), parts[at + 1] if len(parts) > at + 1 else "")
        file = "/".join(parts[at + 2:])
        if repo is None or file not in repo.files:
            return self._send(404, b"", {"X-Error-Code": "EntryNotFound"}, head)
        return self._send(200, repo.files[file], {"X-Repo-Commit": repo.commit, "ETag": f'"{repo.etag(file)}"'}, head)

    def _json(self, payload) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, head: bool) -> None:
        url = urlparse(self.path)
        path = unquote(url.path)
        self.requests.append(f"{self.command} {path}")
        parts = path.strip("/").split("/")
        if parts[:2] == ["api", "datasets"] or parts[:1] == ["datasets"]:
            return self._answer_dataset(url, head)
        if parts[:2] == ["api", "models"] and len(parts) >= 4:
            repo = self.repos.get("/".join(parts[2:4]))
            if repo is None:
                return self.send_error(404)
            if parts[4:5] == ["revision"]:
                return self._json({"id": "/".join(parts[2:4]), "sha": repo.commit,
                                   "siblings": [{"rfilename": p} for p in repo.files]})
            if parts[4:5] == ["tree"]:
                return self._json(repo.tree())
            return self.send_error(404)
        if len(parts) >= 5 and parts[2] == "resolve":
            name, file = "/".join(parts[:2]), "/".join(parts[4:])
            repo = self.repos.get(name)
            if repo is None or file not in repo.files:
                return self.send_error(404)
            data = repo.files[file]
            if f"{name}/{file}" in self.corrupt:
                data = bytes([data[0] ^ 1]) + data[1:]
            self.send_response(200)
            self.send_header("X-Repo-Commit", repo.commit)
            self.send_header("ETag", f'"{repo.etag(file)}"')
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if not head:
                self.wfile.write(data)
            return None
        if path in self.static:
            self.send_response(200)
            self.send_header("Content-Length", str(len(self.static[path])))
            self.end_headers()
            if not head:
                self.wfile.write(self.static[path])
            return None
        if path in ("", "/"):  # biobench's reachability probe
            self.send_response(200)
            self.end_headers()
            return None
        return self.send_error(404)

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        self._answer(head=False)

    def do_HEAD(self) -> None:  # noqa: N802
        self._answer(head=True)

    def log_message(self, *args) -> None:
        pass


@contextmanager
def fake_hub(repos: dict[str, Repo], static: dict[str, bytes] | None = None,
             datasets: dict[tuple[str, str], Repo] | None = None) -> Iterator[str]:
    """Serve model `repos`, `static` files by path and dataset repos ((id, branch) -> Repo) on loopback; yields
    the endpoint URL (for HF_ENDPOINT)."""
    Handler.repos, Handler.corrupt, Handler.requests, Handler.static = repos, set(), [], static or {}
    Handler.datasets = datasets if datasets is not None else {}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def serving_hub(monkeypatch: Any, tmp_path: Path) -> Iterator[type[Handler]]:
    """The loopback hub for this process, as the real one: HF_ENDPOINT and the endpoint the hub libraries read at
    import, offline mode off (the test session runs offline), fresh Hugging Face caches and a fresh biobench probe.
    Yields the handler: fill `Handler.datasets[(repo id, branch)] = Repo(files)` before loading."""
    from biobench.tasks import hub
    from biobench.tasks.loading import _load_cached

    with fake_hub({}) as endpoint:
        monkeypatch.setenv("HF_ENDPOINT", endpoint)
        monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "biobench-cache"))
        monkeypatch.setenv("HF_HOME", str(tmp_path / "hf-home"))
        for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
            monkeypatch.delenv(name, raising=False)
        import datasets.config
        import huggingface_hub.constants as constants

        monkeypatch.setattr(constants, "ENDPOINT", endpoint)
        monkeypatch.setattr(constants, "HUGGINGFACE_CO_URL_TEMPLATE", endpoint + "/{repo_id}/resolve/{revision}/{filename}")
        monkeypatch.setattr(constants, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(constants, "HF_HUB_CACHE", str(tmp_path / "hf-hub"))
        monkeypatch.setattr(datasets.config, "HF_ENDPOINT", endpoint)
        monkeypatch.setattr(datasets.config, "HUB_DATASETS_URL", endpoint + "/datasets/{repo_id}/resolve/{revision}/{path}")
        monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", False)
        monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
        hub.ensure_hub_mode.cache_clear()
        _load_cached.cache_clear()  # a task loaded earlier in the session is read again, from this hub
        try:
            yield Handler
        finally:
            hub.ensure_hub_mode.cache_clear()
            _load_cached.cache_clear()
            filesystem = sys.modules.get("huggingface_hub.hf_file_system")
            if filesystem is not None:  # its instances remember this endpoint
                filesystem.HfFileSystem.clear_instance_cache()
