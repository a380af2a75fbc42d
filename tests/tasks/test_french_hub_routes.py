"""Every French task the hub can serve, against a loopback hub with rows shaped like the authors' files
(tests/fake_hub.py): DiaMED (DrBenchmark/DiaMED's parquet conversion), the FRASIMED document copies
(rntc/tabib-frasimed-{cantemist,distemist}-doc) and MedDialog-FR (rntc/tabib-meddialog-fr), through the `hub`
source that `eval` loads and through `biobench data fetch`; and MedDialog-FR's second route, `biobench data add`
with the original release's two files, which must give the same samples as the hub copy of the same content."""

from __future__ import annotations

import ast
import csv
import io
import zipfile

import pytest
from biobench.cli import main
from biobench.errors import DataError
from biobench.tasks.fetch import add_task, task_status
from biobench.tasks.loading import load_task
from biobench.tasks.registry import get_spec

from tests.fake_hub import Repo, parquet_bytes, serving_hub

# ---------------------------------------------------------------------------------------------- MedDialog-FR
CUIS = [f"C00{n:05d}" for n in range(1, 23)]  # 22 CUIs, as the release's 22-label annotation


def release_files() -> tuple[str, str]:
    """The release's two tab-separated files (multilabel annotation, post-edited texts) for 12 questions:
    every shape the harness meets: an answer or none, no label ([] : dropped), a question without text
    (dropped), the three release split names, double quotes in a literal."""
    labels = io.StringIO()
    writer = csv.writer(labels, delimiter="\t", lineterminator="\n")
    writer.writerow(["id", "split", "labels"])
    texts = io.StringIO()
    text_writer = csv.writer(texts, delimiter="\t", lineterminator="\n")
    text_writer.writerow(["id", "post-edited", "machine_translation"])
    for n in range(12):
        q_id = f"hm3_{67500 + n}_q"
        split = ("train", "train", "train", "train", "train", "train", "dev", "dev", "dev", "test", "test", "test")[n]
        chosen = [CUIS[(n * 3 + k) % 22] for k in range(1 + n % 3)]
        literal = str(chosen) if n != 4 else "[" + ", ".join(f'"{c}"' for c in chosen) + "]"
        writer.writerow([q_id, split, "[]" if n == 5 else literal])
        if n != 7:  # hm3_67507_q has a label but no text: dropped
            text_writer.writerow([q_id, f"Bonjour docteur, question {n} sur ma grossesse ?", f"MT question {n}"])
        if n % 2 == 0:
            text_writer.writerow([f"hm3_{67500 + n}_a", f"Bonjour, réponse {n}.\nConsultez.", f"MT answer {n}"])
    return labels.getvalue(), texts.getvalue()


def harness_rows(labels_tsv: str, texts_tsv: str) -> dict[str, list[dict]]:
    """What tabib's MedDialogWomenAdapter.load_splits builds from the release (written out from
    src/tabib/data/meddialog.py; our own files, so ast.literal_eval is safe here): the hub copy's rows."""
    text_data = {row["id"]: row.get("post-edited", row.get("machine_translation", "")).strip()
                 for row in csv.DictReader(io.StringIO(texts_tsv), delimiter="\t")}
    splits: dict[str, list[dict]] = {"train": [], "val": [], "test": []}
    for row in csv.DictReader(io.StringIO(labels_tsv), delimiter="\t"):
        labels = ast.literal_eval(row["labels"])
        if not labels:
            continue
        q_id = row["id"]
        base = q_id[:-2] if q_id.endswith("_q") else q_id
        q_text, a_text = text_data.get(q_id, ""), text_data.get(f"{base}_a", "")
        if not q_text:
            continue
        text = f"Question: {q_text}\n\nRéponse: {a_text}" if a_text else f"Question: {q_text}"
        splits["val" if row["split"] == "dev" else row["split"]].append({"text": text, "labels_raw": labels})
    return splits


