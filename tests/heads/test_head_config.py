"""heads.config: a head's knobs as a frozen dataclass; a task's `head_config` is checked key by key (unknown,
unused for the kind, wrong type, out of range) with one line naming the head and the key."""

import re

import pytest
from biobench.errors import ConfigError
from biobench.heads.config import HfSequenceConfig, LinearConfig, SpanConfig, TokenConfig, parse_config


def test_defaults_are_kept_and_keys_applied_with_their_types():
    config = parse_config("span", "ner", SpanConfig(), {"max_width": 12, "threshold": 1 / 3, "dropout": 0})
    assert (config.max_width, config.threshold, config.dropout, config.unit) == (12, 1 / 3, 0.0, "subword")
    assert isinstance(config.dropout, float)  # an int is a fine float
    assert parse_config("hf-token", "ner", TokenConfig(), None) == TokenConfig()


def test_multilabel_knobs_are_recorded_only_for_multilabel_tasks():
    assert LinearConfig().as_dict("multilabel") == {"threshold": 0.5, "fallback_top1": True}
    assert LinearConfig().as_dict("classification") == {}
    assert HfSequenceConfig().as_dict("multilabel") == {"threshold": 0.5, "fallback_top1": False}
    with pytest.raises(ConfigError, match="config key 'threshold' is not used for classification tasks; "
                                         "keys used for classification: none"):
        parse_config("linear", "classification", LinearConfig(), {"threshold": 0.3})


@pytest.mark.parametrize(("raw", "message"), [
    ({"max_widht": 3}, "head 'span': unknown config key 'max_widht' (did you mean 'max_width'?); its keys: unit, "),
    ({"max_width": True}, "head 'span': max_width must be a int, not True"),
    ({"threshold": "0.5"}, "head 'span': threshold must be a float, not '0.5'"),
    ({"threshold": 1.0}, "head 'span': threshold must be between 0 and 1 (got 1.0)"),
    ({"unit": "char"}, "head 'span': unit must be one of subword, word, not 'char'"),
    ({"lstm_size": 401}, "head 'span': lstm_size must be even (two directions), got 401"),
    ({"max_spans": 0}, "head 'span': max_spans must be at least 1 (got 0)"),
    ({"negatives": -1}, "head 'span': negatives must be 0 or more (got -1)"),
    ({"dropout": 1.0}, "head 'span': dropout must be in [0, 1) (got 1.0)"),
])
def test_a_bad_key_or_value_is_one_line_naming_the_head_and_the_key(raw, message):
    with pytest.raises(ConfigError, match=re.escape(message)):
        parse_config("span", "ner", SpanConfig(), raw)
