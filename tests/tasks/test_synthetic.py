"""Generated demo tasks: deterministic, the right sizes, valid (and some nested) spans, not trivial."""

from __future__ import annotations

from collections import Counter

from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec
from biobench.tasks.synthetic import demo_corpus, generate_task


def test_deterministic_and_sized():
    a, b = generate_task("demo-ner", seed=3), generate_task("demo-ner", seed=3)
    assert a == b and a != generate_task("demo-ner", seed=4)
    assert {s: len(v) for s, v in a.items()} == {"train": 400, "dev": 100, "test": 100}
    assert len({ex.id for split in a.values() for ex in split}) == 600


def test_ner_spans_valid_and_nested():
    task = load_task(get_spec("demo-ner"))
    assert task.labels == ["ANATOMY", "DISEASE", "DOSE", "DRUG", "SYMPTOM"]
    nested = 0
    for ex in task.splits["train"]:
        for e in ex.entities:
            assert 0 <= e.start < e.end <= len(ex.text) and ex.text[e.start:e.end].strip() == ex.text[e.start:e.end]
        nested += any(o.label == "DISEASE" and o.start <= e.start and e.end <= o.end
                      for e in ex.entities if e.label == "ANATOMY" for o in ex.entities)
    assert nested > 20


def test_classification_and_multilabel_are_balanced_enough():
    cls = load_task(get_spec("demo-cls"))
    counts = Counter(ex.label for ex in cls.splits["train"])
    assert len(counts) == 5 and min(counts.values()) > 50
    ml = load_task(get_spec("demo-multilabel"))
    sizes = Counter(len(ex.labels) for ex in ml.splits["train"])
    assert sizes[1] and sizes[2] and sizes[3]


def test_demo_corpus():
    docs = demo_corpus(5, seed=1)
    assert docs == demo_corpus(5, seed=1) and len(docs) == 5
    assert all(200 <= len(d.split()) <= 500 for d in docs)
