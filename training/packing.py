"""Packing: the framed document stream cut into fixed-length sequences, in a seeded order.

Documents are already framed as [CLS] doc [SEP] in the token cache, so consecutive documents are separated
by the end-of-sequence token and every token of the corpus lands in exactly one sequence (the last, partial
sequence is padded). Attention crosses document boundaries as in the paper; `document_ids` lets `--doc-mask`
restart positions per document and block cross-document attention.

Sequence order is a pure function of (seed, global position): position g reads sequence
perm_{g // n}(g % n) of epoch g // n. A resumed or data-parallel run therefore needs only the position.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np
import torch

if TYPE_CHECKING:
    from biobench.training.token_store import ShardedTokens


@dataclass
class PackedCorpus:
    tokens: np.ndarray | ShardedTokens  # flat framed stream (memory-mapped)
    offsets: np.ndarray  # document starts, n_docs + 1
    seq_len: int
    pad_id: int
    seed: int = 0
    _orders: dict[int, np.ndarray] = field(default_factory=dict, repr=False)

    @property
    def n_sequences(self) -> int:
        return -(-len(self.tokens) // self.seq_len)

    def sequence(self, index: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(ids, attention mask, document ids) of packed sequence `index` (corpus order)."""
        start = index * self.seq_len
        ids = np.asarray(self.tokens[start:start + self.seq_len], dtype=np.int64)
        mask = np.ones(self.seq_len, dtype=np.int64)
        docs = np.searchsorted(self.offsets, np.arange(start, start + len(ids)), side="right") - 1
        if len(ids) < self.seq_len:
            pad = self.seq_len - len(ids)
            mask[len(ids):] = 0
            ids = np.concatenate([ids, np.full(pad, self.pad_id, dtype=np.int64)])
            docs = np.concatenate([docs, np.full(pad, -1, dtype=docs.dtype)])
        return ids, mask, docs

    def order(self, epoch: int) -> np.ndarray:
        if epoch not in self._orders:
            self._orders = {epoch: np.random.default_rng([self.seed, epoch]).permutation(self.n_sequences)}
        return self._orders[epoch]

    def at(self, position: int) -> int:
        """Corpus index of the sequence read at global position `position` (epochs reshuffle)."""
        epoch, i = divmod(position, self.n_sequences)
        return int(self.order(epoch)[i])

    def sequence_tokens(self, index: int) -> np.ndarray:
        """The unpadded token ids of sequence `index` (what `step_digest` hashes)."""
        start = index * self.seq_len
        return np.asarray(self.tokens[start:start + self.seq_len])

    def batch(self, positions: list[int]) -> dict[str, torch.Tensor]:
        return stack_rows([self.sequence(self.at(p)) for p in positions])


def stack_rows(rows: list[tuple[np.ndarray, np.ndarray, np.ndarray]]) -> dict[str, torch.Tensor]:
    """The model inputs of a batch of (ids, attention mask, document ids) rows."""
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
