"""Span-NER head: words and windows, CRF marginals, span decoding, and a tiny end-to-end fit."""

from __future__ import annotations

import dataclasses
import itertools
import time

import pytest
import torch
from biobench.heads import get_head
from biobench.heads.biaffine import BandBiaffine, band_valid, decode_spans
from biobench.heads.crf import (
    ALLOWED_END,
    ALLOWED_NEXT,
    ALLOWED_START,
    B,
    I,
    L,
    O,
    U,
    bioul_crf,
    crf_log_marginals,
    crf_nll_and_log_marginals,
    resolve_overlaps,
    spans_to_tags,
    tagger_span_logits,
)
from biobench.heads.span_ner import SPAN_NER
from biobench.heads.words import WORD_PATTERN, plan_windows, segment_words
from biobench.tasks.schema import Entity, NerExample

LABELS = ["DISO", "ANAT", "CHEM"]


def example(id_: str, text: str, *mentions: tuple[str, str], tokens=None) -> NerExample:
    """An example whose entities are given by (surface, label); offsets are found in `text`."""
    entities = []
    for surface, label in mentions:
        start = text.index(surface)
        entities.append(Entity(start, start + len(surface), label))
    return NerExample(id_, text, tuple(entities), tokens)


TRAIN = [
    example("t0", "Carcinome canalaire infiltrant du sein gauche, grade II.",
            ("Carcinome canalaire infiltrant du sein gauche", "DISO"), ("sein gauche", "ANAT")),
    example("t1", "Traitement par amoxicilline 1 g trois fois par jour pendant sept jours.",
            ("amoxicilline", "CHEM")),
    example("t2", "Antécédents : diabète de type 2, hypertension artérielle, allergie à la pénicilline.",
            ("diabète de type 2", "DISO"), ("hypertension artérielle", "DISO"), ("pénicilline", "CHEM")),
    example("t3", "The patient was admitted with acute myocardial infarction and treated with aspirin.",
            ("acute myocardial infarction", "DISO"), ("aspirin", "CHEM")),
    example("t4", "Scanner thoracique : nodule pulmonaire de 12 mm du lobe supérieur droit.",
            ("nodule pulmonaire", "DISO"), ("lobe supérieur droit", "ANAT")),
    example("t5", "Mutations in the BRCA1 gene are associated with breast and ovarian cancer.",
            ("ovarian cancer", "DISO"), ("breast", "ANAT")),
]


def oracle_predictions(features):
    """What a perfect model predicts per window: its gold word spans as character spans."""
    return [[[f["word_chars"][b][0], f["word_chars"][e][1], LABELS[lab]] for b, e, lab in f["spans"]]
            for f in features]


def f1(gold: list[list], pred: list[list]) -> float:
    g = {(i, *s) for i, spans in enumerate(gold) for s in spans}
    p = {(i, *s) for i, spans in enumerate(pred) for s in spans}
    tp = len(g & p)
    return 2 * tp / (len(g) + len(p)) if g or p else 1.0


# ---- words, alignment, windows ------------------------------------------------------------------------

def test_span_head_has_the_harness_sizes(tiny_encoder):
    spec = get_head("span", "ner")
    assert spec == SPAN_NER
    assert (spec.lstm_layers, spec.lstm_size, spec.biaffine_size, spec.dropout, spec.max_width) == (3, 400, 64, 0.4, 40)
    assert (spec.tagger_weight, spec.biaffine_weight) == (1.0, 1.0)
    model = spec.build(tiny_encoder, LABELS, [])
    assert (model.lstm.num_layers, model.lstm.hidden_size, model.lstm.bidirectional) == (3, 200, True)
    assert model.lstm_in.out_features == 400 and model.biaffine.size == 64 and model.dropout.p == 0.4


