"""`biobench space init`: what it writes can be installed and read as written. The generated requirements.txt
installs into a fresh virtualenv offline from the wheel `space init` built (the index serves no biobench); a
title or requirement cannot add YAML keys or requirement lines; a Space is refused a local results folder; the
app binds 127.0.0.1 unless the Space runtime or --host says otherwise."""

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest
from biobench.errors import ConfigError
from biobench.leaderboard.space import serve_host, wheel_requirement, write_space

HUB = "hf://datasets/acme/results"


def cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "biobench.cli", *args], capture_output=True, text=True)


@pytest.mark.parametrize(("argv", "env", "host"), [
    ([], {}, "127.0.0.1"),
    ([], {"SPACE_ID": "acme/leaderboard"}, "0.0.0.0"),
    (["--host", "0.0.0.0"], {}, "0.0.0.0"),
    (["--host=10.1.2.3"], {"SPACE_ID": "x/y"}, "10.1.2.3"),
    ([], {"GRADIO_SERVER_NAME": "127.0.0.2", "SPACE_ID": "x/y"}, "127.0.0.2"),
])
def test_the_app_binds_localhost_unless_told(argv, env, host):
    assert serve_host(argv, env) == host


@pytest.mark.parametrize(("option", "kwargs", "message"), [
    ("--title", {"title": "My board\nsdk: docker"}, "--title 'My board\\nsdk: docker': line breaks"),
    ("--requirement", {"requirement": "biobench @ git+https://x/y\nevil-package"}, "--requirement"),
    ("--refresh-minutes", {"refresh_minutes": float("nan")}, "--refresh-minutes must be 0"),
    ("--refresh-minutes", {"refresh_minutes": float("inf")}, "--refresh-minutes must be 0"),
    ("--refresh-minutes", {"refresh_minutes": -1.0}, "--refresh-minutes must be 0"),
    ("--space", {"space": "not an id"}, "--space 'not an id'"),
])
def test_bad_values_are_refused_before_anything_is_written(tmp_path, option, kwargs, message):
    with pytest.raises(ConfigError, match=message.replace("\\", "\\\\").replace("(", r"\(")):
        write_space(tmp_path / "space", HUB, **{"requirement": "biobench", **kwargs})
    assert not (tmp_path / "space").exists()


def test_a_space_is_refused_a_local_results_folder_unless_local_ok(tmp_path):
    result = cli("space", "init", str(tmp_path / "space"), "--results", str(tmp_path), "--requirement", "biobench")
    assert result.returncode != 0 and "Traceback" not in result.stderr
    assert f"--results {tmp_path}: a Space cannot read a folder of this machine" in result.stderr + result.stdout
    assert not (tmp_path / "space").exists()
    written = write_space(tmp_path / "space", str(tmp_path), local_ok=True, requirement="biobench")
    assert [p.name for p in written] == ["README.md", "app.py", "requirements.txt"]


def test_title_is_one_yaml_value_and_requirement_one_line(tmp_path):
    write_space(tmp_path / "space", HUB, title='Board: "bio" #1', requirement="biobench[leaderboard] @ git+https://g/b@abc")
    front = (tmp_path / "space" / "README.md").read_text().split("---")[1].strip().splitlines()
    assert front[0] == 'title: "Board: \\"bio\\" #1"'
    assert [line.split(":")[0] for line in front] == ["title", "emoji", "colorFrom", "colorTo", "sdk", "sdk_version",
                                                      "app_file", "pinned", "license", "short_description"]
    lines = [ln for ln in (tmp_path / "space" / "requirements.txt").read_text().splitlines() if not ln.startswith("#")]
    assert lines == ["biobench[leaderboard] @ git+https://g/b@abc"]
    assert "serve_host()" in (tmp_path / "space" / "app.py").read_text()


def test_the_wheel_is_named_by_its_url_in_a_named_space():
    assert wheel_requirement("biobench-0.1.0-py3-none-any.whl", "acme/board") == (
        "biobench[leaderboard] @ https://huggingface.co/spaces/acme/board/resolve/main/wheels/"
        "biobench-0.1.0-py3-none-any.whl")
    assert wheel_requirement("biobench-0.1.0-py3-none-any.whl", None) == "./wheels/biobench-0.1.0-py3-none-any.whl[leaderboard]"


def _dependencies_without_biobench(folder: Path) -> Path:
    """A folder linking every installed distribution of this environment except biobench itself: the fresh
    virtualenv sees the dependencies as installed (pip stays offline), so only the wheel is installed."""
    folder.mkdir()
    for entry in Path(sysconfig.get_paths()["purelib"]).iterdir():
        if entry.name.lower().startswith(("biobench", "__editable__", "_biobench")) or entry.suffix == ".pth":
            continue
        (folder / entry.name).symlink_to(entry)
    return folder