def meddialog_hub_files(labels_tsv: str, texts_tsv: str) -> dict[str, bytes]:
    rows = harness_rows(labels_tsv, texts_tsv)
    return {f"data/{split}-00000-of-00001.parquet": parquet_bytes({"text": [r["text"] for r in split_rows],
                                                                   "labels_raw": [r["labels_raw"] for r in split_rows]})
            for split, split_rows in rows.items()}


def _samples(task) -> dict[str, list[tuple]]:
    return {s: [(ex.id, ex.text, ex.labels) for ex in task.splits[s]] for s in ("train", "dev", "test")}


def test_meddialog_release_files_give_the_harness_samples(tmp_path):
    labels_tsv, texts_tsv = release_files()
    (tmp_path / "dataset_multilabel_meddialog_22labels.csv").write_text(labels_tsv, encoding="utf-8")
    (tmp_path / "meddialog-fr-women_post-editing.csv").write_text(texts_tsv, encoding="utf-8")
    logs: list[str] = []
    add_task(get_spec("meddialog-fr"), tmp_path / "data", [tmp_path / "dataset_multilabel_meddialog_22labels.csv",
                                                            tmp_path / "meddialog-fr-women_post-editing.csv"], log=logs.append)
    assert any("dropped 1 labelled row(s) with no label" in line for line in logs)
    assert any("dropped 1 labelled row(s) with no question text" in line for line in logs)
    task = load_task(get_spec("meddialog-fr"), tmp_path / "data")
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [5, 2, 3]  # 6/3/3 minus the two dropped
    expected = harness_rows(labels_tsv, texts_tsv)
    assert [(ex.text, list(ex.labels)) for ex in task.splits["dev"]] == [(r["text"], r["labels_raw"]) for r in expected["val"]]
    first = task.splits["train"][0]
    assert first.text == ("Question: Bonjour docteur, question 0 sur ma grossesse ?\n\nRéponse: Bonjour, réponse 0.\n"
                          "Consultez.") and first.labels == ("C0000001",)
    assert task.splits["train"][1].text == "Question: Bonjour docteur, question 1 sur ma grossesse ?"  # no answer
    assert task.labels == sorted({c for rows in expected.values() for r in rows for c in r["labels_raw"]})
    assert task.data_version == "tabib-meddialog-fr"


def test_meddialog_fetch_add_and_hub_give_the_same_samples(monkeypatch, tmp_path, capsys):
    """The same content three ways: the release's files through `data add` (zipped as released), the authors'
    hub copy through `data fetch`, and the hub copy read by the `hub` source (no local files)."""
    labels_tsv, texts_tsv = release_files()
    release = tmp_path / "MedDialog-FR-women.zip"
    with zipfile.ZipFile(release, "w") as zf:
        zf.writestr("MedDialog-FR-women/multilabel_annotation/dataset_multilabel_meddialog_22labels.csv", labels_tsv)
        zf.writestr("MedDialog-FR-women/post-editing/meddialog-fr-women_post-editing.csv", texts_tsv)
    assert main(["data", "add", "meddialog-fr", str(release), "--data-dir", str(tmp_path / "added")]) == 0
    with serving_hub(monkeypatch, tmp_path) as hub:
        hub.datasets[("rntc/tabib-meddialog-fr", "main")] = Repo(meddialog_hub_files(labels_tsv, texts_tsv))
        spec = get_spec("meddialog-fr")
        assert task_status(spec, tmp_path / "fetched").state == "hub"
        assert main(["data", "fetch", "meddialog-fr", "--data-dir", str(tmp_path / "fetched")]) == 0
        fetched = load_task(spec, tmp_path / "fetched")
        from_hub = load_task(spec, tmp_path / "empty")
        assert any(r.startswith("GET /api/datasets/rntc/tabib-meddialog-fr") for r in hub.requests)
    added = load_task(spec, tmp_path / "added")
    assert sorted(p.name for p in (tmp_path / "fetched/meddialog-fr/data").iterdir()) == \
        sorted(p.name for p in (tmp_path / "added/meddialog-fr/data").iterdir())
    assert _samples(added) == _samples(fetched) == _samples(from_hub)
    assert added.checksum == fetched.checksum == from_hub.checksum and added.labels == from_hub.labels
    assert fetched.source.endswith("meddialog-fr/data") and from_hub.source == "hub:rntc/tabib-meddialog-fr"
    out = capsys.readouterr().out
    assert "meddialog-fr: done" in out


