"""The tagging half of the span-NER head: a BIOUL linear-chain CRF per entity label.

One 5-tag CRF per label (labels are folded into the batch dimension) lets nested entities of different
labels coexist. pytorch-crf supplies the likelihood and Viterbi; its transitions are replaced by fixed
BIOUL constraints (0 allowed, -1e4 forbidden, as nlstruct's tagger does) so every decoded path is a
valid tagging. pytorch-crf has no marginals: `crf_log_marginals` is forward-backward in log space, and
`tagger_span_logits` turns the per-word marginals into one begin x end score per candidate span.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torchcrf import CRF

TAGS = ("O", "I", "B", "L", "U")
O, I, B, L, U = range(5)  # noqa: E741 - the scheme's own letters
IMPOSSIBLE = -1e4  # finite, so log-sum-exp over forbidden paths never gives NaN gradients

ALLOWED_NEXT = {O: (O, B, U), B: (I, L), I: (I, L), L: (O, B, U), U: (O, B, U)}
ALLOWED_START = (O, B, U)
ALLOWED_END = (O, L, U)


def bioul_crf() -> CRF:
    """A pytorch-crf CRF over the 5 BIOUL tags whose start/end/transition scores are fixed buffers
    encoding the BIOUL grammar (no overlapping entities within one label; juxtaposition allowed)."""
    crf = CRF(len(TAGS), batch_first=True)
    trans = torch.full((5, 5), IMPOSSIBLE)
    for prev, nexts in ALLOWED_NEXT.items():
        trans[prev, list(nexts)] = 0.0
    start = torch.full((5,), IMPOSSIBLE)
    start[list(ALLOWED_START)] = 0.0
    end = torch.full((5,), IMPOSSIBLE)
    end[list(ALLOWED_END)] = 0.0
    for name, value in (("transitions", trans), ("start_transitions", start), ("end_transitions", end)):
        delattr(crf, name)
        crf.register_buffer(name, value)
    return crf


def resolve_overlaps(spans: Sequence[tuple[int, int]]) -> list[tuple[int, int]]:
    """Non-overlapping subset of word spans (first, last inclusive) of ONE label, longest first, so a
    single BIOUL tag sequence can encode it (the span scorer still sees every gold span)."""
    kept: list[tuple[int, int]] = []
    for b, e in sorted(set(spans), key=lambda s: (s[0] - s[1], s[0])):
        if all(e < kb or b > ke for kb, ke in kept):
            kept.append((b, e))
    return sorted(kept)


def spans_to_tags(spans: Sequence[tuple[int, int]], n_words: int) -> list[int]:
    """BIOUL tags of non-overlapping word spans (first, last inclusive)."""
    tags = [O] * n_words
    for b, e in spans:
        if b == e:
            tags[b] = U
        else:
            tags[b], tags[e] = B, L
            tags[b + 1:e] = [I] * (e - b - 1)
    return tags


def crf_log_marginals(crf: CRF, emissions: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """log P(tag_t = y | x) for every position, by forward-backward in log space.

    emissions (N, T, 5), mask (N, T) bool right-padded with mask[:, 0] True. Padded positions get
    log P(O) = 0, so they read as "outside" downstream."""
    alpha, log_z = _forward(crf, emissions.float(), mask)
    return _marginals(crf, emissions.float(), mask, alpha, log_z)


def crf_nll_and_log_marginals(crf: CRF, emissions: torch.Tensor, tags: torch.Tensor,
                              mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(summed negative log-likelihood of `tags`, detached log marginals) from ONE forward pass.

    Training needs both every step: pytorch-crf's own NLL would run the forward algorithm again, so the
    log-partition of the NLL and the marginals share the alphas here. Equal to `-crf(emissions, tags, mask,
    reduction="sum")` and `crf_log_marginals` (tested)."""
    emissions = emissions.float()
    alpha, log_z = _forward(crf, emissions, mask)
    nll = (log_z - _path_score(crf, emissions, tags, mask)).sum()
    with torch.no_grad():
        marginals = _marginals(crf, emissions.detach(), mask, alpha.detach(), log_z.detach())
    return nll, marginals


