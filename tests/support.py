"""Builders shared by several test modules (a test module never imports another one): the toy classification
grid of the evaluation tests, the hand-built NER examples, the SLURM toy grid, the in-process queue drain, and
the browser tests' server helpers. Fixtures stay in conftest.py; the generated hostile corpus in
hostile_corpus.py, the fake hub in fake_hub.py, the one-node cluster in slurm_cluster.py."""

from __future__ import annotations

import json
import os
import random
import re
import shlex
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from types import SimpleNamespace

from biobench.tasks.schema import ClassificationExample, Entity, NerExample, TaskData

REPO = Path(__file__).resolve().parents[1]


def readme_fenced(lang: str) -> list[str]:
    """The README's fenced blocks of `lang` (```lang ... ```), in order."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    return re.findall(rf"^```{lang}\n(.*?)^```", text, flags=re.M | re.S)


def readme_quick_check() -> list[str]:
    """The README's quick-check command, as a newcomer would copy it."""
    text = (REPO / "README.md").read_text(encoding="utf-8")
    (command,) = re.findall(r"`(biobench eval [^`]*--quick[^`]*)`", text)
    return shlex.split(command)


# ---------------------------------------------------------------- a French haystack (needle, analysis probe)
HAYSTACK_WORDS = "le patient présente une douleur thoracique avec fièvre modérée et toux depuis trois jours".split()


def haystack_corpus(n_docs: int = 40, seed: int = 0) -> list[str]:
    """`n_docs` documents of 12 random sentences over HAYSTACK_WORDS."""
    rng = random.Random(seed)
    return [
        " ".join(" ".join(rng.choices(HAYSTACK_WORDS, k=rng.randint(6, 18))).capitalize() + "." for _ in range(12))
        for _ in range(n_docs)
    ]


# ---------------------------------------------------------------- the toy classification grid (eval runner,
# parallel, claims): 3 classes, 12 notes, the smallest settings that still learn
OVERRIDES = {"epochs": 2, "lr": 3e-3, "batch_size": 4, "max_length": 32}
WORDS = {"cardio": "cœur infarctus", "pneumo": "poumon toux", "neuro": "cerveau migraine"}


def toy_data(task_id: str, n: int = 12, test_extra: list | None = None, dev: bool = True) -> TaskData:
    labels = list(WORDS)
    ex = [ClassificationExample(f"{task_id}{i}", f"Patient {i}: {WORDS[labels[i % 3]]}.", labels[i % 3])
          for i in range(n)]
    test = ex[:6] + list(test_extra or [])
    return TaskData(task_id, "classification", {"train": ex, "dev": ex[:6] if dev else [], "test": test},
                    sorted(WORDS), f"toy:{task_id}", f"sha256:{task_id}")


def spec(task_id: str, lang: str = "en", seeds=(1, 2)):
    return SimpleNamespace(id=task_id, lang=lang, kind="classification", max_length=64, protocol=lang, seeds=seeds)


DATA = {"t1": toy_data("t1"), "t2": toy_data("t2")}


# ---------------------------------------------------------------- hand-built NER examples (span and token heads)
NER_LABELS = ["DISO", "ANAT", "CHEM"]


def ner_example(id_: str, text: str, *mentions: tuple[str, str], tokens=None) -> NerExample:
    """An example whose entities are given by (surface, label); offsets are found in `text`."""
    entities = []
    for surface, label in mentions:
        start = text.index(surface)
        entities.append(Entity(start, start + len(surface), label))
    return NerExample(id_, text, tuple(entities), tokens)


NER_TRAIN = [
    ner_example("t0", "Carcinome canalaire infiltrant du sein gauche, grade II.",
                ("Carcinome canalaire infiltrant du sein gauche", "DISO"), ("sein gauche", "ANAT")),
    ner_example("t1", "Traitement par amoxicilline 1 g trois fois par jour pendant sept jours.",
                ("amoxicilline", "CHEM")),
    ner_example("t2", "Antécédents : diabète de type 2, hypertension artérielle, allergie à la pénicilline.",
                ("diabète de type 2", "DISO"), ("hypertension artérielle", "DISO"), ("pénicilline", "CHEM")),
    ner_example("t3", "The patient was admitted with acute myocardial infarction and treated with aspirin.",
                ("acute myocardial infarction", "DISO"), ("aspirin", "CHEM")),
    ner_example("t4", "Scanner thoracique : nodule pulmonaire de 12 mm du lobe supérieur droit.",
                ("nodule pulmonaire", "DISO"), ("lobe supérieur droit", "ANAT")),
    ner_example("t5", "Mutations in the BRCA1 gene are associated with breast and ovarian cancer.",
                ("ovarian cancer", "DISO"), ("breast", "ANAT")),
]


