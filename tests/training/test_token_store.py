"""The token store (training/token_store.py): what it holds, byte-identical whatever --workers and after a
kill -9, bounded reading of hostile sources, and a damaged store never used (issue 49 §1 and §4, issue 51 item 3)."""

from __future__ import annotations

import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest
from biobench.errors import ConfigError, DataError
from biobench.runtime.ownership import MARKER
from biobench.training import corpus, token_store

WORDS = ("le patient présente une fièvre traitement par amoxicilline pendant sept jours scanner thoracique "
         "normal hemoglobin platelets admission carcinome").split()


def _docs(n: int, seed: int = 0) -> list[str]:
    rng = np.random.default_rng(seed)
    return [" ".join(rng.choice(WORDS, size=int(rng.integers(3, 60)))) for _ in range(n)]



def _sources(root: Path) -> Path:
    """A folder with every local format pretrain reads: JSONL, JSONL.gz and (in its own folder) text and parquet."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root.mkdir(parents=True, exist_ok=True)
    (root / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(300, 1)))
    with gzip.open(root / "b.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write("".join(json.dumps({"text": d}) + "\n" for d in _docs(200, 2)))
    (root / "prose").mkdir()
    (root / "prose" / "c.txt").write_text("\n\n".join(d.replace(" fièvre ", " fièvre\n") for d in _docs(250, 3)) + "\n")
    (root / "tables").mkdir()
    pq.write_table(pa.table({"text": _docs(120, 4), "score": list(range(120))}), root / "tables" / "d.parquet",
                   row_group_size=50)
    return root


def _expected(tok, sources: list[str]) -> list[int]:
    ids = []
    for source in sources:
        for doc in corpus.iter_documents(source):
            ids += [tok.cls_token_id] + tok(doc, add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
    return ids


def _content(store: Path) -> dict[str, bytes]:
    return {str(p.relative_to(store)): p.read_bytes() for p in sorted(store.rglob("*"))
            if p.is_file() and p.name not in (token_store.VERIFIED, MARKER)}  # the marker holds a time


def test_store_holds_every_document_framed_and_reads_like_an_array(tmp_path, tok_dir, tiny_tokenizer):
    root = _sources(tmp_path / "src")
    sources = [str(root / "a.jsonl"), str(root / "b.jsonl.gz"), str(root / "prose"), str(root / "tables")]
    # small units: the JSONL and the text file are split into byte ranges, the parquet into its 3 row groups
    store = token_store.build(sources, tmp_path / "store", str(tok_dir), unit_bytes=2000)
    opened = token_store.open_store(store)
    assert len(opened.manifest["shards"]) > 8
    expected = _expected(tiny_tokenizer, sources)
    assert opened.tokens[0:len(opened.tokens)].tolist() == expected
    assert opened.manifest["tokens"] == len(expected) and opened.manifest["dtype"] == "uint16"
    assert opened.n_documents == 300 + 200 + 250 + 120
    starts = opened.offsets[:-1]
    assert (np.asarray(expected)[starts] == tiny_tokenizer.cls_token_id).all()
    # a slice across shard boundaries, and a document-limited view (pretrain --max-documents)
    assert opened.tokens[5:9000].tolist() == expected[5:9000]
    first = token_store.open_store(store, max_documents=10)
    assert first.n_documents == 10 and len(first.tokens) == opened.offsets[10]
    assert not (store / token_store.WORK).exists()  # the work markers go once the store is done
    info = token_store.describe(opened)
    assert f"{len(expected):,} tokens in 870 documents" in info and "a.jsonl" in info


@pytest.mark.slow
def test_the_global_document_index_is_memory_mapped_and_checked(tmp_path, tok_dir, monkeypatch):
    """offsets.idx (written at the end of the build) is what open_store maps: the same offsets as the shards'
    .idx files concatenated, opened without reading any .idx once the copy was verified (O(1) memory in the
    number of documents), and an altered index is a damaged store."""
    root = _sources(tmp_path / "src")
    store = token_store.build([str(root / "a.jsonl"), str(root / "tables")], tmp_path / "s", str(tok_dir),
                              unit_bytes=3000)
    manifest = token_store.read_manifest(store)
    assert len(manifest["shards"]) > 3 and manifest["offsets"]["file"] == token_store.OFFSETS
    opened = token_store.open_store(store)  # verifies every file once
    assert isinstance(opened.offsets, np.memmap) and opened.n_documents == 420
    expected, base = [0], 0
    for shard in manifest["shards"]:
        idx = np.fromfile(store / "shards" / f"{shard['name']}.idx", dtype="<i8")
        expected += (idx[1:] + base).tolist()
        base += shard["tokens"]
    assert opened.offsets.tolist() == expected
    assert token_store.open_store(store, max_documents=7).offsets.tolist() == expected[:8]

    def no_read(*_args, **_kwargs):
        raise AssertionError("a shard index was read into memory")

    monkeypatch.setattr(np, "fromfile", no_read)
    assert token_store.open_store(store).offsets.tolist() == expected  # verified before: nothing read whole
    assert token_store.open_store(store, verify=False).n_documents == 420
    monkeypatch.undo()
    index = store / token_store.OFFSETS
    raw = bytearray(index.read_bytes())
    raw[8] ^= 1
    index.write_bytes(bytes(raw))
    with pytest.raises(DataError, match=r"is damaged \(document index offsets.idx does not match its sha256"):
        token_store.open_store(store)
    index.write_bytes(bytes(raw[:-8]))
    with pytest.raises(DataError, match=r"document index offsets.idx has \d+ bytes, its manifest says"):
        token_store.open_store(store, verify=False)


def test_two_workers_write_the_same_bytes_as_one(tmp_path, tok_dir):
    root = _sources(tmp_path / "src")
    sources = [str(root), str(root / "prose"), str(root / "tables")]
    one = token_store.build(sources, tmp_path / "one", str(tok_dir), workers=1, unit_bytes=3000)
    two = token_store.build(sources, tmp_path / "two", str(tok_dir), workers=2, unit_bytes=3000)
    assert _content(one) == _content(two)
    assert len(_content(one)) > 6


def test_a_pool_worker_tokenises_from_the_building_process_spec_without_transformers(tmp_path, tok_dir):
    """Issue 59 item 2: a build worker's start cost the import of transformers and a tokenizer load (~3 CPU-s a
    worker, a third of a 10M-token 2-worker build); it now receives the backend from the building process and
    writes the unit in a fresh interpreter that never imports transformers, byte for byte as the building process."""
    import pickle

    root = _sources(tmp_path / "src")
    one = token_store.build([str(root / "a.jsonl")], tmp_path / "one", str(tok_dir), workers=1, unit_bytes=1 << 20)
    plan = token_store.prepare([str(root / "a.jsonl")], tmp_path / "two", str(tok_dir), unit_bytes=1 << 20)
    assert len(plan.units) == 1
    job = tmp_path / "job.pkl"
    job.write_bytes(pickle.dumps((token_store.EncoderSpec.of(str(tok_dir), plan.tokenizer), plan.units[0],
                                  plan.out, str(tok_dir))))
    script = ("import pickle, sys\n"
              "from biobench.training import token_store\n"
              "spec, unit, out, name = pickle.loads(open(sys.argv[1], 'rb').read())\n"
              "token_store._pool_worker(spec)\n"
              "token_store.build_unit(0, unit, out, 'text', name)\n"
              "print(sorted(m for m in ('transformers', 'torch') if m in sys.modules))\n")
    ran = subprocess.run([sys.executable, "-c", script, str(job)], capture_output=True, text=True, timeout=120)
    assert ran.returncode == 0, ran.stderr
    assert ran.stdout.strip() == "[]"
    for name in ("000000.bin", "000000.idx"):
        assert (plan.out / "shards" / name).read_bytes() == (one / "shards" / name).read_bytes()
    token_store.finish(plan)
    assert {k: v for k, v in _content(one).items() if k != token_store.BUILD_LOCK} == _content(plan.out)


def test_a_copied_store_stays_valid_and_damage_is_refused(tmp_path, tok_dir, tiny_tokenizer):
    import shutil

    root = _sources(tmp_path / "src")
    built = token_store.build([str(root / "a.jsonl")], tmp_path / "store", str(tok_dir), unit_bytes=4000)
    copy = tmp_path / "scratch" / "store"
    shutil.copytree(built, copy)  # new path, new mtimes: still the same store
    assert token_store.open_store(copy).manifest == token_store.open_store(built).manifest
    token_store.open_store(copy).check_tokenizer(tiny_tokenizer, "tiny")

    def refused(folder: Path, pattern: str) -> None:
        with pytest.raises(DataError, match=pattern) as err:
            token_store.open_store(folder)
        assert "\n" not in str(err.value) and "is not used" in str(err.value)

    shard = sorted((copy / "shards").glob("*.bin"))[1]
    data = bytearray(shard.read_bytes())
    data[10] ^= 1
    shard.write_bytes(bytes(data))  # same size, one bit changed
    refused(copy, f"shard {shard.name} does not match its sha256")
    shard.write_bytes(bytes(data[:-4]))
    refused(copy, f"shard {shard.name} has {len(data) - 4} bytes, its manifest says {len(data)}")
    shutil.rmtree(copy)
    shutil.copytree(built, copy)
    manifest = json.loads((copy / "manifest.json").read_text())
    manifest["tokens"] += 1
    (copy / "manifest.json").write_text(json.dumps(manifest))
    refused(copy, "manifest.json does not match the checksum in 'done'")
    # a store of another tokenizer: refused with the command that rebuilds it
    from biobench.training.presets import train_tokenizer

    other = train_tokenizer(_docs(50, 9), vocab_size=300)
    with pytest.raises(ConfigError, match=r"built with another tokenizer .*biobench corpus build SOURCE\.\.\. "
                                          r"--tokenizer other-model"):
        token_store.open_store(built).check_tokenizer(other, "other-model")


def _one_line(err: BaseException, name: str) -> None:
    text = str(err)
    assert "\n" not in text and name in text, text


def test_hostile_sources_are_one_line_naming_the_file(tmp_path, monkeypatch, tok_dir):
    """Issue 49 §4 / issue 51 item 3: FIFO, /dev/zero, a line past the bound (plain and gzipped: a gzip bomb is
    refused after holding the bound, not the whole line), binary, a non-string text field."""
    fifo = tmp_path / "pipe.jsonl"
    os.mkfifo(fifo)
    zero = tmp_path / "zero.txt"
    zero.symlink_to("/dev/zero")
    monkeypatch.setattr(corpus, "MAX_DOCUMENT_BYTES", 1000)
    long_line = tmp_path / "long.jsonl"
    long_line.write_text(json.dumps({"text": "x" * 5000}) + "\n")
    bomb = tmp_path / "bomb.jsonl.gz"
    with gzip.open(bomb, "wb") as fh:
        fh.write(b'{"text": "' + b"a" * 200_000)  # no newline: one line that expands far past the bound
    long_doc = tmp_path / "long.txt"
    long_doc.write_text(("mot " * 40 + "\n") * 10)  # a 1,610-byte document of short lines, no blank line
    binary = tmp_path / "blob.txt"
    binary.write_bytes(b"ELF\x00\x01\x02" * 10)
    numbers = tmp_path / "numbers.jsonl"
    numbers.write_text('{"text": "ok"}\n{"text": 42}\n')
    cases = {fifo: "not a regular file", zero: "not a regular file", long_line: "a line longer than",
             bomb: "a line longer than", long_doc: "a document longer than", binary: "binary data",
             numbers: r"numbers.jsonl:2: field 'text' is int, not text"}
    for path, pattern in cases.items():
        with pytest.raises(DataError, match=pattern) as err:
            list(corpus.iter_documents(str(path)))
        _one_line(err.value, path.name)
        with pytest.raises(DataError, match=pattern) as err:  # the store reads through the same readers
            token_store.build([str(path)], tmp_path / f"store-{path.name}", str(tok_dir))
        _one_line(err.value, path.name)


def test_cli_build_and_info_refuse_in_one_line(tmp_path, tok_dir, capsys):
    from biobench import cli

    root = _sources(tmp_path / "src")
    assert cli.main(["corpus", "build", str(root / "a.jsonl"), "--tokenizer", str(tok_dir),
                     "--out", str(tmp_path / "s")]) == 0
    out = capsys.readouterr().out
    assert "1 work unit(s)" in out and "tokens in 300 documents" in out
    assert cli.main(["corpus", "info", str(tmp_path / "s")]) == 0
    assert "content id" in capsys.readouterr().out
    (tmp_path / "numbers.jsonl").write_text('{"text": ["a"]}\n')
    assert cli.main(["corpus", "build", str(tmp_path / "numbers.jsonl"), "--tokenizer", str(tok_dir),
                     "--out", str(tmp_path / "bad")]) != 0
    err = capsys.readouterr().err
    assert "numbers.jsonl:1: field 'text' is list, not text" in err and "Traceback" not in err
    assert cli.main(["corpus", "info", str(tmp_path / "src")]) != 0
    assert "not a finished token store" in capsys.readouterr().err


@pytest.mark.slow
def test_kill_9_half_way_then_resume_gives_the_same_store(tmp_path, tok_dir):
    """A real `biobench corpus build` process killed with SIGKILL after some units finished, then rerun: the
    finished units are kept (not redone) and the store is byte-identical to an uninterrupted build."""
    src = tmp_path / "big.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(12_000, 7)))
    cmd = [sys.executable, "-m", "biobench.cli", "corpus", "build", str(src), "--tokenizer", str(tok_dir),
           "--out", str(tmp_path / "killed"), "--unit-mb", "0.02"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    work = tmp_path / "killed" / "work"
    deadline = time.monotonic() + 120
    while len(list(work.glob("*.done"))) < 3 and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    finished = sorted(p.name for p in work.glob("*.done"))
    assert not (tmp_path / "killed" / "done").exists() and len(finished) >= 3, proc.stderr.read().decode()[-2000:]
    kept = {name: (work / name).stat().st_mtime_ns for name in finished}
    result = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr[-2000:]
    assert f"{len(finished)} already done" in result.stdout
    fresh = token_store.build([str(src)], tmp_path / "fresh", str(tok_dir), unit_bytes=int(0.02 * 2**20))
    assert _content(tmp_path / "killed") == _content(fresh)
    assert len(kept) >= 3


def _kill_a_worker_mid_unit(build: subprocess.Popen, shards: Path, log: Path, unit: int | None = None,
                            killed: tuple[int, ...] = ()) -> tuple[int, int]:
    """SIGKILL a tokenizer worker of `build` (a child of it, none of `killed`) while it writes a unit (`unit`, or
    any): its temporary shard is named by its pid. Returns the unit and the pid."""
    deadline = time.monotonic() + 240
    while True:
        assert build.poll() is None and time.monotonic() < deadline, log.read_text()[-2000:]
        for tmp in shards.glob("*.bin.*.tmp") if shards.is_dir() else ():
            pid, found = int(tmp.name.split(".")[-2]), int(tmp.name.split(".")[0])
            stat = Path(f"/proc/{pid}/stat")
            try:  # the state and the parent pid: the fields after the command's closing parenthesis
                state, parent = stat.read_text().rsplit(")", 1)[1].split()[:2]
            except (OSError, ValueError):
                continue
            # a live worker of this build (the temporary of a worker killed before stays; its process may not
            # have ended yet, or be a zombie)
            if int(parent) == build.pid and state not in ("Z", "X") and pid not in killed and unit in (None, found):
                os.kill(pid, signal.SIGKILL)
                return found, pid
        time.sleep(0.005)


def _parallel_build(tmp_path: Path, tok_dir: Path, out: str) -> tuple[list[str], Path]:
    src = tmp_path / "big.jsonl"
    if not src.exists():
        src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(30_000, 5)))
    return ([sys.executable, "-m", "biobench.cli", "corpus", "build", str(src), "--tokenizer", str(tok_dir),
             "--out", str(tmp_path / out), "--unit-mb", "0.5", "--workers", "2"], src)


BUILD_ENV = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}


@pytest.mark.slow
def test_a_worker_killed_mid_unit_is_redone_and_the_build_ends_with_the_same_store(tmp_path, tok_dir):
    """`corpus build --workers 2` with one tokenizer worker killed with SIGKILL (as the OOM killer does) while it
    writes a unit: the build redoes the lost unit in a new pool, says so, and ends rc 0 with the store of a
    clean build, byte for byte (issue 57 §5: multiprocessing.Pool started a new worker and waited for ever on
    the lost unit, the parent at 0% CPU)."""
    cmd, src = _parallel_build(tmp_path, tok_dir, "killed")
    log = tmp_path / "build.out"
    with log.open("w") as out:
        build = subprocess.Popen(cmd, env=BUILD_ENV, stdout=out, stderr=subprocess.STDOUT)
        try:
            unit, _pid = _kill_a_worker_mid_unit(build, tmp_path / "killed" / "shards", log)
            assert build.wait(timeout=300) == 0, log.read_text()[-2000:]
        finally:
            build.kill()
    text = log.read_text()
    assert "a tokenizer worker died (killed, or out of memory) while unit(s) " in text, text
    redone = text.split("while unit(s) ", 1)[1].split(" were being", 1)[0]
    assert str(unit) in redone.split(", "), text
    fresh = token_store.build([str(src)], tmp_path / "fresh", str(tok_dir), unit_bytes=int(0.5 * 2**20))
    assert _content(tmp_path / "killed") == _content(fresh)


@pytest.mark.slow
def test_a_unit_whose_worker_dies_twice_fails_the_build_in_one_line_naming_it(tmp_path, tok_dir):
    """The same unit's worker killed again in the new pool (a unit that runs a worker out of memory every time):
    the build ends in one line naming the unit and keeping the finished ones, instead of a third try or a hang."""
    cmd, _src = _parallel_build(tmp_path, tok_dir, "doomed")
    log = tmp_path / "build.out"
    shards = tmp_path / "doomed" / "shards"
    with log.open("w") as out:
        build = subprocess.Popen(cmd, env=BUILD_ENV, stdout=out, stderr=subprocess.PIPE, text=True)
        try:
            unit, first = _kill_a_worker_mid_unit(build, shards, log)
            _kill_a_worker_mid_unit(build, shards, log, unit, (first,))  # the new pool takes the lost unit first
            _out, err = build.communicate(timeout=300)
        finally:
            build.kill()
    assert build.returncode == 2 and err.count("\n") == 1, err
    assert err.startswith("error: corpus build: a tokenizer worker died 2 times while unit(s) ") and \
        str(unit) in err.split("while unit(s) ", 1)[1].split(" of ", 1)[0].split(", "), err
    assert "finished unit(s) are kept: rerun the same command to resume" in err
    assert not (tmp_path / "doomed" / token_store.DONE).exists()


@pytest.mark.slow
def test_two_processes_building_one_store_at_once_both_succeed_with_one_store(tmp_path, tok_dir):
    """The demo's two pretrainings side by side read one raw corpus into one cached store: two real builds of the
    same --out started together both end rc 0, one of them tokenising and the other waiting for it, and the store
    is byte-identical to a build alone (before the build lock, the second's leftover sweep could remove the
    first's temporary shards: a traceback)."""
    src = tmp_path / "big.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(6_000, 3)))
    cmd = [sys.executable, "-m", "biobench.cli", "corpus", "build", str(src), "--tokenizer", str(tok_dir),
           "--out", str(tmp_path / "shared"), "--unit-mb", "0.02"]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    procs = [subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [proc.communicate(timeout=300) for proc in procs]
    assert [proc.returncode for proc in procs] == [0, 0], [err[-2000:] for _out, err in outs]
    assert not any("Traceback" in err for _out, err in outs)
    alone = token_store.build([str(src)], tmp_path / "alone", str(tok_dir), unit_bytes=int(0.02 * 2**20))
    assert _content(tmp_path / "shared") == _content(alone)


def _forge(store: Path, **changes) -> None:
    """Rewrite a finished store's manifest with `changes` (None removes a key) and a matching `done` marker."""
    import hashlib

    manifest = json.loads((store / token_store.MANIFEST).read_text())
    for key, value in changes.items():
        if value is None:
            manifest.pop(key, None)
        else:
            manifest[key] = value
    text = json.dumps(manifest, indent=1, sort_keys=True).replace('"__1e400__"', "1e400") + "\n"
    (store / token_store.MANIFEST).write_text(text)
    (store / token_store.DONE).write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")


def test_a_stores_own_files_are_read_within_bounds_and_validated_once_for_info_plan_and_pretrain(tmp_path, tok_dir,
                                                                                                 tiny_tokenizer, capsys):
    """Issue 58 item 7: a manifest that is a FIFO or a link to /dev/zero (a real `corpus info` process, which used
    to hang), a sparse 8 GiB `done`, a manifest claiming 2^40 tokens, a text, infinite or missing count or dtype:
    each is one line from `corpus info`, `corpus plan` and pretrain's store opening, never a hang, a MemoryError
    or a traceback."""
    import shutil

    from biobench import cli
    from biobench.training import corpus_input

    src = tmp_path / "docs.jsonl"
    src.write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(20)))
    good = token_store.build([str(src)], tmp_path / "good", str(tok_dir))
    biobench = str(Path(sys.executable).parent / "biobench")

    def copy(name: str) -> Path:
        return Path(shutil.copytree(good, tmp_path / name))

    for name, make in (("fifo", lambda p: os.mkfifo(p)), ("zero", lambda p: p.symlink_to("/dev/zero"))):
        store = copy(name)
        (store / token_store.MANIFEST).unlink()
        make(store / token_store.MANIFEST)
        run = subprocess.run([biobench, "corpus", "info", str(store)], capture_output=True, text=True, timeout=120)
        assert run.returncode != 0 and "not a regular file" in run.stderr and "Traceback" not in run.stderr
        assert run.stderr.strip().count("\n") == 0

    sparse = copy("sparse")
    with open(sparse / token_store.DONE, "wb") as handle:
        handle.truncate(8 << 30)
    forged = {"huge": dict(tokens=1 << 40), "text": dict(tokens="5000"), "inf": dict(tokens="__1e400__"),
              "nodtype": dict(dtype=None), "bool": dict(documents=True)}
    messages = {"sparse": "over the 4096 bytes limit", "huge": "its manifest counts 1,099,511,627,776 tokens",
                "text": "tokens is '5000'", "inf": "tokens is 'inf'", "nodtype": "dtype is 'None'",
                "bool": "documents is 'True'"}
    for name, changes in forged.items():
        _forge(copy(name), **changes)
    for name, message in messages.items():
        store = tmp_path / name
        assert cli.main(["corpus", "info", str(store)]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0 and "is damaged" in err, (name, err)
        (tmp_path / f"{name}.toml").write_text(f'[[source]]\nname = "s"\nstore = "{name}"\nshare = 1\n')
        assert cli.main(["corpus", "plan", str(tmp_path / f"{name}.toml"), "--tokens", "1K", "--seq-len", "16",
                         "--batch-size", "4"]) != 0
        err = capsys.readouterr().err.strip()
        assert message in err and err.count("\n") == 0, (name, err)
        with pytest.raises(DataError, match=message):  # pretrain --corpus STORE opens it the same way
            corpus_input.packed_corpus(_Cfg(str(store)), tiny_tokenizer, True, 1, 0, print)


class _Cfg:
    """What corpus_input.packed_corpus reads of a PretrainConfig."""

    def __init__(self, corpus: str):
        self.corpus, self.seq_len, self.max_documents, self.text_field = corpus, 16, None, "text"


def test_building_other_sources_into_a_finished_store_is_refused(tmp_path, tok_dir, capsys):
    """Issue 58 item 7: `corpus build OTHER --out EXISTING_STORE` kept the old store and said nothing (rc 0)."""
    from biobench import cli

    for name, seed in (("a.jsonl", 1), ("b.jsonl", 2)):
        (tmp_path / name).write_text("".join(json.dumps({"text": d}) + "\n" for d in _docs(10, seed)))
    base = ["--tokenizer", str(tok_dir), "--out", str(tmp_path / "s")]
    assert cli.main(["corpus", "build", str(tmp_path / "a.jsonl"), *base]) == 0
    assert cli.main(["corpus", "build", str(tmp_path / "a.jsonl"), *base]) == 0  # the same sources: found built
    capsys.readouterr()
    assert cli.main(["corpus", "build", str(tmp_path / "b.jsonl"), *base]) != 0
    err = capsys.readouterr().err.strip()
    assert err == (f"error: --out {tmp_path / 's'} is a finished token store of other sources (a.jsonl, text field "
                   "'text', weight field none); choose a new --out, or delete that store to rebuild it")


def test_a_hub_dataset_is_split_into_units_by_its_files_pinned_to_its_commit(tmp_path, tok_dir, monkeypatch):
    """Issue 59 item 3, against the loopback hub (tests/fake_hub.py): a hub source is one work unit per data file
    (parquet and JSONL shards, at the commit its revision names when planned, recorded in the manifest), read
    with --weight-field like local files, and gives the store the same files give locally."""
    from tests.fake_hub import Repo, parquet_bytes, serving_hub

    docs = _docs(40, 7)
    jsonl = "".join(json.dumps({"text": d, "score": 2.0}) + "\n" for d in docs[20:]).encode()
    files = {"data/part-0.parquet": parquet_bytes({"text": docs[:20], "score": [1.0] * 20}),
             "data/part-1.jsonl": jsonl, "README.md": b"# a corpus\n"}
    local = tmp_path / "local" / "data"
    local.mkdir(parents=True)
    for name, data in files.items():
        if name.startswith("data/"):
            (local / name.split("/")[1]).write_bytes(data)
    expected = token_store.open_store(token_store.build([str(local)], tmp_path / "from-files", str(tok_dir),
                                                        weight_field="score"))
    with serving_hub(monkeypatch, tmp_path) as hub:
        repo = Repo(files)
        hub.datasets[("org/corpus", "main")] = repo
        units = token_store.plan_units(["org/corpus"])
        assert units == [[token_store.Piece(f"org/corpus@{repo.commit}:data/part-0.parquet", "hubfile")],
                         [token_store.Piece(f"org/corpus@{repo.commit}:data/part-1.jsonl", "hubfile")]]
        built = token_store.open_store(token_store.build(["org/corpus"], tmp_path / "from-hub", str(tok_dir),
                                                         weight_field="score"))
        pinned = token_store.open_store(token_store.build([f"org/corpus@{repo.commit}"], tmp_path / "pinned",
                                                          str(tok_dir)))
        with pytest.raises(DataError, match=r"cannot read hub dataset 'org/corpus@nosuchbranch' as a corpus"):
            token_store.plan_units(["org/corpus@nosuchbranch"])
    assert built.manifest["hub"] == {"org/corpus": {"commit": repo.commit, "files": 2}}
    assert len(built.manifest["shards"]) == 2
    assert built.tokens[0:len(built.tokens)].tolist() == expected.tokens[0:len(expected.tokens)].tolist()
    assert built.weights().tolist() == [1.0] * 20 + [2.0] * 20
    assert pinned.tokens[0:len(pinned.tokens)].tolist() == expected.tokens[0:len(expected.tokens)].tolist()


@pytest.mark.slow
def test_a_hub_sources_config_and_data_files_select_its_files_and_the_manifest_records_them(tmp_path, tok_dir,
                                                                                            monkeypatch, capsys):
    """Issue 59 item 3's leftover, against the loopback hub: --hub-config picks a config's train files (the hub's
    parquet export layout at refs/convert/parquet, config/split/NNNN.parquet, or the README's `configs:` table),
    --data-files globs pick files as load_dataset's data_files (narrowing a config); one unit per selected file,
    the config, globs and selected paths in the manifest, a rebuild with another selection refused, a glob that
    matches nothing one line listing what the repo has, unsafe globs and configs refused."""
    from biobench import cli

    from tests.fake_hub import Repo, parquet_bytes, serving_hub

    docs = _docs(50, 11)

    def pq(part: list[str]) -> bytes:
        return parquet_bytes({"text": part})

    export = Repo({"en/train/0000.parquet": pq(docs[:10]), "en/train/0001.parquet": pq(docs[10:20]),
                   "en/validation/0000.parquet": pq(docs[20:25]), "fr/train/0000.parquet": pq(docs[25:35]),
                   "README.md": b"# export\n"})
    card = {"configs": [{"config_name": "clinical", "data_files": [{"split": "train", "path": "data/clin-*.jsonl"},
                                                                   {"split": "test", "path": "data/test.jsonl"}]}]}
    carded = Repo({f"data/clin-{i}.jsonl": "".join(json.dumps({"text": d}) + "\n" for d in docs[35 + 5 * i:40 + 5 * i]
                                                   ).encode() for i in range(2)}
                  | {"data/test.jsonl": json.dumps({"text": docs[49]}).encode() + b"\n", "data/notes.csv": b"a,b\n"},
                  card)
    sel = corpus.HubSelection
    src = "org/corpus@refs/convert/parquet"

    def files(source: str, selection) -> list[str]:
        return [unit[0].source.split(":", 1)[1] for unit in token_store.plan_units([source], selection=selection)]

    with serving_hub(monkeypatch, tmp_path) as hub:
        hub.datasets[("org/corpus", "refs/convert/parquet")] = export
        hub.datasets[("org/carded", "main")] = carded
        assert files(src, sel("en")) == ["en/train/0000.parquet", "en/train/0001.parquet"]  # not its validation
        assert files(src, sel(None, ("**/0000.parquet",))) == ["en/train/0000.parquet", "en/validation/0000.parquet",
                                                               "fr/train/0000.parquet"]
        assert files(src, sel(None, ("*/train/*.parquet",))) == ["en/train/0000.parquet", "en/train/0001.parquet",
                                                                 "fr/train/0000.parquet"]
        assert files(src, sel("en", ("*/*/0001.parquet",))) == ["en/train/0001.parquet"]  # the config, narrowed
        assert files("org/carded", sel("clinical")) == ["data/clin-0.jsonl", "data/clin-1.jsonl"]  # the card's train
        assert files("org/carded", sel(None, ("data/test.jsonl", "data/clin-1.jsonl"))) == ["data/clin-1.jsonl",
                                                                                              "data/test.jsonl"]
        with pytest.raises(DataError) as nothing:
            token_store.plan_units([src], selection=sel(None, ("de/train/*.parquet",)))
        assert str(nothing.value) == (
            f"hub dataset '{src}' at {export.commit[:12]}: --data-files de/train/*.parquet match no file; it has "
            "configs/folders en, fr and files README.md, en/train/0000.parquet, en/train/0001.parquet, "
            "en/validation/0000.parquet, fr/train/0000.parquet")
        with pytest.raises(DataError, match=r"no config 'de' \(none in its README's configs:, no folder of that name\)"
                           r"; it has configs/folders en, fr and files README\.md"):
            token_store.plan_units([src], selection=sel("de"))
        with pytest.raises(DataError, match=r"the selection holds data/notes\.csv, which a corpus cannot read"):
            token_store.plan_units(["org/carded"], selection=sel(None, ("data/*",)))
        with pytest.raises(ConfigError, match=r"no SOURCE is one"):
            token_store.plan_units([str(tmp_path)], selection=sel("en"))

        out = tmp_path / "en-store"
        base = ["corpus", "build", src, "--tokenizer", str(tok_dir), "--out", str(out)]
        assert cli.main([*base, "--hub-config", "en", "--data-files", "en/train/*.parquet"]) == 0
        built = token_store.open_store(out)
        assert cli.main([*base, "--hub-config", "en", "--data-files", "en/train/*.parquet"]) == 0  # found built
        capsys.readouterr()
        assert cli.main([*base, "--hub-config", "fr"]) != 0
        refused = capsys.readouterr().err.strip()
        for bad in (["--data-files", "../other/*.parquet"], ["--data-files", "/etc/*"], ["--data-files", "en/../fr/*"],
                    ["--hub-config", ".."], ["--hub-config", "en/train"]):
            assert cli.main([*base[:-2], "--out", str(tmp_path / "bad"), *bad]) != 0
            assert capsys.readouterr().err.startswith("error: --hub-config/--data-files: "), bad
        assert not (tmp_path / "bad").exists()  # refused before anything is made
    assert built.manifest["hub"] == {"org/corpus": {
        "commit": export.commit, "files": 2, "config": "en", "data_files": ["en/train/*.parquet"],
        "paths": ["en/train/0000.parquet", "en/train/0001.parquet"]}}
    assert len(built.manifest["shards"]) == 2 and built.n_documents == 20
    assert refused == (f"error: --out {out} is a finished token store of hub dataset org/corpus selected by config en, "
                       "data_files ['en/train/*.parquet'], not config fr; choose a new --out, or delete that store to "
                       "rebuild it")


def test_a_build_of_an_earlier_version_without_markers_is_recognised_and_finished(tmp_path, tok_dir, capsys):
    """Stores made before the ownership marker: an unfinished build (its work/plan.json) is taken up and finished,
    its work/ removed; a finished store is recognised by its manifest; a folder with a work/ of the user's is not."""
    from biobench import cli
    from biobench.runtime import ownership

    root = _sources(tmp_path / "src")
    source = str(root / "a.jsonl")
    plan = token_store.prepare([source], tmp_path / "old", str(tok_dir), unit_bytes=2048)
    plan.build_unit(0)
    for folder in (tmp_path / "old", tmp_path / "old" / "work"):  # as an earlier biobench left them
        (folder / MARKER).unlink(missing_ok=True)
    ownership._CREATED.clear()
    args = ["corpus", "build", source, "--tokenizer", str(tok_dir), "--unit-mb", str(2048 / 2**20)]
    assert cli.main([*args, "--out", str(tmp_path / "old")]) == 0, capsys.readouterr().err
    assert "1 already done" in capsys.readouterr().out
    assert (tmp_path / "old" / "done").is_file() and not (tmp_path / "old" / "work").exists()
    (tmp_path / "old" / MARKER).unlink()
    assert token_store.legacy_store(tmp_path / "old")
    assert cli.main([*args, "--out", str(tmp_path / "old")]) == 0  # finished: recognised, nothing rebuilt
    (tmp_path / "users" / "work").mkdir(parents=True)
    (tmp_path / "users" / "work" / "plan.json").write_text('{"mine": true}')
    assert not token_store.legacy_store(tmp_path / "users")
    assert cli.main([*args, "--out", str(tmp_path / "users")]) == 2
    assert (tmp_path / "users" / "work" / "plan.json").read_text() == '{"mine": true}'


def _with_duplicates(root: Path) -> tuple[list[str], list[str]]:
    """(sources, documents in corpus order): a JSONL file repeating documents inside itself and a second file
    repeating documents of the first (other work units with small units), and the documents a dedup keeps."""
    docs = _docs(60, 7)
    first = docs[:40] + [docs[3], docs[3], docs[10]]  # within one file (and one unit or two)
    second = docs[40:] + [docs[0], docs[41], docs[39]]  # across files: other units
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in first))
    (root / "b.jsonl").write_text("".join(json.dumps({"text": d}) + "\n" for d in second))
    return [str(root / "a.jsonl"), str(root / "b.jsonl")], docs


