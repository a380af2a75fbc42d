"""Reading pretraining sources (training/corpus.py): every data format of a folder, and documents separated by any
blank line, CRLF and whitespace-only ones included, whole or split into byte-range work units (issue 59 item 5)."""

from __future__ import annotations

import json

import pytest
from biobench.training import corpus, token_store


def test_a_folder_of_jsonl_and_parquet_reads_both_and_notes_beside_data_are_not_corpus(tmp_path, tok_dir):
    import pyarrow as pa
    import pyarrow.parquet as pq

    folder = tmp_path / "mixed"
    folder.mkdir()
    (folder / "a.jsonl").write_text("".join(json.dumps({"text": f"note clinique {i}"}) + "\n" for i in range(3)))
    pq.write_table(pa.table({"text": [f"article {i}" for i in range(4)]}), folder / "b.parquet")
    (folder / "selected_ids.txt").write_text("12\n34\n")  # a list beside the data (../shared/data/pretrain-fr)
    (folder / "README.md").write_text("# about this corpus\n")
    assert [p.name for p in corpus.corpus_files(str(folder))] == ["a.jsonl", "b.parquet"]
    assert list(corpus.iter_documents(str(folder))) == [f"note clinique {i}" for i in range(3)] + \
        [f"article {i}" for i in range(4)]
    store = token_store.open_store(token_store.build([str(folder)], tmp_path / "store", str(tok_dir)))
    assert store.n_documents == 7


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_crlf_and_whitespace_only_lines_separate_text_documents_whole_or_in_units(tmp_path, tok_dir, newline):
    documents = [f"document {i} ligne un{newline}ligne deux {'mot ' * (i % 7)}".strip() for i in range(60)]
    separators = [newline, f"   {newline}", f"\t{newline}", f" \t {newline}{newline}"]
    text = "".join(doc + newline + separators[i % 4] for i, doc in enumerate(documents))
    path = tmp_path / "windows.txt"
    path.write_bytes(text.encode())
    assert list(corpus.iter_documents(str(path))) == documents
    # split into byte ranges of ~150 bytes: each document read once, by the unit in which it starts
    whole = token_store.open_store(token_store.build([str(path)], tmp_path / "whole", str(tok_dir)))
    split = token_store.open_store(token_store.build([str(path)], tmp_path / "split", str(tok_dir), unit_bytes=150))
    assert len(split.manifest["shards"]) > 10
    assert whole.n_documents == split.n_documents == 60
    assert split.tokens[0:len(split.tokens)].tolist() == whole.tokens[0:len(whole.tokens)].tolist()
