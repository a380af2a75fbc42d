"""The token store: a corpus tokenised once, in parallel, in bounded memory, into checksummed shards.

Layout of a store folder (`biobench corpus build SOURCE... --tokenizer MODEL --out STORE`):

    manifest.json          tokenizer fingerprint, dtype, counts, and each shard's token/document counts + sha256
    shards/NNNNNN.bin      the framed token ids of one work unit ([CLS] doc [SEP] ..., uint16 or uint32)
    shards/NNNNNN.idx      its document boundaries: n_docs + 1 little-endian int64 offsets into the .bin
    offsets.idx            every document's global start (n_docs + 1 int64), written at the end, memory-mapped
    doc_hashes.u64         every document's hash (uint64, document_hash), for exact dedup within and across stores
    dropped.idx            the documents that repeat an earlier one (int64, ascending): never read
    done                   the completion marker: the sha256 of manifest.json (ranks wait on it)
    work/                  only while building: the plan and one completion marker per work unit

Choices and where they come from (docs/PRETRAINING.md says more):
- `.bin` + `.idx` per shard, memory-mapped: Megatron-LM's indexed dataset (tools/preprocess_data.py), reduced to
  what packing needs (ids and document offsets); numpy memmaps, no format of our own to parse.
- Work units (a byte range of a JSONL/text file, a few whole small files, a gzip file, a parquet row group)
  that each end with a completion marker, and one tokenizer per worker process: datatrove's DocumentTokenizer.
  A unit is a pure function of its bytes, so the store is byte-identical whatever `--workers` and after a
  `kill -9` and a rerun (finished units are kept, unfinished ones redone).
- A store is known by its content: the manifest's checksums, never its path or mtimes, so a copy to $SCRATCH
  stays valid; opening a store checks every shard's size, and its sha256 once per (shard, size, mtime).
Own code because none of those projects is a dependency we can take for this alone (Megatron's and datatrove's
writers come with their training stacks); the tokenising is the tokenizers library's batch API, the reading
training/corpus.py's bounded readers.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import socket
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
from biobench.errors import ConfigError, DataError
from biobench.runtime.files import atomic_write, disk_full_guard
from biobench.runtime.jsonfile import UnsafeJSONError, parse_json, read_bytes, read_json
from biobench.runtime.ownership import mark_created, owned, remove_owned
from biobench.training import corpus

FORMAT = "biobench-token-store"
VERSION = 2  # 2: every document's hash (HASHES) and the exact duplicates dropped (DROPPED); 1: no dedup (still read)
VERSIONS = (1, 2)
MANIFEST, DONE, WORK, SHARDS, VERIFIED = "manifest.json", "done", "work", "shards", "verified.json"
OFFSETS = "offsets.idx"  # every document's global start, n_docs + 1 int64, memory-mapped by open_store
HASHES = "doc_hashes.u64"  # every document's hash (document_hash), in shard order, little-endian uint64
DROPPED = "dropped.idx"  # the documents that repeat an earlier one (their index in shard order), int64, ascending
BUILD_LOCK = ".build.lock"  # held (flock) by the one process building the store
UNIT_BYTES = 64 << 20  # text per work unit: bounds a worker's memory and the work a kill -9 loses
GZIP_UNIT_WEIGHT = 4  # a .gz counts as 4x its size when grouping files into units (text compresses ~4x)
BATCH_CHARS = 1 << 20  # text handed to the tokenizer's batch API at once
MAX_MANIFEST_BYTES = 256 << 20
MAX_UNITS = 1_000_000


# ---------------------------------------------------------------- tokenizer
def tokenizer_fingerprint(tokenizer) -> str:
    """What ids a tokenizer gives: its backend's state without the truncation/padding settings (a call's options,
    not the vocabulary: the store is written with truncation off, so long documents stay whole)."""
    if hasattr(tokenizer, "backend_tokenizer"):
        state = json.loads(tokenizer.backend_tokenizer.to_str())
        state["truncation"] = state["padding"] = None
        text = json.dumps(state, sort_keys=True)
    else:
        text = repr(sorted(tokenizer.get_vocab().items()))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def load_tokenizer(name: str):
    from transformers import AutoTokenizer

    try:
        return AutoTokenizer.from_pretrained(name)
    except (OSError, ValueError) as err:
        raise ConfigError(f"--tokenizer {name}: cannot load its tokenizer ({str(err).splitlines()[0][:160]})") from None


def store_dtype(tokenizer) -> np.dtype:
    return np.dtype(np.uint16 if len(tokenizer) < 2**16 else np.uint32)


# ---------------------------------------------------------------- plan
@dataclass(frozen=True)
class Piece:
    source: str  # a local file path, a hub dataset id ('hub'), or 'repo@commit:path' ('hubfile')
    kind: str  # jsonl | text | parquet | hub | hubfile
    start: int = 0  # byte offset (jsonl/text), row group (parquet)
    end: int | None = None  # byte end (None: to the end of the file)

    def documents(self, text_field: str, weight_field: str | None = None) -> Iterator[Any]:
        if self.kind == "hubfile":  # one data file of a hub dataset, at the commit the plan pinned
            repo, _, rest = self.source.partition("@")
            commit, _, path = rest.partition(":")
            return corpus.hub_file_documents(repo, commit, path, text_field, weight_field)
        if self.kind == "hub":
            if weight_field is not None:
                raise DataError(f"{self.source}: --weight-field reads local JSONL or parquet files; download the "
                                "hub dataset to parquet first")
            return corpus._hub_documents(self.source, text_field)
        return corpus.piece_documents(Path(self.source), self.kind, text_field, self.start, self.end, weight_field)


def plan_units(sources: list[str], unit_bytes: int = UNIT_BYTES,
               selection: corpus.HubSelection | None = None) -> list[list[Piece]]:
    """Work units, in corpus order: large seekable files split into byte ranges, small files grouped, a gzip file
    or a parquet row group whole, a hub dataset's data files one unit each (those `selection` names: its config,
    its data_files globs). Depends only on the sources and the selection, never on --workers."""
    if selection and all(corpus.is_local(s) for s in sources):
        raise ConfigError("--hub-config/--data-files select the files of a hub dataset source; no SOURCE is one "
                          "(a local folder is selected by naming its files)")
    units: list[list[Piece]] = []
    group: list[Piece] = []
    weight = 0

    def close() -> None:
        nonlocal group, weight
        if group:
            units.append(group)
        group, weight = [], 0

    for source in sources:
        corpus.check_source(source)
        if not corpus.is_local(source):
            close()
            # a unit per data file (its shards), at the commit the revision names now: parallel, resumable, pinned
            repo, commit, files = corpus.hub_files(source, selection)
            units.extend([Piece(f"{repo}@{commit}:{path}", "hubfile")] for path in files)
            if not files:
                units.append([Piece(f"{repo}@{commit}", "hub")])
            continue
        for path in corpus.corpus_files(source):
            kind = corpus.file_kind(path)
            size = path.stat().st_size if path.is_file() else 0
            if kind == "parquet":
                close()
                units.extend([Piece(str(path), kind, g)] for g in range(corpus.parquet_row_groups(path)))
            elif path.suffix == ".gz" or not path.is_file():
                if weight + size * GZIP_UNIT_WEIGHT > unit_bytes:
                    close()
                group.append(Piece(str(path), kind))
                weight += size * GZIP_UNIT_WEIGHT
            elif size > unit_bytes:
                close()
                units.extend([Piece(str(path), kind, s, min(s + unit_bytes, size))] for s in range(0, size, unit_bytes))
            else:
                if weight + size > unit_bytes:
                    close()
                group.append(Piece(str(path), kind))
                weight += size
            if len(units) > MAX_UNITS:
                raise DataError(f"corpus {source}: more than {MAX_UNITS:,} work units; refused")
    close()
    return units


def _plan_record(units: list[list[Piece]], fingerprint: str, text_field: str,
                 weight_field: str | None = None) -> dict[str, Any]:
    files = {}
    for unit in units:
        for piece in unit:
            if piece.kind not in ("hub", "hubfile") and piece.source not in files:
                st = Path(piece.source).stat()
                files[piece.source] = [st.st_size, st.st_mtime_ns]
    return {"tokenizer": fingerprint, "text_field": text_field, "weight_field": weight_field, "files": files,
            "units": [[[p.source, p.kind, p.start, p.end] for p in unit] for unit in units]}


# ---------------------------------------------------------------- one unit
_WORKER: dict[str, Any] = {}


@dataclass(frozen=True)
class Encoder:
    """What tokenising a unit needs of the tokenizer: its backend (the tokenizers library's object, truncation
    and padding off), the framing ids and the store's dtype."""

    backend: Any
    bos: int | None
    eos: int
    dtype: np.dtype


