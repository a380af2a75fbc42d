"""The fr / en protocols as data (heads and selection metrics included), CLI overrides, the max-length cap, the
stable hash, and one clear error for a bad spec."""

from __future__ import annotations

import argparse
import json

import pytest
from biobench.errors import ConfigError
from biobench.heads import HEAD_SPECS
from biobench.protocols import (
    add_protocol_arguments,
    overrides_from_args,
    protocol_overrides,
    protocol_steps,
    resolve_protocol,
    resolve_task_protocol,
    spec_origin,
)
from biobench.tasks.registry import get_spec, read_spec_file


def test_fr_protocols_follow_the_paper():
    cls = resolve_protocol("fr", "classification", 2048)
    assert (cls.epochs, cls.max_steps, cls.lr, cls.head_lr, cls.batch_size, cls.warmup_ratio, cls.weight_decay) == (
        15, None, 2e-5, 2e-5, 4, 0.1, 0.01)
    assert cls.max_length == 2048
    assert resolve_protocol("fr", "multilabel", 4096).epochs == 15
    ner = resolve_protocol("fr", "ner", 1024)
    assert (ner.max_steps, ner.lr, ner.head_lr, ner.batch_size, ner.max_length) == (4000, 5e-5, 1e-3, 16, 1024)
    assert (ner.eval_every, ner.grad_clip, ner.warmup_ratio) == (500, 10.0, 0.1)


def test_en_protocols_follow_the_paper():
    cls = resolve_protocol("en", "relation", 512)
    assert (cls.epochs, cls.lr, cls.batch_size, cls.weight_decay) == (10, 5e-5, 16, 0.01)
    assert (cls.head_lr, cls.warmup_ratio, cls.grad_clip) == (5e-5, 0.0, 1.0)  # one lr, no warmup (Trainer)
    ner = resolve_protocol("en", "ner", 512)
    assert (ner.epochs, ner.head_lr, ner.warmup_ratio) == (20, 5e-5, 0.0)


@pytest.mark.parametrize(("lang", "kind", "head", "dev_metric"), [
    ("fr", "classification", "linear", "weighted_f1"),
    ("fr", "relation", "linear", "weighted_f1"),
    ("fr", "multilabel", "linear", "micro_f1"),
    ("fr", "ner", "span", "sampled_span_f1"),
    ("en", "classification", "hf-sequence", "weighted_f1"),
    ("en", "relation", "hf-sequence", "weighted_f1"),
    ("en", "multilabel", "hf-sequence", "weighted_f1"),
    ("en", "ner", "hf-token", "micro_f1"),
])
def test_heads_and_selection_per_protocol(lang, kind, head, dev_metric):
    protocol = resolve_protocol(lang, kind, 512)
    assert (protocol.head, protocol.dev_metric, protocol.metric) == (head, dev_metric, "macro_f1")
    assert protocol.to_dict()["head_config"] == HEAD_SPECS[head].defaults.as_dict(kind)


def test_head_configs_record_only_the_keys_their_kind_uses():
    """The protocol hash covers what the head reads: no key that the code ignores (issue 23 §3)."""
    assert resolve_protocol("fr", "classification", 512).head_config == {}
    assert resolve_protocol("fr", "multilabel", 512).head_config == {"threshold": 0.5, "fallback_top1": True}
    assert resolve_protocol("en", "multilabel", 512).head_config == {"threshold": 0.5, "fallback_top1": False}
    assert resolve_protocol("en", "ner", 512).head_config == {}


def test_the_protocol_lives_in_one_module():
    from biobench import protocols
    from biobench.tasks.registry import get_spec
    from biobench.tasks.schema import PROTOCOL_NAMES

    assert set(protocols.SEEDS) == set(PROTOCOL_NAMES) == {p for p, _ in protocols.PROTOCOLS}
    assert protocols.task_seeds(get_spec("quaero-emea")) == tuple(range(42, 51))
    assert protocols.task_seeds(get_spec("gad")) == (42, 43, 44, 45, 46)
    assert HEAD_SPECS["span"].knobs == {"head_lr": 1e-3, "grad_clip": 10.0, "dev_metric": "sampled_span_f1"}


def test_span_head_has_the_harness_sizes_and_is_hashed():
    ner = resolve_protocol("fr", "ner", 1024)
    assert ner.head_config == {"unit": "subword", "max_width": 40, "lstm_layers": 3, "lstm_size": 400,
                               "biaffine_size": 64, "dropout": 0.4, "tagger_weight": 1.0, "biaffine_weight": 1.0,
                               "threshold": 0.5, "negatives": 500, "max_spans": 512}
    assert (ner.max_steps, ner.lr, ner.head_lr, ner.batch_size, ner.weight_decay, ner.grad_clip) == \
        (4000, 5e-5, 1e-3, 16, 0.01, 10.0)  # paper Appendix E; clipping from Rian-T/tabib's ner_span_bert.yaml
    en_span = resolve_protocol("en", "ner", 512, {"head": "span"})
    en_token = resolve_protocol("en", "ner", 512)
    assert (en_span.head, en_span.head_lr, en_span.grad_clip, en_span.epochs) == ("span", 1e-3, 10.0, 20)
    assert en_span.dev_metric == "sampled_span_f1" and en_token.dev_metric == "micro_f1"
    fr_token = resolve_protocol("fr", "ner", 512, {"head": "hf-token"})
    assert fr_token.dev_metric == "micro_f1"  # another head on a fr NER task selects on exact spans
    with pytest.raises(ConfigError, match=r"dev_metric 'sampled_span_f1' is not computed; computed metrics: "
                                          r"macro_f1, micro_f1, weighted_f1 \(head 'hf-token'\)"):
        resolve_protocol("en", "ner", 512, dev_metric="sampled_span_f1")
    assert en_span.hash != en_token.hash
    assert resolve_protocol("en", "ner", 512, head="span").hash == en_span.hash  # spec field == --head


