"""Pretraining corpora: read documents, bounded (tokenising them into a store is training/token_store.py).

Sources: a text file (documents separated by blank lines: a line of nothing but whitespace, "\n" or "\r\n"),
JSONL / JSONL.gz (one record per line, text in `text_field` — the E3C dumps in ../shared/data/pretrain-{fr,en}),
parquet, a folder (recursively, sorted: all its JSONL and parquet files, or its .txt files when it has neither —
README/SOURCE .md files are never read from a folder), or
a Hugging Face dataset id (streamed). Documents are framed as the packer needs them ([CLS] doc [SEP]:
`frame_ids`); `corpus_fingerprint` keys the store pretrain builds from raw text (training/corpus_input.py).
"""

from __future__ import annotations

import hashlib
import math
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError, DataError
from biobench.runtime.files import cache_home
from biobench.runtime.jsonfile import UnsafeJSONError, open_regular, parse_json
from biobench.runtime.paths import is_hub_id

# the @revision of a hub source: a branch, tag or commit; a branch may have folders (refs/convert/parquet, the
# hub's parquet export), never a '..' one
HUB_REVISION = re.compile(r"(?!.*(?:^|/)\.\.(?:/|$))[\w.-]{1,100}(?:/[\w.-]{1,100}){0,4}")
HUB_CONFIG = re.compile(r"(?!\.\.?$)[\w][\w.-]{0,99}")  # a hub dataset's config (subset): also a folder name
MAX_DATA_FILES = 64  # globs of one --data-files selection
HUB_DATA_SUFFIXES = (".parquet", ".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")  # what a hub source is split by
TEXT_SUFFIXES = (".txt", ".md", ".text")
JSONL_SUFFIXES = (".jsonl", ".jsonl.gz", ".json.gz", ".ndjson")


def _is_jsonl(path: Path) -> bool:
    return path.name.lower().endswith(JSONL_SUFFIXES)


def corpus_files(source: str) -> list[Path]:
    """The readable files of a local corpus (file or folder), sorted; raises DataError when there are none."""
    path = Path(source)
    if path.is_file():
        return [path]
    if path.exists() and not path.is_dir():  # a FIFO or device was called a "corpus folder" (issue 51 §12)
        raise DataError(f"corpus {path} is not a regular file or a folder (a FIFO or device); point --corpus at one")
    found = sorted(p for p in path.rglob("*") if p.is_file())
    # Data files (JSONL and parquet, every one of them: a folder of a.jsonl and b.parquet is read whole) win over
    # prose: beside data, a .txt is notes or a list (../shared/data/pretrain-fr/selected_ids.txt), never corpus;
    # README/SOURCE .md files are documentation. A folder of .txt files alone is a text corpus.
    files = ([p for p in found if _is_jsonl(p) or p.name.lower().endswith(".parquet")]
             or [p for p in found if p.suffix.lower() in (".txt", ".text")])
    if not files:
        raise DataError(f"corpus folder {path} holds no .jsonl(.gz), .parquet or .txt files; point --corpus at them")
    return files


def is_local(source: str) -> bool:
    return Path(source).exists()


def looks_like_path(source: str) -> bool:
    """A missing local path, not a hub id ("owner/name" or "name"): a folder's trailing slash, a file suffix,
    or anything a hub id cannot be (the hub library would answer with a message about repo ids)."""
    return (source.startswith(("/", ".", "~")) or source.endswith(("/", os.sep))
            or source.partition("@")[0].count("/") > 1
            or source.lower().endswith(TEXT_SUFFIXES + JSONL_SUFFIXES + (".json",))
            or not is_hub_source(source))


def check_source(source: str) -> None:
    """DataError when `source` names a local path that does not exist (checked before any model is loaded)."""
    if not is_local(source) and looks_like_path(source):
        raise DataError(f"corpus {source} does not exist: no such file or folder (expected a text/JSONL file, "
                        f"a folder of them, or a hub dataset id such as owner/name)")


