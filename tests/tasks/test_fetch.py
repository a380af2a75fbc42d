"""`biobench data fetch/add/status` against a loopback HTTP server serving archives in their original formats."""

from __future__ import annotations

import gzip
import hashlib
import http.server
import io
import tarfile
import threading
import zipfile
from pathlib import Path

import pytest
from biobench.cli import build_parser, main
from biobench.errors import DataError
from biobench.tasks.fetch import add_task, fetch_task, task_status
from biobench.tasks.loading import load_task
from biobench.tasks.registry import TaskCatalogue, get_spec, spec_from_dict

IOB = "-DOCSTART-\tO\n\nIL-2\tB-protein\ngene\tI-protein\nexpression\tO\n\nNF-kappa\tB-protein\nB\tI-protein\n\n"


class _Handler(http.server.BaseHTTPRequestHandler):
    files: dict[str, bytes] = {}
    truncate: set[str] = set()

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        if self.path.startswith("/loop"):  # a redirect loop
            self.send_response(302)
            self.send_header("Location", self.path)
            self.end_headers()
            return
        body = self.files.get(self.path)
        if body is None:
            self.send_error(404)
            return
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body[: len(body) // 2] if self.path in self.truncate else body)

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def server():
    _Handler.files, _Handler.truncate = {}, set()
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{httpd.server_address[1]}", _Handler
    httpd.shutdown()
    httpd.server_close()


def _spec(base: str, sha: str | None, convert: str = "files", **fetch) -> object:
    return spec_from_dict({
        "id": "toy-ner", "lang": "en", "kind": "ner", "max_length": 64, "protocol": "en",
        "sources": [{"type": "local", "format": "iob", "version": "toy",
                     "splits": {s: f"toy/{s}.tsv.gz" for s in ("train", "dev", "test")}}],
        "fetch": {"convert": convert, "licence": "CC0",
                  "files": [{"url": f"{base}/data/{s}.tsv", "to": f"toy/{s}.tsv.gz", "sha256": sha}
                            for s in ("train", "dev", "test")], **fetch},
    }, "toy-ner.json")


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.relative_to(folder).as_posix() for p in folder.rglob("*"))


def test_fetch_verifies_converts_and_loads(server, tmp_path):
    base, handler = server
    for s in ("train", "dev", "test"):
        handler.files[f"/data/{s}.tsv"] = IOB.encode()
    spec = _spec(base, hashlib.sha256(IOB.encode()).hexdigest())
    logs: list[str] = []
    written = fetch_task(spec, tmp_path, log=logs.append)
    assert sorted(p.relative_to(tmp_path).as_posix() for p in written) == [f"toy/{s}.tsv.gz" for s in ("dev", "test", "train")]
    assert gzip.decompress((tmp_path / "toy/train.tsv.gz").read_bytes()).decode() == IOB
    assert any("verified" in line and "NOT" not in line for line in logs)
    task = load_task(spec, tmp_path)
    assert task.data_version == "toy" and [e.label for e in task.splits["train"][0].entities] == ["protein"]
    assert _leftovers(tmp_path) == ["toy", "toy/dev.tsv.gz", "toy/test.tsv.gz", "toy/train.tsv.gz"]  # no staging left
    assert task_status(spec, tmp_path).state == "found"


def test_wrong_checksum_and_truncated_download_leave_nothing(server, tmp_path):
    base, handler = server
    for s in ("train", "dev", "test"):
        handler.files[f"/data/{s}.tsv"] = IOB.encode()
    with pytest.raises(DataError, match=r"checksum mismatch: .*/data/train\.tsv: sha256 [0-9a-f]{64}, expected 0{64}"):
        fetch_task(_spec(base, "0" * 64), tmp_path, log=lambda _: None)
    assert _leftovers(tmp_path) == []
    handler.truncate = {"/data/dev.tsv"}
    with pytest.raises(DataError, match=r"download truncated: .*/data/dev\.tsv"):
        fetch_task(_spec(base, None), tmp_path, log=lambda _: None)
    assert _leftovers(tmp_path) == []  # train.tsv had arrived complete, yet nothing was installed
    with pytest.raises(DataError, match=r"HTTP 404"):
        fetch_task(_spec(base.replace("/data", "") + "/nowhere", None), tmp_path, log=lambda _: None)
    assert _leftovers(tmp_path) == []


