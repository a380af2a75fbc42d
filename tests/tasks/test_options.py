"""A task spec names only options its readers read (issue 23 §3): a misspelt one fails when the spec is read,
with the spec file, the key and the nearest valid one."""

from __future__ import annotations

import json
import re

import pytest
from biobench.cli import main
from biobench.errors import ConfigError
from biobench.tasks.options import FORMAT_OPTIONS, check_keys
from biobench.tasks.registry import get_spec, list_specs, read_spec_file


def _iob_spec(tmp_path, options=None, fetch=None, splits=None):
    raw = {"id": "toy-ner", "lang": "en", "kind": "ner", "max_length": 64, "protocol": "en",
           "sources": [{"type": "local", "format": "iob",
                        "splits": splits or {s: f"{s}.tsv" for s in ("train", "dev", "test")},
                        "options": options or {}}]}
    if fetch:
        raw["fetch"] = fetch
    path = tmp_path / "toy-ner.json"
    path.write_text(json.dumps(raw), encoding="utf-8")
    return path


@pytest.mark.parametrize(("bad", "good"), [("schme", "scheme"), ("stirct", "strict")])
def test_misspelt_reader_option_names_file_key_and_nearest(tmp_path, bad, good):
    path = _iob_spec(tmp_path, {bad: "iob1" if good == "scheme" else False})
    with pytest.raises(ConfigError) as err:
        read_spec_file(path)
    assert str(err.value).startswith(f"{path}: source #1 (local iob) options: unknown key '{bad}': did you mean '{good}'? ")


def test_cli_refuses_the_spec_in_one_line(tmp_path, capsys):
    path = _iob_spec(tmp_path, {"stirct": False})
    assert main(["tasks", "--task-file", str(path)]) == 2
    assert capsys.readouterr().err.startswith(f"error: {path}: source #1 (local iob) options: unknown key 'stirct': "
                                              "did you mean 'strict'?")


def test_nested_keys_formats_and_fetch_entries_are_checked(tmp_path):
    cases = [
        (dict(options={"random_split": {"mode": "shuffle_fractions", "fractoins": [0.8, 0.1, 0.1]}}),
         "source #1 options.random_split: unknown key 'fractoins': did you mean 'fractions'?"),
        (dict(options={"columns": {"txt": "sentence"}}, splits={s: {"path": f"{s}.tsv", "format": "tsv"} for s in ("train", "dev", "test")}),
         "source #1 options.columns: unknown key 'txt': did you mean 'text'?"),
        (dict(splits={"train": {"path": "t.tsv", "format": "bratt"}, "dev": "d.tsv", "test": "e.tsv"}),
         "source #1: unknown format 'bratt': did you mean 'brat'?"),
        (dict(splits={"train": {"path": "t.tsv", "member_prefx": "x/"}, "dev": "d.tsv", "test": "e.tsv"}),
         "source #1 split entry 't.tsv': unknown key 'member_prefx': did you mean 'member_prefix'?"),
        (dict(fetch={"convert": "files", "files": [{"url": "http://x/t.tsv", "sha265": None}]}),
         "fetch.files #1: unknown key 'sha265': did you mean 'sha256'?"),
        (dict(fetch={"convert": "extract_tree", "files": [], "options": {"patern": ["*.ann"], "to": "x"}}),
         "fetch.options (convert 'extract_tree'): unknown key 'patern': did you mean 'patterns'?"),
        (dict(fetch={"convert": "extrct", "files": []}), "fetch.convert: unknown converter 'extrct': did you mean 'extract'?"),
        (dict(fetch={"licence": "x", "shas": 1}), "fetch: unknown key 'shas'"),
    ]
    for kwargs, message in cases:
        path = _iob_spec(tmp_path, **kwargs)
        with pytest.raises(ConfigError, match=re.escape(f"{path}: {message}")):
            read_spec_file(path)


def test_every_declared_option_is_accepted_and_builtins_use_only_declared_ones():
    check_keys(FORMAT_OPTIONS["brat_codes"], FORMAT_OPTIONS["brat_codes"], "x")
    with pytest.raises(ConfigError, match=r"^x: unknown key 'code_unit': \(valid here: none\)$"):
        check_keys(["code_unit"], (), "x")
    assert len(list_specs(include_extra=True)) >= 28  # every built-in spec passed the check when read
    assert get_spec("fracco-30").sources[0].options["code_unit"] == "note"
