"""The span head's fast compute path against a straightforward reference kept here: with identical weights and
inputs, the same span logits, loss, gradients (head and encoder) and decoded spans, to float32 rounding.

The reference is the head as first written (issue 19): a packed BiLSTM, the CRF forward-backward through
autograd one time step at a time, and span scores over all (begin, end) pairs, cut to the band afterwards.
The fast path (issue 26) must be the same function: it only changes how it is computed.
"""

from __future__ import annotations

import math

import pytest
import torch
from biobench.heads import get_head
from biobench.heads.biaffine import band_valid, decode_spans
from biobench.heads.crf import B_, IMPOSSIBLE, L_, U_, BioulCrf, O
from biobench.heads.span_ner import GatedBiLSTM, SpanNerModel
from biobench.tasks.schema import Entity, NerExample
from torch import nn

LABELS = ["DISO", "ANAT", "CHEM"]


def example(id_: str, text: str, *mentions: tuple[str, str]) -> NerExample:
    starts = [text.index(surface) for surface, _ in mentions]
    return NerExample(id_, text, tuple(Entity(s, s + len(surface), label)
                                       for s, (surface, label) in zip(starts, mentions, strict=True)))


DOCUMENTS = [
    example("d0", "Carcinome canalaire infiltrant du sein gauche, grade II.",
            ("Carcinome canalaire infiltrant du sein gauche", "DISO"), ("sein gauche", "ANAT")),
    example("d1", "Traitement par amoxicilline 1 g trois fois par jour pendant sept jours.", ("amoxicilline", "CHEM")),
    example("d2", "Antécédents : diabète de type 2, hypertension artérielle, allergie à la pénicilline.",
            ("diabète de type 2", "DISO"), ("hypertension artérielle", "DISO"), ("pénicilline", "CHEM")),
]


# ---- the reference --------------------------------------------------------------------------------------

