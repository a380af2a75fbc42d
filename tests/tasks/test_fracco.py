"""FrACCO-30 / FrACCO-100 as the authors' French harness builds them (tabib src/tabib/data/fracco.py,
FRACCODocumentICDAdapter): labels = whole expression_CIM notes, top-k by document frequency over all documents,
documents without a top-k code dropped, random 80/10/10 split with largest-remainder sizes.

The harness's algorithm is written out here independently (`_harness`) and compared with what biobench loads:
on a small synthetic archive (always) and on the real brat_raw archive (skipped when ../shared/data is absent).
"""

from __future__ import annotations

import io
import math
import random
import tarfile
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import DataError
from biobench.tasks.loading import largest_remainder_counts, load_task
from biobench.tasks.registry import get_spec, spec_from_dict


def _notes(ann: str) -> set[str]:
    """The ICD-O notes on expression_CIM mentions of one .ann, each stripped, as one code each."""
    labels, codes = {}, set()
    for line in ann.splitlines():
        cols = line.split("\t")
        if line.startswith("T"):
            labels[cols[0]] = cols[1].split(" ")[0]
        elif line.startswith("#") and len(cols) == 3:
            kind, target = cols[1].split(" ")
            if kind == "ICD-O" and labels.get(target) == "expression_CIM" and cols[2].strip():
                codes.add(cols[2].strip())
    return codes


def _harness(doc_codes: dict[str, set[str]], top_k: int, seed: int = 42) -> tuple[dict[str, list[str]], set[str], dict[str, set[str]]]:
    """The harness's steps: documents with codes, sorted; a frequency dict filled walking them (a code's place
    is its first document); a stable sort by count; the first top_k; documents keeping one; sorted, shuffled
    with random.Random(seed); sizes 0.8 / 0.1 / (1 - 0.8 - 0.1) with the remainder to the largest fractions."""
    docs = sorted(d for d, c in doc_codes.items() if c)
    freq: dict[str, int] = {}
    for d in docs:
        for c in sorted(doc_codes[d]):  # inside one document the harness iterates a set; by name here
            freq[c] = freq.get(c, 0) + 1
    ranked = sorted(freq.items(), key=lambda kv: kv[1], reverse=True)
    top = {c for c, _ in ranked[:top_k]}
    kept = sorted(d for d in docs if doc_codes[d] & top)
    random.Random(seed).shuffle(kept)
    ratios = [0.8, 0.1, max(0.0, 1.0 - 0.8 - 0.1)]
    exact = [len(kept) * r for r in ratios]
    sizes = [int(x) for x in exact]
    by_fraction = sorted(range(3), key=lambda i: exact[i] - math.floor(exact[i]), reverse=True)
    for n in range(len(kept) - sum(sizes)):
        sizes[by_fraction[n % 3]] += 1
    a, b = sizes[0], sizes[0] + sizes[1]
    splits = {"train": kept[:a], "dev": kept[a:b], "test": kept[b:]}
    return splits, top, {d: doc_codes[d] & top for d in kept}


def _check_against_harness(task, doc_codes: dict[str, set[str]], top_k: int) -> None:
    splits, top, labels = _harness(doc_codes, top_k)
    assert {s: [ex.id for ex in task.splits[s]] for s in splits} == splits
    assert set(task.labels) == top and len(task.labels) == top_k
    assert {ex.id: set(ex.labels) for s in task.splits.values() for ex in s} == labels


