"""Each reader on handwritten fixtures: IOB (tab, space, gzip, IOB1, untyped), BRAT (folder and tar.gz,
nested + discontinuous + notes), TSV/JSONL rows, Hugging Face local parquet and save_to_disk."""

from __future__ import annotations

import gzip
import json
import shutil
import tarfile
from pathlib import Path

import pytest
from biobench.tasks.readers import brat, hf, iob, rows, tabular
from biobench.tasks.schema import Entity

FIX = Path(__file__).parents[1] / "fixtures" / "tasks"


def test_iob_tab_sentences_offsets_and_entities():
    exs = iob.read_iob(FIX / "sample.iob.tsv")
    assert [e.text for e in exs] == ["Aspirin induced acute renal failure .", "No hepatitis B was seen ."]
    first = exs[0]
    assert [(e.start, e.end, e.label) for e in first.entities] == [(0, 7, "Chemical"), (16, 35, "Disease")]
    assert first.text[16:35] == "acute renal failure"
    assert first.tokens[:3] == ((0, 7), (8, 15), (16, 21))
    assert all(first.text[s:e] == tok for (s, e), tok in zip(first.tokens, first.text.split(), strict=True))
    assert exs[1].text[3:14] == "hepatitis B"


def test_iob_gzip_gives_same_examples(tmp_path):
    gz = tmp_path / "sample.tsv.gz"
    gz.write_bytes(gzip.compress((FIX / "sample.iob.tsv").read_bytes()))
    assert [(e.text, e.entities) for e in iob.read_iob(gz)] == [
        (e.text, e.entities) for e in iob.read_iob(FIX / "sample.iob.tsv")
    ]


def test_iob1_space_separated():
    exs = iob.read_iob(FIX / "sample_iob1.txt", scheme="iob1")
    assert exs[0].entities == (Entity(20, 31, "DRUG"),)
    assert exs[0].text[20:31] == "paracétamol"
    assert exs[1].text[: exs[1].entities[0].end] == "Cancer du sein"


def test_iob2_lenient_and_untyped_tags():
    text, _, ents = iob.entities_from_tags(["a", "b", "c"], ["O", "I-X", "I-X"], strict=False)
    assert ents == (Entity(2, 5, "X"),)
    _, _, ents = iob.entities_from_tags(["a", "b", "c"], ["B", "I", "B"], default_type="Entity")
    assert [e.key() for e in ents] == [(0, 3, "Entity"), (4, 5, "Entity")]


def _check_brat_docs(docs):
    by_id = {d.id: d for d in docs}
    assert sorted(by_id) == ["doc1", "doc2"]
    doc = by_id["doc1"]
    ents = {(e.start, e.end, e.label): e for e in doc.entities}
    assert len(doc.entities) == 5
    disc = ents[(50, 85, "DISO")]
    assert disc.fragments == ((50, 58), (70, 85)) and disc.is_discontinuous
    assert ents[(0, 17, "DISO")].code == "C0011860"
    assert ents[(35, 39, "ANAT")].code == "C0022646"  # OtherNote ignored
    # nested: ANAT inside DISO
    assert ents[(23, 39, "DISO")].start <= 35 and 39 <= ents[(23, 39, "DISO")].end
    assert doc.text[35:39] == "rein"


def test_brat_folder():
    _check_brat_docs(brat.read_brat(FIX / "brat"))


def test_brat_tar_gz_without_extracting(tmp_path):
    archive = tmp_path / "train.tar.gz"
    with tarfile.open(archive, "w:gz") as tar:
        tar.add(FIX / "brat", arcname="train/EMEA")
    docs = brat.read_brat(archive, member_prefix="train/EMEA/")
    _check_brat_docs(docs)
    assert not (tmp_path / "train").exists()
    codes = brat.document_codes(docs[0], entity_labels=["ANAT"], code_pattern=r"C\d+")
    assert codes == ("C0022646",)


def test_brat_missing_ann_policies(tmp_path):
    shutil.copytree(FIX / "brat", tmp_path / "b")
    (tmp_path / "b" / "doc2.ann").unlink()
    assert [d.id for d in brat.read_brat(tmp_path / "b", missing_ann="skip")] == ["doc1"]
    assert brat.read_brat(tmp_path / "b", missing_ann="empty")[1].entities == ()