@pytest.mark.parametrize("constrained", [True, False])
def test_one_forward_pass_gives_pytorch_crf_nll_and_the_marginals(constrained):
    torch.manual_seed(1)
    crf = bioul_crf()
    if not constrained:
        for name in ("transitions", "start_transitions", "end_transitions"):
            getattr(crf, name).data.copy_(torch.randn_like(getattr(crf, name)))
    lengths = [5, 1, 3]
    emissions = (torch.randn(3, 5, 5) * 2).requires_grad_()
    mask = torch.arange(5)[None, :] < torch.tensor(lengths)[:, None]
    tags = torch.randint(0, 5, (3, 5))
    nll, log_m = crf_nll_and_log_marginals(crf, emissions, tags, mask)
    expected = -crf(emissions, tags, mask=mask, reduction="sum")
    assert nll.item() == pytest.approx(expected.item(), rel=1e-5)
    assert torch.allclose(log_m.exp(), crf_log_marginals(crf, emissions, mask).exp(), atol=1e-6)
    assert not log_m.requires_grad
    ours = torch.autograd.grad(nll, emissions)[0]
    theirs = torch.autograd.grad(expected, emissions)[0]
    assert torch.allclose(ours, theirs, atol=1e-5)  # same gradient as pytorch-crf's NLL


def test_losses_are_weighted_tagger_to_biaffine(tiny_tokenizer, tiny_encoder):
    features = SPAN_NER.featurize(TRAIN[:2], tiny_tokenizer, 64, LABELS)
    batch = SPAN_NER.collate(features, tiny_tokenizer.pad_token_id)
    torch.manual_seed(0)
    model = dataclasses.replace(SPAN_NER, dropout=0.0).build(tiny_encoder, LABELS, []).eval()
    out = model(batch)
    assert out["loss"].item() == pytest.approx((out["crf_nll"] + out["span_bce"]).item(), rel=1e-5)
    model.spec = dataclasses.replace(model.spec, tagger_weight=2.0)
    assert model(batch)["loss"].item() == pytest.approx((2 * out["crf_nll"] + out["span_bce"]).item(), rel=1e-5)


def test_segment_words_regex_and_source_tokens():
    text = "BRCA1-associated cancer (40%)."
    assert [text[s:e] for s, e in segment_words(text)] == ["BRCA1", "-", "associated", "cancer", "(", "40",
                                                          "%", ")", "."]
    assert segment_words(text, ((0, 5), (5, 5), (6, 16))) == [(0, 5), (6, 16)]
    assert WORD_PATTERN.pattern == r"\w+|[^\w\s]"


def test_plan_windows_covers_and_partitions_words():
    ranges = [(i * 2, i * 2 + 2) for i in range(50)]  # 50 words of 2 subwords
    windows = plan_windows(ranges, budget=20, overlap=5)
    assert len(windows) > 1
    assert windows[0].start == 0 and windows[-1].end == 50
    for win in windows:
        assert ranges[win.end - 1][1] - ranges[win.start][0] <= 20
        assert win.start <= win.own_start < win.own_end <= win.end
    owned = [w for win in windows for w in range(win.own_start, win.own_end)]
    assert owned == list(range(50))
    assert all(a.end > b.start for a, b in itertools.pairwise(windows))  # consecutive windows overlap
    assert plan_windows([], 20, 5)[0].end == 0