MAX_DOCUMENT_BYTES = 64 << 20  # one line of JSONL, one blank-line-separated text document (issue 51 item 3)
MAX_FILE_BYTES = 1 << 50  # a corpus file may be large; what bounds memory is the line/document bound above


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n:,} bytes"


def _bounded_line(handle, path: Path, where: str) -> bytes:
    """The next line of a binary handle, at most MAX_DOCUMENT_BYTES: a longer line (a 2 GB line with no newline,
    a gzip bomb of one line) is refused in one line naming the file, after holding no more than the bound."""
    line = handle.readline(MAX_DOCUMENT_BYTES + 1)
    if len(line) > MAX_DOCUMENT_BYTES:
        raise DataError(f"{path}{where}: a line longer than {_size(MAX_DOCUMENT_BYTES)}; refused (split it into "
                        "documents of at most that size, or fix the file)")
    return line


def _decode(line: bytes, path: Path, where: str) -> str:
    if b"\0" in line:
        raise DataError(f"{path}{where}: binary data (a NUL byte) in a corpus file; refused (point --corpus at "
                        "text or JSONL files)")
    try:
        return line.decode("utf-8")
    except UnicodeDecodeError as err:
        raise DataError(f"{path}{where}: not UTF-8 text ({err.reason}); refused") from None


def open_corpus_file(path: Path):
    """A binary handle on a regular corpus file (a FIFO, /dev/zero or a folder refused without blocking), gunzipped
    when it ends in .gz. Decompression is streamed: what bounds memory is the line bound, whatever the ratio."""
    import gzip

    try:
        raw = open_regular(path, MAX_FILE_BYTES)
    except UnsafeJSONError as err:
        raise DataError(f"corpus file {path}: {err.reason}") from None
    except OSError as err:
        raise DataError(f"cannot read corpus file {path}: {err.strerror or err}") from None
    return gzip.GzipFile(fileobj=raw, mode="rb") if path.suffix == ".gz" else raw


def _blank(line: bytes) -> bool:
    """A line that ends a text document: empty, or nothing but whitespace ("\n", "\r\n", spaces, tabs), so a
    Windows-made corpus separates its documents as a Unix one does."""
    return not line.strip()


def _previous_line_blank(handle, end: int) -> bool:
    """Whether the line before byte `end` (a line start: its newline at end - 1, or the end of the file) is blank
    (`_blank`), read backwards in bounded pieces; the file's start counts as a blank line before the first."""
    at = end - 1  # the newline
    while at > 0:
        step = min(at, 1 << 16)
        handle.seek(at - step)
        piece = handle.read(step)
        newline = piece.rfind(b"\n")
        if piece[newline + 1:].strip():
            return False
        if newline >= 0:
            return True
        at -= step
    return True


def _seek_line_start(handle, start: int, path: Path) -> bool:
    """Move to the first line that starts at or after byte `start`; True when the line before it is blank (or
    it is the file's first line): a text document starts there."""
    if start == 0:
        return True
    handle.seek(start - 1)
    if handle.read(1) != b"\n":
        while True:  # the rest of a line that began before `start`, read in bounded pieces
            part = handle.readline(1 << 20)
            if not part or part.endswith(b"\n"):
                break
    here = handle.tell()
    # the previous piece reads on to the end of its last document: the first blank line at or after its end
    blank = _previous_line_blank(handle, here)
    handle.seek(here)
    return blank


MAX_WEIGHT = 1000.0  # a document repeated at most 1000 times (the paper's largest upsampling is 100x, App. B)