@dataclass(frozen=True)
class EncoderSpec:
    """An Encoder as a pool worker receives it, once, from the building process (the pool's initializer): the
    backend as the tokenizers library's JSON. A worker that rebuilds the backend from it never imports
    transformers nor loads the tokenizer again: that cost ~3-4 CPU-s per worker, a third of the CPU of a
    10M-token build with 2 workers, which is where its second core went (issue 59)."""

    name: str
    backend_json: str
    bos: int | None
    eos: int
    dtype: str

    @classmethod
    def of(cls, name: str, tokenizer) -> EncoderSpec:
        bos, eos = corpus.frame_ids(tokenizer)
        return cls(name, tokenizer.backend_tokenizer.to_str(), bos, eos, store_dtype(tokenizer).name)


def _encoder_of(tokenizer) -> Encoder:
    backend = tokenizer.backend_tokenizer
    backend.no_truncation()
    backend.no_padding()
    bos, eos = corpus.frame_ids(tokenizer)
    return Encoder(backend, bos, eos, store_dtype(tokenizer))


def _pool_worker(spec: EncoderSpec) -> None:
    """A tokenising worker's start: no tokenizer thread pools (one worker per core), and its encoder built once
    from the building process's spec (the tokenizers library alone, no transformers import)."""
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    from tokenizers import Tokenizer

    backend = Tokenizer.from_str(spec.backend_json)
    backend.no_truncation()
    backend.no_padding()
    _WORKER.update(name=spec.name, encoder=Encoder(backend, spec.bos, spec.eos, np.dtype(spec.dtype)))


def _worker_encoder(name: str | None, tokenizer=None) -> Encoder:
    """One tokenizer per process (datatrove's rule), loaded once (or received from the pool's initializer)."""
    if tokenizer is not None:
        return _encoder_of(tokenizer)
    if _WORKER.get("name") != name:
        assert name is not None  # build() is given a tokenizer object or its name
        _WORKER.update(name=name, encoder=_encoder_of(load_tokenizer(name)))
    return _WORKER["encoder"]


def _sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def build_unit(index: int, unit: list[Piece], store: Path, text_field: str, tokenizer_name: str | None,
               tokenizer=None, weight_field: str | None = None) -> dict[str, Any]:
    """Tokenise one work unit into shards/NNNNNN.bin/.idx (streamed: a batch of text at a time), then write its
    completion marker work/NNNNNN.done with the counts and checksums. Returns the marker's record."""
    encoder = _worker_encoder(tokenizer_name, tokenizer)
    backend, bos, eos, dtype = encoder.backend, encoder.bos, encoder.eos, encoder.dtype
    name = f"{index:06d}"
    shards = store / SHARDS
    # per-process temporary names: two runs finishing the same cached store never write into one file
    # (host and pid: SLURM array elements on several nodes may share a store on a cluster file system)
    writer = f"{socket.gethostname()[:60]}.{os.getpid()}"
    bin_tmp, idx_tmp = shards / f"{name}.bin.{writer}.tmp", shards / f"{name}.idx.{writer}.tmp"
    lengths: list[int] = []
    hashes: list[int] = []  # one per document (document_hash), written to work/NNNNNN.hsh for finish's dedup
    weights: list[float] = []  # with weight_field: one per document, written to NNNNNN.wgt (float64)
    batch: list[str] = []
    chars = 0
    encode = getattr(backend, "encode_batch_fast", backend.encode_batch)
    def safe() -> str:
        done = len(list((store / WORK).glob("*.done")))
        return f"{done} finished work unit(s) of {store} are safe (rerun the same command to resume)"

    def cleanup() -> None:  # this unit's temporaries; its completion marker is written last, so none exists
        for leftover in shards.glob(f"{name}.*.{writer}.tmp"):
            leftover.unlink(missing_ok=True)

    with disk_full_guard(shards, 0, safe, cleanup):
        with bin_tmp.open("wb") as out:
            def flush() -> None:
                for enc in encode(batch, add_special_tokens=False):
                    ids = ([bos] if bos is not None else []) + enc.ids + [eos]
                    data = np.asarray(ids, dtype=dtype).tobytes()
                    out.write(data)
                    lengths.append(len(ids))
                    hashes.append(document_hash(data))
                batch.clear()

            for piece in unit:
                for doc in piece.documents(text_field, weight_field):
                    if weight_field is not None:
                        doc, weight = doc
                        weights.append(weight)
                    batch.append(doc)
                    chars += len(doc)
                    if chars >= BATCH_CHARS:
                        flush()
                        chars = 0
            if batch:
                flush()
            out.flush()
            os.fsync(out.fileno())
        offsets = np.zeros(len(lengths) + 1, dtype="<i8")
        np.cumsum(lengths, out=offsets[1:])
        idx_tmp.write_bytes(offsets.tobytes())
        record: dict[str, Any] = {"unit": index, "tokens": int(offsets[-1]), "documents": len(lengths)}
        # before the unit's completion marker (todo() redoes a unit without them: one begun by an older biobench)
        atomic_write(store / WORK / f"{name}.hsh", np.asarray(hashes, dtype="<u8").tobytes())
        if weight_field is not None:
            wgt_tmp = shards / f"{name}.wgt.{writer}.tmp"
            wgt_tmp.write_bytes(np.asarray(weights, dtype="<f8").tobytes())
        if lengths:
            os.replace(bin_tmp, shards / f"{name}.bin")
            os.replace(idx_tmp, shards / f"{name}.idx")
            record.update(name=name, bin_sha256=_sha256(shards / f"{name}.bin"), idx_sha256=_sha256(shards / f"{name}.idx"))
            if weight_field is not None:
                os.replace(wgt_tmp, shards / f"{name}.wgt")
                record["wgt_sha256"] = _sha256(shards / f"{name}.wgt")
        else:
            bin_tmp.unlink()
            idx_tmp.unlink()
            if weight_field is not None:
                wgt_tmp.unlink()
        atomic_write(store / WORK / f"{name}.done", json.dumps(record, sort_keys=True))
    return record


