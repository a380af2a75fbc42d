"""`biobench space init`: the files of a Hugging Face Space that serves the leaderboard from a results dataset.

Why generated rather than a template folder to copy: the Space's README metadata (sdk, app_file), the app's
results/queue locations and the biobench it installs must agree with each other and with the biobench that
wrote them; one function writes them all. The app itself is biobench.leaderboard.app.build_space_app — the
generated app.py only reads its settings (environment variables override them, which is how the local test and a
Space's "Variables" change them without editing code).

Why a wheel in the Space: biobench is not on a package index, so `biobench[leaderboard]==0.1.0` installs nowhere.
`space init` builds a wheel of the biobench that runs it into `wheels/` and requirements.txt names that file
(or, with `--space ORG/NAME`, its download URL in the Space repository: a Space's build installs
requirements.txt before the rest of the repository is copied in). `--requirement` replaces it (a git URL).
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path

from biobench import __version__
from biobench.errors import ConfigError
from biobench.runtime.checkout import package_dirs, source_root
from biobench.runtime.files import atomic_write
from biobench.runtime.paths import is_hub_id
from biobench.service.submission import check_proxies

APP = '''"""The biobench leaderboard as a Hugging Face Space (written by `biobench space init`, biobench {version}).

Settings, each overridable by an environment variable (a Space's "Variables and secrets"):
  BIOBENCH_RESULTS          results dataset (hf://datasets/ORG/NAME), a results.parquet or a results folder
  BIOBENCH_QUEUE            request queue the Submit tab writes to ("" = show the `biobench submit` command)
  BIOBENCH_REFRESH_MINUTES  rescan the results this often (0 = only with the Refresh button)
  BIOBENCH_TRUSTED_PROXY    addresses/networks whose X-Forwarded-For names the visitor, comma-separated ("" = none;
                            "auto" = the hub's proxy, 10.0.0.0/8, on a Space and none elsewhere)
`python app.py` serves on 127.0.0.1; on a Space (SPACE_ID set) on 0.0.0.0; `--host ADDRESS` chooses.
"""

import os

from biobench.leaderboard.json_routes import serve
from biobench.leaderboard.app import LAUNCH_OPTIONS, build_space_app
from biobench.leaderboard.space import serve_host, space_proxies
from biobench.service.submission import trust_proxies

RESULTS = os.environ.get("BIOBENCH_RESULTS", {results!r})
QUEUE = os.environ.get("BIOBENCH_QUEUE", {queue!r}) or None
REFRESH_MINUTES = float(os.environ.get("BIOBENCH_REFRESH_MINUTES", {refresh!r}))
TRUSTED_PROXY = os.environ.get("BIOBENCH_TRUSTED_PROXY", {proxy!r})

demo = build_space_app(RESULTS, queue=QUEUE, refresh_minutes=REFRESH_MINUTES)

if __name__ == "__main__":
    trust_proxies(space_proxies(TRUSTED_PROXY))  # before the server starts: uvicorn reads it then
    serve(demo, server_name=serve_host(), **LAUNCH_OPTIONS)  # the pages and their JSON (/api/v1/...)
'''

README = '''---
title: {title_yaml}
emoji: 🧬
colorFrom: indigo
colorTo: green
sdk: gradio
sdk_version: "{gradio}"
app_file: app.py
pinned: false
license: apache-2.0
short_description: Biomedical encoder leaderboard (biobench)
---

# {title}

The biobench leaderboard for biomedical text encoders (arXiv 2605.12438's 19 French and English tasks), served
from the results dataset `{results}`{queue_line}. Results appear here as they are pushed there; the page
rescans {refresh_text}.

Run the same app locally: `pip install -r requirements.txt && python app.py` (serves on 127.0.0.1).
'''

WHEELS = "wheels"


def serve_host(argv: Sequence[str] | None = None, environ: Mapping[str, str] | None = None) -> str:
    """The address the Space's app.py binds: `--host ADDRESS` on its command line, else GRADIO_SERVER_NAME, else
    0.0.0.0 inside a Space runtime (SPACE_ID is set there) and 127.0.0.1 anywhere else — a local trial is not
    served to the whole network by default."""
    argv = list(sys.argv[1:] if argv is None else argv)
    environ = os.environ if environ is None else environ
    for i, arg in enumerate(argv):
        if arg == "--host" and i + 1 < len(argv):
            return argv[i + 1]
        if arg.startswith("--host="):
            return arg.split("=", 1)[1]
    if environ.get("GRADIO_SERVER_NAME"):
        return environ["GRADIO_SERVER_NAME"]
    return "0.0.0.0" if environ.get("SPACE_ID") else "127.0.0.1"


# The hub's proxy, as a Space sees it: every visitor's request reaches the Space's container from the hub's
# private network (request.client.host is an address like 10.16.3.80, the real client is in X-Forwarded-For,
# appended by that proxy), and nothing else can connect to the container. So inside a Space, trusting 10.0.0.0/8
# trusts that proxy alone, and uvicorn takes the rightmost address it did not trust: the one the proxy appended,
# not one a client wrote. Anywhere else the same network may hold any machine, so "auto" trusts no one there.
SPACE_PROXY = ("10.0.0.0/8",)
AUTO = "auto"


def space_proxies(setting: str, environ: Mapping[str, str] | None = None) -> tuple[str, ...]:
    """The proxies the Space's app.py trusts (`--trusted-proxy` of `biobench leaderboard`): "auto" is the hub's
    proxy (SPACE_PROXY) inside a Space runtime (SPACE_ID set) and none elsewhere; "" none; otherwise the
    comma-separated addresses or networks given (checked by biobench.service.submission.trust_proxies)."""
    environ = os.environ if environ is None else environ
    text = str(setting).strip()
    if text.lower() == AUTO:
        return SPACE_PROXY if environ.get("SPACE_ID") else ()
    return tuple(p.strip() for p in text.split(",") if p.strip())


def _gradio_version() -> str:
    from importlib.metadata import version

    return version("gradio")


def _one_line(value: str, option: str) -> str:
    """A value written into one line of a generated file: a line break or other control character would start
    a new YAML key or requirement line, so it is refused."""
    if any(ord(c) < 32 or ord(c) == 127 for c in value):
        raise ConfigError(f"{option} {value!r}: line breaks and control characters are not allowed (it is "
                          "written into one line of the Space's files)")
    if not value.strip():
        raise ConfigError(f"{option}: empty")
    return value.strip()


def build_wheel(dest: str | Path, root: Path | None = None) -> Path:
    """Build a wheel of the biobench checkout at `root` (default: the one running) into `dest`; returns its path.
    The sources (pyproject.toml, README, the package folders it maps) are copied to a temporary folder first, so
    the build writes no build/ or egg-info into the checkout; built without isolation (no index needed)."""
    root = root or source_root()
    if root is None:
        raise ConfigError("this biobench is not run from a source checkout, so `space init` cannot build its wheel; "
                          "pass --requirement (e.g. git+https://github.com/ORG/biobench@COMMIT)")
    folders = sorted(set(package_dirs(root).values()))
    dest = Path(dest)
    dest.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="biobench-wheel-") as tmp:
        src = Path(tmp) / "src"
        src.mkdir()
        for name in ("pyproject.toml", "README.md", "LICENSE"):
            if (root / name).is_file():
                shutil.copy2(root / name, src / name)
        for folder in folders:
            shutil.copytree(root / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        out = Path(tmp) / "out"
        proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation",
                               "--no-index", "--quiet", "--wheel-dir", str(out), str(src)],
                              capture_output=True, text=True)
        wheels = sorted(out.glob("biobench-*.whl"))
        if proc.returncode != 0 or not wheels:
            last = (proc.stderr or proc.stdout or "no output").strip().splitlines()[-1:]
            raise ConfigError(f"building biobench's wheel failed ({' '.join(last)}); pass --requirement instead")
        target = dest / wheels[0].name
        shutil.copy2(wheels[0], target)
    return target


def wheel_requirement(wheel: str, space: str | None) -> str:
    """requirements.txt's line for the wheel in `wheels/`: its URL in the Space repository when the Space is
    named (a Space installs requirements.txt before the repository is copied in), else the relative file."""
    if space:
        return f"biobench[leaderboard] @ https://huggingface.co/spaces/{space}/resolve/main/{WHEELS}/{wheel}"
    return f"./{WHEELS}/{wheel}[leaderboard]"


def write_space(out: str | Path, results: str, queue: str | None = None, refresh_minutes: float = 10.0,
                title: str = "biobench leaderboard", requirement: str | None = None, space: str | None = None,
                local_ok: bool = False, trusted_proxy: Sequence[str] | None = None) -> list[Path]:
    """Write README.md (Space metadata), app.py, requirements.txt and (without `requirement`) wheels/biobench-*.whl
    into `out`; returns the paths written. `requirement` replaces the wheel (a git URL, one line); `space`
    (ORG/NAME) makes requirements.txt point at the wheel's URL in that Space. A `results` that is not
    hf://datasets/… is refused unless `local_ok` (a Space cannot read the folders of the machine that wrote it).
    `trusted_proxy`: the proxies app.py trusts by default (None: "auto", the hub's proxy inside a Space)."""

    out = Path(out)
    title = _one_line(title, "--title")
    requirement = _one_line(requirement, "--requirement") if requirement is not None else None
    if space is not None and not is_hub_id(_one_line(space, "--space")):
        raise ConfigError(f"--space {space!r}: give the Space's id ORG/NAME")
    if not isinstance(refresh_minutes, int | float) or not math.isfinite(refresh_minutes) or refresh_minutes < 0:
        raise ConfigError(f"--refresh-minutes must be 0 (off) or a positive number of minutes (got {refresh_minutes})")
    results = _one_line(str(results), "--results")
    if queue is not None:
        queue = _one_line(queue, "--queue")
    if not local_ok:
        local = [f"{option} {value}" for option, value in (("--results", results), ("--queue", queue))
                 if value and not value.startswith("hf://datasets/")]
        if local:
            raise ConfigError(f"{local[0]}: a Space cannot read a folder of this machine; pass "
                              "hf://datasets/ORG/NAME (`biobench results push` publishes one), or --local-ok to serve "
                              "this folder from a local app.py")
    proxy = AUTO if trusted_proxy is None else ",".join(check_proxies(list(trusted_proxy)))
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder; pass a new or existing folder to `biobench space init`")
    existing = [name for name in ("README.md", "app.py", "requirements.txt", WHEELS) if (out / name).exists()]
    if existing:
        raise ConfigError(f"{out} already holds {', '.join(existing)}; remove them or choose another folder "
                          "(nothing was written)")
    written = []
    if requirement is None:
        wheel = build_wheel(out / WHEELS)
        written.append(wheel)
        line = wheel_requirement(wheel.name, space)
        comment = f"# biobench {__version__}'s leaderboard extra, from the wheel `biobench space init` built"
    else:
        line, comment = requirement, "# biobench, as given to `biobench space init --requirement`"
    refresh_text = f"every {refresh_minutes:g} minutes" if refresh_minutes else "when you press Refresh"
    files = {
        "README.md": README.format(title=title, title_yaml=json.dumps(title), gradio=_gradio_version(),
                                   results=results, refresh_text=refresh_text,
                                   queue_line=f" and takes evaluation requests into `{queue}`" if queue else ""),
        "app.py": APP.format(version=__version__, results=results, queue=queue or "", refresh=f"{refresh_minutes:g}",
                             proxy=proxy),
        "requirements.txt": f"{comment}\n{line}\n",
    }
    for name, text in files.items():
        atomic_write(out / name, text)
        written.append(out / name)
    return written