def test_unpinned_download_says_it_is_not_verified(server, tmp_path):
    base, handler = server
    for s in ("train", "dev", "test"):
        handler.files[f"/data/{s}.tsv"] = IOB.encode()
    logs: list[str] = []
    fetch_task(_spec(base, None), tmp_path, log=logs.append)
    assert sum("NOT verified" in line for line in logs) == 3


def test_status_reports_found_missing_and_mismatch(tmp_path, capsys):
    spec = _spec("http://unused", hashlib.sha256(IOB.encode()).hexdigest())
    status = task_status(spec, tmp_path)
    assert status.state == "missing" and status.fix == f"biobench data fetch toy-ner --data-dir {tmp_path}"
    (tmp_path / "toy").mkdir()
    for s in ("train", "dev", "test"):
        (tmp_path / f"toy/{s}.tsv.gz").write_bytes(gzip.compress(IOB.encode()))
    assert task_status(spec, tmp_path).state == "found"
    (tmp_path / "toy/dev.tsv.gz").write_bytes(gzip.compress(IOB.replace("gene", "genes").encode()))
    status = task_status(spec, tmp_path)
    assert status.state == "checksum mismatch" and "toy/dev.tsv.gz" in status.detail and "fetch toy-ner" in status.fix
    assert main(["data", "status", "--data-dir", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "anatem " in out and "missing" in out and f"biobench data fetch anatem --data-dir {tmp_path}" in out
    assert f"biobench data add deid FILE... --data-dir {tmp_path}" in out


def test_gated_task_is_never_downloaded_and_add_names_what_is_missing(tmp_path):
    with pytest.raises(DataError, match=r"credentialed/gated .* `biobench data add deid FILE...`"):
        fetch_task(get_spec("deid"), tmp_path)
    wrong = tmp_path / "wrong.zip"
    with zipfile.ZipFile(wrong, "w") as zf:
        zf.writestr("deidentifiedmedicaltext/README.txt", "not the data")
    with pytest.raises(DataError, match=r"does not hold id\.text, id\.res \(found: deidentifiedmedicaltext/README\.txt\)"):
        add_task(get_spec("deid"), tmp_path / "data", [wrong])
    assert not (tmp_path / "data").exists() or _leftovers(tmp_path / "data") == []
    truncated = tmp_path / "cut.zip"
    truncated.write_bytes(wrong.read_bytes()[:40])
    with pytest.raises(DataError):
        add_task(get_spec("deid"), tmp_path / "data", [truncated])


def test_cli_data_fetch_and_add(server, tmp_path, capsys, monkeypatch):
    base, handler = server
    bert_data = io.BytesIO()
    rows = "index\tsentence\tlabel\n1.T1.T2\t@CHEMICAL$ inhibits @GENE$.\tCPR:4\n1.T1.T3\t\"A \"\"quoted\"\" @CHEMICAL$, @GENE$\"\tfalse\n"
    with zipfile.ZipFile(bert_data, "w") as zf:
        for s in ("train", "dev", "test"):
            zf.writestr(f"bert_data/ChemProt/{s}.tsv", rows)
    archive = tmp_path / "bert_data.zip"
    archive.write_bytes(bert_data.getvalue())
    data = tmp_path / "data"
    assert main(["data", "add", "chemprot", str(archive), "--data-dir", str(data)]) == 0
    assert "chemprot/blue/train.tsv.gz" in capsys.readouterr().out
    task = load_task(get_spec("chemprot"), data)
    assert task.data_version == "blue"  # BLUE's own files win over the reconstruction
    assert [ex.text for ex in task.splits["train"]] == ["@CHEMICAL$ inhibits @GENE$.", 'A "quoted" @CHEMICAL$, @GENE$']
    monkeypatch.setenv("BIOBENCH_DATA", str(tmp_path / "env"))
    assert main(["data", "fetch", "deid"]) == 2
    assert "never downloads" in capsys.readouterr().err


def test_fetch_cantemist_es_equals_shared_copy(server, shared_data, tmp_path):
    """Done-when of issue 13: the Zenodo-style CANTEMIST zip, served on loopback, yields the same task."""
    base, handler = server
    zipped = io.BytesIO()
    with zipfile.ZipFile(zipped, "w") as zf:
        for part in ("train-set", "dev-set1", "dev-set2", "test-set"):
            with tarfile.open(shared_data / "cantemist" / f"{part}.tar.gz") as tar:
                for member in tar:
                    if member.isfile():
                        zf.writestr(f"cantemist/{member.name}", tar.extractfile(member).read())
        zf.writestr("cantemist/.DS_Store", b"\0")
    handler.files["/records/3978041/files/cantemist.zip"] = zipped.getvalue()
    spec = get_spec("cantemist-es")
    fetch = dict(spec.fetch)
    fetch["files"] = [dict(spec.fetch["files"][0], url=f"{base}/records/3978041/files/cantemist.zip")]
    local = spec_from_dict({**spec.to_dict(), "fetch": fetch, "base_dir": None}, "cantemist-es")
    fetch_task(local, tmp_path, log=lambda _: None)
    got, want = load_task(local, tmp_path), load_task(spec, shared_data)
    assert got.splits == want.splits and got.labels == want.labels and got.checksum == want.checksum
    assert _leftovers(tmp_path) == ["cantemist"] + [f"cantemist/{p}.tar.gz" for p in ("dev-set1", "dev-set2", "test-set", "train-set")]


def test_pinned_shas_match_the_shared_originals(shared_data):
    """Every sha256 pinned in a spec is the sha256 of the byte-identical original in ../shared/data."""
    from biobench.tasks.fetch import content_sha256, expected_contents
    from biobench.tasks.registry import list_specs

    checked = 0
    for spec in list_specs(include_extra=True):
        for rel, sha in expected_contents(spec.fetch or {}).items():
            path = shared_data / rel
            if path.exists():
                assert content_sha256(path) == sha, (spec.id, rel)
                checked += 1
    assert checked >= 17


def _served_zip(handler, path: str, files: dict[str, str]) -> None:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        for name, text in files.items():
            zf.writestr(name, text)
    handler.files[path] = buf.getvalue()


def _with_url(task_id: str, url: str):
    spec = get_spec(task_id)
    fetch = dict(spec.fetch)
    fetch["files"] = [dict(spec.fetch["files"][0], url=url)]
    return spec_from_dict({**spec.to_dict(), "fetch": fetch, "base_dir": None}, task_id)


def test_fetch_social_history_and_cos_then_split_as_the_protocol(server, tmp_path):
    from datasets import Dataset

    base, handler = server
    notes = {}
    for i in range(20):
        text = f"Patient {i:02d} smokes 2 packs daily.\nLives with wife."
        notes[f"SocialHistoryMTSamples/note{i:02d}.txt"] = text
        notes[f"SocialHistoryMTSamples/note{i:02d}.ann"] = "T1\tTobacco 11 17\tsmokes\nT2\tAmount 18 25\t2 packs\n"
    notes["SocialHistoryMTSamples/orphan.txt"] = "no annotation file"  # skipped, as the protocol does
    _served_zip(handler, "/sh.zip", notes)
    sh = _with_url("social-history", f"{base}/sh.zip")
    fetch_task(sh, tmp_path, log=lambda _: None)
    task = load_task(sh, tmp_path)
    ids = sorted(f"note{i:02d}" for i in range(20))
    first = Dataset.from_dict({"i": ids}).train_test_split(test_size=0.3, seed=42)
    rest = first["test"].train_test_split(test_size=0.5, seed=42)
    assert [ex.id for ex in task.splits["train"]] == first["train"]["i"]
    assert [ex.id for ex in task.splits["dev"]] == rest["train"]["i"]
    assert [ex.id for ex in task.splits["test"]] == rest["test"]["i"]
    assert task.labels == ["Amount", "Tobacco"] and task.data_version == "uw-bionlp"

    snippet = "Chest: RUL opacity, size 2 cm."
    ann = "".join(f"T{3 * k + 1}\tSnippet {100 * k} {100 * k + len(snippet)}\t{snippet}\n"
                  f"T{3 * k + 2}\tCos {100 * k + 11} {100 * k + 18}\topacity\n"
                  f"T{3 * k + 3}\tVal {100 * k + 25} {100 * k + 29}\t2 cm\n" for k in range(12))
    _served_zip(handler, "/cos.zip", {"events-COS-corpus/report1.ann": ann, "events-COS-corpus/report1.txt": "x"})
    cos = _with_url("cos", f"{base}/cos.zip")
    fetch_task(cos, tmp_path, log=lambda _: None)
    assert sorted(p.name for p in (tmp_path / "cos/brat").iterdir()) == ["report1.ann"]
    task = load_task(cos, tmp_path)
    assert [len(task.splits[s]) for s in ("train", "dev", "test")] == [8, 2, 2]
    ex = task.splits["train"][0]
    assert ex.text == snippet and [(ex.text[e.start:e.end], e.label) for e in ex.entities] == [("opacity", "Cos"), ("2 cm", "Val")]
    assert [ex.text[a:b] for a, b in ex.tokens][:4] == ["Chest", ":", "RUL", "opacity"]


def test_diamed_is_gated_and_added_from_its_zip(tmp_path):
    rows = '[{"id": "d1", "text": "Douleur thoracique.", "label": "IX"}]'
    archive = tmp_path / "data.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for s in ("train", "validation", "test"):
            zf.writestr(f"data/splits/{s}.json", rows)
    with pytest.raises(DataError, match="never downloads"):
        fetch_task(get_spec("diamed"), tmp_path / "d")
    assert task_status(get_spec("diamed"), tmp_path / "d").fix.startswith("biobench data add diamed FILE...")
    add_task(get_spec("diamed"), tmp_path / "d", [archive], log=lambda _: None)
    assert sorted(p.name for p in (tmp_path / "d/diamed/splits").iterdir()) == ["test.json", "train.json", "validation.json"]


def _frasimed_zip() -> bytes:
    """A FRASIMED-like Zenodo whole-record download: a zip holding FRASIMED.zip, which holds the two flat BRAT
    folders with `#n<TAB>ICD-O-3.1 Tk<TAB>code` / `#n<TAB>SNOMED Tk<TAB>code` notes, as the French harness reads it."""
    inner = io.BytesIO()
    with zipfile.ZipFile(inner, "w") as zf:
        for i in range(40):  # every document: one frequent code (freq 8) + three codes of its own (freq 1)
            text = f"Patient {i:02d}. Carcinome canalaire du sein et metastases."
            ann = (f"T1\tmorphology-onco 12 21\tcarcinome\n#1\tICD-O-3.1 T1\t8000/{i % 5}\n#2\tSNOMED T1\t1{i % 5}\n"
                   # a projected mention whose text does not read at its offsets (verify_spans is off)
                   f"T2\tmorphology-onco 22 30\tcanal\n" +
                   "".join(f"#{3 + j}\tICD-O-3.1 T2\t81{i:02d}/{j}\n#{9 + j}\tSNOMED T2\t2{i:02d}{j}\n" for j in range(3)))
            zf.writestr(f"FRASIMED/CANTEMIST-FRASIMED/cc_onco{i}.txt", text)
            zf.writestr(f"FRASIMED/CANTEMIST-FRASIMED/cc_onco{i}.ann", ann)
            zf.writestr(f"FRASIMED/DISTEMIST-FRASIMED/es-S{i:03d}.txt", text)
            zf.writestr(f"FRASIMED/DISTEMIST-FRASIMED/es-S{i:03d}.ann", ann.replace("ICD-O-3.1", "OTHER"))
        for i in range(40, 45):  # only a code outside the top 100: dropped before the split
            zf.writestr(f"FRASIMED/CANTEMIST-FRASIMED/cc_onco{i}.txt", "Tumeur.")
            zf.writestr(f"FRASIMED/CANTEMIST-FRASIMED/cc_onco{i}.ann", f"T1\tmorphology-onco 0 6\tTumeur\n#1\tICD-O-3.1 T1\t9999/{i}\n")
        zf.writestr("FRASIMED/CANTEMIST-FRASIMED/cc_onco99.txt", "Sans annotation.")  # no .ann: skipped
    outer = io.BytesIO()
    with zipfile.ZipFile(outer, "w") as zf:
        zf.writestr("FRASIMED.zip", inner.getvalue())
        zf.writestr("README.md", "FRASIMED")
    return outer.getvalue()


def test_frasimed_fetch_and_add_build_the_harness_split(server, tmp_path):
    import random

    base, handler = server
    handler.files["/api/records/8355629/files-archive"] = _frasimed_zip()
    logs: list[str] = []
    fetch_task(_with_url("cantemist", f"{base}/api/records/8355629/files-archive"), tmp_path, log=logs.append)
    assert any("NOT verified" in line for line in logs)
    assert _leftovers(tmp_path) == ["cantemist", "cantemist/fr", "cantemist/fr/frasimed-cantemist.tar.gz"]
    spec = get_spec("cantemist")
    assert task_status(spec, tmp_path).state == "found"
    task = load_task(spec, tmp_path)
    assert task.data_version == "frasimed-zenodo-8355629"
    # top 100 by document frequency over the whole corpus: the 5 frequent codes + the 95 singletons first seen
    # walking the documents in sorted id order (cc_onco0, cc_onco1, cc_onco10, ...), as tabib's stable sort keeps them
    singles = [f"81{i:02d}/{j}" for i in sorted(range(40), key=lambda i: f"cc_onco{i}") for j in range(3)]
    assert task.labels == sorted([f"8000/{k}" for k in range(5)] + singles[:95])
    # cc_onco40-44 lost their only code and cc_onco99 has no .ann; the rest split as tabib's adapter does
    kept = sorted(f"cc_onco{i}" for i in range(40))
    random.Random(42).shuffle(kept)
    assert [[ex.id for ex in task.splits[s]] for s in ("train", "dev", "test")] == [kept[:32], kept[32:36], kept[36:]]
    doc0 = next(ex for s in task.splits.values() for ex in s if ex.id == "cc_onco0")
    assert doc0.labels == ("8000/0", "8100/0", "8100/1", "8100/2")

    downloaded = tmp_path / "FRASIMED-record.zip"  # `data add` takes the same file the user downloaded
    downloaded.write_bytes(handler.files["/api/records/8355629/files-archive"])
    add_task(get_spec("distemist"), tmp_path, [downloaded], log=lambda _: None)
    dis = load_task(get_spec("distemist"), tmp_path)
    assert {ex.id for s in dis.splits.values() for ex in s} == {f"es-S{i:03d}" for i in range(40)}
    assert "10" in dis.labels and "2000" in dis.labels and not any("/" in lab for lab in dis.labels)  # SNOMED only

    broken = tmp_path / "wrong.zip"
    with zipfile.ZipFile(broken, "w") as zf:
        zf.writestr("other/readme.txt", "x")
    with pytest.raises(DataError, match=r"does not hold CANTEMIST-FRASIMED/ \(found: other/readme.txt\)"):
        add_task(spec, tmp_path / "elsewhere", [broken], log=lambda _: None)


def test_frasimed_hub_copy_maps_the_harness_columns(monkeypatch):
    """Without local files the task loads the authors' published copy (train/val/test, doc_name/text/codes)."""
    from biobench.tasks.loading import _read_hub
    from biobench.tasks.readers import hf
    from datasets import Dataset, DatasetDict

    rows = {"doc_name": ["cc_onco1"], "text": ["Carcinome."], "codes": [["8000/3", "8500/3"]]}
    seen = {}

    def fake_load_hub(dataset, revision, config):
        seen["dataset"] = dataset
        return DatasetDict({s: Dataset.from_dict(rows) for s in ("train", "val", "test")})

    monkeypatch.setattr(hf, "load_hub", fake_load_hub)
    spec = get_spec("cantemist")
    splits = _read_hub(spec, spec.sources[1])
    assert seen["dataset"] == "rntc/tabib-frasimed-cantemist-doc"
    assert [(ex.id, ex.text, ex.labels) for ex in splits["dev"]] == [("cc_onco1", "Carcinome.", ("8000/3", "8500/3"))]


def test_fetch_failures_are_one_line_naming_the_url(server, tmp_path, capsys):
    """A redirect loop, a damaged archive and a cut nested archive: one line each, naming the URL (never the
    staging file), and the data folder is left as it was."""
    base, handler = server
    for url in (f"{base}/loop/record.zip", f"{base}/api/records/1/files-archive"):
        spec = _with_url("cantemist", url)
        handler.files["/api/records/1/files-archive"] = b"PK\x03\x04" + b"\0" * 200  # a zip cut short
        with pytest.raises(DataError) as err:
            fetch_task(spec, tmp_path, log=lambda _: None)
        message = str(err.value)
        assert "\n" not in message and message.startswith(f"download failed: {url}" if "loop" in url else url)
        assert ".biobench-" not in message and _leftovers(tmp_path) == []
        assert ("redirects in a loop" if "loop" in url else "damaged or truncated") in message


def test_cli_fetch_skips_present_data_and_tries_every_task(server, tmp_path, capsys, monkeypatch):
    """`data fetch A B`: present data is skipped (--force fetches it again), and a failing task stops no other."""
    from biobench.commands import data as data_command

    base, handler = server
    requests: list[str] = []
    for s in ("train", "dev", "test"):
        handler.files[f"/data/{s}.tsv"] = IOB.encode()
    good = _spec(base, hashlib.sha256(IOB.encode()).hexdigest())
    broken = spec_from_dict({**good.to_dict(), "id": "toy-gone", "sources": [
        dict(good.to_dict()["sources"][0], splits={s: f"gone/{s}.tsv.gz" for s in ("train", "dev", "test")})],
        "fetch": {**good.fetch, "files": [dict(f, url=f.get("url").replace("/data/", "/missing/"),
                                               to=f["to"].replace("toy/", "gone/")) for f in good.fetch["files"]]}},
        "toy-gone.json")
    catalogue = TaskCatalogue.of(broken, good)  # what `data fetch` looks its tasks up in

    def fetch(*argv: str) -> int:
        return data_command.run_fetch(build_parser(load=["data"]).parse_args(["data", "fetch", *argv]), catalogue)

    real_get = handler.do_GET
    monkeypatch.setattr(handler, "do_GET", lambda self: requests.append(self.path) or real_get(self))
    data = str(tmp_path / "data")
    assert fetch("toy-gone", "toy-ner", "--data-dir", data) == 2  # the first fails, the second runs
    out, err = capsys.readouterr()
    assert "toy-ner: done" in out and err.count("toy-gone: failed: ") == 1 and "/missing/train.tsv" in err
    assert "1 of 2 task(s) not fetched: toy-gone" in err
    assert [line for line in err.splitlines() if line.startswith("toy-gone")][0].count("\n") == 0
    requests.clear()
    assert fetch("toy-ner", "--data-dir", data) == 0
    assert "toy-ner: already present (" in capsys.readouterr().out and requests == []
    assert fetch("toy-ner", "--data-dir", data, "--force") == 0
    assert "toy-ner: done" in capsys.readouterr().out and sorted(requests) == ["/data/dev.tsv", "/data/test.tsv",
                                                                             "/data/train.tsv"]
