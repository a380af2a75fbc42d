"""runtime.ownership: biobench removes or replaces only what it created (issue 57). Every case aims at tmp_path
folders holding sentinel files; `/`, the home folder and the working folder are refused through the checking
function with a monkeypatched HOME and working folder, never by running a command on them."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from biobench.errors import ConfigError
from biobench.runtime import ownership
from biobench.runtime.ownership import (
    MARKER,
    check_output_folder,
    free_name,
    mark_created,
    owned,
    protected,
    remove_inside,
    remove_owned,
)


def _sentinel(folder: Path, name: str = "mine.txt") -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_bytes(b"the user's bytes\n")
    return path


def test_a_new_folder_is_created_marked_first_and_owned(tmp_path, monkeypatch):
    monkeypatch.setattr("sys.argv", ["biobench", "corpus", "build", "/secret/path", "--out", "x"])
    out = check_output_folder(tmp_path / "store", "--out", "token store")
    record = json.loads((out / MARKER).read_text())
    assert record["format"] == "biobench-folder" and record["what"] == "token store"
    assert record["command"] == "biobench corpus build"  # the subcommand words, never a path
    assert list(out.iterdir()) == [out / MARKER]
    assert owned(out)


def test_a_folder_of_the_user_is_refused_in_one_line_with_a_free_name(tmp_path):
    user = tmp_path / "DIR"
    sentinel = _sentinel(user / "work")
    (tmp_path / "DIR-2").mkdir()  # taken: the suggestion is the closest free name
    with pytest.raises(ConfigError) as err:
        check_output_folder(user, "--out", "token store")
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"--out {user} is a folder biobench did not create")
    assert str(tmp_path / "DIR-3") in message
    assert sorted(p.name for p in user.iterdir()) == ["work"] and sentinel.read_bytes() == b"the user's bytes\n"


def test_an_empty_folder_is_taken_and_a_legacy_one_recognised(tmp_path):
    empty = tmp_path / "empty"
    empty.mkdir()
    assert check_output_folder(empty, "--out", "run") == empty and (empty / MARKER).is_file()
    old = tmp_path / "old"
    _sentinel(old, "plan.json")
    check_output_folder(old, "--out", "run", legacy=lambda folder: (folder / "plan.json").is_file())
    assert (old / MARKER).is_file()  # taken up: marked now


@pytest.mark.parametrize("which", ["root", "home", "cwd"])
def test_root_home_and_working_folder_are_refused_always(tmp_path, monkeypatch, which):
    home, cwd = tmp_path / "home", tmp_path / "cwd"
    home.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("HOME", str(home))
    monkeypatch.chdir(cwd)
    target = {"root": Path("/"), "home": home, "cwd": Path(".")}[which]
    if which != "root":
        mark_created(target, "a folder biobench made")  # a marker does not make them writable either
    assert protected(target) == {"root": "the root folder", "home": "the home folder",
                                 "cwd": "the working folder itself"}[which]
    with pytest.raises(ConfigError, match=r"biobench writes only into a folder of its own") as err:
        check_output_folder(target, "--out", "token store")
    assert "\n" not in str(err.value)


def test_a_mount_point_is_refused(tmp_path, monkeypatch):
    mount = tmp_path / "mnt"
    mount.mkdir()
    monkeypatch.setattr(os.path, "ismount", lambda path: Path(path) == mount)
    with pytest.raises(ConfigError, match="is a mount point"):
        check_output_folder(mount, "--out", "run")
    assert protected(tmp_path / "elsewhere") is None


def test_remove_owned_refuses_what_biobench_did_not_make(tmp_path):
    user = tmp_path / "work"
    sentinel = _sentinel(user)
    with pytest.raises(ConfigError, match="was not created by biobench"):
        remove_owned(user)
    assert sentinel.read_bytes() == b"the user's bytes\n"
    ours = mark_created(tmp_path / "ours", "scratch")
    _sentinel(ours)
    remove_owned(ours)
    assert not ours.exists()


def test_a_marker_written_by_another_process_is_honoured_a_forged_one_is_not(tmp_path):
    folder = mark_created(tmp_path / "built", "token store")
    ownership._CREATED.clear()  # as another process sees it
    assert owned(folder)
    (folder / MARKER).write_text('{"format": "something else"}')
    assert not owned(folder)
    link = tmp_path / "link"
    link.symlink_to(mark_created(tmp_path / "target", "x"))
    assert not owned(link)  # a link is never biobench's to remove


def test_remove_inside_needs_an_owned_root_and_no_link_out(tmp_path):
    root = mark_created(tmp_path / "root", "benchmark")
    outside = _sentinel(tmp_path / "outside")
    (root / "cache").symlink_to(outside.parent)
    remove_inside(root / "cache", root)  # the link's name only
    assert outside.read_bytes() == b"the user's bytes\n" and not (root / "cache").exists()
    _sentinel(root / "results")
    remove_inside(root / "results", root)
    assert not (root / "results").exists()
    user = tmp_path / "user"
    sentinel = _sentinel(user / "results")
    with pytest.raises(ConfigError):
        remove_inside(user / "results", user)
    assert sentinel.exists()


def test_free_name_counts_up(tmp_path):
    (tmp_path / "d").mkdir()
    assert free_name(tmp_path / "d") == tmp_path / "d-2"
