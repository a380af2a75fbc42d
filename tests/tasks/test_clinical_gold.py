"""COS and social-history gold as the English protocol's dataloader builds it (lindvalllab/BioClinical-ModernBERT
src/dataloader/dataloader.py): protocol tokens, a token tagged only when wholly inside a mention, later mentions
overwriting earlier ones, entities = what seqeval reads from the flat BIO sequence. Synthetic BRAT files in the
corpora's format; the expected tags are written out by hand and read back with seqeval itself."""

from __future__ import annotations

from pathlib import Path

from biobench.tasks.readers.clinical import cos_snippet_examples, social_history_examples
from biobench.tasks.readers.iob import flat_bio_entities
from seqeval.metrics.sequence_labeling import get_entities


def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")


def _as_seqeval(example, tags: list[str]) -> None:
    """The example's entities equal seqeval's reading of `tags` over the example's tokens."""
    tokens = example.tokens
    expected = sorted((tokens[a][0], tokens[b][1], label) for label, a, b in get_entities(tags))
    assert sorted((e.start, e.end, e.label) for e in example.entities) == expected


def test_flat_bio_keeps_whole_tokens_and_lets_later_spans_overwrite():
    offsets = [(0, 3), (4, 8), (9, 12), (13, 17)]  # "abc defg hij klmn"
    ents = flat_bio_entities(offsets, [(0, 12, "A"), (4, 8, "B"), (2, 17, "C")])
    # A tags tokens 0-2; B overwrites token 1 (B-B); C covers tokens 1-3 wholly (not token 0: it starts at 2)
    # -> B-A B-C I-C I-C: A keeps token 0 only, B vanishes under C
    assert [(e.start, e.end, e.label) for e in ents] == [(0, 3, "A"), (4, 17, "C")]
    assert flat_bio_entities(offsets, [(5, 7, "A")]) == ()  # covers no whole token: lost, as in the protocol


def test_cos_snippets_build_the_protocol_gold(tmp_path):
    snippet = "RUL opacity, 2 cm; mass-like."
    base = 100
    ann = (f"T1\tSnippet {base} {base + len(snippet)}\t{snippet}\n"
           f"T2\tCos {base + 4} {base + 11}\topacity\n"                   # 'opacity'
           f"T3\tLoc {base + 0} {base + 11}\tRUL opacity\n"               # later, overlaps T2: overwrites it
           f"T4\tVal {base + 13} {base + 15}\t2 \n"                       # covers '2' only ('cm' is not inside)
           f"T5\tAttr {base + 19} {base + 23}\tmass\n"                    # 'mass' of 'mass-like' (regex splits at '-')
           f"T6\tCos {base + 20} {base + 23}\tass\n"                      # no whole token inside: ignored
           f"T7\tRef {base + 400} {base + 405}\toutside\n"                # outside the snippet
           f"T8\tCos {base + 0} {base + 3};{base + 4} {base + 11}\tRUL opacity\n")  # discontinuous: skipped
    _write(tmp_path / "cos" / "a.ann", ann)
    [ex] = cos_snippet_examples(tmp_path / "cos")
    assert [ex.text[a:b] for a, b in ex.tokens] == ["RUL", "opacity", ",", "2", "cm", ";", "mass", "-", "like", "."]
    tags = ["B-Loc", "I-Loc", "O", "B-Val", "O", "O", "B-Attr", "O", "O", "O"]
    _as_seqeval(ex, tags)
    assert [(ex.text[e.start:e.end], e.label) for e in ex.entities] == [("RUL opacity", "Loc"), ("2", "Val"), ("mass", "Attr")]


def test_social_history_builds_the_protocol_gold(tmp_path):
    text = "Smokes 1 ppd since 1990.\nDrinks\twine occasionally;lives alone."
    _write(tmp_path / "sh" / "note1.txt", text)
    ann = ("T1\tTobacco 0 6\tSmokes\n"
           "T2\tAmount 7 12\t1 ppd\n"
           "T3\tHistory 13 23\tsince 1990\n"        # '1990.' is one whitespace token, not wholly inside: dropped
           "T4\tTemporal 7 23\t1 ppd since 1990\n"   # same start as T2, later in the file: overwrites 1 and ppd
           "T5\tAlcohol 25 31\tDrinks\n"
           "T6\tType 32 36\twine\n"
           "T7\tFrequency 37 49\toccasionally\n"     # 'occasionally;lives' is one token: dropped
           "T8\tLivingStatus 37 56;57 62\tx\n")      # discontinuous: skipped
    _write(tmp_path / "sh" / "note1.ann", ann)
    _write(tmp_path / "sh" / "note2.txt", "No .ann beside this one.")
    [ex] = social_history_examples(tmp_path / "sh")
    assert ex.id == "note1"
    assert [text[a:b] for a, b in ex.tokens] == ["Smokes", "1", "ppd", "since", "1990.", "Drinks", "wine", "occasionally;lives", "alone."]
    # spans sorted by start (stable): T1 0, T2 7, T4 7, T3 13, T5 25, T6 32, T7 37
    tags = ["B-Tobacco", "B-Temporal", "I-Temporal", "B-History", "O", "B-Alcohol", "B-Type", "O", "O"]
    _as_seqeval(ex, tags)
    assert [(text[e.start:e.end], e.label) for e in ex.entities] == [
        ("Smokes", "Tobacco"), ("1 ppd", "Temporal"), ("since", "History"), ("Drinks", "Alcohol"), ("wine", "Type")]
