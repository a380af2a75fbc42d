"""The task versions the paper used (issue 10 §3): typed JNLPBA from standoff, BLUE ChemProt, the English
protocol's phenotyping and deid readers and splits, the extra metric, and the model aliases."""

from __future__ import annotations

import gzip
import re
import tarfile
from collections import Counter

import pytest
from biobench.aliases import ALIASES
from biobench.errors import DataError
from biobench.metrics import extra_metrics, micro_f1_excluding
from biobench.models import resolve_model
from biobench.tasks.loading import load_task, random_split
from biobench.tasks.readers.clinical import deid_rows, mask_category
from biobench.tasks.registry import PAPER_TASKS, get_spec, spec_from_dict


# ---------------------------------------------------------------------------------------------- JNLPBA typed
def _dev_ids(path) -> set[str]:
    with gzip.open(path, "rt", encoding="utf-8") as fh:
        return {line.split()[1] for line in fh if line.startswith("-DOCSTART-")}


@pytest.mark.slow  # reads JNLPBA's three splits and GENIA's: ~12 s
def test_typed_jnlpba_uses_genia_tokens_in_every_split(shared_data):
    """One tokenisation: train is BLURB's GENIA-tokenised train typed from the standoff; dev/test are MTL's
    typed IOB. Mentions per type in train = those of the standoff .ann files of every abstract except the 200
    dev ids; tokens per split as the files hold them."""
    dev_ids = _dev_ids(shared_data / "jnlpba/blurb/dev.tsv.gz")
    assert len(dev_ids) == 200
    expected: Counter = Counter()
    docs = 0
    with tarfile.open(shared_data / "jnlpba/standoff/train.tar.gz") as tar:
        for member in tar:
            name = member.name.rsplit("/", 1)[-1]
            if member.isfile() and name.endswith(".ann") and name[:-4] not in dev_ids:
                docs += 1
                for line in tar.extractfile(member).read().decode().splitlines():
                    if line.startswith("T"):
                        expected[line.split("\t")[1].split()[0]] += 1
    task = load_task(get_spec("jnlpba"), shared_data)
    got = Counter(e.label for ex in task.splits["train"] for e in ex.entities)
    assert docs == 1800 and got == expected
    assert got == {"protein": 27803, "DNA": 8481, "cell_type": 6192, "cell_line": 3430, "RNA": 844}
    assert task.labels == sorted(["protein", "DNA", "RNA", "cell_line", "cell_type"])
    assert task.data_version == "blurb-genia-train-typed-from-standoff+mtl-typed-dev-test"
    sizes = {s: (len(task.splits[s]), sum(len(ex.tokens) for ex in task.splits[s])) for s in ("train", "dev", "test")}
    assert sizes == {"train": (16807, 445090), "dev": (1739, 47461), "test": (3856, 101039)}  # jnlpba/SOURCE.md
    blurb_train = load_task(get_spec("jnlpba-blurb"), shared_data).splits["train"]
    assert [(ex.text, ex.tokens) for ex in blurb_train] == [(ex.text, ex.tokens) for ex in task.splits["train"]]
    assert [[(e.start, e.end) for e in ex.entities] for ex in blurb_train] == [
        [(e.start, e.end) for e in ex.entities] for ex in task.splits["train"]]


def test_standoff_types_must_describe_the_same_entities(tmp_path):
    from biobench.tasks.readers.brat import read_brat, type_from_standoff
    from biobench.tasks.readers.iob import read_iob_documents

    iob = tmp_path / "train.tsv"
    iob.write_text("-DOCSTART- 9001\n\nIL-2\tB\ngene\tI\nbinds\tO\nNF-kappa\tB\nB\tI\n\n"
                   "-DOCSTART- 9001\n\nT\tB\ncells\tI\n\n", encoding="utf-8")
    (tmp_path / "so").mkdir()
    (tmp_path / "so/9001.txt").write_text("IL-2 gene binds NF-kappa B.", encoding="utf-8")
    (tmp_path / "so/9001.ann").write_text("T1\tprotein 16 26\tNF-kappa B\nT2\tDNA 0 9\tIL-2 gene\n", encoding="utf-8")
    (tmp_path / "so/9001-2.txt").write_text("T cells", encoding="utf-8")
    (tmp_path / "so/9001-2.ann").write_text("T1\tcell_type 0 7\tT cells\n", encoding="utf-8")
    groups = read_iob_documents(iob, default_type="untyped", id_prefix="train")
    typed = type_from_standoff(groups, read_brat(tmp_path / "so"), str(iob))
    assert [[(ex.text[e.start:e.end], e.label) for e in ex.entities] for ex in typed] == [
        [("IL-2 gene", "DNA"), ("NF-kappa B", "protein")], [("T cells", "cell_type")]]
    (tmp_path / "so/9001-2.ann").write_text("T1\tcell_type 2 7\tcells\n", encoding="utf-8")
    with pytest.raises(DataError, match=re.escape(f"{iob}: document '9001-2': entity 'T cells' is matched with the "
                                                  "standoff mention 'cells'")):
        type_from_standoff(groups, read_brat.__wrapped__(tmp_path / "so"), str(iob))