def check_weight(value: object, field: str, where: str) -> float:
    """A document's weight (its repeat count before rounding, docs/PRETRAINING.md): a finite number from 0 to
    MAX_WEIGHT; DataError naming the file and line otherwise."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise DataError(f"{where}: weight field '{field}' is {type(value).__name__}, not a number; refused")
    weight = float(value)
    if not math.isfinite(weight) or weight < 0 or weight > MAX_WEIGHT:
        raise DataError(f"{where}: weight field '{field}' is {value!r}; give a finite number from 0 to "
                        f"{MAX_WEIGHT:g} (a document is repeated about that many times)")
    return weight


def piece_documents(path: Path, kind: str, text_field: str = "text", start: int = 0,
                    end: int | None = None, weight_field: str | None = None) -> Iterator[Any]:
    """The documents of one piece of a corpus file, in order: a JSONL record (text in `text_field`) or a
    blank-line-separated text block whose first line starts in bytes [start, end) of the (uncompressed, seekable)
    file; the whole file when `end` is None. Every line is bounded (MAX_DOCUMENT_BYTES), so memory is too.
    With `weight_field`: (text, weight) pairs, the weight checked (check_weight); JSONL and parquet only."""
    if weight_field is not None and kind not in ("jsonl", "parquet"):
        raise DataError(f"{path}: a {kind} file has no fields; --weight-field needs JSONL or parquet sources")
    if kind == "parquet":
        yield from _parquet_documents(path, text_field, start, weight_field)
        return
    with open_corpus_file(path) as handle:
        try:
            at_doc_start = _seek_line_start(handle, start, path) if end is not None else True
            if kind == "jsonl":
                yield from _jsonl_piece(handle, path, text_field, end, weight_field)
            else:
                yield from _text_piece(handle, path, end, at_doc_start)
        except (OSError, EOFError) as err:
            raise DataError(f"cannot read corpus file {path}: {err}") from err


def _jsonl_piece(handle, path: Path, text_field: str, end: int | None,
                 weight_field: str | None = None) -> Iterator[Any]:
    line_no = 0
    while end is None or handle.tell() < end:
        where = f" (byte {handle.tell()})" if end is not None else f":{line_no + 1}"
        line = _bounded_line(handle, path, where)
        if not line:
            return
        line_no += 1
        text = _decode(line, path, where).strip()
        if not text:
            continue
        try:
            record = parse_json(text, f"{path}{where}")
        except UnsafeJSONError as err:
            raise DataError(str(err)) from None
        if not isinstance(record, dict) or text_field not in record:
            keys = ", ".join(list(record)[:20]) if isinstance(record, dict) else type(record).__name__
            raise DataError(f"{path}{where}: no '{text_field}' field (has: {keys}); use --text-field")
        value = record[text_field]
        if not isinstance(value, str):
            raise DataError(f"{path}{where}: field '{text_field}' is {type(value).__name__}, not text; refused")
        if weight_field is not None:
            if weight_field not in record:
                raise DataError(f"{path}{where}: no weight field '{weight_field}'; every record needs one")
            weight = check_weight(record[weight_field], weight_field, f"{path}{where}")
            if value.strip():
                yield value.strip(), weight
        elif value.strip():
            yield value.strip()


def _text_piece(handle, path: Path, end: int | None, at_doc_start: bool) -> Iterator[str]:
    block: list[str] = []
    size = 0
    if not at_doc_start:  # the rest of a document that began in the previous piece
        while True:
            line = _bounded_line(handle, path, f" (byte {handle.tell()})")
            if _blank(line):
                break
    while True:
        here = handle.tell()
        if not block and end is not None and here >= end:
            return
        line = _bounded_line(handle, path, f" (byte {here})")
        if _blank(line):
            text = "".join(block).strip()
            block, size = [], 0
            if text:
                yield text
            if not line:
                return
            continue
        size += len(line)
        if size > MAX_DOCUMENT_BYTES:
            raise DataError(f"{path} (byte {here}): a document longer than {_size(MAX_DOCUMENT_BYTES)} with no "
                            "blank line; refused (separate documents by blank lines)")
        block.append(_decode(line, path, f" (byte {here})"))


def _parquet_documents(path: Path, text_field: str, row_group: int,
                       weight_field: str | None = None) -> Iterator[Any]:
    """The `text_field` column of one row group, in batches (a row group is never held whole as Python strings)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with open_corpus_file(path) as handle:
            parquet = pq.ParquetFile(handle)
            if text_field not in parquet.schema_arrow.names:
                raise DataError(f"{path}: no '{text_field}' column (has: {', '.join(parquet.schema_arrow.names[:20])}); "
                                "use --text-field")
            kind = parquet.schema_arrow.field(text_field).type
            if not (pa.types.is_string(kind) or pa.types.is_large_string(kind)):
                raise DataError(f"{path}: column '{text_field}' is {kind}, not text; refused")
            columns = [text_field] if weight_field is None else [text_field, weight_field]
            if weight_field is not None and weight_field not in parquet.schema_arrow.names:
                raise DataError(f"{path}: no weight column '{weight_field}' (has: "
                                f"{', '.join(parquet.schema_arrow.names[:20])})")
            row = 0
            for batch in parquet.iter_batches(batch_size=256, row_groups=[row_group], columns=columns):
                weights = batch.column(1).to_pylist() if weight_field is not None else None
                for k, value in enumerate(batch.column(0).to_pylist()):
                    row += 1
                    if isinstance(value, str) and value.strip():
                        if len(value) > MAX_DOCUMENT_BYTES:
                            raise DataError(f"{path} (row group {row_group}): a document longer than "
                                            f"{_size(MAX_DOCUMENT_BYTES)}; refused")
                        if weights is not None:
                            where = f"{path} (row group {row_group}, row {row})"
                            yield value.strip(), check_weight(weights[k], str(weight_field), where)
                        else:
                            yield value.strip()
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"cannot read parquet corpus file {path}: {' '.join(str(err).split())[:200]}") from None


