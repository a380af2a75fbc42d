"""The checkpoint kept is the one best on dev by the protocol's dev_metric (not always macro-F1)."""

from __future__ import annotations

import pytest
from biobench import finetune as ft
from biobench.heads import get_head
from biobench.models import load_encoder
from biobench.protocols import resolve_protocol
from biobench.tasks.schema import ClassificationExample, TaskData

# dev scores of the three evaluations (one per epoch): macro peaks at epoch 1, weighted at 2, micro at 3
SCRIPT = [{"macro_f1": 0.9, "micro_f1": 0.1, "weighted_f1": 0.2},
          {"macro_f1": 0.1, "micro_f1": 0.2, "weighted_f1": 0.9},
          {"macro_f1": 0.2, "micro_f1": 0.9, "weighted_f1": 0.1}]


@pytest.mark.parametrize(("dev_metric", "best_epoch"), [("macro_f1", 1), ("weighted_f1", 2), ("micro_f1", 3)])
def test_selection_follows_dev_metric(dev_metric, best_epoch, tiny_mlm_dir, monkeypatch):
    real_score = ft.score
    dev_calls = iter(SCRIPT)

    def scripted(kind, gold, pred, labels=()):
        metrics = real_score(kind, gold, pred, labels)
        if gold is prepared.gold["dev"]:
            metrics.update(next(dev_calls))
        return metrics

    monkeypatch.setattr(ft, "score", scripted)
    encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
    examples = [ClassificationExample(str(i), f"note {i} toux", "ab"[i % 2]) for i in range(8)]
    data = TaskData("toy", "classification", {"train": examples, "dev": examples[:4], "test": examples[:4]},
                    ["a", "b"], "hand-built", "sha256:toy")
    protocol = resolve_protocol("fr", "classification", 16, {"epochs": 3, "batch_size": 4}, dev_metric=dev_metric)
    prepared = ft.prepare_task(get_head(protocol.head, "classification"), data, tokenizer, protocol)
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    assert outcome.best_epoch == best_epoch
    assert outcome.dev_score == 0.9
    assert [h[f"dev_{dev_metric}"] for h in outcome.history] == [s[dev_metric] for s in SCRIPT]


def test_off_a_terminal_each_evaluation_is_one_plain_line(tiny_mlm_dir, capsys):
    """In a log file (stderr not a TTY) the fine-tuning loop prints one line per dev evaluation and no bar."""
    encoder, tokenizer, _ = load_encoder(str(tiny_mlm_dir))
    examples = [ClassificationExample(str(i), f"note {i} toux", "ab"[i % 2]) for i in range(8)]
    data = TaskData("toy", "classification", {"train": examples, "dev": examples[:4], "test": examples[:4]},
                    ["a", "b"], "hand-built", "sha256:toy")
    protocol = resolve_protocol("fr", "classification", 16, {"epochs": 2, "batch_size": 4})
    prepared = ft.prepare_task(get_head(protocol.head, "classification"), data, tokenizer, protocol)
    capsys.readouterr()  # loading's own output is not the loop's
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=True)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("toy seed 0 epoch")]
    assert len(lines) == 2 and "step 4/4: train loss " in lines[-1] and "dev weighted_f1 " in lines[-1]
    assert "\r" not in err
    assert outcome.history[-1]["train_loss"] > 0  # the running loss read from the device at evaluation