# ---------------------------------------------------------------- the SLURM toy grid (batch script, submitit)
def slurm_toy_grid(folder: Path, model: Path, results: str, n_train: int) -> Path:
    """A 2-task x 2-seed grid of generated toy tasks (classification and NER) on the tiny model. The NER task uses
    the token head on 3 x `n_train` sentences: ~2.3 s a run on one core, long enough for a requeue to find it in
    flight (the French default, the span head with its 3-layer LSTM, took 8 s a run here: 17 of the grid's 27 s of
    CPU, run five times by the suite); the span head has tests of its own (tests/heads/test_span_ner.py)."""
    tasks = {"toy-cls": ("classification", "demo-cls", n_train, {}),
             "toy-ner": ("ner", "demo-ner", 3 * n_train, {"head": "hf-token"})}
    for n, (task, (kind, generator, n_examples, head)) in enumerate(tasks.items()):
        (folder / f"{task}.json").write_text(json.dumps({
            "id": task, "lang": "fr", "kind": kind, "max_length": 64, "protocol": "fr", "paper_task": False,
            "metric": "macro_f1" if kind == "classification" else "micro_f1", **head,
            "sources": [{"type": "generated", "generator": generator,
                         "options": {"seed": n, "n_train": n_examples, "n_dev": 16, "n_test": 16}}]}))
    grid = folder / f"grid-{results}.toml"
    grid.write_text(f'results = "{results}"\ntask_files = ["toy-cls.json", "toy-ner.json"]\n\n[[grid]]\n'
                    f'name = "toy"\ntasks = ["toy-cls", "toy-ner"]\nseeds = "42-43"\n'
                    f'overrides = {{ epochs = 2, batch_size = 8 }}\nmodels = [{{ model = "{model}", name = "tiny" }}]\n')
    return grid


def predictions_by_run(results: Path) -> dict[str, bytes]:
    """Every run's predictions file under `results`, keyed task/seed-file."""
    from biobench.store.record import predictions_path

    return {f"{p.parent.name}/{p.name}": predictions_path(p).read_bytes() for p in sorted(results.glob("*/*/seed-*.json"))}


# ---------------------------------------------------------------- pretraining on two ranks (torchrun, srun)
PRETRAIN_TEXTS = ["Le patient présente une fièvre à 39 degrés.", "Traitement par amoxicilline pendant sept jours.",
                  "Scanner thoracique : nodule pulmonaire de 12 mm.", "Hemoglobin 9.8 g/dL on admission."]
TWO_RANK_TOKENS = 3 * 4 * 64  # 3 optimiser steps of 4 x 64 tokens per phase: 4 logged losses for the detour


def pretrain_corpus(folder: Path) -> Path:
    corpus = folder / "docs.jsonl"
    corpus.write_text("".join(json.dumps({"text": f"{t} Cas {i}."}) + "\n" for i in range(60) for t in PRETRAIN_TEXTS))
    return corpus


def pretrain_args(corpus: Path, out: Path, tokens: int, recipe: str = "detour", micro: int = 1) -> list[str]:
    """`python ARGS`: biobench pretrain of the tiny preset on one thread (batch 4 x 64 tokens, micro-batch `micro`)."""
    return ["-m", "biobench.cli", "pretrain", "--recipe", recipe, "--model", "preset:tiny", "--corpus", str(corpus),
            "--out", str(out), "--tokens", str(tokens), "--batch-size", "4", "--seq-len", "64", "--micro-batch-size",
            str(micro), "--decay-ratio", "0.34", "--lr", "1e-3", "--no-progress", "--device", "cpu", "--threads", "1",
            "--cache-dir", str(out.parent / f"cache-{out.name}")]


def weights(folder: Path) -> dict:
    from safetensors.torch import load_file

    return load_file(folder / "model.safetensors")


# ---------------------------------------------------------------- the public request queue, eval stubbed
def snapshot_outside(root: Path, skip: Path) -> dict[str, tuple[int, int]]:
    """Every path under `root` but `skip` with its (size, mtime_ns): what a step changed outside `skip`."""
    out = {}
    for folder, dirs, names in os.walk(root):
        if Path(folder) == skip or skip in Path(folder).parents:
            continue
        for name in dirs + names:
            if Path(folder, name) == skip:
                continue
            st = os.lstat(os.path.join(folder, name))
            out[os.path.join(folder, name)] = (st.st_size, st.st_mtime_ns)
    return out