def document_hash(framed: bytes | memoryview) -> int:
    """A document's identity for exact dedup: the first 8 bytes of the blake2b of its framed token ids (one
    tokenizer per store, and a mix reads one tokenizer, so equal ids are equal text). 64 bits: the odds of any
    false match among n documents are n^2 / 2^65 (3e-4 for 10^8 documents, a large source), a document lost."""
    return int.from_bytes(hashlib.blake2b(framed, digest_size=8).digest(), "little")


# ---------------------------------------------------------------- build
def build(sources: list[str], out: Path, tokenizer_name: str | None, *, workers: int = 1, text_field: str = "text",
          weight_field: str | None = None, tokenizer=None, unit_bytes: int = UNIT_BYTES,
          log: Callable[[str], None] | None = None, selection: corpus.HubSelection | None = None) -> Path:
    """Build (or finish) the store at `out` from `sources` with the tokenizer `tokenizer_name` (a folder or hub
    id; or the `tokenizer` object itself, in this process only). Finished work units are kept: a killed build
    rerun with the same command resumes. Returns `out`."""
    out = Path(out)
    if (out / DONE).is_file():
        return out
    mark_created(out, "token store")  # the marker first (outside the content: the manifest is the store's id)
    # Two processes may build the same store at once: the demo's and a study's two pretrainings side by side
    # read one raw corpus into one cached store. One builds while the other waits on an exclusive lock of a
    # file in the store, then finds it done (without the lock the second's leftover sweep in `finish` removed
    # the first's temporary shards under its feet).
    with open(out / BUILD_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / DONE).is_file():
            return out
        return _build(sources, out, tokenizer_name, workers=workers, text_field=text_field,
                      weight_field=weight_field, tokenizer=tokenizer,
                      unit_bytes=unit_bytes, log=log, selection=selection)


@dataclass
class BuildPlan:
    """What every process building one store agrees on: the work units (from the sources alone), the tokenizer
    and its fingerprint. Written once to work/plan.json; a process that finds another plan there is refused."""

    out: Path
    sources: list[str]
    units: list[list[Piece]]
    tokenizer: Any
    tokenizer_name: str | None
    fingerprint: str
    text_field: str
    weight_field: str | None = None
    selection: corpus.HubSelection | None = None  # of the hub sources' files (corpus.HubSelection)

    def marker(self, index: int) -> Path:
        return self.out / WORK / f"{index:06d}.done"

    def done(self, index: int) -> bool:
        return unit_done(self.out, index)

    def todo(self) -> list[int]:
        return [i for i in range(len(self.units)) if not self.done(i)]

    @contextmanager
    def sharing(self) -> Iterator[None]:
        """Held by one of several processes sharing this build (each unit claimed first) while it claims, writes
        and releases a unit: a shared lock of the store, which finish_once takes exclusively, so the store is
        never finished (its work/ folder removed) under a unit being written or a claim being made."""
        with open(self.out / BUILD_LOCK, "a+b") as lock:
            fcntl.flock(lock, fcntl.LOCK_SH)
            yield

    def finished(self) -> bool:
        return (self.out / DONE).is_file()

    def build_unit(self, index: int) -> dict[str, Any]:
        return build_unit(index, self.units[index], self.out, self.text_field, self.tokenizer_name,
                          self.tokenizer, self.weight_field)


def unit_done(out: Path, index: int) -> bool:
    """A work unit's completion marker and its document hashes (written before the marker): a unit marked done
    by a biobench before dedup has no hashes and is done again."""
    marker = Path(out) / WORK / f"{index:06d}.done"
    return marker.is_file() and marker.with_suffix(".hsh").is_file()


def prepare(sources: list[str], out: Path, tokenizer_name: str | None, *, text_field: str = "text", tokenizer=None,
            unit_bytes: int = UNIT_BYTES, weight_field: str | None = None,
            selection: corpus.HubSelection | None = None) -> BuildPlan:
    """Plan the build of `out` (or check the plan an earlier or concurrent process wrote): the same sources,
    tokenizer and text field always give the same units, so any number of processes may prepare at once."""
    out = Path(out)
    if tokenizer is None:
        assert tokenizer_name is not None  # build() is given a tokenizer object or its name
        tokenizer = load_tokenizer(tokenizer_name)  # for the fingerprint; workers load their own
    fingerprint = tokenizer_fingerprint(tokenizer)
    units = plan_units(sources, unit_bytes, selection)
    plan = _plan_record(units, fingerprint, text_field, weight_field)
    if (out / WORK).is_dir() and not owned_work(out / WORK):
        raise ConfigError(f"{out / WORK} is a folder biobench did not create (no plan of a build, no marker); it "
                          "is left as it is: give the store a new folder")
    mark_created(out / WORK, "token store build")  # removed by finish(): marked first, so only ours ever is
    (out / SHARDS).mkdir(exist_ok=True)
    plan_path = out / WORK / "plan.json"
    if plan_path.is_file():
        if read_json(plan_path, MAX_MANIFEST_BYTES) != json.loads(json.dumps(plan)):
            raise ConfigError(f"{out} holds an unfinished build of other sources or another tokenizer (or the "
                              "sources changed since); delete it or pass the same sources and --tokenizer")
    else:  # two processes writing the same bytes at once: atomic, either one wins
        atomic_write(plan_path, json.dumps(plan, sort_keys=True))
    return BuildPlan(out, list(sources), units, tokenizer, tokenizer_name, fingerprint, text_field, weight_field,
                     selection)