@pytest.mark.slow
def test_exact_duplicates_are_dropped_within_a_store_counted_and_identical_for_any_workers(tmp_path, tok_dir,
                                                                                           tiny_tokenizer, capsys):
    """Issue 59 item 6: every document's hash kept, the repeats of an earlier document (inside a unit or in another
    unit) not read, the counts in the manifest and `corpus info`; the same bytes with 1 and 2 workers; a store of
    format version 1 (no hashes) still read, its dedup 'unknown'."""
    from biobench import cli

    sources, docs = _with_duplicates(tmp_path / "src")
    one = token_store.build(sources, tmp_path / "one", str(tok_dir), workers=1, unit_bytes=1500)
    two = token_store.build(sources, tmp_path / "two", str(tok_dir), workers=2, unit_bytes=1500)
    assert _content(one) == _content(two)
    manifest = token_store.read_manifest(one)
    assert len(manifest["shards"]) > 3 and manifest["version"] == 2
    # 43 + 23 documents seen; the three repeats in a.jsonl and the three of b.jsonl (of a.jsonl's and its own) dropped
    assert manifest["documents"] == 66 and manifest["dedup"]["documents_seen"] == 66
    assert manifest["dedup"]["duplicates_dropped"] == 6
    assert np.fromfile(one / token_store.DROPPED, dtype="<i8").tolist() == [40, 41, 42, 63, 64, 65]
    opened = token_store.open_store(one)
    assert opened.n_documents == 60 and len(set(opened.hashes().tolist())) == 60
    assert opened.tokens[0:len(opened.tokens)].tolist() == _expected_texts(tiny_tokenizer, docs)
    assert token_store.open_store(one, max_documents=41).tokens[0:10**6].tolist() == \
        _expected_texts(tiny_tokenizer, docs[:41])
    assert cli.main(["corpus", "info", str(one)]) == 0
    assert "dedup: 66 documents seen, 6 exact duplicates dropped, 60 read" in capsys.readouterr().out

    # a store built before document hashes: read whole, its dedup unknown
    _forge(one, version=1, dedup=None)
    old = token_store.open_store(one)
    assert old.n_documents == 66 and old.hashes() is None and old.kept is None
    assert cli.main(["corpus", "info", str(one)]) == 0
    assert "dedup unknown (built before document hashes" in capsys.readouterr().out
    _forge(two, dedup={**manifest["dedup"], "duplicates_dropped": 66})
    with pytest.raises(DataError, match="dedup counts"):
        token_store.open_store(two)


