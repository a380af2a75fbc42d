"""The "hf-token" NER head (en protocol): BIO tags on the first sub-word of each word, -100 elsewhere, the
model's own AutoModelForTokenClassification, entities decoded from word tags as seqeval reads them."""

from __future__ import annotations

import random

import pytest
import torch
from biobench.eval.encoder import load_encoder
from biobench.eval.finetune import finetune, prepare_task
from biobench.heads import get_head
from biobench.heads.token_ner import IGNORE_INDEX, TokenNerModel, bio_tags, bio_to_spans, spans_to_bio
from biobench.protocols import resolve_protocol
from biobench.tasks.schema import TaskData
from seqeval.metrics.sequence_labeling import get_entities

from tests.support import NER_LABELS as LABELS
from tests.support import NER_TRAIN as TRAIN


def test_bio_round_trip_and_overlaps_keep_the_longest():
    assert bio_tags(["A", "B"]) == ["O", "B-A", "I-A", "B-B", "I-B"]
    tags = spans_to_bio([(0, 2, 0), (1, 1, 1), (4, 4, 1)], 6)  # (1, 1) is nested in (0, 2): dropped
    assert tags == [1, 2, 2, 0, 3, 0]
    assert bio_to_spans(tags) == [(0, 2, 0), (4, 4, 1)]


@pytest.mark.parametrize("seed", range(5))
def test_decoding_reads_tags_as_seqeval_does(seed):
    rng = random.Random(seed)
    names = bio_tags(["P", "Q"])
    ids = [rng.randrange(len(names)) for _ in range(40)]
    expected = sorted((s, e, ["P", "Q"].index(t)) for t, s, e in get_entities([names[i] for i in ids]))
    assert sorted(bio_to_spans(ids)) == expected


def test_first_subword_carries_the_tag_and_the_rest_is_ignored(minilm_dir):
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    head = get_head("hf-token", "ner")
    features = head.featurize(TRAIN[:2], tokenizer, 64, LABELS)
    batch = head.collate(features, tokenizer.pad_token_id)
    for i, f in enumerate(features):
        firsts = [s for s, _ in f["unit_subwords"]]
        labelled = (batch["labels"][i] != IGNORE_INDEX).nonzero().flatten().tolist()
        assert labelled == sorted(set(firsts))  # one label per word, on its first sub-word; CLS/SEP ignored
    text = TRAIN[0].text  # "Carcinome canalaire infiltrant du sein gauche, grade II." (DISO over 6 words)
    row = batch["labels"][0]
    words = features[0]["unit_chars"]
    tags = {text[s:e]: bio_tags(LABELS)[row[features[0]["unit_subwords"][w][0]]] for w, (s, e) in enumerate(words)}
    assert tags["Carcinome"] == "B-DISO" and tags["gauche"] == "I-DISO" and tags["grade"] == "O"


def test_token_head_is_the_models_own_and_fits_tiny_data(tiny_mlm_dir):
    encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
    data = TaskData("toy-ner", "ner", {"train": TRAIN, "dev": TRAIN, "test": TRAIN}, LABELS, "hand-built", "sha256:x")
    protocol = resolve_protocol("en", "ner", 128, {"epochs": 40, "lr": 3e-3, "batch_size": 6})
    assert protocol.head == "hf-token"
    prepared = prepare_task(get_head(protocol.head, "ner"), data, tokenizer, protocol)
    torch.manual_seed(0)
    outcome = finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    # 11 of the 12 gold entities can be taught in BIO ("sein gauche" is nested in the DISO mention)
    assert outcome.test_metrics["micro_f1"] >= 0.9, outcome.history[-3:]
    model = prepared.head.build(load_encoder(str(tiny_mlm_dir))[0], LABELS, TRAIN)
    assert isinstance(model, TokenNerModel)
    assert type(model.model).__name__ == "ModernBertForTokenClassification"
    assert model.model.config.num_labels == 1 + 2 * len(LABELS)


def test_windows_decode_and_merge_back_to_gold(minilm_dir):
    """Long texts are read in overlapping windows; decoding the gold tags of every window and merging gives
    back every gold entity that BIO can encode (the nested 'sein gauche' is the one it cannot)."""
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    head = get_head("hf-token", "ner")
    features = head.featurize(TRAIN, tokenizer, 24, LABELS)
    assert len(features) > len(TRAIN)
    batch = head.collate(features, tokenizer.pad_token_id)
    per_window = []
    for row, firsts, chars in zip(batch["labels"].tolist(), batch["first_subword"], batch["unit_chars"], strict=True):
        spans = bio_to_spans([row[p] for p in firsts])
        per_window.append(sorted([chars[b][0], chars[e][1], LABELS[lab]] for b, e, lab in spans))
    merged = head.merge(features, per_window, len(TRAIN))
    gold = [head.gold(ex) for ex in TRAIN]
    missing = [(i, s) for i, spans in enumerate(gold) for s in spans if s not in merged[i]]
    extra = [(i, s) for i, spans in enumerate(merged) for s in spans if s not in gold[i]]
    assert extra == [] and [TRAIN[i].text[s[0]:s[1]] for i, s in missing] == ["sein gauche"]


def test_token_head_borrows_the_span_heads_words_without_sampling_spans(minilm_dir):
    from transformers import AutoTokenizer

    head = get_head("hf-token", "ner")
    assert head.windows.config.unit == "word"
    features = head.featurize(TRAIN[:2], AutoTokenizer.from_pretrained(minilm_dir), 64, LABELS)
    assert all("samples" not in f for f in features) and all(f["unit_chars"] for f in features)