def file_kind(path: Path) -> str:
    name = path.name.lower()
    return "jsonl" if _is_jsonl(path) else "parquet" if name.endswith(".parquet") else "text"


def iter_documents(source: str, text_field: str = "text") -> Iterator[str]:
    """Every non-empty document of the corpus, in a fixed order (each line and document bounded)."""
    check_source(source)
    if not is_local(source):
        yield from _hub_documents(source, text_field)
        return
    for path in corpus_files(source):
        kind = file_kind(path)
        if kind == "parquet":
            yield from parquet_pieces_documents(path, text_field)
        else:
            yield from piece_documents(path, kind, text_field)


def parquet_row_groups(path: Path) -> int:
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        with open_corpus_file(path) as handle:
            return pq.ParquetFile(handle).metadata.num_row_groups
    except (pa.ArrowException, OSError) as err:
        raise DataError(f"cannot read parquet corpus file {path}: {' '.join(str(err).split())[:200]}") from None


def parquet_pieces_documents(path: Path, text_field: str) -> Iterator[str]:
    for group in range(parquet_row_groups(path)):
        yield from _parquet_documents(path, text_field, group)


def is_hub_source(source: str) -> bool:
    """'org/name', 'name' or either with '@revision': a hub dataset id (runtime.paths.HUB_ID, the owner optional)."""
    repo, revision = hub_revision(source)
    return is_hub_id(repo, owner=False) and (revision is None or HUB_REVISION.fullmatch(revision) is not None)


def hub_revision(source: str) -> tuple[str, str | None]:
    """'org/name@rev' -> ('org/name', 'rev'); no '@': the default branch (None)."""
    repo, _, revision = source.partition("@")
    return repo, revision or None


def _hub_error(source: str, err: Exception) -> DataError:
    offline = os.environ.get("HF_HUB_OFFLINE") == "1" or os.environ.get("HF_DATASETS_OFFLINE") == "1"
    hint = " (HF_HUB_OFFLINE is set: the hub is unreachable; pass a local folder)" if offline else ""
    return DataError(f"cannot read hub dataset {source!r} as a corpus: {type(err).__name__}: "
                     f"{str(err).splitlines()[0] if str(err) else ''}{hint}")


