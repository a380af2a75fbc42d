"""The needle-in-a-haystack generator: balance, determinism, the fact where it is said to be, minimal negatives."""

import gzip
import json
from collections import Counter
from pathlib import Path

import pytest
from biobench.errors import ConfigError, DataError
from biobench.tasks import needle

from tests.support import haystack_corpus as corpus

LENGTHS = (64, 128)


@pytest.fixture(scope="module")
def rows():
    return needle.generate(corpus(), n_pairs=60, lengths=LENGTHS, seed=3)


@pytest.fixture(scope="module")
def templates():
    return {t.id: t for t in needle.load_templates()}


def pairs(rows):
    by_pair = {}
    for row in rows:
        by_pair.setdefault(row["pair"], {})[row["label"]] = row
    return by_pair


PAPER_EXAMPLES = Path(__file__).resolve().parents[3] / "shared" / "reference" / "needle_examples.txt"


def test_four_templates_are_the_papers_example_facts(templates):
    """Appendix I's four facts are templates rendered back verbatim by their slots; its distractor is the drug
    template with every slot changed."""
    paper = [t for t in templates.values() if t.source == "paper"]
    assert sorted(t.id for t in paper) == ["diagnosis", "drug", "symptom", "vitals"]
    assert sorted(t.id for t in templates.values() if t.source == "biobench") == ["allergy", "duration", "lab", "procedure"]
    for t in paper:
        assert t.render(t.paper_slots) == t.paper_example
        assert all(t.paper_slots[k] in t.slots[k] for k in t.slots)
    drug = templates["drug"]
    distractor = drug.render({"dose": "500 mg", "drug": "tramadol", "route": "orale"})
    assert distractor == "Le patient a reçu 500 mg de tramadol par voie orale."
    if PAPER_EXAMPLES.exists():  # the shared reference copy of Appendix I, verbatim
        lines = [ln for ln in PAPER_EXAMPLES.read_text(encoding="utf-8").splitlines() if ln and not ln.startswith("#")]
        facts = [ln for ln in lines if not ln.startswith("distractor:")]
        assert sorted(facts) == sorted(t.paper_example for t in paper)
        assert [ln.removeprefix("distractor: ") for ln in lines if ln.startswith("distractor:")] == [distractor]


def test_templates_cover_the_paper_categories_with_1_to_4_slots(templates):
    assert {t.category for t in templates.values()} == {
        "medication", "vital signs", "lab result", "diagnosis", "procedure", "allergy", "treatment duration",
        "symptoms",
    }
    for t in templates.values():
        assert 1 <= len(t.slots) <= 4 and all(len(v) >= 4 for v in t.slots.values())
        assert t.render({k: v[0] for k, v in t.slots.items()}).endswith(".")


def test_balanced_over_labels_lengths_and_positions(rows):
    assert len(rows) == 120
    cells = Counter((r["length"], r["position"], r["label"]) for r in rows)
    assert set(cells.values()) == {10} and len(cells) == 2 * 3 * 2
    assert {k: v for k, v in Counter(r["label"] for r in rows).items()} == {1: 60, 0: 60}


def test_deterministic_per_seed():
    a = needle.generate(corpus(), n_pairs=12, lengths=LENGTHS, seed=7)
    assert a == needle.generate(corpus(), n_pairs=12, lengths=LENGTHS, seed=7)
    assert a != needle.generate(corpus(), n_pairs=12, lengths=LENGTHS, seed=8)


def test_fact_is_at_the_stated_position_and_is_the_rendered_template(rows, templates):
    for r in rows:
        fact = r["text"][r["fact_start"] : r["fact_end"]]
        assert fact == templates[r["template"]].render(r["slots"])
        center = (r["fact_start"] + r["fact_end"]) / 2 / len(r["text"])
        if r["position"] == "start":
            assert r["fact_start"] == 0
        elif r["position"] == "end":
            assert r["fact_end"] == len(r["text"])
        else:
            assert 0.35 <= center <= 0.65, (center, r["id"])


def test_positive_states_the_query_and_negative_changes_every_slot(rows, templates):
    for pair in pairs(rows).values():
        pos, neg = pair[1], pair[0]
        assert pos["query"] == neg["query"] == templates[pos["template"]].render(pos["query_slots"])
        assert pos["slots"] == pos["query_slots"]
        assert neg["template"] == pos["template"]
        assert set(neg["slots"]) == set(pos["slots"])
        assert all(neg["slots"][k] != pos["slots"][k] for k in pos["slots"])  # Appendix I: every slot differs
        # outside the fact, the two texts are identical (same haystack, same offset)
        assert pos["text"][: pos["fact_start"]] == neg["text"][: neg["fact_start"]]
        assert pos["text"][pos["fact_end"] :] == neg["text"][neg["fact_end"] :]
        assert neg["query"] not in neg["text"]
        assert pos["split"] == neg["split"] and pos["length"] == neg["length"] and pos["position"] == neg["position"]


