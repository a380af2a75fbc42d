"""The fr / en protocols as data, CLI overrides, the max-length cap and the stable hash."""

from __future__ import annotations

import argparse

import pytest
from biobench.errors import ConfigError
from biobench.protocols import add_protocol_arguments, overrides_from_args, resolve_protocol


def test_fr_protocols_follow_the_paper():
    cls = resolve_protocol("fr", "classification", 2048)
    assert (cls.epochs, cls.max_steps, cls.lr, cls.head_lr, cls.batch_size, cls.warmup_ratio, cls.weight_decay) == (
        15, None, 2e-5, 2e-5, 4, 0.1, 0.01)
    assert cls.max_length == 2048
    assert resolve_protocol("fr", "multilabel", 4096).epochs == 15
    ner = resolve_protocol("fr", "ner", 1024)
    assert (ner.max_steps, ner.lr, ner.head_lr, ner.batch_size, ner.max_length) == (4000, 5e-5, 1e-3, 16, 1024)


def test_en_protocols_follow_the_paper():
    cls = resolve_protocol("en", "relation", 512)
    assert (cls.epochs, cls.lr, cls.batch_size, cls.weight_decay) == (10, 5e-5, 16, 0.01)
    ner = resolve_protocol("en", "ner", 512)
    assert (ner.epochs, ner.head_lr) == (20, 1e-3)


def test_cli_overrides_apply_and_are_hashed():
    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser)
    args = parser.parse_args(["--epochs", "1", "--max-length", "128", "--limit-train", "2000", "--lr", "1e-4"])
    overrides = overrides_from_args(args)
    assert overrides == {"epochs": 1, "max_length": 128, "limit_train": 2000, "lr": 1e-4}
    ner = resolve_protocol("fr", "ner", 1024, overrides)
    assert (ner.epochs, ner.max_steps, ner.eval_every, ner.max_length, ner.limit_train) == (1, None, None, 128, 2000)
    assert ner.head_lr == 1e-3  # the NER head keeps its own lr
    assert resolve_protocol("en", "classification", 512, overrides).head_lr == 1e-4  # sequence heads follow --lr
    both = resolve_protocol("en", "classification", 512, {"epochs": 3, "max_steps": 7})
    assert (both.epochs, both.max_steps) == (3, 7)


def test_hash_is_stable_and_changes_with_any_knob():
    a, b = resolve_protocol("en", "ner", 512), resolve_protocol("en", "ner", 512)
    assert a.hash == b.hash and len(a.hash) == 64
    assert a.to_dict()["hash"] == a.hash and a.to_dict()["epochs"] == 20
    assert resolve_protocol("en", "ner", 512, {"batch_size": 8}).hash != a.hash
    assert resolve_protocol("en", "ner", 256).hash != a.hash


def test_max_length_is_capped_at_the_model_context():
    assert resolve_protocol("fr", "multilabel", 4096, model_context=512).max_length == 512
    assert resolve_protocol("fr", "multilabel", 4096, {"max_length": 128}, model_context=512).max_length == 128


@pytest.mark.parametrize(("overrides", "message"), [
    ({"epochs": 0}, r"--epochs must be positive \(got 0\)"),
    ({"lr": -1.0}, r"--lr must be positive"),
    ({"warmup_ratio": 1.0}, r"--warmup-ratio must be below 1"),
    ({"dropout": 0.1}, r"unknown protocol field\(s\) \['dropout'\]"),
])
def test_bad_overrides(overrides, message):
    with pytest.raises(ConfigError, match=message):
        resolve_protocol("en", "classification", 512, overrides)
    assert resolve_protocol("en", "classification", 512, {"warmup_ratio": 0.0}).warmup_ratio == 0.0


def test_unknown_protocol():
    with pytest.raises(ConfigError, match=r"no fine-tuning protocol 'de' for task kind 'ner'"):
        resolve_protocol("de", "ner", 512)
