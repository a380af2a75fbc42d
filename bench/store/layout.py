"""Where a model's results live: `<results>/<display name>--<8 digits of its revision>/<task>/seed-<n>.json`.

Why this shape: results are keyed by the exact weights they were computed with (a hub commit, or the sha256 of
a local folder's weight files), so a results folder is named by what the model is plus the first digits of
that revision, never by where its files lie: two different `final/` folders never share results, and a copied
or moved model finds its own. Folders of the old layout (no `--<digits>` ending) are still found by the
revision their result files record. Torch-free: the board, the eval grid and `card` all find folders here.
"""

from __future__ import annotations

import contextlib
import os
import re
from pathlib import Path

from biobench.errors import ResultsError
from biobench.runtime.files import atomic_write
from biobench.store.record import SEED_FILE, Result
from biobench.store.result_files import iter_results, read_result

_REVISION_SUFFIX = re.compile(r"--([0-9a-f]{8})$")


def legacy_results(folder: Path) -> bool:
    """A results folder a biobench before the ownership marker wrote: it holds a result file where eval puts them
    (`<model>/<task>/seed-<n>.json`)."""
    return next(Path(folder).glob("*/*/seed-*.json"), None) is not None


def model_slug(model_id: str) -> str:
    """Filesystem-safe name of a model: `org/name` -> `org__name`, 'detour · tiny · 2M' -> 'detour_tiny_2M'."""
    return re.sub(r"[^A-Za-z0-9._-]+", "_", model_id.replace("/", "__")).strip("._")[:80] or "model"


def short_revision(revision: str | None) -> str | None:
    """The first 8 hex digits of a revision ('sha256:<hex>' of local weights, or a hub commit); None when the
    revision is unknown."""
    digits = str(revision or "").split(":", 1)[-1].lower()
    return digits[:8] if re.fullmatch(r"[0-9a-f]{8,}", digits) else None


def results_slug(name: str, revision: str | None) -> str:
    """The results folder name of a model: its display name made filesystem-safe, '--', 8 digits of its
    revision ('detour · tiny · 400k', 'sha256:3fa2…' -> 'detour_tiny_400k--3fa2…')."""
    short = short_revision(revision)
    return f"{model_slug(name)}--{short}" if short else model_slug(name)


def model_group(result: Result, path: str | Path | None = None) -> str:
    """The one identity of the model a result belongs to, wherever results are grouped by model (the board,
    `compare`, `results export`, `load_results` and its summary, push, the card): its results folder, display
    name + 8 digits of its revision, as the result records it (`model.slug`, the folder eval wrote it into); a
    result that does not record it, by the folder it lies in (`<results>/<folder>/<task>/seed-<n>.json`), else
    by its model id and revision (`results_slug`). Never the display name alone: two checkpoints of one recipe,
    base and budget share 'detour · tiny · 213k', and grouping by it filed one checkpoint's score under the
    other's revision (issue 57 item 2)."""
    slug = result.model.get("slug")
    if isinstance(slug, str) and slug:
        return slug
    if path is not None and SEED_FILE.fullmatch(Path(path).name) and Path(path).parent.parent.name:
        return Path(path).parent.parent.name
    return results_slug(str(result.model.get("id") or result.model.get("source") or "model"),
                        result.model.get("revision"))


def _folder_revision(folder: Path) -> str | None:
    """The model revision recorded by one result file of a results sub-folder (None when it has none); read with
    the store's validating reader (a FIFO or a huge file there is skipped, never read)."""
    for path in folder.glob("*/seed-*.json"):
        with contextlib.suppress(ResultsError):
            return read_result(path, check_key=False).model.get("revision")
    return None


def folders_of_revision(results_dir: str | Path, revision: str) -> list[Path]:
    """Every results sub-folder holding results of these weights: the ones whose name ends in the revision's
    8 digits, then folders of the old layout (no such ending) whose results record this revision."""
    root, short = Path(results_dir), short_revision(revision)
    if not root.is_dir():
        return []
    folders = sorted(p for p in root.iterdir() if p.is_dir())
    named = [p for p in folders if short and (m := _REVISION_SUFFIX.search(p.name)) and m[1] == short]
    legacy = [p for p in folders if not _REVISION_SUFFIX.search(p.name) and "--" not in p.name
              and _folder_revision(p) == revision]
    return named + legacy


def results_of_revision(results_dir: str | Path, revision: str) -> list[Result]:
    """Every result of the weights with this revision, in whichever results sub-folder it lies (the folder
    named after the model, one written under another name or location of the same weights, the old layout)."""
    return [result for folder in folders_of_revision(results_dir, revision)
            for _, result in iter_results(results_dir, folder.name) if result.model.get("revision") == revision]


def results_folder(results_dir: str | Path, display: str, revision: str | None) -> Path:
    """Where the results of a model go and are found: `<results>/<display name>--<8 digits of revision>`.
    When that folder does not exist yet, an existing folder of the same weights is used instead (the model
    was moved, copied or renamed, or its results predate this naming), so finished runs are found and skipped."""
    preferred = Path(results_dir) / results_slug(display, revision)
    if preferred.is_dir() or revision is None or short_revision(revision) is None:
        return preferred
    existing = folders_of_revision(results_dir, revision)
    return existing[0] if existing else preferred


def rename_results(results_dir: str | Path, folder: str, name: str, revision: str) -> Path:
    """Name the results of one model's weights `name` (`eval --name` on weights already evaluated under another
    name, issue 57 item 9): each result file of `<results>/<folder>` gets `model.name` = `name` and `model.slug` =
    its new folder (`results_slug(name, revision)`), rewritten atomically, then the folder takes that name, so
    the board shows the new name and `compare "<name>"` finds it. Files first, the folder last: a rename cut
    half way leaves results whose recorded folder is the new one in the old folder, which the next `--name`
    run renames again (store.model_group reads the recorded folder). Only a folder of these weights alone is
    renamed: it must be named by the revision's 8 digits, every result in it must record this revision, and no
    run of it may be claimed (another eval at work there writes into the old folder). ResultsError naming what
    stops it otherwise; nothing is changed then. Returns the new folder."""
    root = Path(results_dir)
    old, new = root / folder, root / results_slug(name, revision)
    short = short_revision(revision)
    match = _REVISION_SUFFIX.search(folder)
    if not short or not match or match[1] != short:
        raise ResultsError(f"{old} is not named by these weights' revision ({short}); not renamed")
    if new.exists():
        raise ResultsError(f"{new} exists; not renamed")
    claimed = sorted(old.glob("*/seed-*.claim"))
    if claimed:
        raise ResultsError(f"{claimed[0]}: a run of it is claimed (another eval may be at work there); not renamed")
    found = list(iter_results(root, folder))
    other = next((path for path, result in found if result.model.get("revision") != revision), None)
    if other is not None:
        raise ResultsError(f"{other} holds results of other weights; not renamed")
    for path, result in found:
        result.model.update(name=name, slug=new.name)
        atomic_write(path, result.to_json())
    try:
        os.rename(old, new)
    except OSError as err:
        if not new.is_dir():  # another process of the same --name renamed it first: done either way
            raise ResultsError(f"{old}: could not be renamed to {new.name} ({err})") from None
    return new
