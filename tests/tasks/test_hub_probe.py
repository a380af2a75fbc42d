"""The hub is probed once per process; an unanswered probe switches the process to offline mode in one line."""

from __future__ import annotations

import http.server
import socket
import sys
import threading

import pytest
from biobench.errors import DataError, ModelLoadError
from biobench.tasks import hub


class _Answer(http.server.BaseHTTPRequestHandler):
    requests: list[str] = []

    def do_HEAD(self) -> None:  # noqa: N802 - http.server's name
        _Answer.requests.append(self.path)
        self.send_response(401)  # any status means the server is there
        self.end_headers()

    def log_message(self, *args) -> None:
        pass


@pytest.fixture()
def fresh_probe(monkeypatch, tmp_path):
    """No offline flag set, a clean probe cache (in memory and on disk), and the flags restored afterwards."""
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.delenv(name, raising=False)
    hub.ensure_hub_mode.cache_clear()
    constants = sys.modules.get("huggingface_hub.constants")
    before = getattr(constants, "HF_HUB_OFFLINE", None)
    yield monkeypatch
    hub.ensure_hub_mode.cache_clear()
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        monkeypatch.setenv(name, "1")  # the test session runs offline (conftest); monkeypatch undoes it
    if constants is not None and before is not None:
        constants.HF_HUB_OFFLINE = before


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_answering_hub_stays_online(fresh_probe):
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        fresh_probe.setenv("HF_ENDPOINT", f"http://127.0.0.1:{server.server_address[1]}")
        _Answer.requests.clear()
        assert hub.ensure_hub_mode() is True
        assert hub.ensure_hub_mode() is True
        assert _Answer.requests == ["/api/models?limit=1"]  # probed once per process
        assert not hub.offline_requested()
    finally:
        server.shutdown()


def test_unreachable_hub_goes_offline_with_one_line(fresh_probe, capsys):
    fresh_probe.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    assert hub.ensure_hub_mode() is False
    assert hub.ensure_hub_mode() is False
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("hub: http://127.0.0.1:") and "running offline" in err[0]
    assert hub.offline_requested()
    import huggingface_hub.constants

    assert huggingface_hub.constants.HF_HUB_OFFLINE is True


def test_offline_flag_skips_the_probe(fresh_probe, capsys):
    fresh_probe.setenv("HF_HUB_OFFLINE", "1")
    fresh_probe.setattr(hub, "probe", lambda *a: pytest.fail("probed although HF_HUB_OFFLINE=1"))
    assert hub.ensure_hub_mode() is False
    assert capsys.readouterr().err == ""


def test_model_and_dataset_fail_fast_after_the_probe(fresh_probe, capsys):
    """The first hub access probes; the model and the hub dataset then fail with their own messages."""
    fresh_probe.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    from biobench.models import inspect_model
    from biobench.tasks.readers.hf import load_hub

    with pytest.raises(ModelLoadError) as err:
        inspect_model("org-that-is-not-cached/model")
    message = str(err.value)
    assert "hub id 'org-that-is-not-cached/model'" in message
    assert "did not answer biobench's" in message and "HF_HUB_OFFLINE=1 is set" not in message  # biobench's words
    assert "try aga" not in message and "Error:" not in message  # no cut upstream message
    with pytest.raises(DataError, match="could not load hub dataset 'org/none'.*did not answer biobench's"):
        load_hub("org/none", None)
    assert capsys.readouterr().err.count("hub: ") == 1


def test_a_recent_answer_is_reused_by_the_next_process(fresh_probe, capsys):
    """Processes run one after another probe once per PROBE_TTL_S; a stale answer is probed again."""
    fresh_probe.setenv("HF_ENDPOINT", f"http://127.0.0.1:{_closed_port()}")
    calls = []
    real = hub.probe
    fresh_probe.setattr(hub, "probe", lambda *a: calls.append(a) or real(*a))
    assert hub.ensure_hub_mode() is False
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        fresh_probe.delenv(name, raising=False)  # what a new process starts with
    hub.ensure_hub_mode.cache_clear()
    assert hub.ensure_hub_mode() is False and len(calls) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 2 and "s ago); running offline" in err[1]
    assert hub.recent_answer(hub.endpoint(), now=__import__("time").time() + hub.PROBE_TTL_S + 1) is None
    hub._answer_file().write_text("{not json")  # a corrupt answer file: probe again, never fail
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        fresh_probe.delenv(name, raising=False)
    hub.ensure_hub_mode.cache_clear()
    assert hub.ensure_hub_mode() is False and len(calls) == 2


def test_compare_over_local_results_never_probes(fresh_probe, tmp_path, capsys):
    """A model named by its hub id or alias is matched to the results folder its files record: no hub."""
    import shutil
    from pathlib import Path

    from biobench.standings.folder_pairs import model_folder

    fresh_probe.setattr(hub, "probe", lambda *a: pytest.fail("probed the hub for local results"))
    results = tmp_path / "results"
    for name in ("mine", "other"):
        shutil.copytree(Path(__file__).parents[1] / "fixtures" / "results" / name.replace("mine", "full-fr")
                        .replace("other", "en-model"), results / name)
    assert model_folder(results, "acme/full-fr-base") == results / "mine"
    assert model_folder(results, "Acme/Full-FR-base") == results / "mine"
    assert capsys.readouterr().err == ""
