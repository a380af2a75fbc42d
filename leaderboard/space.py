"""`biobench space init`: the files of a Hugging Face Space that serves the leaderboard from a results dataset.

Why generated rather than a template folder to copy: the Space's README metadata (sdk, app_file), the app's
results/queue locations and the pinned biobench version must agree with each other and with the biobench that
wrote them; one function writes all three. The app itself is biobench.leaderboard.app.build_space_app — the
generated app.py only reads its settings (environment variables override them, which is how the local test and a
Space's "Variables" change them without editing code).
"""

from __future__ import annotations

from pathlib import Path

from biobench import __version__
from biobench.errors import ConfigError
from biobench.runtime.files import atomic_write

APP = '''"""The biobench leaderboard as a Hugging Face Space (written by `biobench space init`, biobench {version}).

Settings, each overridable by an environment variable (a Space's "Variables and secrets"):
  BIOBENCH_RESULTS          results dataset (hf://datasets/ORG/NAME), a results.parquet or a results folder
  BIOBENCH_QUEUE            request queue the Submit tab writes to ("" = show the `biobench submit` command)
  BIOBENCH_REFRESH_MINUTES  rescan the results this often (0 = only with the Refresh button)
"""

import os

from biobench.leaderboard.app import LAUNCH_OPTIONS, build_space_app

RESULTS = os.environ.get("BIOBENCH_RESULTS", {results!r})
QUEUE = os.environ.get("BIOBENCH_QUEUE", {queue!r}) or None
REFRESH_MINUTES = float(os.environ.get("BIOBENCH_REFRESH_MINUTES", {refresh!r}))

demo = build_space_app(RESULTS, queue=QUEUE, refresh_minutes=REFRESH_MINUTES)

if __name__ == "__main__":
    demo.launch(server_name=os.environ.get("GRADIO_SERVER_NAME", "0.0.0.0"), **LAUNCH_OPTIONS)
'''

README = '''---
title: {title}
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

Run the same app locally: `pip install -r requirements.txt && python app.py`.
'''


def _gradio_version() -> str:
    from importlib.metadata import version

    return version("gradio")


def write_space(out: str | Path, results: str, queue: str | None = None, refresh_minutes: float = 10.0,
                title: str = "biobench leaderboard", requirement: str | None = None) -> list[Path]:
    """Write README.md (Space metadata), app.py and requirements.txt into `out`; returns the paths written.
    `requirement` is how the Space installs biobench (default: `biobench[leaderboard]==<this version>`; give a
    `git+https://…@<commit>` URL or a wheel's URL where biobench is not on the package index)."""
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ConfigError(f"{out} exists and is not a folder; pass a new or existing folder to `biobench space init`")
    if refresh_minutes < 0:
        raise ConfigError(f"--refresh-minutes must be 0 (off) or positive (got {refresh_minutes:g})")
    existing = [name for name in ("README.md", "app.py", "requirements.txt") if (out / name).exists()]
    if existing:
        raise ConfigError(f"{out} already holds {', '.join(existing)}; remove them or choose another folder "
                          "(nothing was written)")
    out.mkdir(parents=True, exist_ok=True)
    requirement = requirement or f"biobench[leaderboard]=={__version__}"
    refresh_text = f"every {refresh_minutes:g} minutes" if refresh_minutes else "when you press Refresh"
    files = {
        "README.md": README.format(title=title, gradio=_gradio_version(), results=results, refresh_text=refresh_text,
                                   queue_line=f" and takes evaluation requests into `{queue}`" if queue else ""),
        "app.py": APP.format(version=__version__, results=results, queue=queue or "", refresh=f"{refresh_minutes:g}"),
        "requirements.txt": f"# biobench's leaderboard extra, pinned to the biobench that wrote this Space\n"
                            f"{requirement}\n",
    }
    written = []
    for name, text in files.items():
        atomic_write(out / name, text)
        written.append(out / name)
    return written