@dataclass(frozen=True)
class HubSelection:
    """Which files of a hub dataset a source reads, as `datasets.load_dataset(repo, name=config,
    data_files=globs)` means them: `config`, the subset its README's `configs:` table names (its train split's
    `data_files`) or else the folder of that name (the hub's parquet export at `refs/convert/parquet` lays a
    config out as `config/split/NNNN.parquet`: its train split then); `data_files`, globs over the repo's paths
    (`*` within a folder, `**` across folders), narrowing the config's files when both are given. Empty: every
    data file of the repo."""

    config: str | None = None
    data_files: tuple[str, ...] = ()

    def __bool__(self) -> bool:
        return self.config is not None or bool(self.data_files)

    def flags(self) -> list[str]:
        """The `corpus build` flags that give this selection (a SLURM element's command, a printed command)."""
        flags = ["--hub-config", self.config] if self.config is not None else []
        return flags + (["--data-files", *self.data_files] if self.data_files else [])

    def record(self) -> dict[str, Any]:
        """What the manifest records of the selection (nothing when there is none: an unselected hub store's
        manifest is what it was before selections)."""
        return {**({"config": self.config} if self.config is not None else {}),
                **({"data_files": list(self.data_files)} if self.data_files else {})}


def hub_selection(config: str | None, data_files: list[str] | tuple[str, ...] | None, what: str) -> HubSelection:
    """A selection from flags or a mix row (`what` names them in the error), validated: a config is a plain name,
    a glob a relative path inside the repo (no absolute path, no '..' or '.' folder, no backslash, no control
    character), at most MAX_DATA_FILES of them."""
    if config is not None and (not isinstance(config, str) or not HUB_CONFIG.fullmatch(config)):
        raise ConfigError(f"{what}: config {str(config)[:60]!r} must be a config name of the dataset (letters, "
                          "digits, '_', '.', '-'; up to 100)")
    globs = tuple(data_files or ())
    if len(globs) > MAX_DATA_FILES:
        raise ConfigError(f"{what}: {len(globs)} data_files globs; at most {MAX_DATA_FILES}")
    for glob in globs:
        if (not isinstance(glob, str) or not glob or len(glob) > 500 or any(ord(c) < 32 for c in glob)
                or "\\" in glob or glob.startswith("/") or any(part in ("", ".", "..") for part in glob.split("/"))):
            raise ConfigError(f"{what}: data_files {str(glob)[:80]!r} must be a glob of paths inside the dataset "
                              "repo, relative to its root (e.g. 'en/train/*.parquet'): no absolute path, no '..' or "
                              "'.' folder, no empty folder, no backslash")
    return HubSelection(config, globs)


def _glob_pattern(glob: str) -> re.Pattern[str]:
    """A data_files glob as a regex over repo paths, as fsspec's glob (what `datasets` resolves data_files with)
    reads it: `*` and `?` stay within a folder, `**` spans folders (`a/**/b` also matches `a/b`), `[...]` a
    character class."""
    out, i = [], 0
    while i < len(glob):
        c = glob[i]
        if glob.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
        elif glob.startswith("**", i):
            out.append(".*")
            i += 2
        elif c == "*":
            out.append("[^/]*")
            i += 1
        elif c == "?":
            out.append("[^/]")
            i += 1
        elif c == "[" and "]" in glob[i + 2:]:
            end = glob.index("]", i + 2)
            body = glob[i + 1:end]
            out.append("[" + ("^" + re.escape(body[1:]) if body.startswith("!") else re.escape(body)) + "]")
            i = end + 1
        else:
            out.append(re.escape(c))
            i += 1
    return re.compile("".join(out))


def _matching(paths: list[str], globs: list[str] | tuple[str, ...]) -> list[str]:
    patterns = [_glob_pattern(g) for g in globs]
    return [p for p in paths if any(pattern.fullmatch(p) for pattern in patterns)]


def _card_configs(info: Any) -> dict[str, Any]:
    """The README's `configs:` table (the hub parses the card's YAML into cardData): config name -> data_files."""
    card = getattr(info, "card_data", None)
    table = card.to_dict().get("configs") if card is not None and hasattr(card, "to_dict") else None
    if not isinstance(table, list):
        return {}
    return {c["config_name"]: c.get("data_files") for c in table
            if isinstance(c, dict) and isinstance(c.get("config_name"), str)}


