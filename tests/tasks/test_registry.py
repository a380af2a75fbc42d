"""Registry facts (19 tasks, Table-8 lengths, seeds), --task-file round trip, and `biobench tasks --json`."""

from __future__ import annotations

import argparse
import json
import os
import shutil
from pathlib import Path

import pytest
from biobench.cli import main
from biobench.errors import ConfigError, DataError
from biobench.tasks.loading import load_task, resolve_data_dir
from biobench.tasks.registry import (
    PAPER_TASKS,
    TaskCatalogue,
    add_task_arguments,
    get_spec,
    list_specs,
    read_spec_file,
)

FIX = Path(__file__).parents[1] / "fixtures" / "tasks"
TABLE8 = {"diamed": 2048, "meddialog-fr": 4096, "fracco-30": 4096, "fracco-100": 4096, "cantemist": 4096,
          "distemist": 4096, "quaero-emea": 1024, "quaero-medline": 1024, "chemprot": 512, "phenotyping": 8192,
          "cos": 512, "social-history": 512, "deid": 8192, "anatem": 512, "bc5cdr": 512, "jnlpba": 512,
          "ncbi-disease": 512, "gad": 512, "hoc": 512}


def test_nineteen_paper_tasks_with_table8_lengths():
    specs = list_specs()
    assert [s.id for s in specs] == list(PAPER_TASKS) and len(PAPER_TASKS) == 19
    assert {s.id: s.max_length for s in specs} == TABLE8
    assert len(list_specs("fr")) == 8 and len(list_specs("en")) == 11
    assert all(s.paper_task and s.metric == "macro_f1" for s in specs)
    from biobench.protocols import resolve_protocol, resolve_task_protocol, task_seeds

    # every paper task selects as its protocol's default head does (docs/PROTOCOL.md)
    assert all(resolve_task_protocol(s).dev_metric == resolve_protocol(s.protocol, s.kind, 512).dev_metric
               for s in specs)
    assert task_seeds(get_spec("quaero-emea")) == tuple(range(42, 51))
    assert task_seeds(get_spec("gad")) == (42, 43, 44, 45, 46)
    assert get_spec("deid").credentialed and get_spec("phenotyping").credentialed


def test_paper_task_list_agrees_in_its_three_places():
    """The paper's 19 tasks are written three times: PAPER_TASKS (the order), `"paper_task": true` in the spec
    files, and the task column of the paper's reference rows (bench/standings/reference/paper_results.csv).
    Adding or removing a paper task means changing all three; this test names what disagrees."""
    import csv
    from importlib import resources

    from biobench.tasks.registry import _builtin

    specs = _builtin()  # the spec files, each variant resolved through its `extends`
    flagged = {tid for tid, spec in specs.items() if spec.paper_task}
    with resources.files("biobench.standings").joinpath("reference", "paper_results.csv").open() as fh:
        rows = list(csv.DictReader(fh))
    in_reference = {row["task"] for row in rows}
    assert len(PAPER_TASKS) == len(set(PAPER_TASKS)) == 19
    assert flagged == set(PAPER_TASKS), f"spec files vs PAPER_TASKS: {sorted(flagged ^ set(PAPER_TASKS))}"
    assert in_reference == set(PAPER_TASKS), f"reference CSV vs PAPER_TASKS: {sorted(in_reference ^ set(PAPER_TASKS))}"
    assert all(row["lang"] == specs[row["task"]].lang for row in rows)  # same task, same language


def test_extras_are_not_paper_tasks():
    extra = {s.id for s in list_specs(include_extra=True)} - set(PAPER_TASKS)
    assert {"cantemist-es", "demo-cls", "demo-multilabel", "demo-ner"} <= extra
    assert all(not get_spec(t).paper_task for t in extra)
    assert get_spec("demo-ner").sources[0].type == "generated"


def test_add_task_arguments_and_data_dir(monkeypatch, tmp_path):
    parser = argparse.ArgumentParser()
    add_task_arguments(parser)
    args = parser.parse_args(["--task-file", "a.json", "--task-file", "b.toml"])
    assert args.task_file == ["a.json", "b.toml"] and args.data_dir is None
    monkeypatch.setenv("BIOBENCH_DATA", str(tmp_path))
    assert resolve_data_dir(None) == tmp_path
    assert resolve_data_dir("/x") == Path("/x")
    monkeypatch.delenv("BIOBENCH_DATA")
    assert resolve_data_dir(None) is None


