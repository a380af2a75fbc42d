"""Hugging Face datasets -> rows: a hub id + revision, a local parquet file/folder, or a save_to_disk folder.

datasets>=4 runs no loading scripts, so a hub source must hold data files (parquet/json/csv), e.g. the
`refs/convert/parquet` revision the hub builds for script datasets. ClassLabel columns are turned into
their names so rows look like any other source's.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from biobench.errors import DataError
from biobench.tasks.hub import ensure_hub_mode, offline_reason
from biobench.tasks.readers.rows import Row
from biobench.tasks.readers.textio import check_data_file


def _label_names(feature: Any) -> list[str] | None:
    names = getattr(feature, "names", None)
    if names is None and hasattr(feature, "feature"):
        names = getattr(feature.feature, "names", None)
    return list(names) if names else None


def dataset_rows(dataset: Any, where: str) -> list[Row]:
    """Rows of a `datasets.Dataset`, ClassLabel ints (also inside sequences) replaced by their names."""
    label_cols = {c: n for c, f in dataset.features.items() if (n := _label_names(f))}
    rows = []
    for i, row in enumerate(dataset):
        for col, names in label_cols.items():
            value = row[col]
            row[col] = [names[v] for v in value] if isinstance(value, list) else names[value]
        rows.append((f"{where}[{i}]", row))
    return rows


def load_local(path: str | Path) -> Any:
    """A save_to_disk folder, or parquet file(s) as a single 'train' split."""
    import datasets

    path = Path(path)
    # datasets opens the files itself: each is checked first (a regular file, bounded), so a FIFO or a link to
    # /dev/zero among them is one line, not a hang
    if path.is_dir() and ((path / "dataset_info.json").exists() or (path / "dataset_dict.json").exists()):
        for file in sorted(p for p in path.rglob("*") if not p.is_dir()):
            check_data_file(file)
        return datasets.load_from_disk(str(path))
    files = sorted(str(p) for p in path.rglob("*.parquet")) if path.is_dir() else [str(path)]
    if not files:
        raise DataError(f"{path}: no .parquet files and no save_to_disk folder here")
    for data_file in files:
        check_data_file(data_file)
    return datasets.load_dataset("parquet", data_files=files, split="train")


def load_hub(dataset_id: str, revision: str | None, config: str | None = None) -> Any:
    """A hub dataset as a DatasetDict; offline or unreachable -> DataError naming the id and HF_HUB_OFFLINE."""
    import datasets

    ensure_hub_mode()
    try:
        return datasets.load_dataset(dataset_id, config, revision=revision)
    except Exception as err:  # network, auth, missing revision: all become one clear message
        why = offline_reason() or f"the hub did not serve it ({type(err).__name__})"
        raise DataError(
            f"could not load hub dataset {dataset_id!r} (revision {revision or 'main'}): it is not in the local "
            f"cache, and {why}. Check network access (and unset HF_HUB_OFFLINE if you set it), or download the "
            "data and use --data-dir"
        ) from err


def hub_split_rows(dd: Any, split_names: Mapping[str, str], where: str) -> dict[str, list[Row]]:
    """Our split -> rows, using `split_names` (ours -> the hub's; default train/validation/test)."""
    mapping = {"train": "train", "dev": "validation", "test": "test", **split_names}
    out = {}
    for ours, theirs in mapping.items():
        if theirs not in dd:
            raise DataError(f"{where}: has no split {theirs!r} (splits: {', '.join(dd)}); map it in the spec's splits")
        out[ours] = dataset_rows(dd[theirs], f"{where}:{theirs}")
    return out
