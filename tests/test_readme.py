"""The README, read top to bottom by a new user: every command in it is valid as written, the ones that need
no GPU, hub or credentialed data run (on generated data), and every link stays inside the repository."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest
from biobench import cli

from tests.support import readme_fenced as fenced

ROOT = Path(__file__).resolve().parent.parent
README = (ROOT / "README.md").read_text(encoding="utf-8")


def commands() -> list[list[str]]:
    """The README's shell commands: continuation lines joined, comments dropped."""
    out = []
    for block in fenced("bash"):
        for line in block.replace("\\\n", " ").splitlines():
            words = shlex.split(line, comments=True)
            if words:
                out.append(words)
    return out


def test_readme_starts_with_the_demo_and_the_tests():
    first = fenced("bash")[0]
    assert [c for c in commands()[:2]] == [["bash", "scripts/demo.sh"], ["bash", "scripts/test.sh"]]
    assert "scripts/demo.sh" in first and README.index(first) < README.index("## ")
    for script in ("demo.sh", "test.sh", "setup.sh"):
        assert (ROOT / "scripts" / script).is_file()


def test_every_biobench_command_parses_as_written():
    parser = cli.build_parser()
    seen = 0
    for words in commands():
        if words[0] != "biobench":
            assert words[0] in ("bash", "source"), f"unexpected README command {words}"
            continue
        args = parser.parse_args(words[1:])  # a wrong option or value exits here, naming it
        assert callable(args.func), words
        seen += 1
    assert seen >= 10


def test_links_stay_inside_the_repository():
    links = re.findall(r"\]\(([^)#]+)", README)
    assert links and not [link for link in links if link.startswith(("..", "/", "http"))]
    missing = [link for link in links if not (ROOT / link).exists() and link != "docs/ARCHITECTURE.md"]
    assert not missing, f"README links to files that do not exist: {missing}"
    assert "../" not in README and "shared/" not in README


def test_local_commands_run_on_generated_data(tmp_path, monkeypatch, capsys, tiny_mlm_dir):
    """What needs no GPU, hub or credentialed data runs: the task listing and data status on an empty data/,
    and the own-task recipe on the README's own spec and TSV lines (eval with a tiny model, one seed)."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("BIOBENCH_CACHE", str(tmp_path / "cache"))
    (tmp_path / "data").mkdir()
    (tmp_path / "my-specialty.json").write_text(fenced("json")[0], encoding="utf-8")
    for split in ("train", "dev", "test"):
        (tmp_path / f"{split}.tsv").write_text(fenced("text")[0], encoding="utf-8")
    ran = []
    for words in commands():
        argv = words[1:]
        local = argv[:1] == ["tasks"] or argv[:2] == ["data", "status"] or "--task-file" in argv
        if words[0] != "biobench" or not local:
            continue
        if "path/to/my-model" in argv:
            argv = [str(tiny_mlm_dir) if a == "path/to/my-model" else a for a in argv]
            argv += ["--seeds", "1", "--epochs", "1", "--no-progress"]
        assert cli.main(argv) == 0, words
        ran.append(argv[0])
    out = capsys.readouterr().out
    assert ran.count("tasks") >= 2 and "data" in ran and "eval" in ran
    assert "my-specialty" in out and "test macro-F1" in out
    # --epochs 1 is a protocol override: a smoke run, in a file of its own beside seed-1.json
    assert [p.name for p in (tmp_path / "results").glob("*/my-specialty/seed-1*.json")] == [
        next((tmp_path / "results").glob("*/my-specialty/seed-1.smoke-*.json")).name]


@pytest.mark.parametrize("word", ["we", "our", "us", "session", "helper", "was built", "agent"])
def test_readme_says_what_biobench_does_not_how_it_was_made(word):
    assert not re.search(rf"\b{word}\b", README, flags=re.I)


def test_the_folders_the_readme_and_the_commands_write_are_git_ignored():
    """Issue 62 item 6: `stores/` (the README's `corpus build --out stores/...`) and `eee/` (`results export
    --format every-eval-ever --out eee/`) showed as untracked files in the user's clone; so would
    `./biobench-slurm/`, the launcher's default log folder. Every `--out` folder of the README, and those, are
    ignored by the repository's .gitignore."""
    import subprocess

    text = (ROOT / "README.md").read_text(encoding="utf-8")
    folders = {path.split("/")[0] for path in re.findall(r"--out (?:\./)?([\w.-]+/[^\s`)]*)", text)}
    assert {"runs", "stores"} <= folders, folders
    for folder in sorted(folders | {"eee", "biobench-slurm", "results"}):
        probe = f"{folder}/some-file"
        ignored = subprocess.run(["git", "check-ignore", "-q", "--no-index", probe], cwd=ROOT)
        assert ignored.returncode == 0, f"{probe} is not git-ignored"


@pytest.mark.slow
def test_the_paper_scale_run_of_pretraining_md_runs_as_written(tmp_path):
    """Issue 59: docs/PRETRAINING.md's three commands of a paper-scale run, with its config file, run from a
    folder holding the mix: the build checks every source first (one message naming the 4 corpora to put in
    place), the plan reads the config and resolves the mix relative to the folder (the 4 stores to build), and
    pretrain reads the same config (its settings line) before it needs the hub model."""
    import os
    import shutil
    import subprocess
    import sys

    text = (ROOT / "docs" / "PRETRAINING.md").read_text(encoding="utf-8")
    section = text[text.index("### A paper-scale run, in three commands"):]
    config = re.search(r"^```toml\n# (\S+)\n(.*?)^```", section, flags=re.M | re.S)
    script = re.search(r"^```bash\n(.*?)^```", section, flags=re.M | re.S)
    assert config and script
    (tmp_path / config.group(1)).parent.mkdir(parents=True)
    (tmp_path / config.group(1)).write_text(config.group(2), encoding="utf-8")
    (tmp_path / "examples" / "mixes").mkdir(parents=True)
    shutil.copy(ROOT / "examples" / "mixes" / "paper-fr.toml", tmp_path / "examples" / "mixes")
    lines = [shlex.split(line, comments=True) for line in script.group(1).splitlines()]
    assert [words[:3] for words in lines] == [["biobench", "corpus", "build"], ["biobench", "corpus", "plan"],
                                              ["biobench", "pretrain", "--config"]]
    biobench = str(Path(sys.executable).parent / "biobench")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    runs = [subprocess.run([biobench, *words[1:]], cwd=tmp_path, capture_output=True, text=True, timeout=300,
                           env=env) for words in lines]
    assert runs[0].returncode == 2 and "cannot build 4 store(s)" in runs[0].stderr, runs[0].stderr
    assert runs[1].returncode == 2 and "4 of 4 store(s) not built yet" in runs[1].stderr, runs[1].stderr
    assert "corpus examples/mixes/paper-fr.toml, phase-1 budget 10,000,000,000 tokens" in runs[2].stdout + \
        runs[2].stderr, runs[2].stdout + runs[2].stderr