def test_brat_line_samples_as_the_harness_splits_them(caplog):
    """Rian-T/tabib `_split_by_lines`: one sample per non-blank line, entities kept whole in their line (offsets line-relative,
    fragments too), an entity across a line boundary dropped and counted."""
    from biobench.tasks.schema import NerExample

    text = "Aspirine 500 mg\n\n  \nfièvre et\ndouleur"
    ents = (Entity(0, 8, "CHEM"), Entity(9, 15, "DOSE"), Entity(20, 26, "DISO"),
            Entity(20, 37, "DISO", ((20, 26), (30, 37))), Entity(30, 37, "DISO"))
    lines, crossing = brat.split_lines("d", text, ents)
    assert crossing == 1  # "fièvre ... douleur" spans lines 3 and 4
    assert [ex.id for ex in lines] == ["d_line0@0", "d_line3@20", "d_line4@30"]  # line 1 empty, line 2 blank
    assert lines[0] == NerExample("d_line0@0", "Aspirine 500 mg", (Entity(0, 8, "CHEM"), Entity(9, 15, "DOSE")))
    assert lines[1].entities == (Entity(0, 6, "DISO"),) and lines[2].entities == (Entity(0, 7, "DISO"),)
    for ex in lines:  # the id's offset maps a line span back to the document
        lo = int(ex.id.rsplit("@", 1)[1])
        assert all(text[lo + e.start:lo + e.end] == ex.text[e.start:e.end] for e in ex.entities)
    inside = brat.split_lines("d", "a b\nc", (Entity(0, 3, "X", ((0, 1), (2, 3))),))[0][0].entities[0]
    assert inside.fragments == ((0, 1), (2, 3))
    doc = brat.BratDocument("d", text, ents, "data/d")
    with caplog.at_level("WARNING"):
        assert len(brat.ner_examples([doc], sample_unit="line")) == 3
    assert "data/d: 1 entities cross a line boundary" in caplog.text
    assert [ex.id for ex in brat.ner_examples([doc])] == ["d"]
    with pytest.raises(Exception, match="sample_unit 'sentence' is not one of document, line"):
        brat.ner_examples([doc], sample_unit="sentence")


def test_tsv_and_jsonl_rows(tmp_path):
    tsv = tabular.read_table(FIX / "user" / "train.tsv", "tsv", {})
    exs = rows.rows_to_examples(tsv, "classification", "train", {})
    assert [(e.id, e.label) for e in exs] == [("u1", "pneumologie"), ("u2", "cardiologie"), ("u3", "neurologie")]
    jl = tmp_path / "r.jsonl"
    jl.write_text('{"text": "<< A >> binds [[ B ]]", "label": "INHIBITOR"}\n\n{"text": "x", "label": "AGONIST"}\n')
    rel = rows.rows_to_examples(tabular.read_table(jl, "jsonl", {}), "relation", "test", {})
    assert [(e.id, e.label) for e in rel] == [("test-0", "INHIBITOR"), ("test-1", "AGONIST")]


def test_multilabel_flags_grouped_by_document(tmp_path):
    path = tmp_path / "hoc.tsv"
    path.write_text(
        "labels\tsentence\tindex\n0_1,1_0,2_0\tS one .\t11_s0\n0_0,1_0,2_1\tS two .\t11_s1\n0_0,1_0,2_0\tS three .\t12_s0\n"
    )
    opts = {"columns": {"id": "index", "text": "sentence"}, "labels_format": "flags",
            "label_names": ["a", "b", "c"], "group_pattern": r"^(.+)_s\d+$"}
    exs = rows.rows_to_examples(tabular.read_table(path, "tsv", opts), "multilabel", "train", opts)
    assert [(e.id, e.text, e.labels) for e in exs] == [("11", "S one . S two .", ("a", "c")), ("12", "S three .", ())]


def test_multilabel_list_and_separator():
    exs = rows.rows_to_examples(
        [("x:1", {"text": "t", "labels": ["a", "b"]}), ("x:2", {"text": "u", "labels": "a|c"})],
        "multilabel", "train", {"label_sep": "|"},
    )
    assert [e.labels for e in exs] == [("a", "b"), ("a", "c")]


def test_hf_local_parquet_and_save_to_disk(tmp_path):
    datasets = pytest.importorskip("datasets")
    feats = datasets.Features({
        "tokens": datasets.Sequence(datasets.Value("string")),
        "ner_tags": datasets.Sequence(datasets.ClassLabel(names=["O", "B-Disease", "I-Disease"])),
    })
    ds = datasets.Dataset.from_dict({"tokens": [["acute", "renal", "failure", "."]], "ner_tags": [[1, 2, 2, 0]]}, features=feats)
    ds.save_to_disk(str(tmp_path / "disk"))
    ds.to_parquet(str(tmp_path / "t.parquet"))
    opts = {"columns": {"tags": "ner_tags"}}
    for source in (tmp_path / "disk", tmp_path / "t.parquet"):
        loaded = hf.load_local(source)
        exs = rows.rows_to_examples(hf.dataset_rows(loaded, str(source)), "ner", "train", opts)
        assert exs[0].entities == (Entity(0, 19, "Disease"),)


def test_hf_hub_offline_message(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    from biobench.errors import DataError

    with pytest.raises(DataError, match=r"'no-such/dataset'.*HF_HUB_OFFLINE"):
        hf.load_hub("no-such/dataset", "refs/convert/parquet")


def test_json_array_rows(tmp_path):
    path = tmp_path / "train.json"
    path.write_text(json.dumps({"data": [{"clinical_case": "Cas.", "icd-10": "C00-D49"}]}))
    exs = rows.rows_to_examples(
        tabular.read_table(path, "json", {}), "classification", "train", {"columns": {"text": "clinical_case", "label": "icd-10"}}
    )
    assert exs[0].label == "C00-D49"