def _build(sources: list[str], out: Path, tokenizer_name: str | None, *, workers: int, text_field: str,
           weight_field: str | None, tokenizer, unit_bytes: int, log: Callable[[str], None] | None,
           selection: corpus.HubSelection | None = None) -> Path:
    if workers > 1 and tokenizer_name is None:
        raise ConfigError("a parallel build needs the tokenizer's folder or hub id (each worker loads its own)")
    plan = prepare(sources, out, tokenizer_name, text_field=text_field, tokenizer=tokenizer, unit_bytes=unit_bytes,
                   weight_field=weight_field, selection=selection)
    units = plan.units
    todo = plan.todo()
    say = log or (lambda _line: None)
    say(f"corpus build: {len(units)} work unit(s), {len(units) - len(todo)} already done, {len(todo)} to tokenise "
        f"with {min(workers, max(1, len(todo)))} worker(s)")
    started = time.monotonic()
    if workers <= 1 or len(todo) <= 1:
        for i in todo:
            plan.build_unit(i)
    else:
        _tokenise_in_pool(plan, todo, workers, say, started)
    return finish(plan)


LOST_LIMIT = 2  # a unit in flight when a worker died this many times fails the build instead of a third try


def _tokenise_in_pool(plan: BuildPlan, todo: list[int], workers: int, say: Callable[[str], None],
                      started: float) -> None:
    """The units `todo` tokenised by `workers` processes, at most one unit each in flight. A worker that dies
    (`kill -9`, the OOM killer) breaks a concurrent.futures pool, which says so (BrokenProcessPool) where
    multiprocessing.Pool started a new worker and waited for ever on the lost unit (issue 57 §5): the units
    that were in flight are redone in a new pool, and a unit in flight at LOST_LIMIT deaths fails the build in
    one line naming it (the finished units stay, a rerun resumes)."""
    import multiprocessing as mp
    from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    left, lost, done = list(todo), {i: 0 for i in todo}, 0
    assert plan.tokenizer_name is not None  # _build refuses a parallel build without it
    spec = EncoderSpec.of(plan.tokenizer_name, plan.tokenizer)
    while left:
        # spawn: a fresh interpreter per worker, each with its own tokenizer (no fork of a tokenizer's threads)
        with ProcessPoolExecutor(workers, mp_context=mp.get_context("spawn"), initializer=_pool_worker,
                                 initargs=(spec,)) as pool:
            running: dict[Future, int] = {}
            broken: list[int] = []
            while left or running:
                try:
                    while left and len(running) < workers:  # one unit per worker: those in flight are known
                        running[pool.submit(build_unit, left[0], plan.units[left[0]], plan.out, plan.text_field,
                                            plan.tokenizer_name, None, plan.weight_field)] = left[0]
                        left.pop(0)
                    finished, _ = wait(running, return_when=FIRST_COMPLETED)
                    for future in finished:
                        future.result()
                        running.pop(future)
                        done += 1
                        if done % max(1, len(todo) // 20) == 0:
                            say(f"corpus build: {done}/{len(todo)} unit(s) ({time.monotonic() - started:.0f} s)")
                except BrokenProcessPool:  # the units in flight are lost with the pool, but those that finished
                    broken = [i for i in sorted(running.values()) if not plan.marker(i).is_file()]
                    left = [i for i in left if not plan.marker(i).is_file()]
                    break
        if broken:
            for i in broken:
                lost[i] += 1
            failing = [i for i in broken if lost[i] >= LOST_LIMIT]
            kept = len(list((plan.out / WORK).glob("*.done")))
            if failing:
                raise DataError(f"corpus build: a tokenizer worker died {LOST_LIMIT} times while unit(s) "
                                f"{', '.join(map(str, failing))} of {plan.out} were being tokenised (killed, or out "
                                f"of memory: lower --unit-mb or --workers); the {kept} finished unit(s) are kept: "
                                "rerun the same command to resume")
            say(f"corpus build: a tokenizer worker died (killed, or out of memory) while unit(s) "
                f"{', '.join(map(str, broken))} were being tokenised: redoing them in a new pool")
            left = broken + left


def finish_once(plan: BuildPlan) -> Path:
    """Finish the store when every unit is done, whichever process gets here first (the others find it done):
    the processes of a SLURM array each call this after their last unit."""
    out = plan.out
    if (out / DONE).is_file():
        return out
    with open(out / BUILD_LOCK, "a+b") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if (out / DONE).is_file():
            return out
        return finish(plan)


def finish(plan: BuildPlan) -> Path:
    """The manifest from the units' markers (in unit order), then the store's completion marker."""
    out, units, tokenizer, text_field, sources = plan.out, plan.units, plan.tokenizer, plan.text_field, plan.sources
    fingerprint = plan.fingerprint
    shards, tokens, documents = [], 0, 0
    for i in range(len(units)):
        record = read_json(out / WORK / f"{i:06d}.done", 1 << 20)
        tokens += record["tokens"]
        documents += record["documents"]
        if record["documents"]:
            keys = ("name", "tokens", "documents", "bin_sha256", "idx_sha256")
            shards.append({k: record[k] for k in (*keys, "wgt_sha256") if k in record})
    if not documents:
        remove_owned(out / WORK, legacy_work)
        raise DataError(f"corpus {' '.join(sources)} holds no non-empty documents (text field '{text_field}')")
    bos, eos = corpus.frame_ids(tokenizer)
    manifest = {"format": FORMAT, "version": VERSION, "sources": [_source_name(s) for s in sources],
                "text_field": text_field, "dtype": store_dtype(tokenizer).name,
                "tokenizer": {"fingerprint": fingerprint, "vocab_size": len(tokenizer), "bos": bos, "eos": eos,
                              "name_or_path": Path(str(tokenizer.name_or_path)).name},
                "tokens": tokens, "documents": documents, "shards": shards}
    if plan.weight_field is not None:  # only then: an unweighted store's manifest is what it was before weights
        manifest["weight_field"] = plan.weight_field
    hub = _hub_record(units, plan.selection)
    if hub:  # only then, as above: each hub source's pinned commit, the data files read and how they were selected
        manifest["hub"] = hub
    # what a killed worker was writing (NNNNNN.bin|idx|wgt.<host>.<pid>.tmp, build_unit's names in a store this
    # build owns): never content; any other file in shards/ is left alone
    for leftover in (out / SHARDS).glob("[0-9][0-9][0-9][0-9][0-9][0-9].*.*.tmp"):
        if leftover.is_file() and not leftover.is_symlink() and leftover.name.split(".")[1] in ("bin", "idx", "wgt"):
            leftover.unlink(missing_ok=True)
    manifest["offsets"] = {"file": OFFSETS, "sha256": _write_offsets(out, shards)}
    manifest["dedup"] = _write_dedup(out, shards)
    text = json.dumps(manifest, indent=1, sort_keys=True) + "\n"
    atomic_write(out / MANIFEST, text)
    atomic_write(out / DONE, hashlib.sha256(text.encode()).hexdigest() + "\n")
    remove_owned(out / WORK, legacy_work)
    return out


def _hub_record(units: list[list[Piece]], selection: corpus.HubSelection | None = None) -> dict[str, Any]:
    """Per hub dataset read: the commit its revision was pinned to and how many data files (work units) it gave;
    with a selection, also its config and data_files globs and the paths they selected."""
    hub: dict[str, Any] = {}
    for unit in units:
        for piece in unit:
            if piece.kind in ("hub", "hubfile"):
                repo, _, rest = piece.source.partition("@")
                commit, _, path = rest.partition(":")
                entry = hub.setdefault(repo, {"commit": commit, "files": 0,
                                              **(selection.record() if selection else {}),
                                              **({"paths": []} if selection else {})})
                entry["files"] += piece.kind == "hubfile"
                if selection and piece.kind == "hubfile":
                    entry["paths"].append(path)
    return hub


def legacy_work(folder: Path) -> bool:
    """A `work/` folder a biobench before the ownership marker made: it holds the plan record only a build
    writes (the tokenizer's fingerprint, the files and the work units)."""
    try:
        plan = read_json(folder / "plan.json", MAX_MANIFEST_BYTES)
    except (UnsafeJSONError, OSError):
        return False
    return isinstance(plan, dict) and {"tokenizer", "text_field", "files", "units"} <= plan.keys()


def owned_work(folder: Path) -> bool:
    """Whether a store's `work/` folder is a build's (this version's marker or an earlier version's plan)."""
    return owned(folder, legacy_work)


def legacy_store(folder: Path) -> bool:
    """A store folder a biobench before the ownership marker made: finished (a manifest of this format and its
    completion marker) or being built (a `work/` folder holding a build's plan)."""
    if (folder / DONE).is_file() and (folder / MANIFEST).is_file():
        try:
            return read_json(folder / MANIFEST, MAX_MANIFEST_BYTES).get("format") == FORMAT
        except (UnsafeJSONError, OSError, AttributeError):
            return False
    if [p.name for p in folder.iterdir()] == [BUILD_LOCK]:  # a build killed before it wrote its plan
        return True
    return (folder / WORK).is_dir() and legacy_work(folder / WORK)


def _write_dedup(out: Path, shards: list[dict[str, Any]]) -> dict[str, Any]:
    """Exact dedup over the whole store: every document's hash (the units', in shard order) to HASHES, and the
    documents whose hash an earlier document has (the first copy kept, wherever the units split the corpus) to
    DROPPED. The shards keep every document (a unit is written once, in parallel, and never rewritten); open_store
    reads the documents not dropped. A pure function of the units: the same bytes for any --workers or resume.
    Holds 16 bytes per document at once (the hashes and the sort)."""
    parts = [np.fromfile(out / WORK / f"{shard['name']}.hsh", dtype="<u8") for shard in shards]
    hashes = np.concatenate(parts) if parts else np.zeros(0, dtype="<u8")
    if len(hashes) != sum(int(shard["documents"]) for shard in shards):
        raise DataError(f"{out}: its work units' document hashes do not match their documents (work/ was "
                        "changed); delete the store and build it again")
    _, first = np.unique(hashes, return_index=True)
    keep = np.zeros(len(hashes), dtype=bool)
    keep[first] = True
    dropped = np.nonzero(~keep)[0].astype("<i8")
    record: dict[str, Any] = {"documents_seen": len(hashes), "duplicates_dropped": len(dropped),
                              "hash": "blake2b-64 of the framed token ids"}
    for key, name, data in (("hashes", HASHES, hashes.astype("<u8")), ("dropped", DROPPED, dropped)):
        atomic_write(out / name, data.tobytes())
        record[key] = {"file": name, "sha256": _sha256(out / name)}
    return record


def _write_offsets(out: Path, shards: list[dict[str, Any]]) -> str:
    """The global document index: each shard's .idx shifted by the tokens before it, streamed shard by shard (one
    shard's offsets in memory at a time), written atomically. Returns its sha256."""
    tmp = out / f"{OFFSETS}.{os.getpid()}.tmp"
    with disk_full_guard(out, 0, lambda: "the shards are safe (rerun the same command to finish)",
                         lambda: tmp.unlink(missing_ok=True)):
        with tmp.open("wb") as handle:
            handle.write(np.zeros(1, dtype="<i8").tobytes())
            base = 0
            for shard in shards:
                idx = np.fromfile(out / SHARDS / f"{shard['name']}.idx", dtype="<i8")
                handle.write((idx[1:] + base).astype("<i8").tobytes())
                base += int(shard["tokens"])
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, out / OFFSETS)
    return _sha256(out / OFFSETS)


