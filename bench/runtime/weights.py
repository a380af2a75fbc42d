"""Model weights from strangers: a `pytorch_model.bin` is a pickle, and unpickling runs whatever code it holds.

biobench never unpickles weights itself, and transformers loads `.bin` files with torch's weights-only loader,
which refuses anything but tensors (UnpicklingError, "Weights only load failed"). That refusal used to surface
as a long traceback; here it becomes one line naming the file and the fix, for every place that loads a model
(evaluation, pretraining, transplants). What this does NOT cover: `--trust-remote-code` runs the model's own
Python code, by design (docs/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import os
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path

from biobench.runtime.jsonfile import UnsafeJSONError, open_regular, parse_json, read_bytes, too_deep


def is_refused_pickle(err: BaseException | None) -> bool:
    """True when `err` (or an error chained under it) is torch's weights-only loader refusing a pickle."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        if isinstance(err, pickle.UnpicklingError) or "Weights only load failed" in str(err):
            return True
        err = err.__cause__ or err.__context__
    return False


def refused_message(source: str | Path) -> str:
    folder = Path(str(source))
    found = sorted(folder.glob("*.bin")) if folder.is_dir() else []
    what = str(found[0]) if found else f"the pickled weights (pytorch_model.bin) of {source}"
    return (f"{what}: refused: a pickle that torch's weights-only loader cannot read as plain tensors (loading it "
            "anyway could run code it holds; nothing was run); use the model's safetensors weights, or convert "
            "them where you trust their origin (from_pretrained(DIR).save_pretrained(DIR, safe_serialization=True))")


@contextlib.contextmanager
def untrusted_weights(source: str | Path, error: type[Exception]) -> Iterator[None]:
    """Around a from_pretrained call: a refused pickle becomes one `error` line (and torch's pickle-protocol
    warning that precedes it is not printed)."""
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message=r"Detected pickle protocol")
        try:
            yield
        except Exception as err:
            if is_refused_pickle(err):
                raise error(refused_message(source)) from None
            raise


# --- a model folder's files before a library parses them (issue 40) ---------------------------------------------
# safetensors and tokenizers read these files in Rust and answer a forged one with a 37- or 49-line traceback
# (a header length of 100 GiB; a header claiming a 1 TB tensor in a 16-byte file; a tokenizer.json nested 200,000
# deep, a RecursionError) or 1.3 GB of memory (a 500 MB tokenizer.json). Checked here first, each in one line.
SAFETENSORS_HEADER_MAX = 100 * 2**20  # safetensors' own limit on its JSON header (N_MAX in its format)
TOKENIZER_MAX_BYTES = 128 * 2**20  # the largest tokenizer.json in common use is ~35 MB (a 256k vocabulary)


def _safetensors_problem(path: Path) -> str | None:
    """Why `path` cannot be a safetensors file (its header length or its tensors' extents past the file), or None."""
    import json
    import struct


    try:
        with open_regular(path, 2**63 - 1) as fh:  # a regular file: a FIFO here never blocks
            size = os.fstat(fh.fileno()).st_size
            head = fh.read(8)
            if len(head) < 8:
                return f"{size} bytes, shorter than a safetensors header"
            (length,) = struct.unpack("<Q", head)
            if length > SAFETENSORS_HEADER_MAX or 8 + length > size:
                return (f"its header claims {length:,} bytes (the file holds {size:,}; safetensors allows "
                        f"{SAFETENSORS_HEADER_MAX >> 20} MiB)")
            header = parse_json(fh.read(length), path)
    except UnsafeJSONError as err:
        return f"its header is not usable ({err.reason})"
    except (OSError, json.JSONDecodeError) as err:
        return f"cannot be read ({err})"
    if not isinstance(header, dict):
        return "its header is not a JSON object"
    data = size - 8 - length
    for name, tensor in header.items():
        offsets = tensor.get("data_offsets") if isinstance(tensor, dict) else None
        if name == "__metadata__":
            continue
        if (not isinstance(offsets, list) or len(offsets) != 2 or not all(isinstance(o, int) for o in offsets)
                or not 0 <= offsets[0] <= offsets[1]):
            return f"tensor {str(name)[:60]!r} has no valid data_offsets"
        if offsets[1] > data:
            return f"tensor {str(name)[:60]!r} claims {offsets[1]:,} bytes of data; the file holds {data:,}"
    return None


def check_model_files(folder: str | Path, error: type[Exception]) -> None:
    """Raise `error` (one line naming the file and the fix) when a local model folder's *.safetensors header or
    tokenizer.json is forged, cut or out of bounds; what passes is parsed by the libraries as before."""
    folder = Path(folder)
    for path in sorted(folder.glob("*.safetensors")):
        why = _safetensors_problem(path)
        if why:
            raise error(f"{path}: not a usable safetensors file: {why}; re-download or re-save the weights")
    tokenizer = folder / "tokenizer.json"
    if tokenizer.exists():
        try:
            text = read_bytes(tokenizer, TOKENIZER_MAX_BYTES)
        except UnsafeJSONError as err:
            raise error(f"{tokenizer}: {err.reason}; re-download or re-save the tokenizer") from None
        if too_deep(text.decode("utf-8", errors="replace")):
            raise error(f"{tokenizer}: JSON nested too deeply to be a tokenizer; re-download or re-save the tokenizer")
