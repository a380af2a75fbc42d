"""A loopback HTTP server that answers as the Hugging Face hub does for `snapshot_download` of model repos
(repo info, the recursive file tree, HEAD/GET of /resolve/), for prefetch tests: HF_ENDPOINT points at it."""

from __future__ import annotations

import hashlib
import http.server
import json
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import unquote, urlparse

LFS_SUFFIXES = (".safetensors", ".bin")  # stored with git-lfs on the hub: the ETag is their sha256


def _git_sha1(data: bytes) -> str:
    return hashlib.sha1(f"blob {len(data)}\0".encode() + data).hexdigest()  # noqa: S324 - git's object id


class Repo:
    def __init__(self, files: dict[str, bytes]):
        self.files = files
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

    def tree(self) -> list[dict]:
        out = []
        for path, data in self.files.items():
            entry = {"type": "file", "path": path, "size": len(data), "oid": _git_sha1(data)}
            if path.endswith(LFS_SUFFIXES):
                entry["lfs"] = {"oid": hashlib.sha256(data).hexdigest(), "size": len(data), "pointerSize": 134}
            out.append(entry)
        return out


class Handler(http.server.BaseHTTPRequestHandler):
    repos: dict[str, Repo] = {}
    corrupt: set[str] = set()  # "repo/path": served with one byte changed (a download that does not match)
    requests: list[str] = []
    static: dict[str, bytes] = {}  # other paths: plain files (a task's original data host)

    def _json(self, payload) -> None:
        body = json.dumps(payload).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _answer(self, head: bool) -> None:
        path = unquote(urlparse(self.path).path)
        self.requests.append(f"{self.command} {path}")
        parts = path.strip("/").split("/")
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
def fake_hub(repos: dict[str, Repo], static: dict[str, bytes] | None = None) -> Iterator[str]:
    """Serve `repos` (and `static` files by path) on loopback; yields the endpoint URL (for HF_ENDPOINT)."""
    Handler.repos, Handler.corrupt, Handler.requests, Handler.static = repos, set(), [], static or {}
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