def reference_bilstm(module: GatedBiLSTM, x: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """GatedBiLSTM through PackedSequence (the rows' real lengths), padded back with zeros."""
    if module.project is not None:
        x = nn.functional.gelu(module.project(x))
    lengths = mask.sum(1).clamp(min=1).cpu()
    for lstm, gate, norm in zip(module.lstms, module.gates, module.norms, strict=True):
        packed = nn.utils.rnn.pack_padded_sequence(x, lengths, batch_first=True, enforce_sorted=False)
        out, _ = lstm(packed)
        out, _ = nn.utils.rnn.pad_packed_sequence(out, batch_first=True, total_length=x.shape[1])
        out = module.dropout(out)
        g = torch.sigmoid(gate(out))
        x = norm(x * (1 - g) + out * g)
    return x


def reference_log_marginals(crf: BioulCrf, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Forward-backward in log space, one step at a time, differentiated by autograd."""
    trans, start, end = crf.scores()
    n, steps, n_tags = emissions.shape
    alphas = [start + emissions[:, 0]]
    for t in range(1, steps):
        step = torch.logsumexp(alphas[-1].unsqueeze(2) + trans, dim=1) + emissions[:, t]
        alphas.append(torch.where(mask[:, t, None], step, alphas[-1]))
    log_z = torch.logsumexp(alphas[-1] + end, dim=-1)
    betas = [end.expand(n, -1)]
    for t in range(steps - 2, -1, -1):
        step = torch.logsumexp(trans + (emissions[:, t + 1] + betas[0]).unsqueeze(1), dim=2)
        betas.insert(0, torch.where(mask[:, t + 1, None], step, end.expand(n, -1)))
    marginals = torch.stack(alphas, 1) + torch.stack(betas, 1) - log_z[:, None, None]
    outside = torch.full_like(marginals, IMPOSSIBLE)
    outside[..., O] = 0.0
    return torch.where(mask[..., None], marginals, outside)


def all_pairs_to_band(pairs: torch.Tensor, band: int) -> torch.Tensor:
    """(N, W, W, C) scores of every [begin, end] -> (N, W, band, C), zero where end runs past W."""
    n, w, _, c = pairs.shape
    out = pairs.new_zeros(n, w, band, c)
    for k in range(band):
        out[:, : w - k, k] = pairs.diagonal(k, 1, 2).permute(0, 2, 1)
    return out


def reference_tagger_scores(log_m: torch.Tensor, n_classes: int, band: int, eps: float = 1e-8) -> torch.Tensor:
    """min(log P(no O inside [b, e]), log P(begins at b), log P(ends at e)) for every pair b <= e."""
    n, w, _ = log_m.shape
    per_class = log_m[..., 1:].reshape(n, w, n_classes, 4)
    begins = torch.logsumexp(per_class[..., [B_, U_]], dim=-1)
    ends = torch.logsumexp(per_class[..., [L_, U_]], dim=-1)
    inside = torch.logsumexp(per_class, dim=-1)
    upper = torch.ones(w, w, dtype=torch.bool).triu()  # [b, e] with b <= t <= e: t >= b, t <= e
    covered = upper[:, None, :] & upper.T[None, :, :]  # (b, e, t)
    no_hole = torch.einsum("bet,ntc->nbec", covered.float(), inside)
    pairs = torch.minimum(torch.minimum(no_hole.clamp(max=-eps), begins[:, :, None]), ends[:, None, :])
    return all_pairs_to_band(pairs, band)


def reference_biaffine(model: SpanNerModel, units: torch.Tensor, band: int) -> torch.Tensor:
    scorer = model.biaffine
    n, w, _ = units.shape
    begin = scorer.begin(units).view(n, w, scorer.n_classes, scorer.size) / math.sqrt(scorer.size)
    end = scorer.end(units).view(n, w, scorer.n_classes, scorer.size)
    return all_pairs_to_band(torch.einsum("nbcd,necd->nbec", begin, end), band) + scorer.bias


def reference_score_units(model: SpanNerModel, units: torch.Tensor, mask: torch.Tensor,
                          unit_mask: torch.Tensor | None = None, lead: int = 0) -> torch.Tensor:
    """Span logits over the text units: the BiLSTM and CRF over the whole sequence (special tokens too), the
    band as wide as the text units allow, the lead ([CLS]) cut off."""
    w = (mask if unit_mask is None else unit_mask).shape[1]
    units = reference_bilstm(model.contextualizer, units, mask)
    band = min(model.config.max_width, w)
    crf_mask = mask.clone()
    crf_mask[:, 0] = True
    log_m = reference_log_marginals(model.crf, model.tag_proj(model.tagger_dropout(units)), crf_mask)
    tagger = reference_tagger_scores(log_m, model.n_classes, band)
    biaffine = reference_biaffine(model, model.biaffine_dropout(units), band)
    return (model.config.tagger_weight * tagger + model.config.biaffine_weight * biaffine)[:, lead:lead + w]


def reference_loss(logits: torch.Tensor, samples: torch.Tensor, n_classes: int) -> torch.Tensor:
    chosen = logits[samples[:, 0], samples[:, 1], samples[:, 2]]
    target = nn.functional.one_hot(samples[:, 3], n_classes).float()
    return nn.functional.binary_cross_entropy_with_logits(chosen, target, reduction="none").mean(-1).mean()


# ---- random inputs --------------------------------------------------------------------------------------

class FakeEncoder(nn.Module):
    """What the head reads of an encoder: its hidden size (the tests feed unit vectors directly)."""

    def __init__(self, hidden_size: int):
        super().__init__()
        self.config = type("Config", (), {"hidden_size": hidden_size})()


def random_model(seed: int, hidden: int = 12, **config) -> SpanNerModel:
    head = get_head("span", "ner", {"lstm_size": 10, "lstm_layers": 2, "biaffine_size": 6, "dropout": 0.0,
                                    "max_width": 5, **config})
    torch.manual_seed(seed)
    model = head.build(FakeEncoder(hidden), LABELS, [])
    with torch.no_grad():  # learned transitions, start/end scores and biases away from their zero init
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.5)
    return model.train()


def random_samples(lengths: list[int], max_width: int, per_window: int, generator: torch.Generator) -> torch.Tensor:
    rows = []
    for i, n_units in enumerate(lengths):
        for _ in range(per_window if n_units else 0):
            b = int(torch.randint(n_units, (1,), generator=generator))
            k = int(torch.randint(min(max_width, n_units - b), (1,), generator=generator))
            rows.append((i, b, k, int(torch.randint(len(LABELS) + 1, (1,), generator=generator))))
    return torch.tensor(rows, dtype=torch.long).view(-1, 4)


def both_ways(model: SpanNerModel, units: torch.Tensor, mask: torch.Tensor, samples: torch.Tensor):
    """(logits, loss, gradients by name incl. "units") for the fast path and for the reference."""
    out = []
    for compute in (lambda u: model.score_units(u, mask)[0], lambda u: reference_score_units(model, u, mask)):
        model.zero_grad(set_to_none=True)
        leaf = units.detach().clone().requires_grad_()
        logits = compute(leaf)
        loss = reference_loss(logits, samples, model.n_classes)
        loss.backward()
        grads = {name: p.grad.clone() for name, p in model.named_parameters() if p.grad is not None}
        out.append((logits.detach(), loss.detach(), {**grads, "units": leaf.grad.clone()}))
    return out


def assert_close(new: torch.Tensor, ref: torch.Tensor, what: str) -> None:
    scale = ref.abs().max().item() + 1e-6
    worst = (new - ref).abs().max().item()
    assert worst <= 2e-5 * scale + 1e-6, f"{what}: max |new - reference| {worst:.3g} (scale {scale:.3g})"


# ---- the tests ------------------------------------------------------------------------------------------

@pytest.mark.parametrize(("lengths", "max_width", "seed"), [
    ([13, 7, 0, 1], 5, 0),      # rows of different lengths, an empty window, W > band (the diagonal path)
    ([4, 4, 2], 5, 1),          # W <= band (one W x W product)
    ([23, 23, 16, 9, 3], 7, 2),  # equal full rows next to short ones, a wider band
])
def test_fast_path_is_the_reference_in_logits_loss_gradients_and_spans(lengths, max_width, seed):
    model = random_model(seed, max_width=max_width)
    generator = torch.Generator().manual_seed(seed)
    width = max(max(lengths), 1)
    mask = torch.arange(width)[None, :] < torch.tensor(lengths)[:, None]
    units = torch.randn(len(lengths), width, 12, generator=generator) * 2
    samples = random_samples(lengths, max_width, 6, generator)
    (logits, loss, grads), (ref_logits, ref_loss, ref_grads) = both_ways(model, units, mask, samples)

    band = min(max_width, width)
    valid = band_valid(mask.sum(1), width, band)
    assert logits.shape == ref_logits.shape == (len(lengths), width, band, len(LABELS) + 1)
    assert_close(logits[valid], ref_logits[valid], "span logits")
    assert torch.isfinite(loss) and loss.item() == pytest.approx(ref_loss.item(), rel=1e-5)
    assert set(grads) == set(ref_grads)
    assert {"units", "crf.transitions", "contextualizer.lstms.0.weight_hh_l0_reverse", "biaffine.bias"} <= set(grads)
    for name in ref_grads:
        assert_close(grads[name], ref_grads[name], f"gradient of {name}")
        assert grads[name].abs().sum() > 0 or ref_grads[name].abs().sum() == 0, name
    assert_close(grads["units"][~mask], ref_grads["units"][~mask], "padding gradients")  # both exactly zero
    for threshold in (0.3, 0.5, 0.7):
        spans, ref_spans = (decode_spans(x.sigmoid(), valid, threshold) for x in (logits, ref_logits))
        assert [[s[:3] for s in row] for row in spans] == [[s[:3] for s in row] for row in ref_spans]
        assert [s[3] for row in spans for s in row] == pytest.approx(
            [s[3] for row in ref_spans for s in row], abs=2e-5)
    assert any(decode_spans(logits.sigmoid(), valid, 0.3))  # the comparison saw predicted spans


def test_full_model_matches_the_reference_through_the_encoder(tiny_tokenizer):
    """End to end on real windows: model(batch) and predict() equal the reference, encoder gradients too."""
    from biobench.training.presets import build_modernbert_mlm

    head = get_head("span", "ner", {"lstm_size": 16, "lstm_layers": 2, "biaffine_size": 8, "dropout": 0.0,
                                    "max_width": 6})
    features = head.featurize(DOCUMENTS, tiny_tokenizer, 24, LABELS)  # short windows: several per document
    batch = head.collate(features, tiny_tokenizer.pad_token_id)
    assert len(set(batch["unit_mask"].sum(1).tolist())) > 1 and batch["unit_mask"].shape[1] > 6
    model = head.build(build_modernbert_mlm(tiny_tokenizer, "tiny", seed=0).model, LABELS, []).train()
    results = []
    for reference in (False, True):
        model.zero_grad(set_to_none=True)
        if reference:
            logits = reference_score_units(model, *model._units(batch)[:2], batch["unit_mask"], model._units(batch)[2])
            loss = reference_loss(logits, batch["samples"], model.n_classes)
        else:
            loss = model(batch)["loss"]
        loss.backward()
        results.append((loss.item(), {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}))
    (loss, grads), (ref_loss, ref_grads) = results
    assert loss == pytest.approx(ref_loss, rel=1e-5)
    assert set(grads) == set(ref_grads) and any(n.startswith("encoder.") for n in grads)
    for name in ref_grads:
        assert_close(grads[name], ref_grads[name], f"gradient of {name}")

    model.eval()
    with torch.no_grad():
        ref_logits = reference_score_units(model, *model._units(batch)[:2], batch["unit_mask"], model._units(batch)[2])
        logits, valid = model.span_logits(batch)
    assert_close(logits[valid], ref_logits[valid], "span logits")
    assert [list(w) for w in model.predict(batch)] == [
        [[chars[b][0], chars[e][1], LABELS[lab]] for b, e, lab, _ in spans]
        for spans, chars in zip(decode_spans(ref_logits.sigmoid(), valid, model.config.threshold),
                                batch["unit_chars"], strict=True)]
