"""A hostile corpus, generated (nothing binary is committed): results, results datasets and archives as an
attacker or a broken disk would leave them (issue 20). Tests build it under their tmp dir and check that
nothing escapes its folder, nothing runs in the browser and nothing crashes.

Every script payload sets `window.__xss` (and calls alert), so a browser test can detect it even where an
`alert` hook is bypassed (an onerror handler runs in page context).
"""

from __future__ import annotations

import copy
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).parent / "fixtures" / "results"
TEMPLATE = FIXTURES / "local__tiny-detour" / "diamed" / "seed-42.json"

PAYLOADS = [
    '<img src=x onerror="window.__xss=(window.__xss||0)+1;alert(1)">',
    '"><script>window.__xss=(window.__xss||0)+1;alert(2)</script>',
    "'><svg onload=\"window.__xss=(window.__xss||0)+1;alert(3)\">",
    '[click](javascript:window.__xss=1) `<b onmouseover=alert(4)>` | x | <details open ontoggle=alert(5)>',
]
BAD_LANG = 'fr"><img src=x onerror="window.__xss=(window.__xss||0)+1;alert(8)">'


def template() -> dict[str, Any]:
    return json.loads(TEMPLATE.read_text(encoding="utf-8"))


def _write(root: Path, slug: str, task: str, seed: int, data: dict[str, Any] | str) -> Path:
    path = root / slug / task / f"seed-{seed}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data), encoding="utf-8")
    return path


def script_results(root: Path) -> list[Path]:
    """Results that are valid except that every string field a result has holds HTML/JS: model name, alias,
    id, architecture, lineage (recipe, base model, hardware, corpus), labels, protocol name and hash, device.
    They must show up as text. Plus one with a script in task.lang and one in task.id: Problems, never tabs."""
    paths = []
    for i, payload in enumerate(PAYLOADS):
        data = template()
        model = data["model"]
        model.update(slug=f"xss-{i}", alias=payload, name=payload, id=f"runs/{payload}/final", architecture=payload,
                     context=payload, revision=payload)
        model["lineage"].update(recipe=payload, base_model=payload, hardware=payload, corpus=payload, phase=payload)
        data["task"]["labels"] = [payload, "neuro"]
        data["metrics"]["test"]["per_label"] = {payload: {"f1": 0.5}, "neuro": {"f1": 0.9}}
        data["protocol"].update(name=payload, hash=payload)
        data["device"] = payload
        data["predictions"] = None
        for seed in (42, 43):
            paths.append(_write(root, f"xss-{i}", "diamed", seed, {**copy.deepcopy(data), "seed": seed,
                                                                     "key": {"seed": seed}}))
    data = template()
    data["model"].update(slug="xss-lang", alias="xss-lang")
    data["task"].update(lang=BAD_LANG, id="diamed")
    data["predictions"] = None
    paths.append(_write(root, "xss-lang", "diamed", 42, data))
    data = template()
    data["model"].update(slug="xss-task", alias="xss-task")
    data["task"].update(id=PAYLOADS[0], lang="fr")
    data["predictions"] = None
    paths.append(_write(root, "xss-task", "diamed", 42, data))
    data = template()  # a predictions file name that leads out of the results folder
    data["model"].update(slug="escape-predictions", alias="escape-predictions")
    data["predictions"] = "../../../../../../etc/passwd"
    paths.append(_write(root, "escape-predictions", "diamed", 42, data))
    return paths


# The bad rows of a crafted results dataset and the column that makes each bad (issue 20 §1).
TRAVERSAL_ROWS = [
    ("model_slug", "../../../../victim/model"),
    ("model_slug", "{victim}/model"),  # an absolute path (filled in with the victim folder)
    ("task", "../../../../victim/task"),
    ("task", "{victim}"),
    ("model_slug", ".."),
    ("model_slug", "a/../../../../victim/b"),
]


def traversal_parquet(path: Path, victim: Path, export: Path) -> int:
    """A results.parquet (from a real `--export`, `export`) with one row per TRAVERSAL_ROWS case appended;
    returns how many bad rows it holds. `victim` is a folder outside the cache the rows aim at."""
    import pandas as pd

    frame = pd.read_parquet(export)
    bad = []
    for column, value in TRAVERSAL_ROWS:
        row = frame.iloc[0].copy()
        row[column] = value.format(victim=victim)
        bad.append(row)
    deep = frame.iloc[0].copy()  # a result column nested too deeply for json (RecursionError today)
    deep["model_slug"], deep["result"] = "deep-json", "[" * 200_000 + "]" * 200_000
    bad.append(deep)
    pd.concat([frame, pd.DataFrame(bad)], ignore_index=True).to_parquet(path, index=False)
    return len(bad)


def malformed_results(root: Path) -> dict[str, str]:
    """Issue 20 §2: result files that crashed or hung the app. Returns {file path: what is wrong}; each must
    become one Problems line (the validating result reader)."""
    cases: dict[str, str] = {}

    def case(slug: str, what: str, edit) -> None:
        data = template()
        data["model"].update(slug=slug, alias=slug)
        data["predictions"] = None
        edit(data)
        text = json.dumps(data, allow_nan=True)
        cases[str(_write(root, slug, "diamed", 42, text))] = what

    case("seed-infinity", "seed Infinity", lambda d: d.update(seed=float("inf")))
    case("tokens-nan", "lineage.tokens.seen NaN", lambda d: d["model"]["lineage"]["tokens"].update(seen=float("nan")))
    case("params-huge", "model.params 10**400", lambda d: d["model"].update(params=10**400))
    case("speed-inf", "timings.tokens_per_s inf", lambda d: d.update(timings={"tokens_per_s": float("inf")}))
    deep = root / "deep-json" / "diamed" / "seed-42.json"
    deep.parent.mkdir(parents=True)
    deep.write_text('{"schema": "biobench.result/1", "model": ' + "[" * 200_000 + "]" * 200_000 + "}")
    cases[str(deep)] = "JSON nested 200k deep"
    fifo = root / "fifo" / "diamed" / "seed-42.json"
    fifo.parent.mkdir(parents=True)
    os.mkfifo(fifo)
    cases[str(fifo)] = "a FIFO"
    zero = root / "dev-zero" / "diamed" / "seed-42.json"
    zero.parent.mkdir(parents=True)
    zero.symlink_to("/dev/zero")
    cases[str(zero)] = "a symlink to /dev/zero"
    big = root / "huge" / "diamed" / "seed-42.json"
    big.parent.mkdir(parents=True)
    with open(big, "wb") as fh:  # sparse: 300 MB on paper, nothing on disk
        fh.truncate(300 * 1024 * 1024)
    cases[str(big)] = "a 300 MB result file"
    return cases


# --- archives (issue 20 §3) -------------------------------------------------------------------------


def zip_bytes(members: dict[str, bytes], compression: int = zipfile.ZIP_DEFLATED) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression) as zf:
        for name, data in members.items():
            zf.writestr(name, data)
    return buf.getvalue()


def tar_bytes(members: dict[str, bytes], mode: str = "w:gz") -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode=mode) as tf:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            tf.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def bomb_zip(member: str, size: int, others: dict[str, bytes] | None = None) -> bytes:
    """A zip whose `member` expands to about `size` bytes of one repeated line (~1000x compression), plus
    `others` as they are."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as zf:
        for name, data in (others or {}).items():
            zf.writestr(name, data)
        with zf.open(member, "w", force_zip64=True) as out:
            chunk = b"word\tO\n" * (1 << 16)
            for _ in range(size // len(chunk)):
                out.write(chunk)
    return buf.getvalue()
