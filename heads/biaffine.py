"""The span-scoring half of the span-NER head and its decoder.

Candidate spans are stored as a band: (start word w, width k+1) for k < max_width, so memory grows with
words x max_width, not words squared (a 1024-subword window has ~700 words). The biaffine scorer is
begin(w) . end(w+k) per label plus a learned per-(width, label) bias, computed one diagonal at a time:
each of the <= max_width steps is vectorised over batch, begins and labels.
"""

from __future__ import annotations

import math

import torch
from biobench.heads.crf import band_index
from torch import nn


class BandBiaffine(nn.Module):
    """Biaffine begin x end scorer, one bilinear form per label, over the band of candidate spans."""

    def __init__(self, input_size: int, n_labels: int, size: int = 128, max_width: int = 40):
        super().__init__()
        self.n_labels, self.size, self.max_width = n_labels, size, max_width
        self.begin = nn.Linear(input_size, n_labels * size)
        self.end = nn.Linear(input_size, n_labels * size)
        self.width_bias = nn.Parameter(torch.zeros(max_width, n_labels))

    def forward(self, words: torch.Tensor, band: int) -> torch.Tensor:
        """words (N, W, H) -> logits (N, W, band, labels) for the span [w, w + k], band <= max_width
        (garbage past the end). Short sequences (W <= band) take one W x W product, long ones one
        product per diagonal so memory stays O(W x labels x size) per step."""
        n, w, _ = words.shape
        begin = self.begin(words).float().view(n, w, self.n_labels, self.size) / math.sqrt(self.size)
        end = self.end(words).float().view(n, w, self.n_labels, self.size)
        if w <= band:
            full = torch.einsum("nwld,nvld->nwvl", begin, end)
            logits = full[:, torch.arange(w, device=words.device)[:, None], band_index(w, band, words.device)]
        else:
            diagonals = [nn.functional.pad((begin[:, : w - k] * end[:, k:]).sum(-1), (0, 0, 0, k))
                         for k in range(band)]
            logits = torch.stack(diagonals, dim=2)
        return logits + self.width_bias[:band]


def band_valid(n_words: torch.Tensor, width: int, max_width: int) -> torch.Tensor:
    """(N, W, K) bool: the span [w, w + k] lies inside the real words of each sequence."""
    w = torch.arange(width, device=n_words.device)[None, :, None]
    k = torch.arange(max_width, device=n_words.device)[None, None, :]
    return w + k < n_words[:, None, None]


def decode_spans(probs: torch.Tensor, valid: torch.Tensor, threshold: float = 0.5
                 ) -> list[list[tuple[int, int, int, float]]]:
    """Per sequence, the spans (first word, last word inclusive, label index, prob) whose probability
    exceeds `threshold`, minus overlaps within a label (greedy by probability, so of two nested or
    crossing spans of one label the likelier stays). Spans of different labels never conflict, so
    nested entities of different types survive. probs (N, W, K, labels), valid (N, W, K)."""
    keep = (probs > threshold) & valid[..., None]
    found = keep.nonzero().tolist()
    scores = probs[keep].tolist()
    per_group: dict[tuple[int, int], list[tuple[float, int, int]]] = {}
    for (seq, w, k, label), p in zip(found, scores, strict=True):
        per_group.setdefault((seq, label), []).append((p, w, w + k))
    out: list[list[tuple[int, int, int, float]]] = [[] for _ in range(probs.shape[0])]
    for (seq, label), cands in per_group.items():
        taken = bytearray(probs.shape[1])  # words already inside a kept span of this label
        for p, b, e in sorted(cands, key=lambda c: (-c[0], c[1], c[2])):
            if 1 not in taken[b:e + 1]:
                taken[b:e + 1] = b"\x01" * (e + 1 - b)
                out[seq].append((b, e, label, p))
    for spans in out:
        spans.sort()
    return out