@pytest.mark.slow
def test_generated_requirements_install_offline_into_a_fresh_virtualenv(tmp_path):
    """space init builds the wheel; `pip install -r requirements.txt --no-index` in the Space folder installs it
    (with the leaderboard extra, its dependencies found installed) into a new virtualenv, whose biobench is the
    wheel's and serves the Space's imports."""
    space = tmp_path / "space"
    result = cli("space", "init", str(space), "--results", HUB)
    assert result.returncode == 0, result.stderr
    wheels = sorted((space / "wheels").glob("biobench-*.whl"))
    assert len(wheels) == 1
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             capture_output=True, text=True, check=True).stdout.strip()
    (Path(purelib) / "deps.pth").write_text(f"{_dependencies_without_biobench(tmp_path / 'deps')}\n")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL", "PIP_EXTRA_INDEX_URL")}
    install = subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "--no-index",
                              "--find-links", "wheels", "-r", "requirements.txt"],
                             cwd=space, capture_output=True, text=True, env=env)
    assert install.returncode == 0, install.stdout + install.stderr
    assert "Successfully installed biobench-0.1.0" in install.stdout
    probe = subprocess.run([str(python), "-c", "import biobench, biobench.leaderboard.space as s; "
                            "print(biobench.__file__); print(s.serve_host([], {}))"],
                           cwd=tmp_path, capture_output=True, text=True, env=env)
    assert probe.returncode == 0, probe.stderr
    where, host = probe.stdout.split()
    assert where.startswith(purelib) and host == "127.0.0.1"


@pytest.mark.parametrize(("setting", "env", "trusted"), [
    ("auto", {"SPACE_ID": "acme/leaderboard"}, ("10.0.0.0/8",)),  # the hub's proxy, inside a Space
    ("auto", {}, ()),  # a local trial: the connection's own address is the visitor
    ("", {"SPACE_ID": "x/y"}, ()),
    ("127.0.0.1, 10.1.0.0/16", {}, ("127.0.0.1", "10.1.0.0/16")),
])
def test_the_space_trusts_forwarded_headers_from_its_own_proxy_only(setting, env, trusted):
    from biobench.leaderboard.space import space_proxies

    assert space_proxies(setting, env) == trusted


def _run_app(app: Path, monkeypatch, env: dict[str, str]) -> tuple[str, dict]:
    """Run a generated app.py as `python app.py` does, with the server stubbed: FORWARDED_ALLOW_IPS (what uvicorn
    trusts) and the launch options the app passed."""
    import runpy

    from biobench.leaderboard import json_routes

    launched: dict = {}
    monkeypatch.setattr(json_routes, "serve", lambda demo, **options: launched.update(options))
    monkeypatch.setenv("FORWARDED_ALLOW_IPS", "127.0.0.1")  # uvicorn's own default, which the app must replace
    for key in ("SPACE_ID", "BIOBENCH_TRUSTED_PROXY"):
        monkeypatch.delenv(key, raising=False)
    for key, value in env.items():
        monkeypatch.setenv(key, value)
    runpy.run_path(str(app), run_name="__main__")
    return os.environ["FORWARDED_ALLOW_IPS"], launched


def test_the_generated_app_passes_the_trusted_proxy_to_the_server(tmp_path, monkeypatch):
    results = Path(__file__).parents[1] / "fixtures" / "results" / "full-fr"
    write_space(tmp_path / "space", str(results), local_ok=True, requirement="biobench", refresh_minutes=0)
    app = tmp_path / "space" / "app.py"
    assert "trust_proxies(space_proxies(TRUSTED_PROXY))" in app.read_text()
    allowed, launched = _run_app(app, monkeypatch, {"SPACE_ID": "acme/leaderboard"})
    assert allowed == "10.0.0.0/8" and launched["server_name"] == "0.0.0.0"
    assert _run_app(app, monkeypatch, {})[0] == ""  # outside a Space no forwarded header is believed
    assert _run_app(app, monkeypatch, {"SPACE_ID": "a/b", "BIOBENCH_TRUSTED_PROXY": "10.16.0.0/12"})[0] == "10.16.0.0/12"
    write_space(tmp_path / "mine", str(results), local_ok=True, requirement="biobench", refresh_minutes=0,
                trusted_proxy=["127.0.0.1"])
    assert _run_app(tmp_path / "mine" / "app.py", monkeypatch, {})[0] == "127.0.0.1/32"
    with pytest.raises(ConfigError, match="--trusted-proxy 'nope': expected an IP address"):
        write_space(tmp_path / "bad", HUB, requirement="biobench", trusted_proxy=["nope"])
    assert not (tmp_path / "bad").exists()
