"""Is the Hugging Face hub reachable? Asked once per process, with a short timeout.

Why: offline, huggingface_hub retries every file request five times with backoff (about 23 s) before it
gives up, and does so again for every model file and every hub-backed dataset. One short probe at the first
hub access tells us whether the hub answers; when it does not, biobench says so in one line and switches the
libraries to offline mode (HF_HUB_OFFLINE), so the local folders, the Hugging Face cache and installed
packages are used at once and a missing file fails immediately with its own clear message.

Data and model loading both call `ensure_hub_mode()` before touching the hub; it lives under tasks/ because
tasks/ and bench/ may both import it (tasks/ never imports bench/). The answer is also kept for
`PROBE_TTL_S` in $BIOBENCH_CACHE/hub/probe.json, per endpoint: commands run one after another (a grid script,
`eval` then `compare`) wait for the probe once, not each.
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

from biobench.runtime.files import atomic_write, cache_home
from biobench.runtime.jsonfile import read_json

DEFAULT_ENDPOINT = "https://huggingface.co"
TRUTHY = {"1", "true", "yes", "on"}
PROBE_TTL_S = 300  # how long another process trusts a probe's answer
_PROBE_FAILED: list[str] = []  # why biobench itself turned offline mode on, when it did


def offline_requested() -> bool:
    """True when the user (or an earlier probe) put the hub libraries in offline mode."""
    return any(os.environ.get(name, "").strip().lower() in TRUTHY
               for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"))


def offline_reason() -> str | None:
    """Why the hub is not used, in words for an error message: biobench's own probe got no answer, or the user
    set offline mode; None when the hub may be used."""
    if _PROBE_FAILED and ensure_hub_mode.cache_info().currsize:
        return _PROBE_FAILED[-1]
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().lower() in TRUTHY:
            return f"{name}={os.environ[name]} is set in the environment, so the hub is not contacted"
    return None


def probe_timeout_s() -> float:
    """Seconds the probe waits ($BIOBENCH_HUB_TIMEOUT, default 3)."""
    try:
        return max(0.1, float(os.environ.get("BIOBENCH_HUB_TIMEOUT", "3")))
    except ValueError:
        return 3.0


def endpoint() -> str:
    """The hub's address: $HF_ENDPOINT (a mirror), else huggingface.co; what the hub libraries use too."""
    return os.environ.get("HF_ENDPOINT", DEFAULT_ENDPOINT).rstrip("/")


def probe(endpoint: str, timeout_s: float) -> str | None:
    """None when `endpoint` answers (any HTTP status counts: the server is there), else why not."""
    request = urllib.request.Request(endpoint + "/api/models?limit=1", method="HEAD")
    try:
        with urllib.request.urlopen(request, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None
    except urllib.error.URLError as err:
        return str(getattr(err, "reason", err))
    except (OSError, ValueError) as err:  # timeouts, refused connections, malformed endpoint
        return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__


def go_offline() -> None:
    """Offline mode for this process: the environment, and the flags the libraries read at import."""
    for name in ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE"):
        os.environ[name] = "1"
    hub_constants: Any = sys.modules.get("huggingface_hub.constants")  # a module: its flags are set below
    if hub_constants is not None:
        hub_constants.HF_HUB_OFFLINE = True
    datasets_config: Any = sys.modules.get("datasets.config")
    if datasets_config is not None:
        datasets_config.HF_HUB_OFFLINE = True
        datasets_config.HF_DATASETS_OFFLINE = True


def _answer_file():
    return cache_home("hub") / "probe.json"


def recent_answer(endpoint: str, now: float | None = None) -> tuple[bool, str | None, float] | None:
    """(answered, why not, age in s) of a probe of `endpoint` made less than PROBE_TTL_S ago by any process;
    None when there is none (or the file is unreadable: then the probe simply runs again)."""
    now = time.time() if now is None else now
    try:
        saved = read_json(_answer_file(), max_bytes=64 * 1024).get(endpoint)
        age = now - float(saved["at"])
        if 0 <= age < PROBE_TTL_S:
            return saved["why"] is None, saved["why"], age
    except Exception:  # noqa: BLE001 - missing, corrupt or foreign: not an answer
        return None
    return None


def _remember(endpoint: str, why: str | None) -> None:
    """Keep the probe's answer for the next processes (best effort: a read-only cache just means probing)."""
    try:
        path = _answer_file()
        try:
            saved = read_json(path, max_bytes=64 * 1024)
            saved = saved if isinstance(saved, dict) else {}
        except Exception:  # noqa: BLE001 - missing or corrupt: start over
            saved = {}
        saved[endpoint] = {"at": time.time(), "why": why}
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, json.dumps(saved))
    except Exception:  # noqa: BLE001 - a read-only or full cache only means the next process probes again
        pass


@functools.cache
def ensure_hub_mode() -> bool:
    """True when the hub may be used. Probes once per process (or reuses a probe less than PROBE_TTL_S old);
    an unanswered probe prints one line and turns offline mode on for the rest of the process."""
    _PROBE_FAILED.clear()
    if offline_requested():
        return False
    address, timeout_s = endpoint(), probe_timeout_s()
    recent = recent_answer(address)
    if recent is not None:
        answered, why, age = recent
        when = f"{age:.0f} s ago"
    else:
        why = probe(address, timeout_s)
        answered, when = why is None, f"probe timeout {timeout_s:g} s"
        _remember(address, why)
    if answered:
        return True
    go_offline()
    _PROBE_FAILED.append(f"the hub ({address}) did not answer biobench's {timeout_s:g} s probe, so this run is offline")
    print(f"hub: {address} is unreachable ({why}; {when if recent is None else 'probed ' + when}); running offline "
          "(local folders, the Hugging Face cache and installed packages only)", file=sys.stderr)
    return False


def datasets_cached(dataset: str) -> bool:
    """Whether the datasets library's cache holds a copy of a hub dataset (what an offline load reads)."""
    import datasets

    folder = Path(datasets.config.HF_DATASETS_CACHE)
    return any(folder.glob(f"{dataset.replace('/', '___')}*/*"))