# ---------------------------------------------------------------------------------------------- ChemProt BLUE
def test_chemprot_is_blue_six_class_and_chemprot_13_is_scibert():
    blue, sci = get_spec("chemprot"), get_spec("chemprot-13")
    assert blue.paper_task and not sci.paper_task and "chemprot" in PAPER_TASKS and "chemprot-13" not in PAPER_TASKS
    assert blue.labels == ("CPR:3", "CPR:4", "CPR:5", "CPR:6", "CPR:9", "false") and len(sci.labels) == 13
    assert [s.version for s in blue.sources] == ["blue", "blue-reconstructed"]
    assert blue.extra_metrics == ("blue_micro_f1",)
    for tid in ("jnlpba-blurb", "anatem-untyped"):
        assert not get_spec(tid).paper_task


def test_blue_micro_f1_excludes_false_as_sklearn_labels():
    from sklearn.metrics import f1_score

    gold = ["CPR:3", "false", "CPR:4", "false", "CPR:9", "CPR:4"]
    pred = ["CPR:3", "CPR:4", "false", "false", "CPR:9", "CPR:3"]
    cpr = ["CPR:3", "CPR:4", "CPR:9"]
    want = f1_score(gold, pred, labels=cpr, average="micro", zero_division=0)
    assert micro_f1_excluding(gold, pred, ("false",)) == pytest.approx(want) == 0.5  # 2 of 4 CPR predictions right, 2 of 4 CPR golds found
    assert extra_metrics(["blue_micro_f1"], gold, pred) == {"blue_micro_f1": pytest.approx(want)}
    with pytest.raises(ValueError, match="unknown extra metric"):
        extra_metrics(["bleu"], gold, pred)


# ---------------------------------------------------------------------------------------------- splits
def test_random_split_is_the_protocols_split():
    from datasets import Dataset
    from sklearn.model_selection import train_test_split

    pool = list(range(103))
    how = {"library": "datasets", "seed": 42, "holdout": 0.2, "second": 0.125, "mode": "test_then_dev"}
    parts = random_split(pool, how, "t")
    first = Dataset.from_dict({"x": pool}).train_test_split(test_size=0.2, seed=42)
    second = first["train"].train_test_split(test_size=0.125, seed=42)
    assert parts == {"train": second["train"]["x"], "dev": second["test"]["x"], "test": first["test"]["x"]}
    assert [len(parts[s]) for s in ("train", "dev", "test")] == [71, 11, 21]  # ~70/10/20 (ceil of 20% and of 12.5% of 82)
    how = {"library": "sklearn", "seed": 42, "holdout": 0.3, "second": 0.5, "mode": "halve_holdout"}
    parts = random_split(pool, how, "t")
    train, rest = train_test_split(pool, test_size=0.3, random_state=42)
    dev, test = train_test_split(rest, test_size=0.5, random_state=42)
    assert parts == {"train": train, "dev": dev, "test": test}
    with pytest.raises(DataError, match="mode"):
        random_split(pool, {"holdout": 0.2, "second": 0.1, "mode": "thirds"}, "t")


