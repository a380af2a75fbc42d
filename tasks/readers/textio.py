"""Opening task data files the same way everywhere: regular files only, bounded, UTF-8, gzip-aware by suffix,
lines numbered from 1.

Why every reader opens its files here: a task spec names its files, and a split that is a FIFO hung `eval`
with no output, one that is a link to /dev/zero grew memory until the process was killed (issue 40). Files go
through the project's bounded regular-file reader (biobench.runtime.jsonfile.open_regular: opened without
blocking, fstat on the open descriptor), and a gzipped file is decompressed up to the same bound (a small
.gz may expand a thousandfold).
"""

from __future__ import annotations

import gzip
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from biobench.errors import DataError
from biobench.runtime.jsonfile import UnsafeJSONError, open_regular

# A task file read whole into memory (TSV, IOB, JSON, BRAT text): the largest built-in one is tens of MB; 1 GiB
# leaves room for a user's corpus and stops a sparse or growing file long before memory runs out.
MAX_TEXT_BYTES = 2**30
# A file a reader streams (pandas CSV, a BRAT .tar.gz, parquet): MIMIC-III's NOTEEVENTS.csv is about 4 GB.
MAX_STREAM_BYTES = 16 * 2**30


def open_data(path: str | Path, max_bytes: int = MAX_STREAM_BYTES) -> BinaryIO:
    """A binary handle on a task data file (the caller closes it), or one DataError: missing, not a regular file
    (a FIFO, device, folder), or over `max_bytes`."""
    try:
        return open_regular(path, max_bytes)
    except FileNotFoundError as err:
        raise DataError(f"{path}: file not found") from err
    except UnsafeJSONError as err:
        raise DataError(f"{path}: {err.reason}; a task's data files must be regular files") from None
    except OSError as err:  # permissions, a loop of links, a name too long
        raise DataError(f"{path}: cannot open ({err.strerror or err})") from None


def check_data_file(path: str | Path, max_bytes: int = MAX_STREAM_BYTES) -> Path:
    """`path` when it is a regular file of at most `max_bytes` (DataError otherwise): for the readers that hand
    a path to a library that opens it itself (datasets' parquet loader)."""
    open_data(path, max_bytes).close()
    return Path(path)


def read_text(path: str | Path) -> str:
    path = Path(path)
    with open_data(path, MAX_TEXT_BYTES) as raw:
        try:
            if path.suffix == ".gz":
                with gzip.GzipFile(fileobj=raw) as fh:
                    data = fh.read(MAX_TEXT_BYTES + 1)
                if len(data) > MAX_TEXT_BYTES:
                    raise DataError(f"{path}: expands to over {MAX_TEXT_BYTES >> 20} MiB when decompressed; refused "
                                    "(split the file)")
            else:
                data = raw.read()
            # universal newlines, as the text-mode open this replaced read them (BRAT offsets count one "\n")
            return data.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")
        except (UnicodeDecodeError, gzip.BadGzipFile, EOFError) as err:
            raise DataError(f"{path}: cannot read as UTF-8 text ({err}); re-save it as UTF-8 (optionally gzip)") from err


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """(line number, line without its newline) for every line of a possibly gzipped file."""
    for i, line in enumerate(read_text(path).split("\n"), start=1):
        yield i, line.rstrip("\r")
