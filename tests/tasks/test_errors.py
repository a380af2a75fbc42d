"""Every malformed input gives one DataError/ConfigError naming the file and line (or offset) and the fix."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError, DataError
from biobench.tasks.loading import load_task
from biobench.tasks.readers import brat, iob
from biobench.tasks.registry import get_spec, spec_from_dict


def _write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


def test_broken_iob_line_names_file_and_line(tmp_path):
    f = _write(tmp_path / "bad.tsv", "Aspirin\tB-Chemical\ninduced\nfailure\tO\n")
    with pytest.raises(DataError) as err:
        iob.read_iob(f)
    assert str(err.value) == (
        f"{f}:2: expected 2 columns (token<TAB>tag), got 1: 'induced'; "
        "fix or remove the line (sentences are separated by blank lines)"
    )


def test_i_tag_after_o_breaks_strict_iob2(tmp_path):
    f = _write(tmp_path / "bad.tsv", "the\tO\nrenal\tI-Disease\n")
    with pytest.raises(DataError) as err:
        iob.read_iob(f)
    assert str(err.value).startswith(f"{f}:2: tag 'I-Disease' follows 'O', which breaks IOB2")
    assert '"scheme": "iob1"' in str(err.value)
    assert iob.read_iob(f, strict=False)[0].entities[0].key() == (4, 9, "Disease")


def _brat(tmp_path: Path, ann: str) -> Path:
    d = tmp_path / "b"
    d.mkdir()
    _write(d / "doc.txt", "Fracture du fémur.")
    _write(d / "doc.ann", ann)
    return d


def test_brat_offsets_outside_text(tmp_path):
    d = _brat(tmp_path, "T1\tDISO 0 17\tFracture du fémur\nT2\tANAT 12 40\tfémur\n")
    with pytest.raises(DataError) as err:
        brat.read_brat(d)
    assert str(err.value).startswith(
        f"{d / 'doc'}.ann:2: offsets 12-40 are outside the text (18 characters in {d / 'doc'}.txt)"
    )


def test_brat_text_mismatch(tmp_path):
    d = _brat(tmp_path, "T1\tANAT 11 17\tfémur\n")
    with pytest.raises(DataError) as err:
        brat.read_brat(d)
    assert str(err.value).startswith(
        f"{d / 'doc'}.ann:1: span 11 17 reads ' fémur' in {d / 'doc'}.txt but the annotation says 'fémur'"
    )


def _user_spec(tmp_path: Path, **kw) -> object:
    raw = {"id": "t", "lang": "en", "kind": "classification", "max_length": 64, "protocol": "en",
           "sources": [{"type": "local", "format": "tsv",
                        "splits": {s: f"{s}.tsv" for s in ("train", "dev", "test")}}]}
    raw.update(kw)
    return spec_from_dict(raw, "test", base_dir=str(tmp_path))


def test_empty_split(tmp_path):
    for s in ("train", "test"):
        _write(tmp_path / f"{s}.tsv", "text\tlabel\nfever\tA\n")
    _write(tmp_path / "dev.tsv", "text\tlabel\n")
    with pytest.raises(DataError, match=re.escape("task 't': split 'dev' is empty (")):
        load_task(_user_spec(tmp_path))


def test_unknown_label(tmp_path):
    for s in ("train", "dev", "test"):
        _write(tmp_path / f"{s}.tsv", "id\ttext\tlabel\nx1\tfever\tA\n" + ("x2\tcough\tC\n" if s == "dev" else ""))
    with pytest.raises(DataError) as err:
        load_task(_user_spec(tmp_path, labels=["A", "B"]))
    assert "example 'x2' in split 'dev'" in str(err.value)
    assert "has label 'C', which is not in the spec's label scheme ['A', 'B']" in str(err.value)


def test_unknown_task_suggests_closest():
    with pytest.raises(ConfigError) as err:
        get_spec("ncbi-diseases")
    assert str(err.value) == "unknown task 'ncbi-diseases': did you mean 'ncbi-disease'? `biobench tasks --all` lists the task ids"


def test_missing_credentialed_file_says_what_and_where(tmp_path):
    with pytest.raises(DataError) as err:
        load_task(get_spec("deid"), tmp_path)
    msg = str(err.value)
    assert msg.startswith(f"task 'deid': credentialed data not found (missing {tmp_path}/deid/id.text")
    assert "deidentifiedmedicaltext" in msg and "biobench data add deid" in msg
    assert f"Expected layout under {tmp_path}: deid/id.text, deid/id.res." in msg
    with pytest.raises(DataError, match=r"physionet\.org"):
        load_task(get_spec("phenotyping"), tmp_path)


def test_hub_only_task_without_data_names_download_and_offline(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    with pytest.raises(DataError) as err:
        load_task(get_spec("diamed"), tmp_path)
    msg = str(err.value)
    assert "Dr-BERT/DiaMED/resolve/main/data.zip" in msg and "'DrBenchmark/DiaMED'" in msg and "HF_HUB_OFFLINE" in msg


def test_cli_prints_one_line_error(tmp_path, capsys):
    assert main(["tasks", "--task-file", str(tmp_path / "nope.json")]) == 2
    err = capsys.readouterr().err
    assert err == f"error: task file {tmp_path / 'nope.json'} does not exist (pass --task-file PATH to a .json or .toml spec)\n"


def test_corpus_top_k_without_a_random_split_is_refused(tmp_path):
    for split in ("train", "dev", "test"):
        (tmp_path / "c" / split).mkdir(parents=True)
        _write(tmp_path / "c" / split / "d1.txt", "Tumeur.")
        _write(tmp_path / "c" / split / "d1.ann", "T1\tX 0 6\tTumeur\n#1\tAnnotatorNotes T1\t8000/3\n")
    spec = spec_from_dict({
        "id": "toy-codes", "lang": "fr", "kind": "multilabel", "max_length": 64, "protocol": "fr",
        "sources": [{"type": "local", "format": "brat_codes", "splits": {s: f"c/{s}" for s in ("train", "dev", "test")},
                     "options": {"top_k": 10, "top_k_scope": "corpus"}}]}, "toy-codes.json")
    with pytest.raises(DataError, match=r"task 'toy-codes': \"top_k_scope\": \"corpus\" counts codes before a random_split"):
        load_task(spec, tmp_path)


def test_unknown_task_suggests_only_a_close_match_else_lists_the_ids():
    with pytest.raises(ConfigError, match=r"unknown task 'jnlpa': did you mean 'jnlpba'\?"):
        get_spec("jnlpa")
    with pytest.raises(ConfigError) as err:
        get_spec("nope")
    message = str(err.value)
    assert "did you mean" not in message and message.startswith("unknown task 'nope'; the task ids are: diamed, ")
    assert "phenotyping" in message and "demo-cls" in message


def test_a_task_files_missing_split_file_names_it_as_written_and_the_fix_there(tmp_path, capsys):
    """A task file's paths are relative to its folder, so --data-dir is no fix: the message names the path as
    the file writes it, the folder it is read from and the task file to correct."""
    (tmp_path / "spec").mkdir()
    _write(tmp_path / "spec" / "all.tsv", "id\ttext\tlabel\nd1\ta b\tx\n")
    spec_file = _write(tmp_path / "spec" / "mine.json", '{"id": "mine", "lang": "fr", "kind": "classification", '
                       '"max_length": 64, "protocol": "fr", "sources": [{"type": "local", "format": "tsv", "splits": '
                       '{"all": "all.tsv"}, "options": {"split_file": "splits.tsv", "path": "all.tsv"}}]}')
    from biobench.tasks.registry import read_spec_file

    with pytest.raises(DataError) as raised:
        load_task(read_spec_file(spec_file), tmp_path / "elsewhere")  # as eval --data-dir elsewhere reads it
    err = str(raised.value)
    assert err.startswith(f"task 'mine': data not found (missing splits.tsv (relative to the task file's folder "
                          f"{tmp_path / 'spec'})). Put the file(s) there, or correct the path(s) in the task file")
    assert "--data-dir does not apply to them" in err and "pass --data-dir" not in err and "Expected layout" not in err


def test_a_hub_source_without_a_dataset_and_a_generated_one_without_a_generator_are_refused_when_read():
    """Refused when the spec is read, naming the source and the key: they were read as dataset None (a hub fallback
    'hub:None' after the offline probe) and generator None."""
    def spec(source: dict) -> dict:
        return {"id": "toy", "lang": "en", "kind": "classification", "max_length": 64, "protocol": "en",
                "sources": [source]}

    with pytest.raises(ConfigError, match=r'^toy.json: source #1: a hub source needs "dataset", the Hugging Face'):
        spec_from_dict(spec({"type": "hub", "revision": "main"}), "toy.json")
    with pytest.raises(ConfigError, match=r'^toy.json: source #1: a generated source needs "generator", one of demo-cls, '):
        spec_from_dict(spec({"type": "generated"}), "toy.json")
    assert spec_from_dict(spec({"type": "generated", "generator": "demo-cls"}), "toy.json").sources[0].generator == "demo-cls"
