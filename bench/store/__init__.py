"""The results store: the one home of everything biobench knows about results (docs/FORMATS.md).

- record:   `Result`, one (model, task, seed) run as stored; its validation; where it lives; `new_result`, the
            one builder the writers (eval grid, linear probe) use.
- storage:  the writer (predictions first, result last, atomic), the one validating reader of untrusted result
            files (regular files, bounded size and depth, finite numbers in range, integer seeds), the folder
            walk and the skip / overwrite decision.
- layout:   where a model's results live, and `model_group`, the one identity of a model wherever results are
            grouped by model (its results folder: display name + 8 digits of its revision).
- pairing:  alignment of several models' test predictions for paired statistics.
- summary:  per-task seed summaries and the minimum detectable difference (fractions).
- comparison: A versus B per task and on the task average, and the protocol settings in which their runs
            differ (fractions; callers format percent).
- trust:    smoke runs (protocol overrides) and degenerate test predictions with their likely reason: what the
            console, eval's summary, the leaderboard, the exports and the model card mark.
- analysis: typed records of the analysis outputs (CKA, CKA trajectory, needle, transplant) and of a
            pretraining checkpoint's lineage and training config.

No torch here: the leaderboard reads results through this package. `eval`, `compare`, `card`, `results push`,
the probes and the leaderboard call it; nothing else parses a result file.
"""

from biobench.store.layout import model_group
from biobench.store.pairing import AlignedPredictions, PredictionColumns, align_predictions
from biobench.store.record import (
    KEY_FIELDS,
    SCHEMA,
    SEED_FILE,
    Result,
    claim_path,
    new_result,
    predictions_path,
    result_path,
    run_key,
)
from biobench.store.result_files import (
    decide,
    iter_results,
    parse_result,
    read_json_file,
    read_prediction_columns,
    read_predictions,
    read_result,
    read_result_bytes,
    seed_paths,
    write_result,
)

__all__ = [
    "KEY_FIELDS", "SCHEMA", "SEED_FILE", "AlignedPredictions", "PredictionColumns", "Result", "align_predictions", "claim_path", "decide",
    "iter_results", "model_group", "new_result", "parse_result", "predictions_path", "read_json_file", "read_prediction_columns", "read_predictions", "read_result",
    "read_result_bytes", "result_path", "run_key", "seed_paths", "write_result",
]
