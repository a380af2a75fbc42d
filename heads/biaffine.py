"""The span-scoring half of the span-NER head and its decoder.

Candidate spans are stored as a band: (start unit w, width k+1) for k < max_width, so memory grows with
units x max_width, not units squared (a 1024-subword window has 1022 units). The biaffine scorer is
begin(w) . end(w+k) / sqrt(size) per class plus one learned bias (Rian-T/tabib `BiaffineSpanScorer`), computed in
blocks of max_width begins (`banded_products`).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch
from torch import nn


class BandBiaffine(nn.Module):
    """Biaffine begin x end scorer, one bilinear form per class, over the band of candidate spans."""

    def __init__(self, input_size: int, n_classes: int, size: int = 64):
        super().__init__()
        self.n_classes, self.size = n_classes, size
        self.begin = nn.Linear(input_size, n_classes * size)
        self.end = nn.Linear(input_size, n_classes * size)
        self.bias = nn.Parameter(torch.zeros(()))

    def forward(self, units: torch.Tensor, band: int) -> torch.Tensor:
        """units (N, W, H) -> logits (N, W, band, classes) for the span [w, w + k] (garbage past the end)."""
        n, w, _ = units.shape
        begin = self.begin(units).float().view(n, w, self.n_classes, self.size) / math.sqrt(self.size)
        end = self.end(units).float().view(n, w, self.n_classes, self.size)
        return banded_products(begin, end, band) + self.bias


def banded_products(begin: torch.Tensor, end: torch.Tensor, band: int) -> torch.Tensor:
    """(N, W, C, D) x (N, W, C, D) -> (N, W, band, C): begin[w] . end[w + k] per class, for k < band.

    Computed block by block: the `band` begins of a block against the 2 x band - 1 ends they can reach, one
    batched matrix product each, then the band read out of it. Twice the products the band needs, but as
    matrix products, where one elementwise product per diagonal moved the (N, W, C, D) tensors through
    memory 2 x band times (forward and backward). Memory stays O(W x band), never W x W."""
    n, w, c, _ = begin.shape
    rows_all, cols_all = begin.transpose(1, 2).contiguous(), end.transpose(1, 2).contiguous()  # (N, C, W, D)
    offsets = torch.arange(band, device=begin.device)
    pieces = []
    for lo in range(0, w, band):
        rows, cols = rows_all[:, :, lo:lo + band], cols_all[:, :, lo:lo + 2 * band - 1]
        scores = rows @ cols.transpose(-1, -2)  # (N, C, rows, cols): begin lo + r against end lo + q
        reach = (offsets[: rows.shape[2], None] + offsets[None, :]).clamp(max=cols.shape[2] - 1)  # q = r + k
        pieces.append(scores.gather(3, reach.expand(n, c, -1, -1)))
    return torch.cat(pieces, dim=2).permute(0, 2, 3, 1)


def band_valid(n_units: torch.Tensor, width: int, max_width: int) -> torch.Tensor:
    """(N, W, K) bool: the span [w, w + k] lies inside the real units of each sequence."""
    w = torch.arange(width, device=n_units.device)[None, :, None]
    k = torch.arange(max_width, device=n_units.device)[None, None, :]
    return w + k < n_units[:, None, None]


def decode_spans(probs: torch.Tensor, valid: torch.Tensor, threshold: float = 0.5,
                 unit_chars: Sequence[Sequence[tuple[int, int]]] | None = None
                 ) -> list[list[tuple[int, int, int, float]]]:
    """Per sequence, the spans (first unit, last unit inclusive, label index, prob) the harness keeps
    (Rian-T/tabib `BERTSpanNERAdapter.predict` and `_filter_overlapping_predictions`): each candidate span takes its
    best non-O class, kept when its probability exceeds `threshold`; then, within a label, spans are taken
    by decreasing probability, then decreasing length in characters (`unit_chars`: each sequence's unit
    character ranges; in units without it), then Rian-T/tabib's enumeration order (first unit, then last unit: a
    stable sort over spans listed start-major), and one overlapping an already kept span is dropped, so
    nested entities of different labels survive. Exact ties are common: a sigmoid is exactly 1.0 in float32
    above a logit of ~16.7. probs (N, W, K, classes) with class 0 = O, valid (N, W, K); label index = class - 1."""
    best, label = probs[..., 1:].max(-1)
    keep = (best > threshold) & valid
    found = keep.nonzero().tolist()
    per_group: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
    for (seq, w, k), p, lab in zip(found, best[keep].tolist(), label[keep].tolist(), strict=True):
        per_group.setdefault((seq, lab), []).append((p, w, w + k))
    out: list[list[tuple[int, int, int, float]]] = [[] for _ in range(probs.shape[0])]
    for (seq, lab), cands in per_group.items():
        chars = unit_chars[seq] if unit_chars is not None else None
        lengths = [chars[e][1] - chars[b][0] if chars else e - b for _, b, e in cands]
        taken = bytearray(probs.shape[1])  # units already inside a kept span of this label
        ranked = sorted(zip(cands, lengths, strict=True), key=lambda c: (-c[0][0], -c[1], c[0][1], c[0][2]))
        for (p, b, e), _ in ranked:
            if 1 not in taken[b:e + 1]:
                taken[b:e + 1] = b"\x01" * (e + 1 - b)
                out[seq].append((b, e, lab, p))
    for spans in out:
        spans.sort()
    return out