def stub_eval(record: Path):
    """A stand-in for `biobench eval` that records which request ran (the queue is under test, not training)."""

    def command(request, results):
        return [sys.executable, "-c", f"open({str(record)!r}, 'a').write({request.id!r} + '\\n')"]
    return command


def drain(storage, tmp_path: Path, record: Path) -> list[str]:
    """Run `worker --once` (in process, eval stubbed) until the queue has nothing left; the worker's lines."""
    from biobench.service.worker import WorkerConfig, run_worker

    lines: list[str] = []
    config = WorkerConfig(results=str(tmp_path / "results"), once=True, log_dir=tmp_path / "logs", renew_s=0.2,
                          lease_s=30)
    for _ in range(60):
        if run_worker(storage, config, log=lines.append, command=stub_eval(record)) == 0:
            return lines
    raise AssertionError("the worker never emptied the queue")


# ---------------------------------------------------------------- servers for the browser tests
RESULTS_FIXTURES = Path(__file__).parent / "fixtures" / "results"


def free_port() -> int:
    """A port the OS says is free now (tests run in parallel: never a fixed one)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def wait_http(url: str, proc: subprocess.Popen, timeout: float = 180) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise AssertionError(f"leaderboard exited early:\n{proc.stdout.read()}")
        try:
            with urllib.request.urlopen(url, timeout=5) as r:
                if r.status == 200:
                    return
        except OSError:
            time.sleep(1)
    raise AssertionError(f"{url} did not answer within {timeout} s")


def screenshot(browser, tmp_path, name: str) -> Path:
    """Save a screenshot as NAME.png under $BIOBENCH_SCREENSHOTS when set (the closing notes' screenshots), else
    under the test's tmp dir."""
    folder = Path(os.environ.get("BIOBENCH_SCREENSHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.png"
    assert browser.save_screenshot(str(path)) and path.stat().st_size > 10_000
    return path


# Runs before the page's own scripts: alert/confirm/prompt calls are recorded instead of shown, and the corpus's
# payloads also set window.__xss (an onerror or onload handler that runs is caught even without alert).
ALERT_HOOK = """
window.__alerts = [];
window.alert = window.confirm = window.prompt = function (m) { window.__alerts.push(String(m)); };
"""
CHROMIUM, DRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"


def headless_chromium(profile: Path):
    """A headless Chromium at 1280x1000 whose pages all run ALERT_HOOK first (the caller quits it); the test is
    skipped when chromium, chromedriver or selenium is missing."""
    import shutil

    import pytest

    if not (Path(CHROMIUM).exists() and Path(DRIVER).exists()) and not (shutil.which("chromium") and shutil.which("chromedriver")):
        pytest.skip("chromium / chromedriver not installed (bash scripts/install_browser.sh)")
    webdriver = pytest.importorskip("selenium.webdriver")
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM if Path(CHROMIUM).exists() else shutil.which("chromium")
    for flag in ("--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1280,1000", f"--user-data-dir={profile}"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(DRIVER if Path(DRIVER).exists() else shutil.which("chromedriver")),
                              options=options)
    driver.execute_cdp_cmd("Page.addScriptToEvaluateOnNewDocument", {"source": ALERT_HOOK})
    driver.set_window_size(1280, 1000)
    return driver


# study files (tests/api/test_study.py, tests/api/test_study_slurm.py): a [[pretrain]] table on the demo's generated corpus
STUDY_PRETRAIN = """
[[pretrain]]
name = "{name}"
recipe = "{recipe}"
model = "{model}"
corpus = "generated:demo-fr"
tokens = "{tokens}"
seq_len = 64
batch_size = 4
cache_dir = "token-cache"
{extra}
"""


def study_pretrain(name: str, recipe: str = "detour", model: str = "preset:tiny", tokens: str = "20K", extra: str = "") -> str:
    return STUDY_PRETRAIN.format(name=name, recipe=recipe, model=model, tokens=tokens, extra=extra)


TINY_STUDY = (study_pretrain("detour", tokens="12K") + study_pretrain("mlm", "mlm", tokens="12K")
        + '\n[[eval]]\nname = "cls"\ntasks = ["demo-cls", "demo-multilabel"]\nseeds = "42,43"\n'
          'overrides = { epochs = 1, lr = 1e-3, limit_train = 64, limit_eval = 64 }\n'
          'models = [{ model = "run:detour/final" }, { model = "run:mlm/final" }]\n'
        + '\n[[analysis]]\nname = "cka-final"\nkind = "cka"\nmodels = ["run:detour/final", "run:mlm/final"]\n'
          'texts = ["demo-cls"]\nn = 8\nsample_seeds = "42,43"\nmax_length = 32\n'
        + '\n[[analysis]]\nname = "trajectory"\nkind = "cka-trajectory"\nrun = "run:detour/final"\n'
          'start = "run:detour/init"\n'
          'texts = ["demo-cls"]\nn = 8\nsample_seeds = "42,43"\nmax_length = 32\n'
        + '\n[[compare]]\na = "run:detour/final"\nb = "run:mlm/final"\ncorrection = "holm"\nn_boot = 200\n'
          'lang = "fr"\npaper_a = "CLM detour (Base, 10B) = ModernCamemBERT-bio-base"\n')

# Table 3/6 in small: layers 0-1 of the detour final copied into the mlm final, and DiaMED's linear probe (here
# demo-cls) on the mlm final and on that transplant
TRANSPLANT_PROBES = """
[[analysis]]
name = "transplant-low"
kind = "transplant"
from = "run:detour/final"
into = "run:mlm/final"
layers = "0-1"
component = "all"

[[analysis]]
name = "probe-mlm"
kind = "probe"
model = "run:mlm/final"
task = "demo-cls"
seeds = "42,43"
limit_train = 64
paper = 32.8

[[analysis]]
name = "probe-transplant-low"
kind = "probe"
model = "analysis:transplant-low"
task = "demo-cls"
seeds = "42,43"
limit_train = 64
"""


def example_study_clone(root: Path, inputs: bool = True) -> Path:
    """examples/studies/ copied into `root` as a clone holds them (examples/studies/*.toml), with small stand-ins of
    every input they name when `inputs`: the corpora (one .txt each), the needle haystacks and, for every task of
    the registry, an empty file at each path of its first local source under data/ (what the input check looks
    for; a dry run reads no data). Returns the examples/studies folder."""
    import shutil

    from biobench.tasks.loading import _source_paths
    from biobench.tasks.registry import list_specs

    repo = Path(__file__).resolve().parents[1]
    studies = root / "examples" / "studies"
    studies.mkdir(parents=True)
    for path in (repo / "examples" / "studies").glob("*.toml"):
        shutil.copy(path, studies / path.name)
    if not inputs:
        return studies
    for corpus in ("corpora/fr-mix", "corpora/en-mix", "data/pretrain-fr"):
        (root / corpus).mkdir(parents=True)
        (root / corpus / "a.txt").write_text("Le patient est hospitalisé.\n", encoding="utf-8")
    for spec in list_specs(include_extra=True):
        local = next((s for s in spec.sources if s.type == "local"), None)
        for rel in _source_paths(local) if local is not None else ():
            target = root / "data" / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.touch()
    return studies


def run_biobench(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    """`biobench ARGS` as a user types it: the venv's entry point in a child process."""
    exe = Path(sys.executable).with_name("biobench")
    return subprocess.run([str(exe), *args], cwd=cwd, capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, "BIOBENCH_DATA": ""})


def fake_token_store(folder: Path, tokens: int, fingerprint: str = "x") -> Path:
    """A finished store of one document of `tokens` zeros, its shard a sparse file (what `corpus plan` opens: the
    manifest and the shards' sizes, no sha256), of format version 1 (built before document hashes: still read)."""
    import hashlib

    import numpy as np
    from biobench.training import token_store

    (folder / "shards").mkdir(parents=True)
    with open(folder / "shards" / "000000.bin", "wb") as handle:
        handle.truncate(2 * tokens)
    np.array([0, tokens], dtype="<i8").tofile(folder / "shards" / "000000.idx")
    shard = {"name": "000000", "tokens": tokens, "documents": 1, "bin_sha256": "0" * 64, "idx_sha256": "0" * 64}
    text = json.dumps({"format": token_store.FORMAT, "version": 1, "tokens": tokens,
                       "documents": 1, "shards": [shard], "dtype": "uint16", "sources": [], "text_field": "text",
                       "tokenizer": {"fingerprint": fingerprint, "name_or_path": "tok", "vocab_size": 100,
                                     "bos": 1, "eos": 2}}, indent=1, sort_keys=True) + "\n"
    (folder / "manifest.json").write_text(text)
    (folder / "done").write_text(hashlib.sha256(text.encode()).hexdigest() + "\n")
    return folder