# ---------------------------------------------------------------------------------------------- phenotyping
def _phenotype_files(folder, n=30):
    cols = ["ROW_ID", "SUBJECT_ID", "ADVANCED.CANCER", "ADVANCED.HEART.DISEASE", "ADVANCED.LUNG.DISEASE",
            "ALCOHOL.ABUSE", "CHRONIC.NEUROLOGICAL.DYSTROPHIES", "CHRONIC.PAIN.FIBROMYALGIA", "DEMENTIA",
            "DEPRESSION", "DEVELOPMENTAL.DELAY.RETARDATION", "NON.ADHERENCE", "NONE", "OBESITY",
            "OTHER.SUBSTANCE.ABUSE", "SCHIZOPHRENIA.AND.OTHER.PSYCHIATRIC.DISORDERS", "UNSURE"]
    lines = [",".join(cols)]
    for i in range(n):
        flags = {c: 0 for c in cols[2:]}
        if i % 3 == 0:
            flags["NONE"] = 1
        else:
            flags["DEMENTIA"] = 1
            flags["OBESITY"] = i % 2
        if i == 1:
            flags["NONE"] = 1  # NONE plus a phenotype: dropped as the protocol does
        lines.append(",".join([str(1000 + i), "7"] + [str(flags[c]) for c in cols[2:]]))
    (folder / "ACTdb102003.csv").write_text("\n".join(lines) + "\n")
    notes = ["ROW_ID,SUBJECT_ID,TEXT"] + [f'{1000 + i},7,"Note {i}: pt seen, ""stable""."' for i in range(n + 5)]
    import gzip

    (folder / "NOTEEVENTS.csv.gz").write_bytes(gzip.compress(("\n".join(notes) + "\n").encode()))


def test_phenotyping_reader_on_synthetic_physionet_files(tmp_path):
    (tmp_path / "phenotyping").mkdir()
    _phenotype_files(tmp_path / "phenotyping")
    task = load_task(get_spec("phenotyping"), tmp_path)
    everything = [ex for s in ("train", "dev", "test") for ex in task.splits[s]]
    assert task.kind == "multilabel" and task.data_version.startswith("physionet-phenotype")
    assert len(everything) == 29 and "1001-1" not in {ex.id for ex in everything}
    by_id = {ex.id: ex for ex in everything}
    assert by_id["1000-0"].labels == () and by_id["1002-1"].labels == ("DEMENTIA",)
    assert by_id["1005-4"].labels == ("DEMENTIA", "OBESITY") and by_id["1005-4"].text == 'Note 5: pt seen, "stable".'
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [20, 3, 6]
    assert len(task.labels) == 14 and "NONE" not in task.labels


# ---------------------------------------------------------------------------------------------- deid
TEXT = ("START_OF_RECORD=1||||1||||\nPt John Smith seen 2/12 at\nCity Hospital, call 555-1234.\n||||END_OF_RECORD\n"
        "START_OF_RECORD=1||||2||||\nAge 91 today, no PHI else.\n||||END_OF_RECORD\n")
RES = ("START_OF_RECORD=1||||1||||\nPt [**Known patient firstname **] [**Known patient lastname **] seen [**2-12**] at\n"
       "[**Hospital 1**], call [**Telephone/Fax (1) 1**].\n||||END_OF_RECORD\n"
       "START_OF_RECORD=1||||2||||\nAge [**Age over 90 **] today, no PHI else.\n||||END_OF_RECORD\n")


def test_deid_reader_on_synthetic_physionet_files(tmp_path):
    (tmp_path / "id.text").write_text(TEXT)
    (tmp_path / "id.res").write_text(RES)
    rows = {r["id"]: r for _, r in deid_rows(tmp_path / "id.text", tmp_path / "id.res")}
    assert list(rows) == ["1-1", "1-2"]
    assert list(zip(rows["1-1"]["tokens"], rows["1-1"]["tags"], strict=True)) == [
        ("Pt", "O"), ("John", "B-name"), ("Smith", "B-name"), ("seen", "O"), ("2/12", "B-date"), ("at", "O"),
        ("City", "B-location"), ("Hospital", "I-location"), (",", "O"), ("call", "O"), ("555-1234", "B-phone_nb"),
        (".", "O")]
    assert rows["1-2"]["tags"][:2] == ["O", "B-age"]
    assert [mask_category(m) for m in ("[**2101-3-4**]", "[**2020-01-05**]", "[**Company 12**]", "[**Doctor**]")] == [
        None, "date", "other", None]
    (tmp_path / "bad.res").write_text(RES.replace("[**2-12**]", "[**Doctor 7**]"))
    with pytest.raises(DataError, match=r"bad\.res: record 1-1: mask '\[\*\*Doctor 7\*\*\]' maps to no PHI type"):
        deid_rows(tmp_path / "id.text", tmp_path / "bad.res")