def test_task_file_round_trip(tmp_path):
    spec = TaskCatalogue.build([FIX / "user" / "specialty.json"]).get("my-specialty")
    task = load_task(spec)
    assert {s: len(v) for s, v in task.splits.items()} == {"train": 3, "dev": 2, "test": 2}
    assert task.labels == ["cardiologie", "neurologie", "pneumologie"]
    # the same spec copied elsewhere with its data loads the same content (paths are relative to the file)
    shutil.copytree(FIX / "user", tmp_path / "u")
    again = load_task(read_spec_file(tmp_path / "u" / "specialty.json"))
    assert again.checksum == task.checksum
    ner = load_task(TaskCatalogue.build([FIX / "ner.toml"]).get("my-ner"))
    assert ner.labels == ["Chemical", "Disease"] and len(ner.splits["test"]) == 2


def test_task_file_cannot_shadow_builtin(tmp_path):
    raw = json.loads((FIX / "user" / "specialty.json").read_text())
    raw["id"] = "gad"
    (tmp_path / "gad.json").write_text(json.dumps(raw))
    with pytest.raises(ConfigError, match="is a built-in task"):
        TaskCatalogue.build([tmp_path / "gad.json"])


def test_a_catalogue_reads_each_task_file_once_however_many_lookups(monkeypatch):
    """Issue 61 item 3: the catalogue is built once (each --task-file read and checked then); a lookup by id or a
    language's listing is a dict lookup, never a read of the spec files again (before, every get_spec read every
    task file: 2 files x 50 lookups = 100 reads)."""
    import biobench.tasks.registry as registry

    reads: list[Path] = []
    real = registry.read_spec_file
    monkeypatch.setattr(registry, "read_spec_file", lambda path: reads.append(Path(path)) or real(path))
    files = [FIX / "user" / "specialty.json", FIX / "ner.toml"]
    catalogue = TaskCatalogue.build(files)
    assert reads == files and catalogue.files == tuple(files)
    for _ in range(25):
        assert catalogue.get("my-specialty").id == "my-specialty" and catalogue.get("my-ner").kind == "ner"
        assert [s.id for s in catalogue.own()] == ["my-specialty", "my-ner"]
        assert [s.id for s in catalogue.tasks("fr")][-1] == "my-specialty"  # paper tasks first, then the user's
    assert catalogue.extended(files) is catalogue  # a grid naming the same files reads nothing again
    # a grid's own files list their tasks first (before the command line's), read once however often extended
    grid = TaskCatalogue.build(files[1:]).extended(files[:1], first=True)
    assert [s.id for s in grid.own()] == ["my-specialty", "my-ner"] and grid.files == (files[0], files[1])
    assert [s.id for s in grid.extended(files[:1], first=True).own()] == ["my-specialty", "my-ner"]
    assert [s.id for s in TaskCatalogue.build(files[1:]).extended(files[:1]).own()] == ["my-ner", "my-specialty"]
    assert len(reads) == 2 + 4
    with pytest.raises(ConfigError, match="did you mean 'my-ner'"):
        catalogue.get("my-nre")
    assert "my-ner" not in {s.id for s in list_specs(include_extra=True)}  # the built-ins alone stay built-in


def test_a_catalogue_of_specs_in_memory_adds_tasks_without_a_file():
    """TaskCatalogue.of: the seam tests use to add a task (no spec file, no patched registry)."""
    extra = read_spec_file(FIX / "ner.toml")
    catalogue = TaskCatalogue.of(extra)
    assert catalogue.get("my-ner") is extra and catalogue.get("gad") is get_spec("gad")
    assert catalogue.own() == [extra] and catalogue.files == ()