def _train_globs(data_files: Any) -> list[str]:
    """A card config's train split globs: `data_files` as a glob, a list of globs (the train split), or a list
    of {split, path} (the 'train' entry's path, a glob or a list)."""
    if isinstance(data_files, str):
        return [data_files]
    globs: list[str] = []
    for entry in data_files if isinstance(data_files, list) else []:
        if isinstance(entry, str):
            globs.append(entry)
        elif isinstance(entry, dict) and entry.get("split") == "train":
            path = entry.get("path")
            globs.extend([path] if isinstance(path, str) else [p for p in path or [] if isinstance(p, str)])
    return globs


def _is_train(path: str) -> bool:
    """A file of the train split under a config's folder: a `train/` folder, or a name `train-*`/`train.*` (the
    hub's parquet export and the converted-repo layouts)."""
    return path.split("/")[0] == "train" or re.match(r"train[-_.]", path.rsplit("/", 1)[-1]) is not None


def _select(source: str, commit: str, paths: list[str], configs: dict[str, Any], selection: HubSelection) -> list[str]:
    """The repo's paths the selection names (see HubSelection), each a data file; one DataError line otherwise,
    listing what the repo has."""
    where = f"hub dataset {source!r} at {commit[:12]}"

    def refuse(what: str) -> DataError:
        shown = ", ".join(paths[:20]) + (f", ... ({len(paths)} files)" if len(paths) > 20 else "")
        names = sorted({p.split("/")[0] for p in paths if "/" in p} | set(configs))
        return DataError(f"{where}: {what}; it has configs/folders {', '.join(names[:20]) or 'none'} and files "
                         f"{shown or 'none'}")

    chosen = paths
    if selection.config is not None:
        config = selection.config
        if config in configs:
            globs = _train_globs(configs[config])
            chosen = _matching(paths, globs)
            if not chosen:
                raise refuse(f"config {config!r}'s train data_files ({', '.join(globs) or 'none'}) match no file")
        else:
            inside = [p for p in paths if p.startswith(config + "/")]
            train = [p for p in inside if _is_train(p[len(config) + 1:])]
            chosen = train or inside
            if not chosen:
                raise refuse(f"no config {config!r} (none in its README's configs:, no folder of that name)")
    if selection.data_files:
        narrowed = _matching(chosen, selection.data_files)
        if not narrowed:
            within = f" within config {selection.config!r}" if selection.config is not None else ""
            raise refuse(f"--data-files {' '.join(selection.data_files)} match no file{within}")
        chosen = narrowed
    unreadable = [p for p in chosen if not p.lower().endswith(HUB_DATA_SUFFIXES)]
    if unreadable:
        raise DataError(f"{where}: the selection holds {', '.join(unreadable[:5])}, which a corpus cannot read "
                        f"(only {', '.join(HUB_DATA_SUFFIXES)}); narrow --data-files to those")
    return chosen


def hub_files(source: str, selection: HubSelection | None = None) -> tuple[str, str, list[str]]:
    """(repo id, commit sha, data files) of a hub dataset source 'org/name[@revision]': the revision pinned to its
    commit, so every work unit and every resume reads the same bytes, and the repo's JSONL and parquet files (or
    those `selection` names: HubSelection), sorted (a corpus's shards: one work unit each). No data file and no
    selection (a dataset served by a script or another format): an empty list, and the source is streamed as one
    unit at that commit."""
    from huggingface_hub import HfApi

    repo, revision = hub_revision(source)
    try:
        info = HfApi().dataset_info(repo, revision=revision)
    except Exception as err:  # the hub client raises many types (HTTP errors, offline mode, repo not found)
        raise _hub_error(source, err) from err
    paths = sorted(s.rfilename for s in (info.siblings or []))
    if selection:
        return repo, str(info.sha), _select(source, str(info.sha), paths, _card_configs(info), selection)
    return repo, str(info.sha), [p for p in paths if p.lower().endswith(HUB_DATA_SUFFIXES)]


