"""Model weights from strangers: a `pytorch_model.bin` is a pickle, and unpickling runs whatever code it holds.

biobench never unpickles weights itself, and transformers loads `.bin` files with torch's weights-only loader,
which refuses anything but tensors (UnpicklingError, "Weights only load failed"). That refusal used to surface
as a long traceback; here it becomes one line naming the file and the fix, for every place that loads a model
(evaluation, pretraining, transplants). What this does NOT cover: `--trust-remote-code` runs the model's own
Python code, by design (docs/RELIABILITY.md).
"""

from __future__ import annotations

import contextlib
import pickle
import warnings
from collections.abc import Iterator
from pathlib import Path


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
