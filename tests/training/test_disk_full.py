"""A full disk while writing checkpoints and caches: one DiskFullError line naming the folder, the bytes about
to be written and what is safe on disk; nothing partial left behind. (Results and predictions: test_record.)"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import torch
from biobench.errors import DiskFullError
from biobench.training import checkpoint


def _full(*_args, **_kwargs):
    raise OSError(errno.ENOSPC, "No space left on device")


class _Model:
    """What checkpoint.save needs of a model: its weights and save_pretrained (which fills the disk here)."""

    def state_dict(self):
        return {"w": torch.zeros(10, 4), "b": torch.zeros(4, dtype=torch.float16)}

    def save_pretrained(self, folder, state_dict=None):
        (folder / "model.safetensors").write_bytes(b"partial")
        raise RuntimeError("Error while serializing: IoError(Os { code: 28, kind: StorageFull, message: "
                           "\"No space left on device\" })")  # how safetensors reports it


class _Tokenizer:
    def save_pretrained(self, folder):
        (folder / "tokenizer.json").write_text("{}")


def test_checkpoint_on_a_full_disk(tmp_path):
    (tmp_path / "step-1").mkdir()
    (tmp_path / "step-1" / checkpoint.META).write_text(json.dumps({"tokens": {"seen": 1}}))
    state = {"optimizer": {"state": {0: {"exp_avg": torch.zeros(10, 4)}}}}
    with pytest.raises(DiskFullError) as err:
        checkpoint.save(tmp_path / "step-2", _Model(), _Tokenizer(), {"recipe": "detour"}, state)
    needed = 10 * 4 * 4 + 4 * 2 + 10 * 4 * 4  # weights + optimizer state
    assert str(err.value).startswith(f"disk full writing to {tmp_path}: {needed:,} bytes needed")
    assert f"1 finished checkpoint(s) in {tmp_path} are safe" in str(err.value)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["step-1"]  # no step-2.tmp left half-written


def _full_after(monkeypatch, calls: int) -> None:
    """os.fsync fails with ENOSPC from its `calls`+1-th call on (a full disk found at the flush of a shard)."""
    real, seen = os.fsync, []

    def fsync(fd):
        seen.append(fd)
        if len(seen) > calls:
            raise OSError(errno.ENOSPC, "No space left on device")
        return real(fd)

    monkeypatch.setattr(os, "fsync", fsync)


def test_token_store_on_a_full_disk(tmp_path, monkeypatch):
    from biobench.training import token_store
    from biobench.training.presets import train_tokenizer

    docs = ["Le patient présente une fièvre.", "Scanner thoracique normal."] * 5
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tok = train_tokenizer(docs, vocab_size=120)
    # the store's and work/'s ownership markers and the plan (work/plan.json) are written; the first shard fills it
    _full_after(monkeypatch, 3)
    with pytest.raises(DiskFullError) as err:
        token_store.build([str(source)], tmp_path / "store", None, tokenizer=tok)
    assert str(err.value).startswith(f"disk full writing to {tmp_path / 'store' / 'shards'}")
    assert f"0 finished work unit(s) of {tmp_path / 'store'} are safe" in str(err.value)
    assert list((tmp_path / "store" / "shards").iterdir()) == []  # nothing half-written left
    assert not (tmp_path / "store" / "done").exists()


def test_token_store_full_half_way_keeps_finished_units_and_resumes(tmp_path, monkeypatch):
    from biobench.training import token_store
    from biobench.training.presets import train_tokenizer

    docs = [f"Le patient {i} présente une fièvre et une toux." for i in range(400)]
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tok = train_tokenizer(docs, vocab_size=200)
    # the two ownership markers, the plan, then per unit its shard, its document hashes and its marker: the third
    # unit's shard fails
    _full_after(monkeypatch, 9)
    with pytest.raises(DiskFullError, match=r"2 finished work unit\(s\) of .* are safe \(rerun the same command"):
        token_store.build([str(source)], tmp_path / "store", None, tokenizer=tok, unit_bytes=4000)
    assert not list((tmp_path / "store" / "shards").glob("*.tmp"))
    monkeypatch.undo()
    lines = []
    token_store.build([str(source)], tmp_path / "store", None, tokenizer=tok, unit_bytes=4000, log=lines.append)
    assert "2 already done" in lines[0]
    fresh = token_store.build([str(source)], tmp_path / "fresh", None, tokenizer=tok, unit_bytes=4000)
    assert token_store.store_id(tmp_path / "store") == token_store.store_id(fresh)
    assert token_store.open_store(tmp_path / "store").tokens[0:10**6].tolist() == \
        token_store.open_store(fresh).tokens[0:10**6].tolist()


def test_feature_cache_is_atomic_and_on_a_full_disk_one_line(tmp_path, fill_disk):
    from biobench.analysis.features import cached

    source = tmp_path / "needle.jsonl"
    source.write_text("{}\n")
    cache = tmp_path / "features" / "m.npy"
    feats = cached(cache, source, lambda: np.arange(6.0).reshape(2, 3))
    assert np.array_equal(np.load(cache), feats)
    assert np.array_equal(cached(cache, source, lambda: pytest.fail("recomputed a fresh cache")), feats)
    os.utime(source)  # the data changed after the cache was written: recompute
    os.utime(cache, (0, 0))
    fill_disk()
    with pytest.raises(DiskFullError, match=r"bytes needed.*1 cached feature file\(s\) in .*features are safe"):
        cached(cache, source, lambda: np.zeros((2, 3)))
    assert np.array_equal(np.load(cache), feats) and sorted(p.name for p in cache.parent.iterdir()) == ["m.npy"]


# --- issue 20 §4: the guard everywhere, one function deciding what a full disk is ------------------------


def test_one_function_recognises_a_full_disk():
    from biobench.runtime.files import is_disk_full

    assert is_disk_full(OSError(errno.ENOSPC, "No space left on device"))
    assert is_disk_full(OSError(errno.EDQUOT, "Disk quota exceeded"))
    assert is_disk_full(OSError("1048576 requested and 4096 written"))  # numpy's np.save / tofile
    wrapped = RuntimeError("could not write the shard")
    wrapped.__cause__ = OSError(errno.ENOSPC, "x")
    assert is_disk_full(wrapped)  # a library's own error type, the full disk chained under it
    assert not is_disk_full(OSError(errno.EACCES, "Permission denied")) and not is_disk_full(ValueError("3 requested"))


def test_log_append_is_whole_or_nothing(tmp_path, monkeypatch):
    from biobench.runtime.files import append_line

    log = tmp_path / "train_log.jsonl"
    append_line(log, json.dumps({"step": 1}))
    real, calls = os.write, []

    def half_then_full(fd, data):
        calls.append(len(data))
        if len(calls) == 1:
            return real(fd, bytes(data[: len(data) // 2]))
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(os, "write", half_then_full)
    with pytest.raises(DiskFullError, match=r"^disk full writing to .*: 12 bytes needed"):
        append_line(log, json.dumps({"step": 2}))
    monkeypatch.undo()
    assert log.read_text() == '{"step": 1}\n' and len(calls) == 2  # half a record was written, then cut back


@pytest.mark.parametrize("name", ["out.csv", "out.json", "out.parquet"])
def test_leaderboard_export_on_a_full_disk(tmp_path, fill_disk, capsys, monkeypatch, name):
    from biobench import cli

    from tests.hostile_corpus import FIXTURES

    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    out = tmp_path / "export" / name
    out.parent.mkdir()
    fill_disk()
    assert cli.main(["leaderboard", "--results", str(FIXTURES), "--no-cache", "--export", str(out)]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if not line.startswith("warning:")]
    assert len(err) == 1 and err[0].startswith(f"error: disk full writing to {out.parent}")
    assert list(out.parent.iterdir()) == []  # no 0-byte out.csv, no .out.parquet.tmp


def test_data_add_on_a_full_disk(tmp_path, capsys, monkeypatch):
    import shutil

    from biobench import cli
    from biobench.tasks import archives

    from tests.hostile_corpus import zip_bytes

    archive = tmp_path / "bert_data.zip"
    archive.write_bytes(zip_bytes({f"bert_data/ChemProt/{s}.tsv": b"index\tsentence\tlabel\n" for s in ("train", "dev", "test")}))
    copies = []

    def copy_then_full(src, dst, *args):
        copies.append(1)
        if len(copies) == 2:  # the second split: the first is already staged
            raise OSError(errno.ENOSPC, "No space left on device")
        return shutil.copyfileobj(src, dst, *args)

    monkeypatch.setattr(archives.shutil, "copyfileobj", copy_then_full)
    data = tmp_path / "data"
    assert cli.main(["data", "add", "chemprot", str(archive), "--data-dir", str(data)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: disk full writing to {data}") and "as it was" in err[0]
    assert list(data.iterdir()) == []  # nothing installed, no staging folder left


def test_perf_script_output_on_a_full_disk(tmp_path, fill_disk, capsys):
    from biobench.perf.perf_common import finish, script

    fill_disk()
    assert script(lambda: finish({"arm": 1}, tmp_path / "perf" / "report.json", 1.5)) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"error: disk full writing to {tmp_path / 'perf'}")
    assert list((tmp_path / "perf").iterdir()) == []