def _source_name(source: str) -> str:
    """A source as the manifest records it: its last path component or the hub id (a store copied elsewhere, or
    built from another checkout of the same files, has the same manifest)."""
    return source if not corpus.is_local(source) else Path(source).name


def is_store(path: str | Path) -> bool:
    """A finished store's folder, or one claiming to be (a manifest or marker of any kind, a FIFO or a link
    included: open_store then refuses it in one line rather than reading it as raw text)."""
    path = Path(path)
    return path.is_dir() and any(os.path.lexists(path / name) for name in (MANIFEST, DONE))


def check_same_sources(out: Path, sources: list[str], text_field: str, weight_field: str | None,
                       selection: corpus.HubSelection | None = None) -> None:
    """A finished store at `out` built from other sources (or another text or weight field, or another selection
    of a hub dataset's files: config, data_files) is refused in one line: a build with `--out` of an existing
    store would otherwise keep the old store and say nothing."""
    if not (Path(out) / DONE).is_file():
        return
    manifest = read_manifest(out)
    have = (manifest["sources"], manifest["text_field"], manifest.get("weight_field"))
    if have != ([_source_name(s) for s in sources], text_field, weight_field):
        raise ConfigError(f"--out {out} is a finished token store of other sources ({', '.join(have[0])[:300]}, "
                          f"text field '{have[1]}', weight field {have[2] or 'none'}); choose a new --out, or delete "
                          "that store to rebuild it")
    want = selection.record() if selection else {}
    hub = manifest.get("hub")
    for repo, entry in (hub if isinstance(hub, dict) else {}).items():
        held = {k: entry[k] for k in ("config", "data_files") if isinstance(entry, dict) and k in entry}
        if held != want:
            def said(record: dict[str, Any]) -> str:
                return ", ".join(f"{k} {v}" for k, v in record.items()) or "every data file"
            raise ConfigError(f"--out {out} is a finished token store of hub dataset {repo} selected by "
                              f"{said(held)}, not {said(want)}; choose a new --out, or delete that store to rebuild it")


