"""heads.base: the contract of a head. The HF heads wrap the encoder already loaded (its weights, not fresh
ones) with the task's labels; a head's own parameters are told apart from the encoder's."""

import pytest
import torch
from biobench.errors import ConfigError
from biobench.heads.base import HeadModel, to_device, wrap_hf_head
from transformers import AutoModelForTokenClassification, BertConfig, BertModel


def _encoder() -> BertModel:
    config = BertConfig(vocab_size=50, hidden_size=16, num_hidden_layers=1, num_attention_heads=2,
                        intermediate_size=32, max_position_embeddings=32)
    return BertModel(config, add_pooling_layer=False)


def test_the_wrapped_head_keeps_the_loaded_encoder_and_the_task_labels():
    encoder = _encoder()
    model = wrap_hf_head(AutoModelForTokenClassification, encoder, ["O", "B-DISO", "I-DISO"], classifier_dropout=0.0)
    assert model.bert is encoder  # the checkpoint's weights, not a freshly initialised copy
    assert model.config.num_labels == 3 and model.config.id2label == {0: "O", 1: "B-DISO", 2: "I-DISO"}
    assert model.config.label2id["I-DISO"] == 2 and model.config.classifier_dropout == 0.0
    assert encoder.config.num_labels == 2  # the encoder's own config is a copy's source, left as it was


def test_an_architecture_without_that_head_is_one_config_error():
    class NoHead:
        __name__ = "AutoModelForNothing"

        @staticmethod
        def from_config(config):
            raise ValueError("Unrecognized configuration class")

    with pytest.raises(ConfigError, match="BertModel has no AutoModelForNothing head in transformers .*--head linear"):
        wrap_hf_head(NoHead(), _encoder(), ["a", "b"])


def test_head_parameters_are_the_ones_outside_the_encoder():
    class Probe(HeadModel):
        def __init__(self):
            super().__init__()
            self.encoder = _encoder()
            self.out = torch.nn.Linear(16, 2)

    probe = Probe()
    assert [tuple(p.shape) for p in probe.head_parameters()] == [(2, 16), (2,)]


def test_to_device_moves_tensors_and_leaves_python_values():
    batch = {"input_ids": torch.ones(2, 3, dtype=torch.long), "offsets": [(0, 1)], "example_index": [0, 1]}
    moved = to_device(batch, "cpu")
    assert moved["input_ids"].device.type == "cpu" and moved["offsets"] is batch["offsets"]