def test_tasks_json_cli(capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["tasks", "--json", "--all", "--data-dir", str(tmp_path), "--counts",
                 "--task-file", str(FIX / "user" / "specialty.json")]) == 0
    rows = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert set(PAPER_TASKS) | {"demo-cls", "my-specialty"} <= set(rows)
    for r in rows.values():
        assert {"id", "lang", "kind", "max_length", "protocol", "available", "source", "splits"} <= set(r)
    assert rows["my-specialty"]["available"] and rows["my-specialty"]["splits"] == {"train": 3, "dev": 2, "test": 2}
    assert rows["demo-cls"]["available"] and rows["demo-cls"]["splits"] is None  # --task-file: its tasks counted
    assert not rows["anatem"]["available"] and "anatem-typed/train.conll.gz" in rows["anatem"]["reason"]
    assert rows["quaero-emea"]["max_length"] == 1024
    heads = {t: (rows[t]["head"], rows[t]["metric"], rows[t]["dev_metric"]) for t in ("quaero-emea", "ncbi-disease",
                                                                                    "fracco-100", "hoc", "demo-cls")}
    assert heads == {"quaero-emea": ("span", "macro_f1", "sampled_span_f1"), "ncbi-disease": ("hf-token", "macro_f1", "micro_f1"),
                     "fracco-100": ("linear", "macro_f1", "micro_f1"), "hoc": ("hf-sequence", "macro_f1", "weighted_f1"),
                     "demo-cls": ("linear", "macro_f1", "weighted_f1")}
    assert rows["ncbi-disease"]["labels"] == ["Disease"]  # the spec's inventory, even without data
    assert rows["my-specialty"]["labels"]  # found in the data
    assert main(["tasks", "--json", "--all", "--data-dir", str(tmp_path), "--counts"]) == 0  # no --task-file: all
    counted = {r["id"]: r for r in json.loads(capsys.readouterr().out)}
    assert counted["demo-cls"]["splits"] == {"train": 400, "dev": 100, "test": 100}


def test_tasks_cli_names_a_bad_spec_file(capsys, tmp_path):
    raw = json.loads((FIX / "user" / "specialty.json").read_text())
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(dict(raw, dev_metric="auroc")))
    assert main(["tasks", "--json", "--data-dir", str(tmp_path), "--task-file", str(bad)]) != 0
    err = capsys.readouterr().err
    assert f"{bad}: dev_metric 'auroc' is not computed" in err