def is_unfinished(path: str | Path) -> bool:
    """A store folder whose build began (its lock or work units) and never finished: not a corpus of text."""
    path = Path(path)
    return path.is_dir() and not (path / DONE).is_file() and ((path / BUILD_LOCK).exists() or (path / WORK).is_dir())


def wait_for(store: Path, poll_s: float = 2.0, timeout_s: float | None = None) -> None:
    """Block until another process finished the store (its completion marker): ranks wait on a file, not on a
    collective whose process-group timeout would end a long build."""
    started = time.monotonic()
    while not (store / DONE).is_file():
        if timeout_s is not None and time.monotonic() - started > timeout_s:
            raise DataError(f"{store}: still not built after {timeout_s:.0f} s")
        time.sleep(poll_s)


# ---------------------------------------------------------------- open
class ShardedTokens:
    """The concatenated token ids of a store's shards, sliced like an array: `len()`, `[a:b]` (memory-mapped,
    read on demand). Pickles by path, so loader workers reopen the maps instead of copying them."""

    def __init__(self, files: list[Path], lengths: list[int], dtype: np.dtype, limit: int | None = None):
        self.files, self.dtype = files, np.dtype(dtype)
        self.starts = np.concatenate([[0], np.cumsum(lengths, dtype=np.int64)]).astype(np.int64)
        self.length = int(self.starts[-1]) if limit is None else min(limit, int(self.starts[-1]))
        self._maps: dict[int, np.ndarray] = {}

    def __len__(self) -> int:
        return self.length

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_maps": {}}

    def _map(self, i: int) -> np.ndarray:
        if i not in self._maps:
            self._maps[i] = np.memmap(self.files[i], dtype=self.dtype, mode="r")
        return self._maps[i]

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError("ShardedTokens takes contiguous slices")
        start, stop, _ = key.indices(self.length)
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        first = int(np.searchsorted(self.starts, start, side="right")) - 1
        parts, at = [], start
        i = first
        while at < stop:
            base = int(self.starts[i])
            end = min(stop, int(self.starts[i + 1]))
            parts.append(self._map(i)[at - base:end - base])
            at = end
            i += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


class DocumentView:
    """Some documents of a token stream, in the order `documents` lists them (a document may repeat), as one
    token stream sliced like an array, with `offsets` their starts (what PackedCorpus takes). Holds 16 bytes per
    listed document; the tokens stay where they are (memory-mapped in the store)."""

    def __init__(self, tokens, offsets: np.ndarray, documents: np.ndarray):
        self.base, self.base_offsets = tokens, np.asarray(offsets)
        self.documents = np.asarray(documents, dtype=np.int64)
        lengths = self.base_offsets[self.documents + 1] - self.base_offsets[self.documents]
        self.offsets = np.zeros(len(self.documents) + 1, dtype=np.int64)
        np.cumsum(lengths, out=self.offsets[1:])
        self.dtype = getattr(tokens, "dtype", np.dtype(np.int64))

    def __len__(self) -> int:
        return int(self.offsets[-1])

    def __getitem__(self, key: slice) -> np.ndarray:
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise TypeError(f"{type(self).__name__} takes contiguous slices")
        start, stop, _ = key.indices(len(self))
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        v = int(np.searchsorted(self.offsets, start, side="right")) - 1
        parts, at = [], start
        while at < stop:
            doc = int(self.documents[v])
            end = min(stop, int(self.offsets[v + 1]))
            base = int(self.base_offsets[doc]) - int(self.offsets[v])
            parts.append(np.asarray(self.base[at + base:end + base]))
            at = end
            v += 1
        return parts[0] if len(parts) == 1 else np.concatenate(parts)


@dataclass
class TokenStore:
    """An opened, checked store: the framed token stream and its document offsets (what PackedCorpus takes), the
    documents an exact dedup dropped left out."""

    path: Path
    manifest: dict[str, Any]
    tokens: ShardedTokens | DocumentView
    offsets: np.ndarray  # n_docs + 1 starts of the documents read
    kept: np.ndarray | None = None  # which of the shards' documents are read (dedup dropped others); None: all

    @property
    def weight_field(self) -> str | None:
        return self.manifest.get("weight_field")

    def _read(self, values: np.ndarray) -> np.ndarray:
        """One value per document of the shards -> one per document read."""
        return values[self.kept] if self.kept is not None else values[:self.n_documents]

    @property
    def dedup(self) -> dict[str, Any] | None:
        """The build's dedup record (documents seen, duplicates dropped); None for a store built before dedup."""
        return self.manifest.get("dedup")

    def hashes(self) -> np.ndarray | None:
        """Each read document's hash (document_hash), None when the store has none (built before dedup)."""
        if self.dedup is None:
            return None
        return self._read(np.fromfile(self.path / HASHES, dtype="<u8"))

    def weights(self) -> np.ndarray:
        """Each read document's weight (`corpus build --weight-field`), in store order; DataError when it has none."""
        if self.weight_field is None:
            raise DataError(f"token store {self.path} has no document weights (build it with --weight-field)")
        parts = [np.fromfile(self.path / SHARDS / f"{s['name']}.wgt", dtype="<f8") for s in self.manifest["shards"]]
        weights = self._read(np.concatenate(parts))
        if not np.all(np.isfinite(weights)) or weights.min(initial=0) < 0 or weights.max(initial=0) > corpus.MAX_WEIGHT:
            raise _damaged(self.path, "a document weight out of range")
        return weights

    @property
    def n_documents(self) -> int:
        return len(self.offsets) - 1

    @property
    def fingerprint(self) -> str:
        return str(self.manifest["tokenizer"]["fingerprint"])

    @property
    def tokenizer_name(self) -> str:
        return str(self.manifest["tokenizer"].get("name_or_path") or "MODEL")

    def check_tokenizer(self, tokenizer, model: str) -> None:
        mine = tokenizer_fingerprint(tokenizer)
        if mine != self.fingerprint:
            raise ConfigError(f"token store {self.path} was built with another tokenizer (fingerprint "
                              f"{self.fingerprint}, {model}'s is {mine}); rebuild it: biobench corpus build "
                              f"SOURCE... --tokenizer {model} --out NEW_STORE")