@pytest.mark.parametrize("tokenizer_name, max_length", [("tiny", 64), ("minilm", 32)])
def test_featurize_merge_round_trip_gives_exact_gold(tokenizer_name, max_length, request):
    if tokenizer_name == "tiny":
        tokenizer = request.getfixturevalue("tiny_tokenizer")
    else:
        from transformers import AutoTokenizer
        tokenizer = AutoTokenizer.from_pretrained(request.getfixturevalue("minilm_dir"))
    long_doc = example("doc", " ".join(ex.text for ex in TRAIN[:4]),
                       ("Carcinome canalaire infiltrant du sein gauche", "DISO"), ("sein gauche", "ANAT"),
                       ("amoxicilline", "CHEM"), ("hypertension artérielle", "DISO"), ("aspirin", "CHEM"))
    iob = NerExample("iob", "aspirin 81 mg", (Entity(0, 7, "CHEM"),), tokens=((0, 7), (8, 10), (11, 13)))
    examples = [*TRAIN, long_doc, NerExample("empty", "", ()), iob]
    features = SPAN_NER.featurize(examples, tokenizer, max_length, LABELS)
    per_example = [sum(f["example_index"] == i for f in features) for i in range(len(examples))]
    assert per_example[len(TRAIN)] >= 3 and all(n >= 1 for n in per_example)
    assert all(len(f["input_ids"]) <= max_length for f in features)
    assert any(e - s > 1 for f in features for s, e in f["word_subwords"])  # words split into subwords
    merged = SPAN_NER.merge(features, oracle_predictions(features), len(examples))
    assert merged == [SPAN_NER.gold(ex) for ex in examples]
    # every window predicts every one of its words: the windows' owned parts partition the document
    doc = len(TRAIN)
    every_word = [[[s, e, "CHEM"] for s, e in f["word_chars"]] if f["example_index"] == doc else []
                  for f in features]
    words = segment_words(long_doc.text)
    assert SPAN_NER.merge(features, every_word, len(examples))[doc] == [[s, e, "CHEM"] for s, e in words]


def test_featurize_rejects_unusable_tokenizers_and_lengths(tiny_tokenizer):
    from biobench.errors import ConfigError

    with pytest.raises(ConfigError, match=r"max_length 2 leaves no room for text after the tokenizer's 2 "
                                          r"special tokens; use a larger --max-length \(e.g. 128\)"):
        SPAN_NER.featurize(TRAIN, tiny_tokenizer, 2, LABELS)

    class SlowTokenizer:
        is_fast = False

        def __call__(self, text, **kwargs):
            return tiny_tokenizer(text, **kwargs)

    with pytest.raises(ConfigError, match="span NER needs a fast tokenizer .character offsets.; SlowTokenizer"):
        SPAN_NER.featurize(TRAIN, SlowTokenizer(), 64, LABELS)


def test_gold_uses_the_hull_of_discontinuous_entities():
    ex = NerExample("d", "tumeur du sein et du foie",
                    (Entity(0, 25, "DISO", fragments=((0, 14), (18, 25))), Entity(10, 14, "ANAT"),
                     Entity(10, 14, "ANAT")))
    assert SPAN_NER.gold(ex) == [[0, 25, "DISO"], [10, 14, "ANAT"]]


def test_entities_off_word_boundaries_are_learned_as_covering_words(tiny_tokenizer, caplog):
    ex = NerExample("x", "hyperglycémie sévère", (Entity(5, 13, "DISO"),))
    features = SPAN_NER.featurize([ex], tiny_tokenizer, 64, LABELS)
    assert features[0]["spans"] == [(0, 0, 0)]
    assert "1 of 1 entities do not start/end on word boundaries" in caplog.text


# ---- CRF ----------------------------------------------------------------------------------------------

def brute_force_marginals(crf, emissions, length):
    """P(tag_t = y) by enumerating every tag path of one sequence."""
    weights = {}
    for path in itertools.product(range(5), repeat=length):
        score = crf.start_transitions[path[0]] + crf.end_transitions[path[-1]]
        score = score + sum(emissions[t, y] for t, y in enumerate(path))
        score = score + sum(crf.transitions[a, b] for a, b in itertools.pairwise(path))
        weights[path] = score.exp().item()
    z = sum(weights.values())
    out = torch.zeros(length, 5, dtype=torch.float64)
    for path, w in weights.items():
        for t, y in enumerate(path):
            out[t, y] += w / z
    return out


