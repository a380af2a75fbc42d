"""Every command that takes an output folder, pointed at a folder of the user's, and (for the long ones) killed half
way and rerun: every file of the user's survives byte for byte (issue 57, docs/RELIABILITY.md "Ownership").

A user's folder holds a sentinel file at its top and inside each subfolder name biobench uses (`work/`, `shards/`,
`final/`, `resume-*/`, `logs/`, `.study/`, ...). Before the ownership marker, `corpus build --out DIR` took a
`DIR/work/` for an unfinished store and removed it, and `pretrain --out DIR` replaced a `DIR/final/`. A command may
be refused (one line); it must never remove or change a sentinel. No test points a command at `/` or a home
folder: their refusal is tested through the checking function (tests/runtime/test_ownership.py)."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from biobench import cli

from tests.support import RESULTS_FIXTURES, pretrain_args, pretrain_corpus

# the subfolder names biobench gives things inside an output folder (token store, pretraining run, study, space,
# data staging, eval results, analyses)
BIOBENCH_NAMES = ["work", "shards", "final", "final.tmp", "init", "phase1", "resume-1024", "resume-1024.tmp",
                  "step-512", "logs", "slurm", ".study", ".study/plans", "runs", "analyses", "corpus", "tokenizer",
                  "data", "data/biobench", "wheels", "results", "chemprot", ".biobench-chemprot-x1"]
SENTINEL = "users-notes.txt"


def plant(folder: Path) -> dict[str, bytes]:
    """A folder of the user's: a sentinel at its top and in each name biobench uses; returns what it holds."""
    for name in ["", *BIOBENCH_NAMES]:
        (folder / name).mkdir(parents=True, exist_ok=True)
        (folder / name / SENTINEL).write_bytes(f"the user's own file in /{name}\n".encode() + os.urandom(16))
    return sentinels(folder)


def sentinels(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob(SENTINEL))}



def _corpus(tmp: Path) -> Path:
    src = tmp / "corpus.jsonl"
    src.write_text("".join(json.dumps({"text": f"Le patient {i} présente une fièvre."}) + "\n" for i in range(40)))
    return src


def _study(tmp: Path) -> Path:
    path = tmp / "study.toml"
    path.write_text('[[pretrain]]\nname = "detour"\nrecipe = "detour"\nmodel = "preset:tiny"\n'
                    'corpus = "generated:demo-fr"\ntokens = "4K"\nseq_len = 64\nbatch_size = 4\n')
    return path


def _chemprot_archive(tmp: Path) -> Path:
    rows = "index\tsentence\tlabel\n1.T1.T2\t@CHEMICAL$ inhibits @GENE$.\tCPR:4\n"
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for s in ("train", "dev", "test"):
            zf.writestr(f"bert_data/ChemProt/{s}.tsv", rows)
    archive = tmp / "bert_data.zip"
    archive.write_bytes(buffer.getvalue())
    return archive


# (command, its argv given the user's folder DIR, a scratch folder and the fixtures' folders; the error it must
# refuse a folder of the user's with, or None when it writes its own files beside the user's)
Argv = Callable[[Path, Path, dict[str, Path]], list[str]]
USERS = "{user} is a folder biobench did not create"
COMMANDS: list[tuple[str, Argv, str | None]] = [
    ("corpus build", lambda d, t, f: ["corpus", "build", str(_corpus(t)), "--tokenizer", str(f["tok"]),
                                      "--out", str(d)], USERS),
    ("pretrain", lambda d, t, f: pretrain_args(pretrain_corpus(t), d, 512)[2:], USERS),
    ("eval", lambda d, t, f: ["eval", "--model", str(f["model"]), "--tasks", "demo-cls", "--seeds", "42",
                              "--epochs", "1", "--limit-train", "16", "--results", str(d), "--device", "cpu"], USERS),
    ("study run", lambda d, t, f: ["study", "run", str(_study(t)), "--out", str(d)], USERS),
    ("demo", lambda d, t, f: ["demo", "--out", str(d), "--no-minilm"], USERS),
    ("analyze needle generate", lambda d, t, f: ["analyze", "needle", "generate", "--haystacks", str(_corpus(t)),
                                                 "--out", str(d), "--examples", "8", "--lengths", "64",
                                                 "--length-unit", "words"], USERS),
    ("results export", lambda d, t, f: ["results", "export", "--format", "every-eval-ever", "--results",
                                        str(RESULTS_FIXTURES), "--out", str(d)], USERS),
    ("results push --dry-run", lambda d, t, f: ["results", "push", "acme/results", "--results",
                                                str(RESULTS_FIXTURES), "--dry-run", str(d)], USERS),
    # these write only files of their own names beside the user's (space init refuses its wheels/ folder)
    ("leaderboard --export", lambda d, t, f: ["leaderboard", "--results", str(RESULTS_FIXTURES), "--no-reference",
                                              "--export", str(d / "board.csv")], None),
    ("space init", lambda d, t, f: ["space", "init", str(d), "--results", "hf://datasets/acme/results",
                                    "--requirement", "biobench[leaderboard]"],
     "{user} already holds wheels; remove them or choose another folder (nothing was written)"),
    ("data add", lambda d, t, f: ["data", "add", "chemprot", str(_chemprot_archive(t)), "--data-dir", str(d)], None),
]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "argv", "refusal"), COMMANDS, ids=[c[0] for c in COMMANDS])
def test_a_folder_of_the_user_keeps_every_file(tmp_path, capsys, tok_dir, tiny_mlm_dir, name, argv, refusal):
    user = tmp_path / "DIR"
    before = plant(user)
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    rc = cli.main(argv(user, scratch, {"tok": tok_dir, "model": tiny_mlm_dir}))
    err = capsys.readouterr().err
    assert sentinels(user) == before, f"{name} changed or removed a file of the user's (rc {rc}): {err[-1500:]}"
    if refusal is not None:
        assert rc == 2, err[-1500:]
        assert err.count("\n") == 1 and refusal.format(user=user) in err and "Traceback" not in err
        if refusal == USERS:
            assert str(tmp_path / "DIR-2") in err  # the closest free name
        assert sorted(p.name for p in user.iterdir()) == sorted({n.split("/")[0] for n in BIOBENCH_NAMES} | {SENTINEL})
    else:
        assert rc == 0, err[-1500:]