def _damaged(store: Path, why: str) -> DataError:
    return DataError(f"token store {store} is damaged ({why}); it is not used: rebuild it with biobench corpus build")


MAX_DONE_BYTES = 4096  # the completion marker: a sha256 in hex and a newline
MAX_STORE_TOKENS = 1 << 48  # far past any corpus (the paper's largest run reads 50B = 2^35.5 tokens)
DTYPES = ("uint16", "uint32")  # store_dtype's choices


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= MAX_STORE_TOKENS


def _check_manifest(store: Path, manifest: Any) -> dict[str, Any]:
    """The one validation of a manifest, shared by `corpus info`, `plan` and `pretrain` (all through read_manifest):
    its kinds, bounds and sums, so what reads it later never meets a text count, an infinite one or a missing
    dtype (each was a traceback), nor a count its shards do not hold. DataError naming what is wrong otherwise."""
    if not isinstance(manifest, dict) or manifest.get("format") != FORMAT or manifest.get("version") not in VERSIONS:
        raise _damaged(store, f"not a {FORMAT} manifest of version {' or '.join(map(str, VERSIONS))}")

    def bad(what: str, value: Any) -> DataError:
        return _damaged(store, f"its manifest's {what} is {str(value)[:40]!r}")

    if manifest.get("dtype") not in DTYPES:
        raise bad("dtype", manifest.get("dtype"))
    for key in ("tokens", "documents"):
        if not _count(manifest.get(key)):
            raise bad(key, manifest.get(key))
    shards = manifest.get("shards")
    if not isinstance(shards, list) or len(shards) > MAX_UNITS:
        raise bad("shards", type(shards).__name__)
    for shard in shards:
        if not isinstance(shard, dict) or not isinstance(shard.get("name"), str) \
                or not re.fullmatch(r"\d{6}", shard["name"]):
            raise bad("shard entry", shard)
        for key in ("tokens", "documents"):
            if not _count(shard.get(key)):
                raise bad(f"shard {shard['name']} {key}", shard.get(key))
    for key in ("tokens", "documents"):
        if sum(s[key] for s in shards) != manifest[key]:
            raise _damaged(store, f"its manifest counts {manifest[key]:,} {key}, its shards "
                                  f"{sum(s[key] for s in shards):,}")
    tokenizer = manifest.get("tokenizer")
    if not isinstance(tokenizer, dict) or not isinstance(tokenizer.get("fingerprint"), str):
        raise bad("tokenizer", tokenizer)
    sources = manifest.get("sources")
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise bad("sources", sources)
    if not isinstance(manifest.get("text_field"), str):
        raise bad("text_field", manifest.get("text_field"))
    if manifest.get("weight_field") is not None and not isinstance(manifest["weight_field"], str):
        raise bad("weight_field", manifest["weight_field"])
    index = manifest.get("offsets")
    if index is not None and not (isinstance(index, dict) and isinstance(index.get("sha256"), str)):
        raise bad("offsets", index)
    if manifest["version"] >= 2:  # dedup's record: version 1 stores have none (their dedup is unknown)
        dedup = manifest.get("dedup")
        if not isinstance(dedup, dict) or any(not (isinstance(dedup.get(k), dict) and isinstance(
                dedup[k].get("sha256"), str)) for k in ("hashes", "dropped")):
            raise bad("dedup", dedup)
        for key in ("documents_seen", "duplicates_dropped"):
            if not _count(dedup.get(key)):
                raise bad(f"dedup {key}", dedup.get(key))
        if dedup["documents_seen"] != manifest["documents"] or dedup["duplicates_dropped"] >= max(1, manifest["documents"]):
            raise _damaged(store, f"its manifest's dedup counts ({dedup['documents_seen']:,} seen, "
                                  f"{dedup['duplicates_dropped']:,} dropped) do not fit its {manifest['documents']:,} documents")
    return manifest


def _done_text(store: Path) -> str:
    """The completion marker's checksum, read within MAX_DONE_BYTES (a sparse 8 GiB `done`, a FIFO or a link to
    /dev/zero is refused, never read whole or waited on)."""
    return read_bytes(store / DONE, MAX_DONE_BYTES).decode("ascii").strip()


def read_manifest(store: Path) -> dict[str, Any]:
    """The manifest, read within bounds (bench/runtime/jsonfile: a FIFO, a device, a file past the bound refused
    without blocking), checked against the completion marker's checksum (an edited manifest is refused) and
    validated (`_check_manifest`)."""
    store = Path(store)
    if not (store / DONE).is_file():
        raise DataError(f"{store} is not a finished token store (no '{DONE}' marker): finish it with the same "
                        "biobench corpus build command")
    try:
        expected = _done_text(store)
        raw = read_bytes(store / MANIFEST, MAX_MANIFEST_BYTES)
    except UnsafeJSONError as err:
        raise _damaged(store, f"{Path(err.source).name}: {err.reason}") from None
    except (OSError, UnicodeDecodeError) as err:
        raise _damaged(store, f"cannot read its manifest: {err}") from None
    if hashlib.sha256(raw).hexdigest() != expected:
        raise _damaged(store, f"{MANIFEST} does not match the checksum in '{DONE}'")
    try:
        manifest = parse_json(raw, store / MANIFEST)
    except UnsafeJSONError as err:
        raise _damaged(store, err.reason) from None
    return _check_manifest(store, manifest)


