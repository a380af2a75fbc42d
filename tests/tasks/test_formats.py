"""tasks.formats: the table of task formats (name -> reader of one split entry, its options, its sample unit) and
the one place a spec's local path becomes a file, kept inside the task's data folder."""

import json
from types import SimpleNamespace

import pytest
from biobench.errors import DataError
from biobench.tasks.formats import FORMATS, EntryRead, resolve_path, sample_unit_of
from biobench.tasks.readers import rows


def test_a_spec_path_stays_inside_its_data_folder(tmp_path):
    (tmp_path / "task").mkdir()
    assert resolve_path(tmp_path, "task/train.tsv") == tmp_path / "task" / "train.tsv"
    for escape in ("../../../../dev/zero", "/etc/passwd", "task/../../x"):
        with pytest.raises(DataError, match="a spec's local paths stay inside its data folder"):
            resolve_path(tmp_path / "task", escape)


def test_the_uncompressed_file_is_accepted_for_a_named_gz(tmp_path):
    (tmp_path / "train.tsv").write_text("x\n")
    assert resolve_path(tmp_path, "train.tsv.gz") == tmp_path / "train.tsv"
    (tmp_path / "dev.tsv.gz").write_bytes(b"")
    assert resolve_path(tmp_path, "dev.tsv.gz") == tmp_path / "dev.tsv.gz"


def test_a_jsonl_entry_is_read_through_its_row_of_the_table(tmp_path):
    path = tmp_path / "train.jsonl"
    path.write_text("\n".join(json.dumps({"id": f"d{i}", "text": t, "label": lab})
                              for i, (t, lab) in enumerate([("fièvre", "pos"), ("rien", "neg")])) + "\n")
    entry = EntryRead("toy", "classification", "train", path, tmp_path, "", None, {}, 0)
    examples = FORMATS["jsonl"].read(entry)
    assert [(ex.id, ex.text, ex.label) for ex in examples] == [("d0", "fièvre", "pos"), ("d1", "rien", "neg")]


def test_each_format_declares_its_options_and_the_table_formats_read_rows():
    assert set(FORMATS) >= {"iob", "brat", "brat_codes", "hf", "tsv", "csv", "jsonl", "json"}
    assert all(isinstance(f.options, tuple) and all(isinstance(o, str) for o in f.options) for f in FORMATS.values())
    assert set(rows.OPTIONS) <= set(FORMATS["jsonl"].options) and "columns" not in FORMATS["iob"].options


@pytest.mark.parametrize(("source", "unit"), [
    (SimpleNamespace(type="local", format="iob", options={}), "sentence"),
    (SimpleNamespace(type="local", format="brat", options={"sample_unit": "line"}), "non-blank line of a document"),
    (SimpleNamespace(type="local", format="brat", options=None), "document"),
    (SimpleNamespace(type="local", format="tsv", options={"group_pattern": "(.*)-\\d+"}),
     "rows grouped by id (group_pattern)"),
    (SimpleNamespace(type="hub", format="hf", options={}), "hub row"),
    (SimpleNamespace(type="generated", format="jsonl", options={}), "generated example"),
    (SimpleNamespace(type="local", format="json", options={}), "record"),
])
def test_the_sample_unit_the_protocol_table_shows(source, unit):
    assert sample_unit_of(source) == unit