def _forward(crf: CRF, emissions: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Forward algorithm: alphas (N, T, 5) and log Z (N,)."""
    trans, start, end = crf.transitions, crf.start_transitions, crf.end_transitions
    alphas = [start + emissions[:, 0]]
    for t in range(1, emissions.shape[1]):
        step = torch.logsumexp(alphas[-1].unsqueeze(2) + trans, dim=1) + emissions[:, t]
        alphas.append(torch.where(mask[:, t, None], step, alphas[-1]))
    return torch.stack(alphas, 1), torch.logsumexp(alphas[-1] + end, dim=-1)


def _marginals(crf: CRF, emissions: torch.Tensor, mask: torch.Tensor, alpha: torch.Tensor,
               log_z: torch.Tensor) -> torch.Tensor:
    """Backward algorithm, then log marginals from the alphas; padded positions read as "outside"."""
    trans, end = crf.transitions, crf.end_transitions
    n, t_len, _ = emissions.shape
    betas = [end.expand(n, -1)]
    for t in range(t_len - 2, -1, -1):
        step = torch.logsumexp(trans + (emissions[:, t + 1] + betas[0]).unsqueeze(1), dim=2)
        betas.insert(0, torch.where(mask[:, t + 1, None], step, end.expand(n, -1)))
    marginals = alpha + torch.stack(betas, 1) - log_z[:, None, None]
    outside = torch.full_like(marginals, IMPOSSIBLE)
    outside[..., O] = 0.0
    return torch.where(mask[..., None], marginals, outside)


def _path_score(crf: CRF, emissions: torch.Tensor, tags: torch.Tensor, mask: torch.Tensor) -> torch.Tensor:
    """Unnormalised log score (N,) of the tag path `tags` under a right-padded `mask`."""
    emit = emissions.gather(2, tags.unsqueeze(2)).squeeze(2)
    trans = crf.transitions[tags[:, :-1], tags[:, 1:]]
    inner = mask[:, 1:].to(emit.dtype)
    last = tags.gather(1, (mask.sum(1) - 1).clamp(min=0).unsqueeze(1)).squeeze(1)
    return (crf.start_transitions[tags[:, 0]] + emit[:, 0] + ((emit[:, 1:] + trans) * inner).sum(1)
            + crf.end_transitions[last])


def band_index(n_words: int, max_width: int, device: torch.device | None = None) -> torch.Tensor:
    """(W, K) index of the last word of the span starting at w with width k+1, clamped into range
    (spans running past the end are masked by the caller)."""
    w = torch.arange(n_words, device=device)[:, None]
    k = torch.arange(max_width, device=device)[None, :]
    return (w + k).clamp(max=max(n_words - 1, 0))


def tagger_span_logits(log_marginals: torch.Tensor, max_width: int, eps: float = 1e-6,
                       clamp: float = 10.0) -> torch.Tensor:
    """Span logits (..., W, K) from per-word log marginals (..., W, 5): the span [w, w+k] scores
    min(log P(begins at w), log P(ends at w+k), log P(no O inside)) (nlstruct's bound), turned into a
    logit and clamped to +-`clamp` so the biaffine scorer can still overrule a confident tagger."""
    n_words = log_marginals.shape[-2]
    begins = torch.logsumexp(log_marginals[..., [B, U]], dim=-1)
    ends = torch.logsumexp(log_marginals[..., [L, U]], dim=-1)
    inside = torch.logsumexp(log_marginals[..., [I, B, L, U]], dim=-1)
    cum = torch.cat([torch.zeros_like(inside[..., :1]), inside.cumsum(-1)], dim=-1)
    last = band_index(n_words, max_width, log_marginals.device)
    no_hole = cum[..., last + 1] - cum[..., :n_words, None]
    log_p = torch.minimum(torch.minimum(begins[..., :, None], ends[..., last]), no_hole.clamp(max=-eps))
    return (log_p - torch.log(-torch.expm1(log_p))).clamp(-clamp, clamp)
