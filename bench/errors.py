"""One exception family for every user-facing failure.

The CLI prints a BiobenchError as a single message (no traceback): each one names the file/line or the
thing that is wrong and how to fix it.
"""


class BiobenchError(Exception):
    """A user-facing error whose message says what is wrong and how to fix it."""


class DataError(BiobenchError):
    """Malformed, missing or inconsistent task data (names the file and line/offset)."""


class ConfigError(BiobenchError):
    """Bad command-line value, unknown task/model/recipe, inconsistent options."""


class ModelLoadError(BiobenchError):
    """A model could not be loaded (offline, missing folder, unsupported architecture)."""


class NoModelFolder(ModelLoadError):
    """--model names a local folder (a path, not an alias or a hub id) that does not exist: a typo to fix here,
    never a revision to fetch elsewhere (a dry run said "revision unresolved ... `biobench prefetch`" for it)."""


class ResultsError(BiobenchError):
    """A results file is corrupt or was produced under a different protocol."""


class DiskFullError(BiobenchError):
    """The disk (or quota) filled up while writing; names the folder, the bytes needed and what is safe."""


class StoppedError(BiobenchError):
    """A command stopped at a safe point on a scheduler's signal (SIGTERM, SIGUSR1): the message says what was
    kept and how it resumes; the exit code is the shell's for that signal (128 + its number)."""

    def __init__(self, message: str, signum: int):
        super().__init__(message)
        self.exit_code = 128 + signum


class TrainingDivergedError(BiobenchError):
    """A training whose loss or gradient became NaN or infinite: stopped before the weights are updated."""