@pytest.mark.parametrize("constrained", [True, False])
def test_crf_marginals_match_brute_force(constrained):
    torch.manual_seed(0)
    crf = bioul_crf()
    if not constrained:  # the recursion itself, with arbitrary transition scores
        for name in ("transitions", "start_transitions", "end_transitions"):
            getattr(crf, name).copy_(torch.randn_like(getattr(crf, name)))
    lengths = [4, 1, 3]
    emissions = torch.randn(3, 4, 5) * 2
    mask = torch.arange(4)[None, :] < torch.tensor(lengths)[:, None]
    log_m = crf_log_marginals(crf, emissions, mask)
    probs = log_m.exp()
    assert torch.allclose(probs.sum(-1), torch.ones(3, 4), atol=1e-5)  # padded positions read as O
    for i, n in enumerate(lengths):
        expected = brute_force_marginals(crf, emissions[i].double(), n)
        assert torch.allclose(probs[i, :n].double(), expected, atol=1e-5)
        assert torch.allclose(probs[i, n:, O], torch.ones(4 - n))


def test_crf_is_bioul_constrained_and_pytorch_crf_uses_the_constraints():
    crf = bioul_crf()
    assert not list(crf.parameters())  # fixed structure: nothing for the optimiser
    torch.manual_seed(1)
    emissions = torch.randn(8, 7, 5) * 3
    mask = torch.ones(8, 7, dtype=torch.bool)
    mask[3:, 5:] = False
    for path in crf.decode(emissions, mask):
        assert path[0] in ALLOWED_START and path[-1] in ALLOWED_END
        assert all(b in ALLOWED_NEXT[a] for a, b in itertools.pairwise(path))
    # log-likelihood of a valid tagging is finite, of an invalid one (O -> I) about -1e4
    good = torch.tensor([[B, I, L, O, U, O, O]])
    bad = torch.tensor([[O, I, L, O, U, O, O]])
    one = torch.ones(1, 7, dtype=torch.bool)
    assert crf(emissions[:1], good, one).item() > -100
    assert crf(emissions[:1], bad, one).item() < -5000


def test_spans_to_tags_resolves_overlaps_longest_first():
    assert resolve_overlaps([(2, 2), (0, 3), (5, 6), (6, 7)]) == [(0, 3), (5, 6)]
    assert spans_to_tags([(0, 3), (5, 5)], 7) == [B, I, I, L, O, U, O]


def test_tagger_span_logits_follow_a_confident_tagging():
    tags = torch.tensor([O, B, I, L, O, U])
    log_m = torch.full((6, 5), -30.0)
    log_m[torch.arange(6), tags] = 0.0
    logits = tagger_span_logits(log_m, max_width=4)
    assert logits.shape == (6, 4)
    assert logits[1, 2] == 10.0 and logits[5, 0] == 10.0  # "B I L" and "U": positive, clamped
    assert logits[1, 1] == -10.0 and logits[0, 1] == -10.0 and logits[2, 1] == -10.0


def test_biaffine_band_is_the_same_for_short_and_long_sequences():
    torch.manual_seed(0)
    scorer = BandBiaffine(8, n_labels=3, size=4, max_width=12)
    torch.nn.init.normal_(scorer.width_bias)
    words = torch.randn(2, 10, 8)
    full = scorer(words, band=10)   # W <= band: one W x W product
    diag = scorer(words, band=5)    # W > band: one product per diagonal
    begin = scorer.begin(words).view(2, 10, 3, 4) / 2
    end = scorer.end(words).view(2, 10, 3, 4)
    assert full.shape == (2, 10, 10, 3) and diag.shape == (2, 10, 5, 3)
    valid = band_valid(torch.tensor([10, 10]), 10, 5)  # past the end the two paths hold different garbage
    assert torch.allclose(full[:, :, :5][valid], diag[valid], atol=1e-5)
    expected = (begin[1, 2] * end[1, 6]).sum(-1) + scorer.width_bias[4]
    assert torch.allclose(diag[1, 2, 4], expected, atol=1e-5)  # span [2, 6] of sequence 1


