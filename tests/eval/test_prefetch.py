"""`biobench prefetch` against a loopback server standing in for the hub and a data host, then the grid run
with HF_HUB_OFFLINE=1: nothing is missing. The CLI runs in subprocesses: huggingface_hub reads the offline flag
once, at import, and the test session itself is offline (conftest)."""

from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fake_hub import Repo, fake_hub

IOB = "-DOCSTART-\tO\n\nIL-2\tB-protein\ngene\tI-protein\nexpression\tO\n\nNF-kappa\tB-protein\nB\tI-protein\n\n" * 3


def write_grid(folder: Path, endpoint: str, model: str = "org/tiny-bio") -> Path:
    """A grid file with an open task (a task file whose data downloads from `endpoint`, sha256 pinned) and a
    credentialed one (deid), each in its own [[grid]] so the open one can run alone."""
    sha = hashlib.sha256(IOB.encode()).hexdigest()
    (folder / "toy-ner.json").write_text(json.dumps({
        "id": "toy-ner", "lang": "en", "kind": "ner", "max_length": 64, "protocol": "en",
        "sources": [{"type": "local", "format": "iob", "version": "toy",
                     "splits": {s: f"data/toy/{s}.tsv.gz" for s in ("train", "dev", "test")}}],
        "fetch": {"convert": "files", "licence": "CC0",
                  "files": [{"url": f"{endpoint}/files/{s}.tsv", "to": f"data/toy/{s}.tsv.gz", "sha256": sha}
                            for s in ("train", "dev", "test")]}}))
    grid = folder / "grid.toml"
    grid.write_text(f"""results = "results"
task_files = ["toy-ner.json"]
data_dir = "data"

[[grid]]
name = "open"
tasks = ["toy-ner"]
seeds = "42"
overrides = {{ epochs = 1, batch_size = 4 }}
models = [{{ model = "{model}", name = "tiny-bio" }}]

[[grid]]
name = "credentialed"
tasks = ["deid"]
models = [{{ model = "{model}" }}]
""")
    return grid


def cli(*args: str, env: dict[str, str], timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "biobench.cli", *args], env=env, capture_output=True, text=True,
                          timeout=timeout)


def online_env(tmp_path: Path, endpoint: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items()
           if k not in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")}
    return {**env, "HF_ENDPOINT": endpoint, "HF_HOME": str(tmp_path / "hf"), "BIOBENCH_CACHE": str(tmp_path / "bb"),
            "OMP_NUM_THREADS": "1", "HF_HUB_DISABLE_PROGRESS_BARS": "1"}


@pytest.mark.slow  # eval subprocesses against a loopback hub: ~7 s
def test_prefetch_then_the_grid_runs_offline(tiny_mlm_dir, tmp_path):
    files = {f"/files/{s}.tsv": IOB.encode() for s in ("train", "dev", "test")}
    with fake_hub({"org/tiny-bio": Repo.from_folder(tiny_mlm_dir)}, files) as endpoint:
        grid = write_grid(tmp_path, endpoint)
        env = online_env(tmp_path, endpoint)
        done = cli("prefetch", "--config", str(grid), env=env)
    commit = Repo.from_folder(tiny_mlm_dir).commit
    assert done.returncode == 2, done.stderr  # deid is credentialed: said, with its command
    assert f"model  org/tiny-bio  fetched  org/tiny-bio@{commit} (checksums verified)" in done.stdout
    assert "data   toy-ner       fetched" in done.stdout
    assert "a run with HF_HUB_OFFLINE=1 will still miss 1:" in done.stderr
    assert "  data deid: biobench data add deid FILE..." in done.stderr
    assert sorted(p.name for p in (tmp_path / "data" / "toy").iterdir()) == ["dev.tsv.gz", "test.tsv.gz", "train.tsv.gz"]

    offline = {**env, "HF_HUB_OFFLINE": "1", "HF_DATASETS_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1",
               "HF_ENDPOINT": "http://127.0.0.1:9"}  # the server is gone: any hub request would fail
    again = cli("prefetch", "--config", str(grid), "--grid", "open", env=offline)
    assert again.returncode == 0, again.stderr
    assert "nothing missing: 2 model(s) and task(s)" in again.stdout and "toy-ner       ready" in again.stdout
    run = cli("eval", "--config", str(grid), "--grid", "open", "--device", "cpu", "--no-progress", "--threads", "1",
              env=offline, timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    results = list((tmp_path / "results").glob("*/toy-ner/seed-42*.json"))
    assert len(results) == 1
    assert json.loads(results[0].read_text())["model"]["revision"] == commit  # the prefetched commit was used


def test_a_corrupted_download_is_named_and_the_model_counts_as_missing(tiny_mlm_dir, tmp_path):
    from tests.fake_hub import Handler

    with fake_hub({"org/tiny-bio": Repo.from_folder(tiny_mlm_dir)}) as endpoint:
        Handler.corrupt.add("org/tiny-bio/model.safetensors")
        done = cli("prefetch", "--model", "org/tiny-bio", env=online_env(tmp_path, endpoint))
    assert done.returncode == 2
    assert "model.safetensors do not match their hub checksum" in done.stdout
    assert "  model org/tiny-bio: delete " in done.stderr


def test_prefetch_needs_something_to_fetch(capsys):
    from biobench.cli import main

    assert main(["prefetch"]) == 2
    assert "needs --config GRID.toml, or --model M" in capsys.readouterr().err


@pytest.mark.parametrize("snapshot_files", [{"config.json": b"{}", "model.safetensors": b"weights"}])
def test_unverified_files_compares_each_file_with_its_cache_name(tmp_path, snapshot_files):
    from biobench.eval.prefetch import unverified_files

    from tests.fake_hub import _git_sha1

    blobs, snapshot = tmp_path / "blobs", tmp_path / "snapshots" / "abc"
    blobs.mkdir()
    snapshot.mkdir(parents=True)
    for name, data in snapshot_files.items():
        blob = blobs / (hashlib.sha256(data).hexdigest() if name.endswith(".safetensors") else _git_sha1(data))
        blob.write_bytes(data)
        (snapshot / name).symlink_to(blob)
    assert unverified_files(snapshot) == []
    (blobs / hashlib.sha256(b"weights").hexdigest()).write_bytes(b"weightz")
    assert unverified_files(snapshot) == ["model.safetensors"]