def test_head_override_from_the_command_line():
    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser)
    assert overrides_from_args(parser.parse_args(["--head", "span"])) == {"head": "span"}
    with pytest.raises(ConfigError, match=r"--head: head 'span' does not fit a classification task .*"
                                          r"heads for classification: linear, hf-sequence"):
        resolve_protocol("en", "classification", 512, {"head": "span"})


@pytest.mark.parametrize(("fields", "message"), [
    ({"head": "crf"}, r"my/spec.json: unknown head 'crf'; known heads: linear, hf-sequence, span, span-words, hf-token"),
    ({"head": "linear"}, r"my/spec.json: head 'linear' does not fit a ner task"),
    ({"dev_metric": "accuracy"}, r"my/spec.json: dev_metric 'accuracy' is not computed; computed metrics: "
                                 r"macro_f1, micro_f1, weighted_f1"),
    ({"metric": "f1"}, r"my/spec.json: metric 'f1' is not computed"),
])
def test_bad_spec_fields_name_the_spec_file(fields, message):
    with pytest.raises(ConfigError, match=message):
        resolve_protocol("fr", "ner", 512, origin="my/spec.json", **fields)


def test_task_spec_errors_name_its_file(tmp_path):
    spec_file = tmp_path / "mine.json"
    spec_file.write_text(json.dumps({"id": "mine", "lang": "en", "kind": "ner", "max_length": 64, "protocol": "en",
                                     "head": "hf-sequence", "sources": [{"type": "generated", "generator": "x"}]}))
    spec = read_spec_file(spec_file)
    with pytest.raises(ConfigError, match=rf"{spec_file}: head 'hf-sequence' does not fit a ner task"):
        resolve_task_protocol(spec)
    builtin = get_spec("ncbi-disease")
    assert resolve_task_protocol(builtin).dev_metric == "micro_f1"
    assert spec_origin(builtin) == "tasks/specs/ncbi-disease.json"


def test_cli_overrides_apply_and_are_hashed():
    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser)
    args = parser.parse_args(["--epochs", "1", "--max-length", "128", "--limit-train", "2000", "--lr", "1e-4"])
    overrides = overrides_from_args(args)
    assert overrides == {"epochs": 1, "max_length": 128, "limit_train": 2000, "lr": 1e-4}
    ner = resolve_protocol("fr", "ner", 1024, overrides)
    assert (ner.epochs, ner.max_steps, ner.eval_every, ner.max_length, ner.limit_train) == (1, None, None, 128, 2000)
    assert ner.head_lr == 1e-3  # the span NER head keeps its own lr
    assert resolve_protocol("en", "classification", 512, overrides).head_lr == 1e-4  # sequence heads follow --lr
    both = resolve_protocol("en", "classification", 512, {"epochs": 3, "max_steps": 7})
    assert (both.epochs, both.max_steps) == (3, 7)


def test_hash_is_stable_and_changes_with_any_knob():
    a, b = resolve_protocol("en", "ner", 512), resolve_protocol("en", "ner", 512)
    assert a.hash == b.hash and len(a.hash) == 64
    assert a.to_dict()["hash"] == a.hash and a.to_dict()["epochs"] == 20
    assert resolve_protocol("en", "ner", 512, {"batch_size": 8}).hash != a.hash
    assert resolve_protocol("en", "ner", 256).hash != a.hash


def test_limit_eval_is_an_override_hashed_only_when_set():
    import hashlib
    from dataclasses import asdict

    parser = argparse.ArgumentParser()
    add_protocol_arguments(parser)
    assert overrides_from_args(parser.parse_args(["--limit-eval", "50"])) == {"limit_eval": 50}
    plain = resolve_protocol("en", "classification", 512)
    knobs = {k: v for k, v in asdict(plain).items() if k != "limit_eval"}  # the hash results were keyed with
    canonical = json.dumps(knobs, sort_keys=True, separators=(",", ":"))
    assert plain.hash == hashlib.sha256(canonical.encode()).hexdigest() and plain.to_dict()["limit_eval"] is None
    limited = resolve_protocol("en", "classification", 512, {"limit_eval": 50})
    assert limited.limit_eval == 50 and limited.hash != plain.hash
    with pytest.raises(ConfigError, match=r"--limit-eval must be positive \(got 0\)"):
        resolve_protocol("en", "classification", 512, {"limit_eval": 0})


def test_protocol_overrides_name_each_changed_knob_with_the_protocols_value():
    ner = resolve_protocol("fr", "ner", 1024)
    smoke = resolve_protocol("fr", "ner", 1024, {"max_steps": 60, "limit_train": 200})
    assert protocol_overrides(ner, ner) == {}
    assert protocol_overrides(ner, smoke) == {"max_steps": {"run": 60, "protocol": 4000},
                                              "limit_train": {"run": 200, "protocol": None}}
    assert protocol_steps(ner, 706) == 4000
    assert protocol_steps(resolve_protocol("fr", "classification", 512), 10) == 15 * 3  # 15 epochs of 3 batches


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