# ---- decoding -----------------------------------------------------------------------------------------

def test_decode_keeps_nested_spans_of_different_labels_and_removes_same_label_overlaps():
    probs = torch.zeros(2, 6, 4, 3)
    probs[0, 0, 3, 0] = 0.9           # DISO [0, 3]
    probs[0, 2, 0, 1] = 0.8           # ANAT [2, 2], nested in DISO [0, 3]: kept
    probs[0, 1, 1, 0] = 0.7           # DISO [1, 2], nested in DISO [0, 3]: removed
    probs[0, 3, 1, 0] = 0.6           # DISO [3, 4], crosses DISO [0, 3]: removed
    probs[0, 5, 0, 0] = 0.8           # DISO [5, 5]: kept
    probs[0, 5, 0, 2] = 0.4           # CHEM [5, 5]: below threshold
    probs[1, 0, 0, 2] = 0.99          # the second sequence has 1 word ...
    probs[1, 0, 1, 2] = 0.99          # ... so [0, 1] is not a candidate
    valid = band_valid(torch.tensor([6, 1]), 6, 4)
    out = decode_spans(probs, valid, threshold=0.5)
    assert [(b, e, lab) for b, e, lab, _ in out[0]] == [(0, 3, 0), (2, 2, 1), (5, 5, 0)]
    assert out[0][0][3] == pytest.approx(0.9)
    assert [(b, e, lab) for b, e, lab, _ in out[1]] == [(0, 0, 2)]


# ---- the model ----------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_encoder(tiny_tokenizer):
    from biobench.training.presets import build_modernbert_mlm

    return build_modernbert_mlm(tiny_tokenizer, "tiny", seed=0).model


def test_empty_and_padded_windows_keep_the_first_step_unmasked(tiny_tokenizer, tiny_encoder):
    examples = [NerExample("e", "", ()), NerExample("s", "   ", ()), TRAIN[1]]
    features = SPAN_NER.featurize(examples, tiny_tokenizer, 64, LABELS)
    batch = SPAN_NER.collate(features, tiny_tokenizer.pad_token_id)
    assert batch["word_mask"][:2].sum() == 0 and batch["word_mask"].shape[1] > 1
    model = SPAN_NER.build(tiny_encoder, LABELS, examples)
    out = model(batch)
    assert torch.isfinite(out["loss"])
    out["loss"].backward()
    assert tiny_encoder.embeddings.tok_embeddings.weight.grad.abs().sum() > 0  # the encoder is fine-tuned too
    preds = model.predict(batch)
    assert preds[0] == [] and preds[1] == []
    # a batch of only empty windows works too
    assert model.predict(SPAN_NER.collate(features[:2], tiny_tokenizer.pad_token_id)) == [[], []]


def test_first_and_mean_pooling(tiny_tokenizer, tiny_encoder):
    features = SPAN_NER.featurize(TRAIN[:2], tiny_tokenizer, 64, LABELS)
    batch = SPAN_NER.collate(features, tiny_tokenizer.pad_token_id)
    hidden = tiny_encoder(input_ids=batch["input_ids"], attention_mask=batch["attention_mask"]).last_hidden_state
    for pooling in ("mean", "first"):
        model = dataclasses.replace(SPAN_NER, pooling=pooling, dropout=0.0).build(tiny_encoder, LABELS, [])
        model.eval()
        captured: dict = {}
        model.lstm_in.register_forward_hook(lambda m, args, out, seen=captured: seen.update(x=args[0]))
        model.predict(batch)
        words = captured["x"]  # pooled word vectors, before the projection to the BiLSTM size
        s, e = features[0]["word_subwords"][0]
        assert e - s > 1
        expected = hidden[0, s:e].mean(0) if pooling == "mean" else hidden[0, s]
        assert torch.allclose(words[0, 0], expected, atol=1e-5)