# --------------------------------------------------------------------------------------------- synthetic
def _archive(path: Path, docs: dict[str, str | None]) -> Path:
    """brat_raw/<doc>.txt (+ .ann unless None) in a .tar.gz, the layout of fracco/brat_raw.tar.gz."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tarfile.open(path, "w:gz") as tar:
        for doc, ann in docs.items():
            members = {f"brat_raw/{doc}.txt": "Carcinome du poumon. Adénopathie sus-claviculaire. Métastase osseuse."}
            if ann is not None:
                members[f"brat_raw/{doc}.ann"] = ann
            for name, text in members.items():
                data = text.encode()
                info = tarfile.TarInfo(name)
                info.size = len(data)
                tar.addfile(info, io.BytesIO(data))
    return path


def _expression_ann(codes: list[str]) -> str:
    """Each code on an expression_CIM mention, plus a morphologie mention whose note must be ignored."""
    lines = ["T1\tmorphologie 0 9\tCarcinome", "#1\tICD-O T1\t8010/3"]
    for i, code in enumerate(codes, start=2):
        lines += [f"T{i}\texpression_CIM 0 19\tCarcinome du poumon", f"#{i}\tICD-O T{i}\t{code}"]
    lines.append("T99\texpression_CIM 21 32\tAdénopathie")  # an expression without a note: no label
    return "\n".join(lines) + "\n"


def _spec(top_k: int):
    raw = get_spec("fracco-30").to_dict()
    raw["sources"][0]["options"]["top_k"] = top_k
    for key in ("origin", "base_dir"):
        raw.pop(key)
    return spec_from_dict(raw, "fracco-test.json")


def test_synthetic_corpus_builds_the_harness_labels_and_split(tmp_path):
    docs: dict[str, str | None] = {}
    for i in range(23):  # 'C34.9 8046/3' in every document; one code of its own (frequency 1) in each
        codes = ["C34.9 8046/3", f"C{i:02d}.9 8000/1"]
        if i % 2 == 0:
            codes.append("C77.1 8000/6;C77.2 8000/6")  # a multi-site note: one label, not split at ';'
        if i in (3, 17):
            codes.append("C71.0 8000/1")  # frequency 2
        docs[f"cc_onco{i}"] = _expression_ann(codes)
    docs["cc_onco50"] = _expression_ann(["9999/9"])  # only a rare code: dropped once top_k leaves it out
    docs["cc_onco60"] = None  # no .ann: skipped (cc_onco853 in the real corpus)
    _archive(tmp_path / "fracco" / "brat_raw.tar.gz", docs)
    doc_codes = {d: _notes(a) for d, a in docs.items() if a is not None}

    task = load_task(_spec(top_k=5), tmp_path)
    _check_against_harness(task, doc_codes, 5)
    # frequencies: 23, 12, 2, then 24 codes tied at 1: the two first seen in sorted ids, those of cc_onco0 and
    # cc_onco1 (a tie broken by name would take '9999/9' and 'C00.9 8000/1')
    assert task.labels == sorted(["C34.9 8046/3", "C77.1 8000/6;C77.2 8000/6", "C71.0 8000/1", "C00.9 8000/1", "C01.9 8000/1"])
    assert "8010/3" not in task.labels  # morphologie notes are not labels
    assert sum(len(s) for s in task.splits.values()) == 23  # cc_onco50 dropped, cc_onco60 skipped
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [19, 2, 2]  # 18.4 / 2.3 / 2.3: +1 to train


def test_split_sizes_use_largest_remainder():
    assert largest_remainder_counts(1295, [0.8, 0.1, 1 - 0.8 - 0.1]) == [1036, 130, 129]
    assert largest_remainder_counts(23, [0.8, 0.1, 0.1]) == [19, 2, 2]
    assert largest_remainder_counts(1288, [0.8, 0.1, 1 - 0.8 - 0.1]) == [1030, 129, 129]
    assert largest_remainder_counts(7, [0.5, 0.5, 0.0]) == [4, 3, 0]  # a zero fraction gets no remainder
    assert int(1295 * 0.8) + int(1295 * 0.1) == 1165  # the floor rule (FRASIMED) would give test 130 instead


def test_source_without_expression_notes_fails_naming_the_file(tmp_path, capsys):
    ann = "T1\tmorphologie 0 9\tCarcinome\n#1\tICD-O T1\t8010/3\nT2\texpression_CIM 0 19\tCarcinome du poumon\n"
    archive = _archive(tmp_path / "data" / "fracco" / "brat_raw.tar.gz", {"cc_onco1": ann, "cc_onco2": ann})
    with pytest.raises(DataError) as err:
        load_task(get_spec("fracco-30"), tmp_path / "data")
    assert str(err.value).startswith(
        f"{archive}: none of its 2 documents has a 'ICD-O' note on expression_CIM mentions")
    assert "brat_raw, not brat_processed" in str(err.value)
    results = tmp_path / "results"
    code = main(["eval", "--model", "all-MiniLM-L6-v2", "--tasks", "fracco-30", "--seeds", "42",
                 "--data-dir", str(tmp_path / "data"), "--results", str(results), "--device", "cpu", "--no-progress"])
    assert code != 0 and f"{archive}: none of its 2 documents" in capsys.readouterr().err
    assert not results.exists() or not any(p.is_file() for p in results.rglob("*"))


# --------------------------------------------------------------------------------------------- real data
def _real_doc_codes(shared_data: Path) -> dict[str, set[str]]:
    out = {}
    with tarfile.open(shared_data / "fracco" / "brat_raw.tar.gz") as tar:
        for member in tar:
            if member.name.endswith(".ann"):
                out[Path(member.name).stem] = _notes(tar.extractfile(member).read().decode("utf-8"))
    return out


@pytest.mark.parametrize("top_k", [30, 100])
def test_real_fracco_equals_the_harness_algorithm(shared_data, top_k):
    doc_codes = _real_doc_codes(shared_data)
    # the harness sorts names with their suffix ('cc_onco1.ann'); for these ids that is the same order
    assert sorted(doc_codes) == [name[:-4] for name in sorted(f"{d}.ann" for d in doc_codes)]
    task = load_task(get_spec(f"fracco-{top_k}"), shared_data)
    _check_against_harness(task, doc_codes, top_k)
    sizes = {30: [1030, 129, 129], 100: [1036, 130, 129]}[top_k]  # 1,300 annotated documents; 12 / 5 dropped
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == sizes
    assert len(doc_codes) == 1300 and len({c for cs in doc_codes.values() for c in cs}) == 2418
    assert task.data_version == "onco-camembert-brat_raw-expressions"
    assert "C77.9 8000/1" in task.labels and "8000/1" in task.labels


def test_real_fracco_100_ties_follow_the_harness_order(shared_data):
    """Five expressions share the 100th place (20 documents each); the harness's stable sort keeps the two
    first seen in sorted document order, not the two first by name."""
    labels = set(load_task(get_spec("fracco-100"), shared_data).labels)
    assert {"C34.9 8046/3", "C71.6 8000/1"} <= labels
    assert not {"8170/3", "C20.9 8000/1", "C64.9 8000/3"} & labels
    assert sum(";" in lab for lab in labels) == 6  # multi-site notes that made the top 100, kept whole