@pytest.mark.parametrize(("literal", "reason"), [
    ("__import__('os').system('touch /tmp/pwned')", "is not a flat list of quoted labels"),
    ("[['C0000001']]", "is not a flat list of quoted labels"),
    ("[" * 50_000 + "]" * 50_000, "a label list of 100,000 characters, over the 4,096 allowed"),
    ("['C0000001', 'C\\x41']", "is not a flat list of quoted labels"),
    ("{'C0000001': 1}", "is not a flat list of quoted labels"),
    (str([f"C{n:07d}" for n in range(65)]), "65 labels, over the 64 allowed"),
])
def test_a_hostile_label_literal_is_one_line_naming_file_and_line(tmp_path, capsys, literal, reason):
    labels_tsv, texts_tsv = release_files()
    lines = labels_tsv.splitlines()
    q_id, split, _ = lines[3].split("\t")
    lines[3] = "\t".join([q_id, split, literal])
    (tmp_path / "dataset_multilabel_meddialog_22labels.csv").write_text("\n".join(lines) + "\n", encoding="utf-8")
    (tmp_path / "meddialog-fr-women_post-editing.csv").write_text(texts_tsv, encoding="utf-8")
    files = [str(tmp_path / "dataset_multilabel_meddialog_22labels.csv"), str(tmp_path / "meddialog-fr-women_post-editing.csv")]
    assert main(["data", "add", "meddialog-fr", *files, "--data-dir", str(tmp_path / "data")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err[0].startswith("error: ") and "dataset_multilabel_meddialog_22labels.csv:4: labels: " in err[0]
    assert reason in err[0] and len(err[0]) < 400
    assert err[1:] == ["nothing was installed; give the files as released"]
    assert not (tmp_path / "data" / "meddialog-fr").exists()
    assert not (tmp_path / "pwned").exists()


def test_every_bad_row_is_its_own_line(tmp_path):
    from biobench.tasks.readers.meddialog import release_splits

    labels_tsv, texts_tsv = release_files()
    lines = labels_tsv.splitlines()
    lines[2] = lines[2].replace("\ttrain\t", "\tvalidation-set\t")
    lines[5] = lines[5].split("\t")[0] + "\ttrain\t[C0000001]"
    with pytest.raises(DataError) as err:
        release_splits("\n".join(lines).encode(), texts_tsv.encode(), "labels.csv", "texts.csv")
    assert str(err.value).splitlines() == [
        "labels.csv:3: split 'validation-set' is not train, dev or test",
        "labels.csv:6: labels: '[C0000001]' is not a flat list of quoted labels like ['C0011847', 'C0020538'] "
        "(at most 64 characters each, no escapes, no nesting)",
        "nothing was installed; give the files as released"]


def test_meddialog_status_offers_fetch_and_add(tmp_path, capsys):
    assert main(["data", "status", "--data-dir", str(tmp_path)]) == 0
    out = [line for line in capsys.readouterr().out.splitlines()]
    row = out.index(next(line for line in out if line.startswith("meddialog-fr ")))
    assert "biobench data fetch meddialog-fr" in out[row + 1] and "biobench data add meddialog-fr FILE..." in out[row + 1]
    assert "dataset_multilabel_meddialog_22labels.csv" in out[row + 1]


def test_meddialog_add_names_the_missing_release_file(tmp_path):
    labels_tsv, _ = release_files()
    only = tmp_path / "dataset_multilabel_meddialog_22labels.csv"
    only.write_text(labels_tsv, encoding="utf-8")
    with pytest.raises(DataError, match=r"does not hold meddialog-fr-women_post-editing.csv \(found: "
                                        r"dataset_multilabel_meddialog_22labels.csv\)"):
        add_task(get_spec("meddialog-fr"), tmp_path / "data", [only], log=lambda _: None)


# ---------------------------------------------------------------------------------------------- DiaMED, FRASIMED
def diamed_parquet(split: str) -> bytes:
    """A split of DrBenchmark/DiaMED's parquet conversion: the DrBenchmark loader's features (data_loaders_hf/
    DiaMED.py), `icd-10` a ClassLabel of the 22 chapter names, figures empty."""
    from datasets import ClassLabel, Features, Image, Sequence, Value

    chapters = ["A00-B99  Certain infectious and parasitic diseases", "C00-D49  Neoplasms",
                *[f"X{n:02d}  chapter {n}" for n in range(2, 22)]]
    strings = ("title", "topic", "collected_at", "published_at", "source_url", "source_name", "license")
    features = Features({"identifier": Value("string"), "clinical_case": Value("string"),
                         **{k: Value("string") for k in strings},
                         **{k: Sequence(Value("string")) for k in ("keywords", "domains", "figures_urls", "figures_paths")},
                         "figures": Sequence(Image()), "icd-10": ClassLabel(names=chapters)})
    n = {"train": 4, "validation": 2, "test": 2}[split]
    rows = {"identifier": [f"{split}-{i}" for i in range(n)],
            "clinical_case": [f"Cas clinique {split} {i} : masse mammaire." for i in range(n)],
            **{k: [""] * n for k in strings}, **{k: [[]] * n for k in ("keywords", "domains", "figures_urls", "figures_paths")},
            "figures": [[]] * n, "icd-10": [i % 2 for i in range(n)]}
    return parquet_bytes(rows, features)


def frasimed_files(prefix: str) -> dict[str, bytes]:
    """rntc/tabib-frasimed-*-doc as tabib's FRASIMEDDocumentMultilabelAdapter uploads it: splits train/val/test,
    columns text, codes (a list), doc_name."""
    return {f"data/{split}-00000-of-00001.parquet": parquet_bytes({
        "text": [f"Cas {split} {i}. Carcinome." for i in range(n)],
        "codes": [[f"{prefix}{i % 3}", f"{prefix}9"] for i in range(n)],
        "doc_name": [f"cc_onco{split}{i}" for i in range(n)]})
        for split, n in (("train", 4), ("val", 2), ("test", 2))}


def test_diamed_cantemist_distemist_load_from_the_hub_as_published(monkeypatch, tmp_path):
    with serving_hub(monkeypatch, tmp_path) as hub:
        hub.datasets[("DrBenchmark/DiaMED", "refs/convert/parquet")] = Repo({
            f"default/{split}/0000.parquet": diamed_parquet(split) for split in ("train", "validation", "test")})
        hub.datasets[("rntc/tabib-frasimed-cantemist-doc", "main")] = Repo(frasimed_files("8000/"))
        hub.datasets[("rntc/tabib-frasimed-distemist-doc", "main")] = Repo(frasimed_files("1000"))
        for task_id in ("diamed", "cantemist", "distemist"):
            assert task_status(get_spec(task_id), tmp_path / "empty").state == "hub"
        diamed = load_task(get_spec("diamed"), tmp_path / "empty")
        cantemist = load_task(get_spec("cantemist"), tmp_path / "empty")
        distemist = load_task(get_spec("distemist"), tmp_path / "empty")
    assert diamed.source == "hub:DrBenchmark/DiaMED@refs/convert/parquet"
    assert [len(diamed.splits[s]) for s in ("train", "dev", "test")] == [4, 2, 2]
    ex = diamed.splits["dev"][1]
    assert (ex.id, ex.text, ex.label) == ("validation-1", "Cas clinique validation 1 : masse mammaire.", "C00-D49  Neoplasms")
    assert diamed.labels == ["A00-B99  Certain infectious and parasitic diseases", "C00-D49  Neoplasms"]
    assert cantemist.source == "hub:rntc/tabib-frasimed-cantemist-doc" and cantemist.data_version == "tabib-hub"
    assert [(e.id, e.labels) for e in cantemist.splits["dev"]] == [("cc_oncoval0", ("8000/0", "8000/9")),
                                                                  ("cc_oncoval1", ("8000/1", "8000/9"))]
    assert distemist.labels == ["10000", "10001", "10002", "10009"]


def test_diamed_and_frasimed_fetch_say_where_the_hub_copy_is_read(tmp_path, capsys):
    """`data fetch` of a task whose hub copy `eval` reads: DiaMED's is gated (never downloaded), FRASIMED's is
    fetched from Zenodo; both say what to run, and a hub status row names the hub dataset."""
    assert main(["data", "fetch", "diamed", "--data-dir", str(tmp_path)]) == 2
    assert "never downloads" in capsys.readouterr().err
    assert main(["data", "status", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    # offline (the tests' default) the row says the hub copy is not reachable; either way it names the copy
    assert "hub:DrBenchmark/DiaMED@refs/convert/parquet is not reachable offline" in out
    assert "hub:rntc/tabib-frasimed-cantemist-doc" in out and "hub:rntc/tabib-meddialog-fr" in out


def test_a_cell_over_the_csv_limit_names_its_line():
    from biobench.tasks.readers.meddialog import release_splits

    labels_tsv, texts_tsv = release_files()
    lines = labels_tsv.splitlines()
    lines[3] = lines[3].split("\t")[0] + "\ttrain\t" + "[" * 200_000
    with pytest.raises(DataError, match=r"^labels.csv:4: not a tab-separated row \(field larger than field limit"):
        release_splits("\n".join(lines).encode(), texts_tsv.encode(), "labels.csv", "texts.csv")


def test_eval_runs_meddialog_from_the_hub_copy(monkeypatch, tmp_path, tiny_mlm_dir, capsys):
    """`biobench eval` with no local MedDialog-FR data trains on the hub copy (its `hub` source) and records it."""
    import json

    labels_tsv, texts_tsv = release_files()
    with serving_hub(monkeypatch, tmp_path) as hub:
        hub.datasets[("rntc/tabib-meddialog-fr", "main")] = Repo(meddialog_hub_files(labels_tsv, texts_tsv))
        args = ["eval", "--model", str(tiny_mlm_dir), "--tasks", "meddialog-fr", "--seeds", "42", "--epochs", "1",
                "--max-length", "32", "--data-dir", str(tmp_path / "empty"), "--results", str(tmp_path / "results"),
                "--no-progress", "--json"]
        assert main(args) == 0
    summary = json.loads(capsys.readouterr().out)
    assert [r["status"] for r in summary["runs"]] == ["done"]
    from biobench.store import read_result

    result = read_result(summary["runs"][0]["path"])
    assert result.task["source"] == "hub:rntc/tabib-meddialog-fr" and result.task["data_version"] == "tabib-meddialog-fr"


def test_status_offline_says_a_hub_only_task_is_not_reachable_and_how_to_provide_it(monkeypatch, tmp_path, capsys):
    """Under HF_HUB_OFFLINE=1 a hub-only task (diamed, no local files) is not "hub" (which reads as available)
    unless the datasets cache holds it: the row says it cannot be reached and names prefetch and data add."""
    import datasets

    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setattr(datasets.config, "HF_DATASETS_CACHE", tmp_path / "hf-datasets")
    assert main(["data", "status", "--data-dir", str(tmp_path / "empty")]) == 0
    out = capsys.readouterr().out.splitlines()
    row = out.index(next(line for line in out if line.startswith("diamed ")))
    assert out[row].split()[1:3] == ["hub,", "offline"]
    assert "hub:DrBenchmark/DiaMED@refs/convert/parquet is not reachable offline (HF_HUB_OFFLINE=1" in out[row]
    assert out[row + 1].split(None, 1)[1].startswith("biobench data add diamed FILE...")
    assert "; or biobench prefetch --tasks diamed where the hub is reachable" in out[row + 1]
    (tmp_path / "hf-datasets" / "DrBenchmark___DiaMED" / "default").mkdir(parents=True)  # what prefetch leaves
    status = task_status(get_spec("diamed"), tmp_path / "empty")
    assert status.state == "hub" and "in the datasets cache (read offline)" in status.detail and not status.fix
