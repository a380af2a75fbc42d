"""The 11 locally available paper tasks (and the extra versions kept beside them) load from ../shared/data with their SOURCE.md counts.

Parsed once per session (load_task caches per process); skipped when the shared data folder is absent."""

from __future__ import annotations

from collections import Counter

import pytest
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec

# (train, dev, test) in examples: sentences for sentence corpora, documents/titles/abstracts otherwise.
COUNTS = {
    "anatem": (5861, 2118, 3830),
    "anatem-untyped": (5861, 2118, 3830),
    "bc5cdr": (4560, 4581, 4797),
    "jnlpba": (16807, 1739, 3856),  # train: BLURB's GENIA sentences of the 1,800 train abstracts, typed from the standoff
    "jnlpba-blurb": (16807, 1739, 3856),
    "ncbi-disease": (5424, 923, 940),
    "chemprot": (19167, 11820, 16712),  # BLUE: reconstructed train/test, genuine dev (chemprot-blue/SOURCE.md)
    "chemprot-13": (4169, 2427, 3469),
    "gad": (4261, 535, 534),
    "hoc": (1295, 186, 371),
    "quaero-emea": (706, 649, 578),  # one sample per non-blank line of the 11/12/15 documents, as Rian-T/tabib reads them
    "quaero-medline": (833, 832, 833),
    "fracco-30": (1030, 129, 129),  # 1,288 of the 1,300 annotated documents keep a top-30 expression (tests/tasks/test_fracco.py)
    "fracco-100": (1036, 130, 129),  # 1,295 keep a top-100 expression
    "fracco-morph-topo-100": (501 + 250, 249, 300),  # train+dev2 / dev1 minus cc_onco853 (no .ann) / test
}


# JNLPBA's two readings take 6-7 s each (its 2,000-abstract corpus): slow, the others fast
SLOW_TO_READ = {"jnlpba", "jnlpba-blurb"}


@pytest.mark.parametrize("task_id", [pytest.param(t, marks=pytest.mark.slow) if t in SLOW_TO_READ else t
                                     for t in sorted(COUNTS)])
def test_split_sizes_match_source(shared_data, task_id):
    task = load_task(get_spec(task_id), shared_data)
    assert tuple(len(task.splits[s]) for s in ("train", "dev", "test")) == COUNTS[task_id]
    assert task.checksum.startswith("sha256:") and len(task.checksum) == 71
    assert task.labels == sorted(task.labels)


def _mentions(task, split):
    return Counter(e.label for ex in task.splits[split] for e in ex.entities)


@pytest.mark.slow  # reads every real NER task's splits: ~15 s
def test_entity_mention_counts(shared_data):
    assert _mentions(load_task(get_spec("anatem-untyped"), shared_data), "test") == {"Anatomy": 4616}
    typed = _mentions(load_task(get_spec("anatem"), shared_data), "test")  # anatem-typed/SOURCE.md table
    assert sum(typed.values()) == 4616 and len(typed) == 12 and typed["Cell"] == 1429 and typed["Anatomical_system"] == 39
    assert _mentions(load_task(get_spec("ncbi-disease"), shared_data), "test") == {"Disease": 960}
    assert _mentions(load_task(get_spec("bc5cdr"), shared_data), "test") == {"Chemical": 5385, "Disease": 4424}
    assert _mentions(load_task(get_spec("jnlpba"), shared_data), "test") == {
        "protein": 5067, "cell_type": 1921, "DNA": 1056, "cell_line": 500, "RNA": 118}  # jnlpba/SOURCE.md
    assert sum(_mentions(load_task(get_spec("jnlpba-blurb"), shared_data), "test").values()) == 8662
    emea = load_task(get_spec("quaero-emea"), shared_data)
    assert sum(_mentions(emea, "train").values()) == 2695 and _mentions(emea, "train")["CHEM"] == 727
    assert sum(_mentions(load_task(get_spec("quaero-medline"), shared_data), "test").values()) == 3103