def test_lengths_are_filled_but_not_exceeded(rows):
    for r in rows:
        assert r["length_unit"] == "words"
        assert 0.9 * r["length"] <= r["n_tokens"] <= r["length"] == len(r["text"].split()) + (r["length"] - r["n_tokens"])


def test_split_70_15_15_by_pair_within_each_cell():
    rows = needle.generate(corpus(), n_pairs=120, lengths=(64,), seed=1)
    per_split = Counter(r["split"] for r in rows)
    assert per_split == {"train": 168, "dev": 36, "test": 36}


def test_lengths_counted_with_a_tokenizer(tiny_tokenizer):
    def count(text):
        return len(tiny_tokenizer(text, add_special_tokens=False)["input_ids"])

    rows = needle.generate(corpus(), n_pairs=6, lengths=(192,), seed=0, count=count)
    assert all(r["length_unit"] == "tokens" and 172 <= count(r["text"]) == r["n_tokens"] <= 192 for r in rows)


def test_haystack_folder_too_small_is_a_clear_error():
    with pytest.raises(DataError) as err:
        needle.generate(["Une phrase courte. Une autre phrase."], n_pairs=3, lengths=(64, 512), source="tiny/")
    assert str(err.value) == (
        "haystack folder 'tiny/' holds only 6 words of text, fewer than the longest length 512; "
        "add more texts or lower --lengths"
    )


def test_at_least_one_pair():
    with pytest.raises(ConfigError, match="at least one positive/negative pair"):
        needle.generate(corpus(), n_pairs=0, lengths=LENGTHS)


def test_read_texts_jsonl_gz_and_txt(tmp_path):
    records, lines = tmp_path / "records", tmp_path / "lines"
    records.mkdir()
    lines.mkdir()
    with gzip.open(records / "a.jsonl.gz", "wt", encoding="utf-8") as fh:
        fh.write(json.dumps({"id": 1, "text": "Premier texte."}) + "\n\n" + json.dumps({"text": "Second."}) + "\n")
    (records / "ids.txt").write_text("id-1\nid-2\n", encoding="utf-8")  # not corpus text beside JSONL
    (lines / "b.txt").write_text("ligne un\n\nligne deux\n", encoding="utf-8")
    (lines / "notes.md").write_text("ignored", encoding="utf-8")
    assert needle.read_texts(records) == ["Premier texte.", "Second."]
    assert needle.read_texts(lines) == needle.read_texts(lines / "b.txt") == ["ligne un", "ligne deux"]
    (records / "c.jsonl").write_text('{"text": "ok"}\nnot json\n', encoding="utf-8")
    with pytest.raises(DataError, match=r"c\.jsonl:2: not a JSON object"):
        needle.read_texts(records)


def test_jsonl_round_trip(tmp_path, rows):
    needle.write_jsonl(rows, tmp_path / "needle.jsonl")
    assert needle.read_jsonl(tmp_path / "needle.jsonl") == rows


def test_real_french_haystacks(shared_data):
    texts = needle.read_texts(shared_data / "pretrain-fr")
    assert len(texts) == 1970  # the records' text fields; selected_ids.txt beside them is not text
    rows = needle.generate(texts, n_pairs=6, lengths=(256, 512), seed=0)
    assert all(r["n_tokens"] <= r["length"] for r in rows)


def test_fact_at_the_end_of_an_8192_token_example_is_never_truncated(tiny_tokenizer):
    """Lengths include the query and the special tokens: the whole (query, document) input fits the length,
    so an 8192-token model keeps the fact at position "end" (checked with the probe's own visibility rule)."""
    from biobench.analysis.needle_probe import fact_visible

    tok = tiny_tokenizer
    tok.model_max_length = 10**9

    def count(text):
        return len(tok(text, add_special_tokens=False)["input_ids"])

    specials = tok.num_special_tokens_to_add(pair=True)
    assert specials > 0
    rows = needle.generate(corpus(400), n_pairs=3, lengths=(8192,), seed=0, count=count,
                           reserve=lambda q: count(q) + specials)
    end = [r for r in rows if r["position"] == "end"]
    assert len(end) == 2 and all(r["fact_end"] == len(r["text"]) for r in end)
    for r in rows:
        n_input = len(tok(r["query"], r["text"])["input_ids"])
        assert n_input == r["n_input_tokens"] <= 8192
        assert n_input >= 8192 - 40  # filled, not just short
    assert fact_visible(tok, end, max_length=8192) == [True, True]
    # without the reservation the same end facts would be cut off
    unreserved = needle.generate(corpus(400), n_pairs=3, lengths=(8192,), seed=0, count=count)
    assert fact_visible(tok, [r for r in unreserved if r["position"] == "end"], max_length=8192) == [False, False]
