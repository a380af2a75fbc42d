"""Packing: the framed document stream cut into fixed-length sequences, in a seeded order.

Documents are already framed as [CLS] doc [SEP] in the token cache, so consecutive documents are separated
by the end-of-sequence token and every token of the corpus lands in exactly one sequence (the last, partial
sequence is padded). Attention crosses document boundaries as in the paper; `document_ids` lets `--doc-mask`
restart positions per document and block cross-document attention.

Each pass over the corpus shuffles its documents before packing them (Megatron-LM's per-epoch document
index), so an upsampled corpus read 20 times shows the model 20 different cuts of its documents, never the same
windows again; the pass's sequences are then read in a shuffled order. Both are a pure function of (seed,
stream, pass): position g reads sequence perm_p(g % n) of pass p = g // n. A resumed or data-parallel run
therefore needs only the position, whatever the number of ranks.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from biobench.training.token_store import DocumentView, ShardedTokens


@dataclass
class PackedCorpus:
    """A document stream read pass after pass: pass p shuffles the documents (Megatron-LM's per-epoch document
    index), packs them into sequences of `seq_len` and reads those in a shuffled order, both drawn from
    (seed, stream, p) alone. `groups`: document index boundaries within which documents are shuffled (a weighted
    mix source's layers, mixture.RepeatedDocuments), None for one group. A sequence's index (`at`) is
    pass * n_sequences + its place in that pass's packing."""

    tokens: np.ndarray | ShardedTokens | DocumentView  # flat framed stream (memory-mapped, or a view of one)
    offsets: np.ndarray  # document starts, n_docs + 1
    seq_len: int
    pad_id: int
    seed: int = 0
    stream: int | None = None  # a mix source's index: its passes drawn apart from the other sources'
    groups: np.ndarray | None = None
    _passes: dict[int, tuple[np.ndarray, np.ndarray, np.ndarray]] = field(default_factory=dict, repr=False)

    @property
    def n_sequences(self) -> int:
        return -(-len(self.tokens) // self.seq_len)

    def _rng(self, p: int) -> np.random.Generator:
        return np.random.default_rng([self.seed, p] if self.stream is None else [self.seed, self.stream, p])

    def shuffled(self, p: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Pass p: (document order, each of those documents' start in the pass's stream (n_docs + 1), sequence
        order). 4 + 8 bytes per document, held for the last two passes asked for."""
        cached = self._passes.get(p)
        if cached is not None:
            return cached
        rng = self._rng(p)
        n_docs = len(self.offsets) - 1
        kind = np.int32 if n_docs < 1 << 31 else np.int64
        if self.groups is None:
            order = rng.permutation(n_docs).astype(kind)
        else:
            bounds = np.asarray(self.groups, dtype=np.int64)
            order = np.concatenate([(lo + rng.permutation(hi - lo)).astype(kind)
                                    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True)])
        offsets = np.asarray(self.offsets)
        starts = np.zeros(n_docs + 1, dtype=np.int64)
        np.cumsum(offsets[order.astype(np.int64) + 1] - offsets[order], out=starts[1:])
        cached = (order, starts, rng.permutation(self.n_sequences))
        if len(self._passes) >= 2:  # a batch at a pass boundary reads two passes
            self._passes.pop(next(iter(self._passes)))
        self._passes[p] = cached
        return cached

    def fill(self, index: int, ids: np.ndarray, mask: np.ndarray, docs: np.ndarray) -> None:
        """Sequence `index` written into the int64 rows `ids`, `mask`, `docs` (seq_len each): its tokens, then
        padding. The batch's rows are filled in place: no per-row arrays, padding concatenations or stacking
        (issue 59 item 3)."""
        p, j = divmod(index, self.n_sequences)
        order, starts, _ = self.shuffled(p)
        start, stop = j * self.seq_len, min((j + 1) * self.seq_len, int(starts[-1]))
        v = int(np.searchsorted(starts, start, side="right")) - 1
        at = start
        while at < stop:
            doc, end = int(order[v]), min(stop, int(starts[v + 1]))
            base = int(self.offsets[doc]) - int(starts[v])
            ids[at - start:end - start] = self.tokens[at + base:end + base]
            docs[at - start:end - start] = doc
            at, v = end, v + 1
        n = max(0, stop - start)
        ids[n:], docs[n:], mask[:n], mask[n:] = self.pad_id, -1, 1, 0

    def sequence(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, attention mask, document ids) of packed sequence `index` (`at`'s numbering)."""
        ids, mask, docs = (np.empty(self.seq_len, dtype=np.int64) for _ in range(3))
        self.fill(index, ids, mask, docs)
        return ids, mask, docs

    def at(self, position: int) -> int:
        """Index of the sequence read at global position `position` (pass * n_sequences + place in the pass)."""
        p, i = divmod(position, self.n_sequences)
        return p * self.n_sequences + int(self.shuffled(p)[2][i])

    def sequence_tokens(self, index: int) -> np.ndarray:
        """The unpadded token ids of sequence `index` (what `step_digest` hashes)."""
        ids, mask, docs = self.sequence(index)
        return ids[:int(np.count_nonzero(mask))]

    def batch(self, positions: list[int]) -> dict[str, torch.Tensor]:
        return read_batch(self, positions)


def read_batch(corpus, positions: list[int]) -> dict[str, torch.Tensor]:
    """The model inputs of the sequences read at `positions` of a corpus with `seq_len`, `at` and `fill`
    (PackedCorpus, mixture.MixedCorpus), each row filled in place."""
    ids, mask, docs = (np.empty((len(positions), corpus.seq_len), dtype=np.int64) for _ in range(3))
    for row, position in enumerate(positions):
        corpus.fill(corpus.at(position), ids[row], mask[row], docs[row])
    return {"input_ids": torch.from_numpy(ids), "attention_mask": torch.from_numpy(mask),
            "document_ids": torch.from_numpy(docs)}


def stack_rows(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, torch.Tensor]:
    """The model inputs of a batch of (ids, attention mask, document ids) rows (the held-out evaluation's batches:
    sequences by index, not by position)."""
    ids, mask, docs = (torch.from_numpy(np.stack(col)) for col in zip(*rows, strict=True))
    return {"input_ids": ids, "attention_mask": mask, "document_ids": docs}


def document_positions(document_ids: torch.Tensor) -> torch.Tensor:
    """Position ids that restart at 0 at every document start (for --doc-mask)."""
    seq_len = document_ids.shape[1]
    idx = torch.arange(seq_len).expand_as(document_ids)
    starts = torch.ones_like(document_ids, dtype=torch.bool)
    starts[:, 1:] = document_ids[:, 1:] != document_ids[:, :-1]
    start_idx = torch.where(starts, idx, torch.zeros_like(idx))
    return idx - torch.cummax(start_idx, dim=1).values


def step_digest(packed, first: int, count: int) -> str:
    """A 16-hex-digit digest of the token ids one global step reads (positions first .. first + count - 1, in
    order, before any masking): equal digests = the same data in the same order (the seed-noise control)."""
    import hashlib

    h = hashlib.blake2b(digest_size=8)
    for position in range(first, first + count):
        h.update(np.ascontiguousarray(packed.sequence_tokens(packed.at(position)), dtype=np.int64).tobytes())
    return h.hexdigest()