def hub_file(repo: str, commit: str, path: str) -> Path:
    """One data file of a hub dataset at `commit`, downloaded into the Hugging Face cache (once)."""
    from huggingface_hub import hf_hub_download

    try:
        return Path(hf_hub_download(repo, path, repo_type="dataset", revision=commit))
    except Exception as err:  # as in hub_files
        raise _hub_error(f"{repo}@{commit}", err) from err


def hub_file_documents(repo: str, commit: str, path: str, text_field: str,
                       weight_field: str | None = None) -> Iterator[Any]:
    """The documents of one data file of a hub dataset (a work unit), read as a local file of its format."""
    local = hub_file(repo, commit, path)
    kind = file_kind(Path(path))
    if kind == "parquet":
        for group in range(parquet_row_groups(local)):
            yield from _parquet_documents(local, text_field, group, weight_field)
    else:
        yield from piece_documents(local, kind, text_field, weight_field=weight_field)


def _hub_documents(dataset_id: str, text_field: str) -> Iterator[str]:
    """Stream a hub dataset's train split; offline or unknown ids fail with one clear message."""
    from datasets import load_dataset

    repo, revision = hub_revision(dataset_id)
    try:
        stream = load_dataset(repo, split="train", streaming=True, revision=revision)
        for record in stream:
            text = record.get(text_field)
            if isinstance(text, str) and text.strip():
                yield text.strip()
    except Exception as err:  # datasets raises many types (ConnectionError, FileNotFoundError, DatasetNotFoundError)
        if isinstance(err, DataError):
            raise
        raise _hub_error(dataset_id, err) from err


def corpus_fingerprint(source: str, text_field: str, max_documents: int | None) -> str:
    """Paths, sizes and mtimes of local files (or the hub id): changes when the corpus changes."""
    h = hashlib.sha256(f"{text_field}|{max_documents}".encode())
    if is_local(source):
        for path in corpus_files(source):
            st = path.stat()
            h.update(f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}".encode())
    else:
        h.update(f"hub:{source}".encode())
    return h.hexdigest()[:16]


MAX_RECORDED_FILES = 1000  # a corpus of more files is recorded by its first ones and its totals


def corpus_record(source: str, text_field: str = "text") -> dict[str, Any]:
    """What a checkpoint records of its corpus (biobench_pretrain.json, the model card): each local file's path,
    size and sha256 (so `eval --check-contamination` finds it again and can tell it changed), or the hub id.
    Hashing reads the files once (about 1 GB/s; a 40 GB corpus adds under a minute to a run of days)."""
    if not is_local(source):
        return {"hub": source, "text_field": text_field, "files": [], "bytes": None}
    files: list[dict[str, Any]] = []
    total = 0
    for path in corpus_files(source):
        size = path.stat().st_size
        total += size
        if len(files) < MAX_RECORDED_FILES:
            digest = hashlib.sha256()
            with path.open("rb") as handle:
                for block in iter(lambda: handle.read(1 << 20), b""):
                    digest.update(block)
            files.append({"path": str(path.resolve()), "bytes": size, "sha256": digest.hexdigest()})
    return {"text_field": text_field, "files": files, "bytes": total, "n_files": len(corpus_files(source))}


def frame_ids(tokenizer) -> tuple[int | None, int]:
    """(bos, eos) put around each document: [CLS]/[SEP] for BERT-style tokenizers, else BOS/EOS."""
    bos = tokenizer.cls_token_id if tokenizer.cls_token_id is not None else tokenizer.bos_token_id
    eos = tokenizer.sep_token_id if tokenizer.sep_token_id is not None else tokenizer.eos_token_id
    if eos is None:
        raise ConfigError("the tokenizer has neither a [SEP] nor an EOS token to separate packed documents")
    return bos, eos


def default_cache_dir() -> Path:
    return cache_home("tokens")
