"""Corpus readers, the token store and packing: every document exactly once, framed by [CLS] ... [SEP]."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import torch
from biobench.errors import DataError
from biobench.training import corpus, token_store
from biobench.training.packing import PackedCorpus, document_positions

DOCS = ["Le patient présente une fièvre.", "Traitement par amoxicilline pendant sept jours.",
        "Scanner thoracique normal."] * 7


def _jsonl(path, docs, gz=False):
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = "".join(json.dumps({"id": i, "text": d, "source": "x"}) + "\n" for i, d in enumerate(docs))
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(lines)
    else:
        path.write_text(lines)
    return path


def test_readers_text_jsonl_and_folder(tmp_path):
    (tmp_path / "a.txt").write_text("premier document\nsur deux lignes\n\n\nsecond document\n")
    (tmp_path / "README.md").write_text("documentation, not corpus\n")
    (tmp_path / "ignored.csv").write_text("x,y\n")
    assert list(corpus.iter_documents(str(tmp_path))) == ["premier document\nsur deux lignes", "second document"]
    _jsonl(tmp_path / "sub" / "b.jsonl.gz", ["troisième", "", "quatrième"], gz=True)
    assert list(corpus.iter_documents(str(tmp_path))) == ["troisième", "quatrième"]  # JSONL wins in a folder
    assert list(corpus.iter_documents(str(tmp_path / "README.md"))) == ["documentation, not corpus"]


def test_e3c_records_are_read(shared_data):
    docs = list(corpus.iter_documents(str(shared_data / "pretrain-fr")))
    assert len(docs) == 1970  # SOURCE.md: 1,970 documents, 11.77 M characters
    assert 11.5e6 < sum(map(len, docs)) < 11.8e6


def test_bad_corpora_have_one_clear_message(tmp_path):
    (tmp_path / "empty.jsonl").write_text("\n")
    with pytest.raises(DataError, match="holds no non-empty documents"):
        token_store.build([str(tmp_path / "empty.jsonl")], tmp_path / "store", None, tokenizer=_tok())
    (tmp_path / "broken.jsonl.gz").write_bytes(b"not gzip at all")
    with pytest.raises(DataError, match=r"cannot read corpus file .*broken.jsonl.gz"):
        list(corpus.iter_documents(str(tmp_path / "broken.jsonl.gz")))
    (tmp_path / "nofield.jsonl").write_text('{"body": "x"}\n')
    with pytest.raises(DataError, match=r"nofield.jsonl:1: no 'text' field \(has: body\); use --text-field"):
        list(corpus.iter_documents(str(tmp_path / "nofield.jsonl")))
    (tmp_path / "folder").mkdir()
    with pytest.raises(DataError, match=r"holds no .jsonl\(.gz\), .parquet or .txt files"):
        list(corpus.iter_documents(str(tmp_path / "folder")))
    with pytest.raises(DataError, match="does not exist"):
        token_store.build([str(tmp_path / "missing.jsonl")], tmp_path / "store2", None, tokenizer=_tok())



@pytest.mark.parametrize("source", ["my-corpus/", "my corpus", "runs/tiny/corpus", "notes.txt"])
def test_a_missing_local_corpus_is_a_missing_path_not_a_repo_id(source, tmp_path, monkeypatch, capsys):
    from biobench import cli

    monkeypatch.chdir(tmp_path)
    assert cli.main(["pretrain", "--model", "preset:tiny", "--corpus", source, "--tokens", "1M", "--out", "run",
                     "--device", "cpu"]) == 2
    err = capsys.readouterr().err
    assert f"error: corpus {source} does not exist: no such file or folder" in err
    assert "repo" not in err.lower() and "HFValidationError" not in err


def test_hub_corpus_offline_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    with pytest.raises(DataError, match=r"cannot read hub dataset 'someone/some-corpus'.*HF_HUB_OFFLINE"):
        list(corpus.iter_documents("someone/some-corpus"))


_TOK = {}


def _tok():
    if "t" not in _TOK:
        from biobench.training.presets import train_tokenizer

        _TOK["t"] = train_tokenizer(DOCS, vocab_size=300)
    return _TOK["t"]


def test_store_is_built_once_and_packing_loses_nothing(tmp_path):
    tok = _tok()
    distinct = [" ".join([d] * (1 + i // 3)) for i, d in enumerate(DOCS)]  # 21 documents, none a repeat (dedup)
    path = _jsonl(tmp_path / "c.jsonl", distinct)
    folder = token_store.build([str(path)], tmp_path / "store", None, tokenizer=tok)
    stamps = {p.name: p.stat().st_mtime_ns for p in (folder / token_store.SHARDS).iterdir()}
    assert token_store.build([str(path)], folder, None, tokenizer=tok) == folder  # built once: found done
    assert {p.name: p.stat().st_mtime_ns for p in (folder / token_store.SHARDS).iterdir()} == stamps
    built = token_store.open_store(folder)
    assert isinstance(built.tokens[0:4], np.memmap)  # read from the shards on demand
    expected = [[tok.cls_token_id] + tok(d, add_special_tokens=False)["input_ids"] + [tok.sep_token_id]
                for d in distinct]
    assert len(built.tokens) == sum(map(len, expected))  # token count: nothing lost, nothing duplicated

    packed = PackedCorpus(built.tokens, built.offsets, seq_len=16, pad_id=tok.pad_token_id, seed=3)
    rows = [packed.sequence(i) for i in range(packed.n_sequences)]
    stream = np.concatenate([ids[mask == 1] for ids, mask, _ in rows])
    assert sum(int(m.sum()) for _, m, _ in rows) == len(built.tokens)
    # a pass reads every document once, whole, in a shuffled order (documents framed [CLS] ... [SEP])
    docs = np.concatenate([d[m == 1] for _, m, d in rows])
    assert np.bincount(docs).tolist() == [len(e) for e in expected]
    read = [stream[docs == d].tolist() for d in range(len(expected))]
    assert read == expected
    assert list(dict.fromkeys(docs.tolist())) != list(range(len(expected)))  # not the store's order
    # one epoch of positions reads every sequence exactly once, in a seeded order
    order = [packed.at(p) for p in range(packed.n_sequences)]
    assert sorted(order) == list(range(packed.n_sequences)) and order != sorted(order)
    assert [packed.at(p) for p in range(3)] == order[:3]


def test_document_positions_restart():
    docs = torch.tensor([[0, 0, 0, 1, 1, 2, 2, 2], [5, 5, 6, 6, 6, 6, -1, -1]])
    assert document_positions(docs).tolist() == [[0, 1, 2, 0, 1, 0, 1, 2], [0, 1, 0, 1, 2, 3, 0, 1]]