@pytest.mark.slow  # reads every shared task: ~7 s
def test_tasks_json_cli_shared_data(shared_data, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    assert main(["tasks", "--json", "--data-dir", str(shared_data), "--counts"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["id"] for r in rows] == list(PAPER_TASKS)
    available = {r["id"] for r in rows if r["available"]}
    assert available == {"anatem", "bc5cdr", "jnlpba", "ncbi-disease", "chemprot", "gad", "hoc",
                         "quaero-emea", "quaero-medline", "fracco-30", "fracco-100"}
    tests = {r["id"]: r["splits"]["test"] for r in rows if r["splits"]}  # None: not counted (missing)
    assert (tests["ncbi-disease"], tests["anatem"], tests["bc5cdr"], tests["gad"], tests["chemprot"]) == (940, 3830, 4797, 534, 16712)


def test_tasks_table_cli(capsys, tmp_path):
    assert main(["tasks", "--lang", "fr", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "quaero-emea" in out and "anatem" not in out and "0/8 tasks have data" in out


def test_tasks_lists_from_files_and_counts_once_per_data_version(capsys, tmp_path, monkeypatch):
    """Without --counts nothing is read; --counts reads once, then reuses the counts until a file changes."""
    import biobench.api.catalog as tasks_command

    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    data = tmp_path / "user"
    shutil.copytree(FIX / "user", data)
    spec = ["--task-file", str(data / "specialty.json"), "--json", "--data-dir", str(tmp_path)]
    reads = []
    real = tasks_command.load_task
    monkeypatch.setattr(tasks_command, "load_task", lambda *a: reads.append(a[0].id) or real(*a))

    def row(*extra):
        assert main(["tasks", *spec, "--all", *extra]) == 0
        return next(r for r in json.loads(capsys.readouterr().out) if r["id"] == "my-specialty")

    listed = row()
    assert listed["available"] and listed["splits"] is None and reads == []
    assert row("--counts")["splits"] == {"train": 3, "dev": 2, "test": 2}
    assert row("--counts")["splits"] == {"train": 3, "dev": 2, "test": 2}
    assert reads.count("my-specialty") == 1  # the second call used the cache
    train = next(p for p in data.rglob("train.*") if p.is_file())
    train.write_text(train.read_text(encoding="utf-8").rstrip("\n") + "\n", encoding="utf-8")
    os.utime(train, ns=(1, 1))  # another mtime: the data changed
    row("--counts")
    assert reads.count("my-specialty") == 2


def test_own_data_dir_in_documented_layout_uncompressed(tmp_path, monkeypatch):
    """A user's BIOBENCH_DATA folder mirroring <data>/<task>/... works, gzip optional."""
    folder = tmp_path / "ncbi-disease" / "NCBI-disease-IOB"
    folder.mkdir(parents=True)
    for name in ("train", "devel", "test"):
        shutil.copy(FIX / "sample.iob.tsv", folder / f"{name}.tsv")
    monkeypatch.setenv("BIOBENCH_DATA", str(tmp_path))
    with pytest.raises(DataError, match=r"task 'ncbi-disease': example 'train-0' in split 'train' \(.*NCBI-disease-IOB\) "
                       r"has label 'Chemical', which is not in the spec's label scheme \['Disease'\]; fix the data"):
        load_task(get_spec("ncbi-disease"))  # fixed label scheme ['Disease'] is enforced
    for name in ("train", "devel", "test"):
        (folder / f"{name}.tsv").write_text("No\tO\nhepatitis\tB-Disease\nB\tI-Disease\n")
    task = load_task(get_spec("ncbi-disease"))
    assert task.source == str(folder) and len(task.splits["test"]) == 1


def test_a_variant_spec_states_only_what_differs_and_resolves_to_the_whole_spec():
    from biobench.tasks.registry import _builtin_raw

    written = _builtin_raw()["fracco-100"][1]
    assert written["extends"] == "fracco-30" and set(written) == {"id", "extends", "sources", "description"}
    full, parent = get_spec("fracco-100"), get_spec("fracco-30")
    assert full.sources[0].options["top_k"] == 100 and parent.sources[0].options["top_k"] == 30
    assert {k: v for k, v in full.sources[0].options.items() if k != "top_k"} == \
        {k: v for k, v in parent.sources[0].options.items() if k != "top_k"}
    assert (full.kind, full.max_length, full.dev_metric, full.paper_task) == ("multilabel", 4096, "micro_f1", True)
    # a data mapping is replaced, not merged: distemist's fetch writes only its own set
    assert get_spec("distemist").fetch["options"]["sets"] == {"DISTEMIST-FRASIMED": "distemist/fr/frasimed-distemist.tar.gz"}
    assert get_spec("distemist").fetch["files"] == get_spec("cantemist").fetch["files"]
    assert get_spec("distemist").sources[1].dataset == "rntc/tabib-frasimed-distemist-doc"


@pytest.mark.parametrize("variant,error", [
    ({"id": "x", "extends": "fracco-3"}, "'extends' names no known task spec: 'fracco-3' (did you mean 'fracco-30'?)"),
    ({"extends": "fracco-30"}, "a spec that extends 'fracco-30' still needs its own 'id'"),
    ({"id": "x", "extends": "fracco-30", "sources": [{}, {}]}, "needs as many entries as the parent's (1"),
    ({"id": "x", "extends": "fracco-30", "sources": [{"options": {"top_kk": 5}}]}, "unknown key 'top_kk': did you mean 'top_k'?"),
    ({"id": "x", "extends": "fracco-30", "epochs": 3}, "unknown spec field 'epochs': (valid here: "),
    ({"id": "x", "extends": "fracco-30", "sources": [{"formt": "iob"}]},
     "source #1: unknown key 'formt': did you mean 'format'? (valid here: "),
])
def test_a_bad_variant_is_one_error_naming_its_file(tmp_path, variant, error):
    from biobench.errors import ConfigError
    from biobench.tasks.registry import read_spec_file

    path = tmp_path / "mine.json"
    path.write_text(json.dumps(variant))
    with pytest.raises(ConfigError) as err:
        read_spec_file(path)
    assert str(err.value).startswith(str(path)) and error in str(err.value) and "\n" not in str(err.value)


def test_extends_refuses_a_circle():
    from biobench.errors import ConfigError
    from biobench.tasks.registry import resolve_extends

    parents = {"a": {"id": "a", "extends": "b"}, "b": {"id": "b", "extends": "a"}}
    with pytest.raises(ConfigError, match="circle: a -> b -> a"):
        resolve_extends(parents["a"], parents, "spec.json")


def test_tasks_with_a_task_file_and_no_data_dir_lists_the_users_tasks_first(capsys, monkeypatch):
    monkeypatch.delenv("BIOBENCH_DATA", raising=False)
    assert main(["tasks", "--task-file", str(FIX / "user" / "specialty.json")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert any("my-specialty" in line for line in lines[:6])  # title, header, then the user's task
    assert not any(t in out for t in ("anatem", "ncbi-disease", "quaero-emea"))  # no per-task missing-data notes
    assert lines[-1].startswith(f"Also {len(PAPER_TASKS)} built-in tasks (") and "pass --data-dir DIR" in lines[-1]
    assert len(lines) < 15
