"""A full disk while writing checkpoints and caches: one DiskFullError line naming the folder, the bytes about
to be written and what is safe on disk; nothing partial left behind. (Results and predictions: test_results.)"""

from __future__ import annotations

import errno
import json
import os

import numpy as np
import pytest
import torch
from biobench.errors import DiskFullError
from biobench.training import checkpoint, corpus


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


def test_token_cache_on_a_full_disk(tmp_path, monkeypatch):
    from biobench.training.presets import train_tokenizer

    docs = ["Le patient présente une fièvre.", "Scanner thoracique normal."] * 5
    source = tmp_path / "c.jsonl"
    source.write_text("".join(json.dumps({"text": d}) + "\n" for d in docs))
    tok = train_tokenizer(docs, vocab_size=120)
    monkeypatch.setattr(np, "save", _full)
    with pytest.raises(DiskFullError) as err:
        corpus.load_or_build(str(source), tok, tmp_path / "cache")
    assert str(err.value).startswith(f"disk full writing to {tmp_path / 'cache'}")
    assert f"0 finished token cache(s) in {tmp_path / 'cache'} are safe" in str(err.value)
    assert list((tmp_path / "cache").iterdir()) == []  # the half-built cache is gone: the next run rebuilds it


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