def test_corpus_build_beside_a_work_folder_of_the_user_removes_nothing(tmp_path, capsys, tok_dir):
    """The issue's case, fast: DIR holds the user's work/ only; the build is refused and work/ is as it was."""
    user = tmp_path / "DIR"
    (user / "work").mkdir(parents=True)
    (user / "work" / "thesis.tex").write_bytes(b"\\chapter{one}\n")
    rc = cli.main(["corpus", "build", str(_corpus(tmp_path)), "--tokenizer", str(tok_dir), "--out", str(user)])
    err = capsys.readouterr().err
    assert rc == 2 and err.count("\n") == 1 and "did not create" in err
    assert (user / "work" / "thesis.tex").read_bytes() == b"\\chapter{one}\n"
    assert sorted(p.name for p in user.rglob("*")) == ["thesis.tex", "work"]


# ---------------------------------------------------------------- killed half way, then rerun
def _kill_when(cmd: list[str], ready: Callable[[], bool], timeout: float = 180) -> None:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while not ready() and time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert ready(), f"{cmd[3:5]} ended before the point to kill it at: {proc.stderr.read().decode()[-1500:]}"


def _rerun(cmd: list[str]) -> subprocess.CompletedProcess:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "TOKENIZERS_PARALLELISM": "false"}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


def _killed_case(tmp_path: Path, tok_dir: Path, model: Path, which: str) -> tuple[list[str], Path, Callable[[], bool]]:
    out = tmp_path / "parent" / "out"
    if which == "corpus build":
        src = tmp_path / "big.jsonl"
        src.write_text("".join(json.dumps({"text": f"Document {i} : " + "mot " * (i % 50)}) + "\n" for i in range(6000)))
        cmd = ["corpus", "build", str(src), "--tokenizer", str(tok_dir), "--out", str(out), "--unit-mb", "0.02"]
        return cmd, out, lambda: len(list((out / "work").glob("*.done"))) >= 2
    if which == "pretrain":
        # a resumable checkpoint every 2 steps (step-<tokens>/): killed after the first, resumed by the rerun
        cmd = pretrain_args(pretrain_corpus(tmp_path), out, 4 * 64 * 24)[2:] + ["--save-every", "512", "--resume"]
        return cmd, out, lambda: any(not p.name.endswith(".tmp") and (p / "resume" / "trainer_state.safetensors").is_file()
                                     for p in out.glob("step-*"))  # a finished one (step-N.tmp/ is being written)
    cmd = ["eval", "--model", str(model), "--tasks", "demo-cls", "--seeds", "42-44", "--epochs", "1",
           "--limit-train", "32", "--results", str(out), "--device", "cpu", "--no-progress"]
    return cmd, out, lambda: next(out.glob("*/*/seed-*.json"), None) is not None


@pytest.mark.slow
@pytest.mark.parametrize("which", ["corpus build", "pretrain", "eval"])
def test_killed_half_way_and_rerun_keeps_every_file_of_the_user(tmp_path, tok_dir, tiny_mlm_dir, which):
    """The output folder inside a folder of the user's (sentinels in the names biobench uses beside it), the
    command killed with SIGKILL half way; the user then drops a note at the top of the output folder; the rerun
    finishes (or refuses in one line) and every sentinel is as it was."""
    cmd, out, ready = _killed_case(tmp_path, tok_dir, tiny_mlm_dir, which)
    before = plant(out.parent)
    full = [sys.executable, "-m", "biobench.cli", *cmd]
    if which == "pretrain":
        full = [sys.executable, "-m", "biobench.cli", *[a for a in cmd if a != "--resume"]]
    _kill_when(full, ready)
    note = out / SENTINEL
    note.write_bytes(b"a note the user left beside the outputs\n")
    before[str(note.relative_to(out.parent))] = note.read_bytes()
    result = _rerun([sys.executable, "-m", "biobench.cli", *cmd])
    assert result.returncode == 0, result.stderr[-2000:]
    assert sentinels(out.parent) == before
