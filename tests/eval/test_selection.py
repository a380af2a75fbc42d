"""The checkpoint kept is the one best on dev by the protocol's dev_metric (not always macro-F1)."""

from __future__ import annotations

import pytest
from biobench.eval import finetune as ft

# dev scores of the three evaluations (one per epoch): macro peaks at epoch 1, weighted at 2, micro at 3
SCRIPT = [{"macro_f1": 0.9, "micro_f1": 0.1, "weighted_f1": 0.2},
          {"macro_f1": 0.1, "micro_f1": 0.2, "weighted_f1": 0.9},
          {"macro_f1": 0.2, "micro_f1": 0.9, "weighted_f1": 0.1}]


@pytest.mark.parametrize(("dev_metric", "best_epoch"), [("macro_f1", 1), ("weighted_f1", 2), ("micro_f1", 3)])
def test_selection_follows_dev_metric(dev_metric, best_epoch, toy_classification, monkeypatch):
    real_score = ft.score
    dev_calls = iter(SCRIPT)

    def scripted(kind, gold, pred, labels=()):
        metrics = real_score(kind, gold, pred, labels)
        if gold is prepared.gold["dev"]:
            metrics.update(next(dev_calls))
        return metrics

    monkeypatch.setattr(ft, "score", scripted)
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=3, dev_metric=dev_metric)
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    assert outcome.best_epoch == best_epoch
    assert outcome.dev_score == 0.9
    assert [h[f"dev_{dev_metric}"] for h in outcome.history] == [s[dev_metric] for s in SCRIPT]



# the demo's case (issue 26): the selection score stays 0 while the headline metric on dev rises
ZEROS = [{"weighted_f1": 0.0, "macro_f1": 0.0}, {"weighted_f1": 0.0, "macro_f1": 0.139},
         {"weighted_f1": 0.0, "macro_f1": 0.05}, {"weighted_f1": 0.3, "macro_f1": 0.01}]


@pytest.mark.parametrize(("script", "best_epoch"), [
    (ZEROS[:3], 2),  # ties at 0: the higher dev headline metric (exact-span macro-F1 for NER) wins
    (ZEROS, 4),  # a positive selection score beats any 0, whatever the headline metric
    ([{"weighted_f1": 0.5, "macro_f1": 0.1}, {"weighted_f1": 0.5, "macro_f1": 0.9}], 1),  # Rian-T/tabib: first of equal
    ([{"weighted_f1": 0.0, "macro_f1": 0.0}, {"weighted_f1": 0.0, "macro_f1": 0.0}], 1),
])
def test_ties_at_zero_are_broken_by_the_headline_metric(script, best_epoch, toy_classification, monkeypatch):
    real_score = ft.score
    dev_calls = iter(script)

    def scripted(kind, gold, pred, labels=()):
        metrics = real_score(kind, gold, pred, labels)
        if gold is prepared.gold["dev"]:
            metrics.update(next(dev_calls))
        return metrics

    monkeypatch.setattr(ft, "score", scripted)
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=len(script), dev_metric="weighted_f1")
    assert protocol.metric == "macro_f1"
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=False)
    assert outcome.best_epoch == best_epoch
    assert outcome.dev_metrics["macro_f1"] == script[best_epoch - 1]["macro_f1"]

def test_off_a_terminal_each_evaluation_is_one_plain_line(toy_classification, capsys):
    """In a log file (stderr not a TTY) the fine-tuning loop prints one line per dev evaluation and no bar."""
    encoder, tokenizer, prepared, protocol = toy_classification(epochs=2)
    capsys.readouterr()  # loading's own output is not the loop's
    outcome = ft.finetune(prepared, encoder, tokenizer.pad_token_id, protocol, seed=0, progress=True)
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.startswith("toy seed 0 epoch")]
    assert len(lines) == 2 and "step 4/4: train loss " in lines[-1] and "dev weighted_f1 " in lines[-1]
    assert "\r" not in err
    assert outcome.history[-1]["train_loss"] > 0  # the running loss read from the device at evaluation