def test_deid_task_splits_70_15_15(tmp_path):
    records_t, records_r = [], []
    for i in range(40):
        records_t.append(f"START_OF_RECORD={i}||||1||||\nSeen by Jane on 3/4, record {i}.\n||||END_OF_RECORD\n")
        records_r.append(f"START_OF_RECORD={i}||||1||||\nSeen by [**First Name 1**] on [**3-4**], record {i}.\n||||END_OF_RECORD\n")
    (tmp_path / "deid").mkdir()
    (tmp_path / "deid/id.text").write_text("".join(records_t))
    (tmp_path / "deid/id.res").write_text("".join(records_r))
    task = load_task(get_spec("deid"), tmp_path)
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [28, 6, 6]
    ex = task.splits["train"][0]
    assert [(ex.text[e.start:e.end], e.label) for e in ex.entities] == [("Jane", "name"), ("3/4", "date")]


# ---------------------------------------------------------------------------------------------- models
def test_aliases_cover_the_papers_models_and_never_guess_hub_ids():
    names = {a.name for a in ALIASES}
    assert {"CamemBERT", "BioBERT", "SciBERT", "ModernBERT-large", "ModernCamemBERT-bio-large",
            "ModernBERT-bio-large", "BioClinical-ModernBERT-large", "PubMedBERT", "DrBERT", "CamemBERT-bio"} <= names
    assert all(a.hub_id is None or re.fullmatch(r"[\w.-]+/[\w.-]+", a.hub_id) for a in ALIASES)
    assert resolve_model("ModernCamemBERT-bio-large").hub_id == "almanach/ModernCamemBERT-bio-large"
    assert resolve_model("modernbert-bio-large").hub_id == "almanach/ModernBERT-bio-large"
    assert resolve_model("SciBERT").hub_id == "allenai/scibert_scivocab_uncased"


def test_spec_field_extra_metrics_round_trips():
    spec = spec_from_dict({"id": "x", "lang": "en", "kind": "relation", "max_length": 8, "protocol": "en",
                           "extra_metrics": ["blue_micro_f1"], "sources": [{"type": "generated", "generator": "cls"}]}, "x")
    assert spec.extra_metrics == ("blue_micro_f1",) and spec.to_dict()["extra_metrics"] == ["blue_micro_f1"]


def test_leaderboard_reference_rows_use_the_paper_task_ids():
    """The paper's numbers belong to the paper's versions: chemprot (BLUE), typed jnlpba/anatem; the extra
    versions (chemprot-13, jnlpba-blurb, anatem-untyped) never receive a reference row."""
    from biobench.standings.scan import load_reference

    tasks = {task for row in load_reference() for task in row.scores}
    assert tasks == set(PAPER_TASKS)
    assert all(get_spec(t).paper_task for t in tasks)
    assert not tasks & {"chemprot-13", "jnlpba-blurb", "anatem-untyped", "cantemist-es"}


def test_phenotyping_data_add_takes_the_physionet_files_as_distributed(tmp_path):
    import zipfile

    from biobench.tasks.fetch import add_task, task_status

    raw = tmp_path / "raw"
    raw.mkdir()
    _phenotype_files(raw)
    archive = tmp_path / "phenotype-annotations-mimic-1.20.03.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.write(raw / "ACTdb102003.csv", "phenotype-annotations-mimic-1.20.03/ACTdb102003.csv")
    data = tmp_path / "data"
    assert task_status(get_spec("phenotyping"), data).fix.startswith(f"biobench data add phenotyping FILE... --data-dir {data}")
    with pytest.raises(DataError, match=r"does not hold NOTEEVENTS\.csv\.gz"):
        add_task(get_spec("phenotyping"), data, [archive])
    add_task(get_spec("phenotyping"), data, [archive, raw / "NOTEEVENTS.csv.gz"], log=lambda _: None)
    assert sorted(p.name for p in (data / "phenotyping").iterdir()) == ["ACTdb102003.csv", "NOTEEVENTS.csv.gz"]
    assert task_status(get_spec("phenotyping"), data).state == "found"
    assert sum(len(v) for v in load_task(get_spec("phenotyping"), data).splits.values()) == 29