def _expected_texts(tok, texts: list[str]) -> list[int]:
    return [i for text in texts for i in [tok.cls_token_id, *tok(text, add_special_tokens=False)["input_ids"],
                                          tok.sep_token_id]]


def test_a_unit_finished_without_document_hashes_is_tokenised_again(tmp_path, tok_dir):
    """A build begun by a biobench before dedup left units marked done without their hashes: a resume redoes
    them (the dry run counts them to do) and ends with the store an uninterrupted build writes."""
    from biobench.api import corpus as api_corpus

    sources, _docs_kept = _with_duplicates(tmp_path / "src")
    plan = token_store.prepare(sources, tmp_path / "old", str(tok_dir), unit_bytes=1500)
    for index in (0, 1):
        plan.build_unit(index)
    (tmp_path / "old" / token_store.WORK / "000000.hsh").unlink()  # as an older biobench left it
    assert plan.todo()[0] == 0 and 1 not in plan.todo()
    line, states = api_corpus.build_progress(sources, str(tok_dir), tmp_path / "old", unit_mb=1500 / 2**20)
    assert [s.done for s in states[:2]] == [False, True] and "1 done" in line
    lines: list[str] = []
    token_store.build(sources, tmp_path / "old", str(tok_dir), unit_bytes=1500, log=lines.append)
    assert "1 already done" in lines[0]
    fresh = token_store.build(sources, tmp_path / "fresh", str(tok_dir), unit_bytes=1500)
    assert _content(tmp_path / "old") == _content(fresh)
