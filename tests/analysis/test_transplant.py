"""Layer / component transplant: exactly the named tensors change (ModernBERT and BERT naming), clear errors."""

import json

import pytest
import torch
from biobench.analysis.transplant import select_keys, transplant
from biobench.errors import ConfigError


def _save(model, tokenizer, path):
    with torch.no_grad():  # fresh norms are all ones: perturb every tensor so that A and B differ everywhere
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.save_pretrained(path)
    tokenizer.save_pretrained(path)
    return path


@pytest.fixture(scope="module")
def modernbert_pair(tmp_path_factory, tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    root = tmp_path_factory.mktemp("transplant-mb")
    return tuple(_save(build_modernbert_mlm(tiny_tokenizer, "tiny", seed=s), tiny_tokenizer, root / f"m{s}")
                 for s in (1, 2))


def _state(path):
    from transformers import AutoConfig, AutoModelForMaskedLM

    assert AutoConfig.from_pretrained(path).architectures == ["ModernBertForMaskedLM"]
    return AutoModelForMaskedLM.from_pretrained(path, dtype=torch.float32).state_dict()


MB_ATTENTION_1_2 = {
    "model.layers.1.attn_norm.weight", "model.layers.1.attn.Wqkv.weight", "model.layers.1.attn.Wo.weight",
    "model.layers.2.attn_norm.weight", "model.layers.2.attn.Wqkv.weight", "model.layers.2.attn.Wo.weight",
}


@pytest.mark.parametrize(
    ("layers", "component", "expected"),
    [
        ([1, 2], "attention", MB_ATTENTION_1_2),
        ([0], "mlp", {"model.layers.0.mlp_norm.weight", "model.layers.0.mlp.Wi.weight", "model.layers.0.mlp.Wo.weight"}),
    ],
)
def test_modernbert_transplant_changes_exactly_the_named_tensors(modernbert_pair, tmp_path, layers, component,
                                                                 expected):
    a, b = modernbert_pair
    record = transplant(a, b, layers, component, tmp_path / "out")
    assert set(record["copied"]) == expected
    assert json.loads((tmp_path / "out" / "transplant.json").read_text())["copied"] == record["copied"]
    sa, sb, out = _state(a), _state(b), _state(tmp_path / "out")
    assert set(out) == set(sb)
    for key, tensor in out.items():
        if key in expected:
            assert torch.equal(tensor, sa[key]) and not torch.equal(tensor, sb[key]), key
        else:
            assert torch.equal(tensor, sb[key]), key
    assert (tmp_path / "out" / "tokenizer.json").is_file()


def test_all_components_of_a_range(modernbert_pair, tmp_path):
    record = transplant(*modernbert_pair, [3], "all", tmp_path / "out")
    assert set(record["copied"]) == {
        "model.layers.3.attn_norm.weight", "model.layers.3.attn.Wqkv.weight", "model.layers.3.attn.Wo.weight",
        "model.layers.3.mlp_norm.weight", "model.layers.3.mlp.Wi.weight", "model.layers.3.mlp.Wo.weight",
    }


def test_bert_naming_norms_go_with_their_sublayer(tmp_path, tiny_tokenizer):
    from transformers import BertConfig, BertModel

    config = BertConfig(vocab_size=len(tiny_tokenizer), hidden_size=32, num_hidden_layers=3, num_attention_heads=2,
                        intermediate_size=64)
    paths = []
    for seed in (0, 1):
        torch.manual_seed(seed)
        paths.append(_save(BertModel(config), tiny_tokenizer, tmp_path / f"bert{seed}"))
    record = transplant(paths[0], paths[1], [2], "mlp", tmp_path / "out")
    assert set(record["copied"]) == {
        "encoder.layer.2.intermediate.dense.weight", "encoder.layer.2.intermediate.dense.bias",
        "encoder.layer.2.output.dense.weight", "encoder.layer.2.output.dense.bias",
        "encoder.layer.2.output.LayerNorm.weight", "encoder.layer.2.output.LayerNorm.bias",
    }
    sa, sb = BertModel.from_pretrained(paths[0]).state_dict(), BertModel.from_pretrained(paths[1]).state_dict()
    out = BertModel.from_pretrained(tmp_path / "out").state_dict()
    for key, tensor in out.items():
        assert torch.equal(tensor, (sa if key in record["copied"] else sb)[key]), key
    attention = select_keys(list(sb), [0], "attention", 3)
    assert "encoder.layer.0.attention.output.LayerNorm.weight" in attention
    assert all(k.startswith("encoder.layer.0.attention.") for k in attention)


def test_layer_range_outside_the_model(modernbert_pair, tmp_path):
    with pytest.raises(ConfigError) as err:
        transplant(*modernbert_pair, list(range(0, 8)), "all", tmp_path / "out")
    assert str(err.value).startswith("layers 0-7 are outside the source model")
    with pytest.raises(ConfigError) as err:
        select_keys(["layers.0.attn.Wo.weight"], [2, 4, 5], "all", 4)
    assert str(err.value) == "layers [4, 5] are outside the model, which has 4 layers (0-3); fix --layers"


def test_unknown_component(modernbert_pair, tmp_path):
    with pytest.raises(ConfigError) as err:
        transplant(*modernbert_pair, [0], "ffn", tmp_path / "out")
    assert str(err.value) == "unknown component 'ffn'; choose one of all, attention, mlp"
    assert not (tmp_path / "out").exists()


def test_mismatched_shapes(modernbert_pair, tmp_path, tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    wide = _save(build_modernbert_mlm(tiny_tokenizer, "tiny", seed=0, intermediate_size=96), tiny_tokenizer,
                 tmp_path / "wide")
    with pytest.raises(ConfigError, match=r"tensor 'layers\.0\.mlp\.Wi\.weight' has shape \(192, 64\) in .* but "
                                          r"\(256, 64\) in .*; transplants need the same architecture"):
        transplant(wide, modernbert_pair[1], [0], "mlp", tmp_path / "out")