def train_and_score(model, spec, features, examples, tokenizer, steps, lr_encoder, lr_head):
    params = [{"params": model.encoder.parameters(), "lr": lr_encoder},
              {"params": model.head_parameters(), "lr": lr_head}]
    optimizer = torch.optim.AdamW(params, weight_decay=0.01)
    batch = spec.collate(features, tokenizer.pad_token_id)
    gold = [spec.gold(ex) for ex in examples]
    score = 0.0
    for step in range(1, steps + 1):
        model.train()
        loss = model(batch)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        if step % 10 == 0:
            model.eval()
            pred = spec.merge(features, model.predict(batch), len(examples))
            score = f1(gold, pred)
            if score > 0.95:
                break
    return score, step


def test_head_fits_a_tiny_dataset_with_nested_entities(tiny_tokenizer, tiny_encoder, capsys):
    torch.manual_seed(0)
    features = SPAN_NER.featurize(TRAIN, tiny_tokenizer, 128, LABELS)
    model = SPAN_NER.build(tiny_encoder, LABELS, TRAIN)
    assert {id(p) for p in model.head_parameters()}.isdisjoint({id(p) for p in tiny_encoder.parameters()})
    started = time.perf_counter()
    score, steps = train_and_score(model, SPAN_NER, features, TRAIN, tiny_tokenizer, 300, 5e-5, 1e-3)
    elapsed = time.perf_counter() - started
    with capsys.disabled():
        print(f"\n[span-ner tiny fit] train F1 {score:.3f} after {steps} steps in {elapsed:.1f}s")
    assert score > 0.9
    pred = SPAN_NER.merge(features, model.predict(SPAN_NER.collate(features, tiny_tokenizer.pad_token_id)),
                          len(TRAIN))
    assert [0, 45, "DISO"] in pred[0] and [34, 45, "ANAT"] in pred[0]  # the nested pair


def test_head_trains_on_a_bert_tokenizer_and_windows(minilm_dir):
    from transformers import AutoModel, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(minilm_dir)
    encoder = AutoModel.from_pretrained(minilm_dir)
    features = SPAN_NER.featurize(TRAIN[:3], tokenizer, 16, LABELS)
    assert len(features) > 3  # windows
    model = SPAN_NER.build(encoder, LABELS, TRAIN[:3])
    batch = SPAN_NER.collate(features, tokenizer.pad_token_id)
    optimizer = torch.optim.AdamW(model.head_parameters(), lr=1e-3)
    losses = []
    for _ in range(3):
        loss = model(batch)["loss"]
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        losses.append(loss.item())
    assert losses[-1] < losses[0]
    merged = SPAN_NER.merge(features, model.predict(batch), 3)
    assert len(merged) == 3 and all(isinstance(s, list) and len(s) == 3 for doc in merged for s in doc)


def test_real_brat_documents_split_into_windows_and_merge_back(shared_data, tiny_tokenizer):
    from biobench.tasks.loading import load_task
    from biobench.tasks.registry import get_spec

    task = load_task(get_spec("quaero-emea"), shared_data)
    docs = task.splits["train"]
    features = SPAN_NER.featurize(docs, tiny_tokenizer, 256, task.labels)
    assert len(features) > 5 * len(docs) and all(len(f["input_ids"]) <= 256 for f in features)
    oracle = [[[f["word_chars"][b][0], f["word_chars"][e][1], task.labels[lab]] for b, e, lab in f["spans"]]
              for f in features]
    merged = SPAN_NER.merge(features, oracle, len(docs))
    gold = {(i, *s) for i, ex in enumerate(docs) for s in SPAN_NER.gold(ex)}
    pred = {(i, *s) for i, spans in enumerate(merged) for s in spans}
    assert sum(map(len, merged)) == len(pred)  # no duplicates from overlapping windows
    assert len(gold & pred) >= len(gold) - 2  # all but entities ending inside a word