# (samples, entities) per split as the authors' harness builds them (Rian-T/tabib src/tabib/data/brat.py): EMEA one sample per
# non-blank line (EMEAAdapter, chunk_size=-1; T ner_span.md: "706 samples train"), MEDLINE one per title file
# (MEDLINEAdapter, chunk_size=0); no entity of either corpus crosses a line boundary.
HARNESS_SIZES = {
    "quaero-emea": {"train": (706, 2695), "dev": (649, 2260), "test": (578, 2204)},
    "quaero-medline": {"train": (833, 2994), "dev": (832, 2977), "test": (833, 3103)},
    # the whole-document variant: the shape of T's hub copy rntc/tabib-emea (upload_emea, chunk_size=0); the same
    # entities, as none crosses a line
    "quaero-emea-doc": {"train": (11, 2695), "dev": (12, 2260), "test": (15, 2204)},
}


@pytest.mark.parametrize("task_id", sorted(HARNESS_SIZES))
def test_quaero_samples_and_entities_per_split_are_the_harness(shared_data, task_id):
    task = load_task(get_spec(task_id), shared_data)
    sizes = {s: (len(task.splits[s]), sum(len(ex.entities) for ex in task.splits[s])) for s in ("train", "dev", "test")}
    assert sizes == HARNESS_SIZES[task_id]
    if task_id == "quaero-emea":
        assert all(ex.text.strip() and "\n" not in ex.text for s in sizes for ex in task.splits[s])
        assert task.splits["train"][0].id == "train/EMEA/318_line0@0"


def test_quaero_has_nested_discontinuous_and_codes(shared_data):
    task = load_task(get_spec("quaero-emea"), shared_data)
    ents = [e for ex in task.splits["train"] for e in ex.entities]
    assert any(e.is_discontinuous for e in ents)
    assert all(e.code for e in ents[:50])
    nested = [ex for ex in task.splits["train"]
              if any(a.start <= b.start and b.end <= a.end and a.key() != b.key() for a in ex.entities for b in ex.entities)]
    assert len(nested) > 100  # T ner_span.md: "315 avec nested entities" of 706


def test_label_distributions(shared_data):
    gad = Counter(ex.label for ex in load_task(get_spec("gad"), shared_data).splits["test"])
    assert gad == {"1": 281, "0": 253}
    chem = Counter(ex.label for ex in load_task(get_spec("chemprot-13"), shared_data).splits["train"])
    assert chem["INHIBITOR"] == 1642 and chem["AGONIST-INHIBITOR"] == 4 and len(chem) == 13
    blue = load_task(get_spec("chemprot"), shared_data)
    assert blue.data_version == "blue-reconstructed"
    assert Counter(ex.label for ex in blue.splits["dev"]) == {  # genuine BLUE dev (chemprot-blue/SOURCE.md)
        "false": 9404, "CPR:4": 1094, "CPR:3": 550, "CPR:9": 457, "CPR:6": 199, "CPR:5": 116}


def test_fracco_morph_topo_top_k_counted_on_train_only(shared_data):
    """The extra task kept from biobench's earlier FRACCO version: separate codes, top 100 on train."""
    t100 = load_task(get_spec("fracco-morph-topo-100"), shared_data)
    assert len(t100.labels) == 100
    train_freq = Counter(lab for ex in t100.splits["train"] for lab in ex.labels)
    ranked = sorted(train_freq.values(), reverse=True)
    assert min(train_freq.values()) >= ranked[99] and len(train_freq) == 100
    assert "cc_onco853" not in {ex.id for ex in t100.splits["dev"]}
    assert {"8000/1", "C34.9"} <= set(t100.labels)


def test_spanish_cantemist_is_separate(shared_data):
    from biobench.errors import DataError

    with pytest.raises(DataError, match="cantemist-es"):
        load_task(get_spec("cantemist"), shared_data)
    es = load_task(get_spec("cantemist-es"), shared_data)
    assert es.task_id == "cantemist-es" and len(es.splits["test"]) == 300