def open_store(store: str | Path, verify: bool = True, max_documents: int | None = None) -> TokenStore:
    """Open a finished store: manifest checksum, every shard's size, and (verify) each shard's sha256 unless
    this copy was verified before with the same size and mtime (recorded in verified.json, outside the content).
    The document offsets are the memory-mapped global index (offsets.idx), so opening holds O(shards) memory,
    not 8 bytes per document; a shard's .idx is read only when its sha256 is checked (it must frame its tokens)."""
    store = Path(store)
    manifest = read_manifest(store)
    dtype = np.dtype(manifest["dtype"])
    files, lengths, old_offsets, base = [], [], [np.zeros(1, dtype=np.int64)], 0
    stamps_path = store / VERIFIED
    try:
        stamps = read_json(stamps_path, 64 << 20) if stamps_path.is_file() else {}
    except UnsafeJSONError:
        stamps = {}
    fresh: dict[str, Any] = {}

    def check(path: Path, size: int, sha256: object, what: str) -> bool:
        """Size always; sha256 when verifying a copy not verified before. True when the sha256 was computed."""
        try:
            st = path.stat()
        except OSError:
            raise _damaged(store, f"{what} {path.name} is missing") from None
        if st.st_size != size:
            raise _damaged(store, f"{what} {path.name} has {st.st_size} bytes, its manifest says {size}")
        stamp = [st.st_size, st.st_mtime_ns, sha256]
        fresh[path.name] = stamp
        if verify and stamps.get(path.name) != stamp:
            if _sha256(path) != sha256:
                raise _damaged(store, f"{what} {path.name} does not match its sha256 in the manifest")
            return True
        return False

    indexed = isinstance(manifest.get("offsets"), dict)  # stores built before the global index: offsets in RAM
    for shard in manifest["shards"]:
        name = shard["name"]
        kinds = [("bin", shard["tokens"] * dtype.itemsize), ("idx", (shard["documents"] + 1) * 8)]
        if manifest.get("weight_field") is not None:
            kinds.append(("wgt", shard["documents"] * 8))
        computed = False
        for ext, size in kinds:
            if f"{ext}_sha256" not in shard:
                raise _damaged(store, f"shard {name} has no {ext}_sha256 in the manifest")
            computed |= check(store / SHARDS / f"{name}.{ext}", size, shard[f"{ext}_sha256"], "shard")
        if computed or not indexed:
            idx = np.fromfile(store / SHARDS / f"{name}.idx", dtype="<i8")
            if idx[0] != 0 or idx[-1] != shard["tokens"] or np.any(idx[1:] < idx[:-1]):
                raise _damaged(store, f"shard {name}.idx does not frame its tokens")
            if not indexed:
                old_offsets.append(idx[1:] + base)
        base += int(shard["tokens"])
        files.append(store / SHARDS / f"{name}.bin")
        lengths.append(int(shard["tokens"]))
    if indexed:
        index = manifest["offsets"]
        check(store / OFFSETS, (int(manifest["documents"]) + 1) * 8, index.get("sha256"), "document index")
        all_offsets: np.ndarray = np.memmap(store / OFFSETS, dtype="<i8", mode="r")
        if all_offsets[0] != 0 or all_offsets[-1] != manifest["tokens"]:
            raise _damaged(store, f"{OFFSETS} does not frame the tokens")
    else:
        all_offsets = np.concatenate(old_offsets)
    kept = None
    dedup = manifest.get("dedup")
    if dedup is not None:
        n_docs, n_dropped = int(manifest["documents"]), int(dedup["duplicates_dropped"])
        check(store / HASHES, n_docs * 8, dedup["hashes"]["sha256"], "document hashes")
        check(store / DROPPED, n_dropped * 8, dedup["dropped"]["sha256"], "dropped documents")
        if n_dropped:
            dropped = np.fromfile(store / DROPPED, dtype="<i8")
            if dropped[0] < 1 or dropped[-1] >= n_docs or np.any(dropped[1:] <= dropped[:-1]):
                raise _damaged(store, f"{DROPPED} does not list documents of the store in order")
            keep = np.ones(n_docs, dtype=bool)
            keep[dropped] = False
            kept = np.nonzero(keep)[0]
    if verify and fresh != stamps:
        try:
            atomic_write(stamps_path, json.dumps(fresh))
        except OSError:
            pass  # a read-only copy is verified again next time
    if kept is not None:  # the documents read skip the duplicates: a view of the shards (16 bytes per document)
        view = DocumentView(ShardedTokens(files, lengths, dtype), all_offsets, kept[:max_documents])
        return TokenStore(store, manifest, view, view.offsets, kept[:max_documents])
    limit = None
    if max_documents is not None and max_documents < len(all_offsets) - 1:
        all_offsets = all_offsets[:max_documents + 1]
        limit = int(all_offsets[-1])
    return TokenStore(store, manifest, ShardedTokens(files, lengths, dtype, limit), all_offsets)


def describe(store: TokenStore) -> str:
    """`biobench corpus info`: the manifest in words."""
    m = store.manifest
    tok = m["tokenizer"]
    size = sum(f.stat().st_size for f in (store.path / SHARDS).iterdir())
    lines = [f"token store {store.path}",
             f"  sources: {', '.join(m['sources'])} (text field '{m['text_field']}')",
             f"  tokenizer: {tok['name_or_path']} (fingerprint {tok['fingerprint']}, vocabulary {tok['vocab_size']:,},"
             f" ids {m['dtype']}, documents framed {tok['bos']} ... {tok['eos']})",
             f"  {m['tokens']:,} tokens in {m['documents']:,} documents, {len(m['shards'])} shard(s), "
             f"{size / 2**20:,.1f} MiB on disk",
             f"  {dedup_line(m.get('dedup'))}",
             f"  content id {store_id(store.path)} (sha256 of the manifest; every shard checked against it)"]
    return "\n".join(lines)


def dedup_line(dedup: dict[str, Any] | None) -> str:
    if dedup is None:
        return "dedup unknown (built before document hashes, format version 1; rebuild the store to dedup it)"
    read = dedup["documents_seen"] - dedup["duplicates_dropped"]
    return (f"dedup: {dedup['documents_seen']:,} documents seen, {dedup['duplicates_dropped']:,} exact duplicates "
            f"dropped, {read:,} read (hash: {dedup.get('hash', 'blake2b-64')})")


def store_id(store: Path) -> str:
    try:
        return _done_text(Path(store))[:16]
    except (UnsafeJSONError, OSError, UnicodeDecodeError) as err:
        raise _damaged(Path(store), f"cannot read '{DONE}': {getattr(err, 'reason', err)}") from None
