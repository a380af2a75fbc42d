"""The contamination check: exactly the planted test sentences are found, whatever their case, punctuation
spacing or line breaks; n-grams across batch and document boundaries are handled; a `biobench pretrain`
checkpoint's recorded corpus is checked by `eval --check-contamination` and stored in the run's record."""

from __future__ import annotations

import gzip
import json
import random
import shutil
from pathlib import Path

import biobench
import pytest
from biobench.analysis import contamination as C
from biobench.cli import main

VOCAB = [f"mot{i}" for i in range(400)] + ["patient", "âgé", "douleur", "thoracique", "fièvre", "toux"]


def _sentence(rng: random.Random) -> str:
    return " ".join(rng.choice(VOCAB) for _ in range(rng.randint(15, 25))) + "."


def _task(folder: Path, n_test: int = 50) -> tuple[Path, list[str]]:
    """A generated classification task (TSV) with `n_test` distinct test sentences; returns its spec file."""
    rng = random.Random(7)
    folder.mkdir(parents=True, exist_ok=True)
    test = [_sentence(rng) for _ in range(n_test)]
    for split, texts in (("train", [_sentence(rng) for _ in range(20)]), ("dev", [_sentence(rng) for _ in range(10)]),
                         ("test", test)):
        lines = ["id\ttext\tlabel"] + [f"{split}{i}\t{t}\t{'ab'[i % 2]}" for i, t in enumerate(texts)]
        (folder / f"{split}.tsv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    spec = {"id": "gen-contam", "lang": "fr", "kind": "classification", "max_length": 64, "protocol": "fr",
            "labels": ["a", "b"], "sources": [{"type": "local", "format": "tsv",
                                               "splits": {"train": "train.tsv", "dev": "dev.tsv", "test": "test.tsv"}}]}
    (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
    return folder / "spec.json", test


def _disguise(sentence: str, how: int) -> str:
    """The same words as the corpus would hold them: upper case, punctuation spaced, broken across lines."""
    words = sentence.rstrip(".").split()
    if how == 0:
        return " ".join(words).upper() + " !"
    if how == 1:
        return " ,\n".join(" ".join(words[i:i + 4]) for i in range(0, len(words), 4)) + " ."
    return "\n\n".join([" ".join(words[:7]), " ".join(words[7:])]).replace(" ", "  ")  # a paragraph break inside


def _corpus(folder: Path, planted: list[str]) -> Path:
    rng = random.Random(11)
    folder.mkdir(parents=True, exist_ok=True)
    docs = [" ".join(rng.choice(VOCAB) for _ in range(300)) for _ in range(40)]
    for how, sentence in enumerate(planted):
        docs[5 + 10 * how] += " Cas clinique : " + _disguise(sentence, how) + " Fin du cas."
    with gzip.open(folder / "part-0.jsonl.gz", "wt", encoding="utf-8") as handle:
        for doc in docs:
            handle.write(json.dumps({"text": doc}, ensure_ascii=False) + "\n")
    return folder


def test_normalisation_ignores_case_punctuation_spacing_and_line_breaks():
    assert C.words("Patient ÂGÉ ,de\n45 ans.") == C.words("patient âgé, de 45\r\nans") == ["patient", "âgé", "de", "45", "ans"]
    assert C.words("ﬁèvre") == ["fièvre"]  # NFKC: the ligature is two letters on both sides


def test_a_corpus_holding_3_of_50_test_sentences_reports_exactly_those_3(tmp_path):
    spec, test = _task(tmp_path / "task")
    planted = [test[3], test[17], test[41]]
    corpus = _corpus(tmp_path / "corpus", planted)
    report = biobench.contamination(corpus, tasks=["gen-contam"], task_files=[spec])
    found = report["tasks"]["gen-contam"]
    assert found["test"]["contaminated"] == 3 and found["test"]["examples"] == 50
    assert found["test"]["ids"] == ["test3", "test17", "test41"] and found["test"]["share"] == pytest.approx(0.06)
    assert found["train"]["contaminated"] == found["dev"]["contaminated"] == 0
    # the longest shared run is a whole planted sentence; the paragraph break splits the third into two documents'
    # worth of text only if the reader splits it: a JSONL document keeps it whole
    assert found["test"]["longest"] == max(len(C.words(s)) for s in planted)
    assert report["corpus"]["documents"] == 40 and report["corpus"]["sources"] == [f"{tmp_path.name}/corpus"]


def test_runs_across_batches_and_not_across_documents():
    side = C.task_side({("t", "test"): [("a", " ".join(f"w{i}" for i in range(30)))]}, n=5)
    long_doc = " ".join(["x"] * 17 + [f"w{i}" for i in range(30)] + ["y"] * 9)
    C.scan_corpus(side, [long_doc], batch_words=12)  # pieces of 12 words sharing 4: the sentence spans five
    assert side.splits[("t", "test")].to_dict()["longest"] == 30
    side = C.task_side({("t", "test"): [("a", " ".join(f"w{i}" for i in range(30)))]}, n=5)
    C.scan_corpus(side, ["w0 w1 w2", "w3 w4 w5"], batch_words=100)  # an n-gram never spans two documents
    assert side.splits[("t", "test")].to_dict()["contaminated"] == 0


def test_the_command_prints_the_table_and_json(tmp_path, capsys):
    spec, test = _task(tmp_path / "task")
    corpus = _corpus(tmp_path / "corpus", [test[0]])
    assert main(["contamination", "--corpus", str(corpus), "--tasks", "gen-contam", "--task-file", str(spec),
                 "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["tasks"]["gen-contam"]["test"]["ids"] == ["test0"] and str(tmp_path) not in json.dumps(report)
    assert main(["contamination", "--corpus", str(corpus), "--tasks", "gen-contam", "--task-file", str(spec),
                 "--n", "0"]) == 2
    assert "--n 0: give a positive n-gram length" in capsys.readouterr().err


def test_eval_check_contamination_stores_the_check_in_each_record(tmp_path, tiny_mlm_dir, capsys):
    from biobench.training.corpus import corpus_record

    spec, test = _task(tmp_path / "task", n_test=8)
    corpus = _corpus(tmp_path / "corpus", [test[2]])
    model = tmp_path / "checkpoint"
    shutil.copytree(tiny_mlm_dir, model)
    (model / "biobench_pretrain.json").write_text(json.dumps(
        {"recipe": "detour", "phase": "final", "base_model": "preset:tiny", "tokens": {"seen": 1000},
         "corpus": str(corpus), "corpus_record": corpus_record(str(corpus))}))
    assert main(["eval", "--model", str(model), "--tasks", "gen-contam", "--task-file", str(spec), "--seeds", "42",
                 "--epochs", "1", "--limit-train", "8", "--results", str(tmp_path / "results"),
                 "--check-contamination", "--no-progress", "--device", "cpu"]) == 0
    assert "contamination gen-contam: 1/8 test examples share a 13-gram" in capsys.readouterr().err
    results = biobench.load_results(tmp_path / "results")
    record = results.records[0]
    assert record.details["contamination"]["splits"]["test"]["contaminated"] == 1
    assert record.details["contamination"]["corpus"] == ["corpus/part-0.jsonl.gz"]  # the recorded file, no server path
    assert results.summary(mdd=False)["contamination"].tolist() == [pytest.approx(1 / 8)]
    # the model's metadata: base model and training data (the corpus files by name) from its lineage
    assert record.model["metadata"] == {"license": None, "base_model": "preset:tiny",
                                        "training_data": ["part-0.jsonl.gz"], "open_weights": None}


def test_model_card_metadata_is_read_from_its_yaml_header(tmp_path):
    from biobench.models import card_metadata

    card = tmp_path / "README.md"
    card.write_text("---\nlicense: apache-2.0\nbase_model: almanach/moderncamembert-base\ndatasets:\n- rntc/e3c\n---\n# x\n")
    assert card_metadata(card, None) == {"license": "apache-2.0", "base_model": "almanach/moderncamembert-base",
                                         "training_data": ["rntc/e3c"], "open_weights": None}
    card.write_text("---\nlicense: [unclosed\n---\n")
    assert card_metadata(card, {"base_model": "/srv/models/base"})["base_model"] == "base"  # never a server path


def test_check_contamination_refuses_a_model_without_a_recorded_corpus(tmp_path, tiny_mlm_dir):
    spec, _ = _task(tmp_path / "task", n_test=4)
    with pytest.raises(biobench.ConfigError, match="needs a `biobench pretrain` checkpoint"):
        biobench.evaluate(str(tiny_mlm_dir), tasks=["gen-contam"], task_files=[spec], results=tmp_path / "r",
                          seeds=[42], check_contamination=True)
