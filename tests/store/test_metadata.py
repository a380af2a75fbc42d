"""Model metadata stated in a grid file's model entry (`metadata = { ... }`): validated as untrusted input
(biobench.store.metadata), carried through a resolved grid file, and recorded over what the model card says."""

from __future__ import annotations

import shutil

import pytest
from biobench.errors import ConfigError
from biobench.eval.grid import read_grid_file, resolved_grid_file
from biobench.models import identify_model
from biobench.store.metadata import check_metadata

GRID = """[[grid]]
name = "g"
tasks = ["gad"]
models = [{{ model = "all-MiniLM-L6-v2", metadata = {{ {meta} }} }}]
"""


def test_a_grid_entry_states_metadata_and_a_resolved_grid_keeps_it(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text(GRID.format(meta='license = "mit", params = 22700000, context = 256, open_weights = true, '
                                     'training_data = ["pubmed-2024", "mimic-iv"], base_model = "bert-base-uncased"'))
    entry = read_grid_file(path)[0].models[0]
    assert entry.metadata == {"license": "mit", "params": 22_700_000, "context": 256, "open_weights": True,
                              "training_data": ["pubmed-2024", "mimic-iv"], "base_model": "bert-base-uncased"}
    again = tmp_path / "resolved.toml"
    again.write_text(resolved_grid_file(read_grid_file(path)))
    assert read_grid_file(again)[0].models[0].metadata == entry.metadata


@pytest.mark.parametrize("meta, message", [
    ('licence = "mit"', "unknown metadata field(s) licence; allowed: params, context, license"),
    ('license = "my-own"', "metadata license 'my-own' is not a known license id"),
    ("params = -1", "metadata params must be a whole number from 0 to 10,000,000,000,000"),
    ("params = nan", "metadata params must be a whole number"),
    ("context = inf", "metadata context must be a whole number"),
    ("params = 1.5", "metadata params must be a whole number"),
    ('context = "512"', "metadata context must be a whole number"),
    ('open_weights = "yes"', "metadata open_weights must be true or false"),
    ("training_data = []", "metadata training_data must be a corpus name or a list of 1 to 50 names"),
    (f'base_model = "{"x" * 201}"', "metadata base_model must be a single-line text of 1 to 200 characters"),
    ('base_model = "a\\nb"', "metadata base_model must be a single-line text"),
    ('training_data = [""]', "metadata training_data must be a single-line text"),
])
def test_bad_stated_metadata_is_one_clear_error_naming_the_entry(tmp_path, meta, message):
    path = tmp_path / "grid.toml"
    path.write_text(GRID.format(meta=meta))
    with pytest.raises(ConfigError) as caught:
        read_grid_file(path)
    assert f"{path} grid 'g' model #1: " in str(caught.value) and message in str(caught.value)


def test_other_unknown_keys_of_a_model_entry_are_still_refused(tmp_path):
    path = tmp_path / "grid.toml"
    path.write_text('[[grid]]\nname = "g"\ntasks = ["gad"]\nmodels = [{ model = "m", licence = "mit" }]\n')
    with pytest.raises(ConfigError, match="unknown key.s. licence; allowed: metadata, model, name, overrides"):
        read_grid_file(path)
    assert check_metadata(None, "x") == {}
    with pytest.raises(ConfigError, match="metadata must be a table"):
        check_metadata("mit", "x")


def test_stated_metadata_wins_over_the_model_card_and_is_marked_stated(tmp_path, tiny_mlm_dir):
    model = tmp_path / "model"  # a copy: the fixture's folder is shared by the session
    shutil.copytree(tiny_mlm_dir, model)
    (model / "README.md").write_text("---\nlicense: apache-2.0\nbase_model: org/base\ndatasets:\n- a\n---\n")
    card = identify_model(str(model), tmp_path).record()
    assert card["metadata"]["license"] == "apache-2.0" and "stated" not in card["metadata"]
    stated = {"license": "mit", "params": 123, "context": 64, "open_weights": True}
    record = identify_model(str(model), tmp_path, stated=stated).record()
    assert record["metadata"]["license"] == "mit" and record["metadata"]["open_weights"] is True
    assert record["metadata"]["base_model"] == "org/base" and record["metadata"]["training_data"] == ["a"]
    assert (record["params"], record["context"]) == (123, 64)
    assert record["metadata"]["stated"] == ["context", "license", "open_weights", "params"]
