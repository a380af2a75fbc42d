"""Unknown keys of a file a person wrote (a task spec, a grid, a pretraining config, a mix file): refused with
the closest valid name. In runtime so that every layer (tasks, training, commands) uses the one check."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

from biobench.errors import ConfigError
from biobench.runtime.paths import display_text


def check_keys(given: Iterable[str], allowed: Iterable[str], where: str, what: str = "key") -> None:
    """Refuse the first key of `given` outside `allowed`: `where` names the spec file and the place in it."""
    allowed = sorted(set(allowed))
    for key in given:
        if key in allowed:
            continue
        close = difflib.get_close_matches(key, allowed, n=1, cutoff=0.6)
        hint = f"did you mean '{close[0]}'? " if close else ""
        valid = ", ".join(allowed) if allowed else "none"
        # the key as shown, not as written: an ESC or a newline in a mix file's key reached the terminal raw
        raise ConfigError(f"{where}: unknown {what} '{display_text(key, 80)}': {hint}(valid here: {valid})")
