"""Mixtures of token stores, in tokens, as the paper states them (§3.2, App. B).

A mix file (TOML) has one `[[source]]` table per source:

    [[source]]
    name = "literature"            # a name for the table and the logs
    store = "stores/biomed-fr"     # a built token store (`biobench corpus build`), relative to this file
    share = 0.7                    # of the run's tokens (or: tokens = 7_000_000_000; all sources use one form)
    max_passes = 1                 # upsampling by repetition, each pass reshuffled (OLMo-core's max repetition)
    build_from = "almanach/..."    # optional, documentation only: what `corpus build` reads for this store
    weight = "score"               # optional: the store's per-document weight field (`corpus build --weight-field`)
    hub_config = "fr"              # optional, a hub build_from only: its config (`corpus build --hub-config`)
    data_files = ["fr/*.parquet"]  # optional, a hub build_from only: globs of its files (`corpus build --data-files`)

A source with `weight` reads each document a deterministic number of times (repeat_counts: the weight's whole
part, plus one more with probability its fractional part, drawn from the document's index alone), laid out in
layers: layer k holds, in store order, the documents repeated more than k times, so copies of one document are a
layer apart, never adjacent. That is the paper's upsampling of literature by its high-scoring paragraphs and of
clinical paragraphs 100x / 10x (§3.2, App. B), with no copy on disk; the source's available tokens are those of
its repeated stream.

Sequences are cut from each source's own token stream (whole packed sequences: a source's share counts
tokens, never documents, unlike mosaicml streaming's `proportion`, which counts samples) and interleaved by
Megatron-LM's BlendedDataset rule: position g takes the source whose share is furthest behind its target
(largest `share * (g + 1) - taken`), so every source stays within one sequence of its target share at every
step. Which sequence a position reads is a pure function of (mix, seed, position): a resumed run, or one with
another number of ranks, reads the same sequences. Pass p of a source shuffles its documents before packing them
(Megatron-LM's per-epoch document index: an upsampled source shows other windows each pass) and reads the
sequences in a shuffled order, both drawn from (seed, source, p) (packing.PackedCorpus); a source that would need more than `max_passes` passes to fill its share is
refused in one line naming it (OLMo-core's `max_repetition_ratio` check), and the plan table records target
and realised share per source (OLMo-core logs the realised deviation per source). A document that an earlier
source of the mix holds (the same document hash, token_store.document_hash) is left out of every later source
(source_streams): upsampling would multiply it; the plan table counts what dedup left out per source.

`pretrain --heldout-docs N` holds N documents of each source out of training (split_sources): the N whose
splitmix64 draw, keyed by the source's name, is smallest among the documents the source would read (dedup's and
a weight of 0's left out). A pure function of the store and the source's name, never of a seed or the number of
ranks: every run over the store, whatever its seeds, validates on the same documents (as Megatron-LM's `--split`
is a fixed document range, and OLMo's in-loop evaluators a fixed set). They leave every pass of the training
stream, so the plan (and `corpus plan`'s table) counts the tokens that remain.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
from biobench.errors import ConfigError, DataError
from biobench.ranges import Bounds
from biobench.runtime.jsonfile import UnsafeJSONError, read_toml
from biobench.runtime.keys import check_keys
from biobench.training import corpus, token_store
from biobench.training.schedules import phase_steps

MAX_MIX_BYTES = 1 << 20
MAX_SOURCES = 64  # the paper's mixes have 2-4 sources; the blend index stores a source as uint8
MIX_KEYS = ("description", "source", "tokenizer")
SOURCE_KEYS = ("name", "store", "share", "tokens", "max_passes", "build_from", "weight", "text_field", "hub_config",
               "data_files")
MAX_REPEATED_DOCUMENTS = 1 << 31  # a weighted source's repeated stream: 16 bytes per repeated document in RAM
NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")
SHARE_TOLERANCE = 1e-6


@dataclass(frozen=True)
class MixSource:
    name: str
    store: Path
    share: float  # of the run's tokens (from `share`, or `tokens` over the sum of `tokens`)
    max_passes: float
    tokens: int | None = None
    build_from: str | None = None  # what `corpus build --mix` reads: a local path (as given) or a hub dataset id
    weight: str | None = None  # the store's per-document weight field: repeat counts (repeat_counts)
    text_field: str = "text"
    selection: corpus.HubSelection = field(default_factory=corpus.HubSelection)  # of a hub build_from's files

    def build_source(self, folder: Path) -> str | None:
        """What `build_from` names, as `corpus build` takes it: a path relative to the mix file's folder (the rule
        `store` follows too), made absolute, or a hub dataset id; None when the source states none."""
        if self.build_from is None:
            return None
        local = folder / Path(self.build_from).expanduser()
        if local.exists() or not corpus.is_hub_source(self.build_from) or corpus.looks_like_path(self.build_from):
            return str(local.resolve())
        return self.build_from


@dataclass(frozen=True)
class Mix:
    path: Path
    sources: tuple[MixSource, ...]
    tokenizer: str | None = None  # the model whose tokenizer builds every store (`corpus build --mix`)

    def build_command(self, source: MixSource, tokenizer: str | None = None) -> str:
        """The `corpus build` command that builds one source's store (paths absolute: run it from anywhere)."""
        import shlex

        what = source.build_source(self.path.parent)
        parts = ["biobench", "corpus", "build", what or "SOURCE", "--tokenizer", tokenizer or self.tokenizer or "MODEL",
                 "--out", str(source.store)]
        if source.text_field != "text":
            parts += ["--text-field", source.text_field]
        if source.weight is not None:
            parts += ["--weight-field", source.weight]
        parts += source.selection.flags()
        return " ".join(shlex.quote(p) for p in parts)

    def missing(self) -> list[MixSource]:
        """The sources whose store is not a finished token store (never built, or its build unfinished)."""
        return [s for s in self.sources if not (s.store / token_store.DONE).is_file()]

    def check_built(self, tokenizer: str | None = None) -> None:
        """One message listing every store of the mix not built yet, each with the command that builds it, and
        the one command that builds them all; nothing when every store is finished."""
        missing = self.missing()
        if not missing:
            return
        tok = tokenizer or self.tokenizer
        lines = [f"mix file {self.path}: {len(missing)} of {len(self.sources)} store(s) not built yet; build them "
                 f"all with: biobench corpus build --mix {self.path}" + ("" if tok else " --tokenizer MODEL")
                 + ", or one by one:"]
        for s in missing:
            started = " (unfinished: the command resumes it)" if s.store.exists() else ""
            lines.append(f"  {s.name}{started}: {self.build_command(s, tok)}")
        raise ConfigError("\n".join(lines))


def is_mix_file(source: str | Path) -> bool:
    return str(source).lower().endswith(".toml") and Path(source).is_file()


def read_mix(path: str | Path) -> Mix:
    """A mix file, validated: bounded, TOML, known keys (the closest name suggested), names and stores once each,
    shares finite, positive and summing to 1 (or token counts), max_passes >= 1, at most MAX_SOURCES sources.
    Every refusal is one ConfigError line naming the file."""
    path = Path(path)
    where = f"mix file {path}"
    try:
        raw = read_toml(path, MAX_MIX_BYTES)
    except UnsafeJSONError as err:
        raise ConfigError(f"{where}: {err.reason}") from None
    except OSError as err:
        raise ConfigError(f"{where}: cannot read it ({err.strerror or err})") from None
    check_keys(raw, MIX_KEYS, where)
    tables = raw.get("source")
    if not isinstance(tables, list) or not tables or not all(isinstance(t, dict) for t in tables):
        raise ConfigError(f"{where}: expected one or more [[source]] tables")
    if len(tables) > MAX_SOURCES:
        raise ConfigError(f"{where}: {len(tables):,} sources; at most {MAX_SOURCES} are allowed")
    forms = set()
    names: set[str] = set()
    stores: set[Path] = set()
    parsed = []
    for number, table in enumerate(tables, 1):
        here = f"{where}: source #{number}"
        check_keys(table, SOURCE_KEYS, here)
        name = table.get("name")
        if not isinstance(name, str) or not NAME.fullmatch(name):
            raise ConfigError(f"{here}: name {str(name)[:40]!r} must be 1-64 letters, digits, '_', '.' or '-'")
        here = f"{where}: source '{name}'"
        if name in names:
            raise ConfigError(f"{here} appears twice; give each source one table")
        store = table.get("store")
        if not isinstance(store, str) or not store or any(ord(c) < 32 for c in store):
            raise ConfigError(f"{here}: store must be the path of a built token store")
        store_path = (path.parent / store).resolve()
        if store_path in stores:
            raise ConfigError(f"{here}: store {store} is already another source's; a source appears once")
        given = [k for k in ("share", "tokens") if k in table]
        if len(given) != 1:
            raise ConfigError(f"{here}: give exactly one of share (of the run's tokens) or tokens (a count)")
        forms.add(given[0])
        value = table[given[0]]
        if isinstance(value, bool):
            raise ConfigError(f"{here}: {given[0]} must be a number")
        if given[0] == "share":
            amount = Bounds(0, 1, above=True).check(value, f"{here}: share")
        else:
            amount = Bounds(1, 1e15, integer=True).check(value, f"{here}: tokens")
        passes = table.get("max_passes", 1)
        if isinstance(passes, bool):
            raise ConfigError(f"{here}: max_passes must be a number")
        passes = Bounds(1, 1e6).check(passes, f"{here}: max_passes")
        build_from = table.get("build_from")
        if build_from is not None and (not isinstance(build_from, str) or len(build_from) > 1000):
            raise ConfigError(f"{here}: build_from must be text (what `corpus build` reads)")
        if build_from is not None and (not build_from or any(ord(c) < 32 for c in build_from)):
            raise ConfigError(f"{here}: build_from must be a path (relative to the mix file) or a hub dataset id")
        weight = table.get("weight")
        if weight is not None and (not isinstance(weight, str) or not NAME.fullmatch(weight)):
            raise ConfigError(f"{here}: weight must name the store's weight field (corpus build --weight-field)")
        text_field = table.get("text_field", "text")
        if not isinstance(text_field, str) or not NAME.fullmatch(text_field):
            raise ConfigError(f"{here}: text_field must name the JSON field / parquet column holding the text")
        data_files = table.get("data_files")
        if isinstance(data_files, str):
            data_files = [data_files]
        if data_files is not None and not isinstance(data_files, list):
            raise ConfigError(f"{here}: data_files must be a glob or a list of globs (of the hub dataset's files)")
        selection = corpus.hub_selection(table.get("hub_config"), data_files, here)
        if selection and (build_from is None or not corpus.is_hub_source(build_from)
                          or corpus.looks_like_path(build_from)):
            raise ConfigError(f"{here}: hub_config and data_files select the files of a hub dataset; build_from "
                              f"{build_from or '(none)'} is not a hub dataset id")
        names.add(name)
        stores.add(store_path)
        parsed.append((name, store_path, given[0], amount, passes, build_from, weight, text_field, selection))
    if len(forms) > 1:
        raise ConfigError(f"{where}: sources mix 'share' and 'tokens'; state every source the same way")
    total = sum(p[3] for p in parsed)
    if forms == {"share"} and abs(total - 1) > SHARE_TOLERANCE:
        raise ConfigError(f"{where}: shares sum to {total:.6g}, not 1; fix them so they sum to 1")
    sources = tuple(MixSource(name, store, amount / total, passes, int(amount) if form == "tokens" else None, build,
                              weight, text_field, selection)
                    for name, store, form, amount, passes, build, weight, text_field, selection in parsed)
    tokenizer = raw.get("tokenizer")
    if tokenizer is not None and (not isinstance(tokenizer, str) or not tokenizer or len(tokenizer) > 1000
                                  or any(ord(c) < 32 for c in tokenizer)):
        raise ConfigError(f"{where}: tokenizer must name a model (alias, folder or hub id), as --tokenizer does")
    return Mix(path, sources, tokenizer)


# ---------------------------------------------------------------- per-document weights
def _uniform(index: np.ndarray) -> np.ndarray:
    """A uniform draw in [0, 1) per document index: splitmix64 of the index (a fixed bijection of 64-bit words),
    its top 53 bits. A pure function of the index: the same on every machine, run and seed."""
    with np.errstate(over="ignore"):
        z = index.astype(np.uint64) + np.uint64(0x9E3779B97F4A7C15)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        z = z ^ (z >> np.uint64(31))
    return (z >> np.uint64(11)).astype(np.float64) / float(1 << 53)


def repeat_counts(weights: np.ndarray) -> np.ndarray:
    """How many times each document is read: floor(w), plus one with probability w - floor(w), the draw a pure
    function of the document's index in its store (`_uniform`). The expected count is w (2.5 -> 2 or 3, half each;
    0 -> never read; 100 -> exactly 100); a whole corpus's repeated tokens are within a few documents of
    sum(w * length). Weights are checked at build time (finite, 0 to corpus.MAX_WEIGHT)."""
    weights = np.asarray(weights, dtype=np.float64)
    whole = np.floor(weights)
    return (whole + (_uniform(np.arange(len(weights))) < weights - whole)).astype(np.int64)


class RepeatedDocuments(token_store.DocumentView):
    """A store's documents, each read `counts[d]` times, as one token stream sliced like an array (what
    PackedCorpus takes, with `offsets` its document starts): layer k holds the documents with count > k, in store
    order, so copies of a document are a layer apart. Holds 16 bytes per repeated document (which document, where
    it starts); the tokens stay memory-mapped in the store."""

    def __init__(self, tokens, offsets: np.ndarray, counts: np.ndarray, where: str):
        counts = np.asarray(counts, dtype=np.int64)
        total = int(counts.sum())
        if total > MAX_REPEATED_DOCUMENTS:
            raise ConfigError(f"{where}: its weights repeat {total:,} documents, more than {MAX_REPEATED_DOCUMENTS:,}; "
                              "lower the weights")
        if total == 0:
            raise ConfigError(f"{where}: every document has weight 0 (or rounds to 0 repeats); nothing to read")
        layers = [np.nonzero(counts > k)[0] for k in range(int(counts.max()))]
        super().__init__(tokens, offsets, np.concatenate(layers))
        # where each layer starts among the repeated documents: a pass shuffles documents within a layer only
        self.layers = np.zeros(len(layers) + 1, dtype=np.int64)
        np.cumsum([len(layer) for layer in layers], out=self.layers[1:])


def source_stream(source: MixSource, store, shared: np.ndarray | None = None) -> tuple[Any, np.ndarray, np.ndarray | None]:
    """(tokens, document offsets, shuffle groups) that a mix source reads from its opened store
    (token_store.TokenStore): the store as it is (one group), or its documents repeated by the source's weight
    field (a group per layer, so a pass shuffles each layer apart and copies of a document stay layers apart);
    without the documents `shared` marks (an earlier source of the mix holds them: source_streams)."""
    tokens, offsets, groups, _ = split_source(source, store, shared, 0)
    return tokens, offsets, groups


def heldout_documents(candidates: np.ndarray, n: int, key: str) -> np.ndarray:
    """The `n` documents of `candidates` (store indices) held out for validation, in store order: those whose
    splitmix64 draw (`_uniform`) of the index, xor a 64-bit key hashed from `key` (the source's name), is
    smallest. A pure function of (candidates, n, key): no seed, no rank."""
    import hashlib

    salt = np.uint64(int.from_bytes(hashlib.blake2b(key.encode(), digest_size=8).digest(), "little"))
    candidates = np.asarray(candidates, dtype=np.int64)
    draws = _uniform(candidates.astype(np.uint64) ^ salt)
    return np.sort(candidates[np.argsort(draws, kind="stable")[:n]])


def check_heldout(n: int, available: int, where: str) -> None:
    """At least one document must stay for training: one line naming the source and the fix."""
    if n >= available:
        raise ConfigError(f"{where}: --heldout-docs {n:,} holds out {'all' if n == available else 'more than all'} "
                          f"of its {available:,} document(s) it reads; lower --heldout-docs below {available:,}")


def split_source(source: MixSource, store, shared: np.ndarray | None, heldout: int, where: str | None = None,
                 ) -> tuple[Any, np.ndarray, np.ndarray | None, np.ndarray | None]:
    """source_stream's (tokens, offsets, groups), without `heldout` documents (heldout_documents, drawn among the
    documents the source reads), and those documents' store indices (None when heldout is 0). `where` names the
    source in a refusal (default: the mix source's name)."""
    where = where or f"mix source '{source.name}'"
    if shared is not None and shared.all():
        raise ConfigError(f"{where}: every document of store {source.store} is also in an earlier source of the "
                          "mix (exact duplicates are read once, from the first source); remove the source")
    if source.weight is None:
        keep = None if shared is None or not shared.any() else ~shared
        held = None
        if heldout:
            candidates = np.arange(store.n_documents) if keep is None else np.nonzero(keep)[0]
            check_heldout(heldout, len(candidates), where)
            held = heldout_documents(candidates, heldout, source.name)
            keep = np.ones(store.n_documents, dtype=bool) if keep is None else keep
            keep[held] = False
        if keep is None:
            return store.tokens, store.offsets, None, None
        view = token_store.DocumentView(store.tokens, store.offsets, np.nonzero(keep)[0])
        return view, view.offsets, None, held
    if store.weight_field != source.weight:
        have = f"has weight field '{store.weight_field}'" if store.weight_field else "has no document weights"
        raise ConfigError(f"{where}: weight = '{source.weight}', but store {store.path} {have}; rebuild it with "
                          f"corpus build ... --weight-field {source.weight}")
    counts = repeat_counts(store.weights())
    if shared is not None:
        counts[shared] = 0
    held = None
    if heldout:  # among the documents read at least once: a weight of 0 is a document the source never shows
        candidates = np.nonzero(counts > 0)[0]
        check_heldout(heldout, len(candidates), where)
        held = heldout_documents(candidates, heldout, source.name)
        counts[held] = 0
    repeated = RepeatedDocuments(store.tokens, store.offsets, counts, where)
    return repeated, repeated.offsets, repeated.layers, held


def shared_documents(stores: list) -> list[np.ndarray | None]:
    """Per source of a mix, in mix order: which of its documents (read after its store's own dedup) an earlier
    source also holds, by document hash (token_store.document_hash); None when this store or an earlier one was
    built before document hashes (unknown). An upsampled source multiplies a duplicate by its passes, so a
    document is read from the first source that holds it only."""
    result: list[np.ndarray | None] = []
    earlier: list[np.ndarray] = []
    known = True
    for store in stores:
        hashes = store.hashes()
        known = known and hashes is not None
        if not known:
            result.append(None)
            continue
        result.append(np.isin(hashes, np.concatenate(earlier)) if earlier else np.zeros(len(hashes), dtype=bool))
        earlier.append(hashes)
    return result


def source_streams(mix: Mix, stores: list, heldout: int = 0) -> tuple[list[tuple[Any, np.ndarray, np.ndarray | None]],
                                                                     list[dict[str, int | None]]]:
    """Every source's stream (source_stream, the documents shared with an earlier source left out, and `heldout`
    documents held out for validation: split_sources) and what dedup left out of it: {'duplicates_dropped': by its
    store's build, 'shared_dropped': shared with an earlier source}, None where unknown (a store built before
    document hashes), plus 'heldout_documents' and 'heldout_tokens' when documents are held out. What `corpus
    plan` and `pretrain` both read."""
    streams, dedup, _ = split_sources(mix, stores, heldout)
    return streams, dedup


def split_sources(mix: Mix, stores: list, heldout: int = 0) -> tuple[list[tuple[Any, np.ndarray, np.ndarray | None]],
                                                                    list[dict[str, int | None]],
                                                                    list[np.ndarray | None]]:
    """source_streams' (streams, counts), and per source the store indices of its held-out documents (None when
    `heldout` is 0): what pretrain validates on (validation_corpus)."""
    shared = shared_documents(stores)
    split = [split_source(m, s, x, heldout) for m, s, x in zip(mix.sources, stores, shared, strict=True)]
    dedup: list[dict[str, int | None]] = [
        {"duplicates_dropped": s.dedup["duplicates_dropped"] if s.dedup else None,
         "shared_dropped": None if x is None else int(x.sum())} for s, x in zip(stores, shared, strict=True)]
    if heldout:
        for counts, store, (*_, held) in zip(dedup, stores, split, strict=True):
            assert held is not None  # split_source holds out documents whenever heldout > 0
            counts["heldout_documents"] = len(held)
            counts["heldout_tokens"] = int((store.offsets[held + 1] - store.offsets[held]).sum())
    return [(t, o, g) for t, o, g, _ in split], dedup, [held for *_, held in split]


# ---------------------------------------------------------------- plan
def blend(shares: list[float], total: int) -> tuple[np.ndarray, np.ndarray]:
    """Megatron's greedy interleaving: for each position, the source with the largest error
    `share * (position + 1) - taken` (ties: the first), and the count of that source's sequences taken before.
    A plain loop over positions (6.1M for 50B tokens at 8,192: a few seconds), computed once per process, for the
    loader (MixPlan.order); what a table needs is blend_counts."""
    k = len(shares)
    source_of = np.empty(total, dtype=np.uint8)
    index_in = np.empty(total, dtype=np.int64)
    taken = [0] * k
    order = range(k)
    for g in range(total):
        n = g + 1
        best, best_err = 0, shares[0] * n - taken[0]
        for s in order:
            err = shares[s] * n - taken[s]
            if err > best_err:
                best, best_err = s, err
        source_of[g] = best
        index_in[g] = taken[best]
        taken[best] += 1
    return source_of, index_in


def blend_counts(shares: list[float], total: int) -> list[int]:
    """How many of the first `total` positions `blend` gives each source, without its per-position arrays (what
    the plan table reads: `corpus plan` of a 50B-token mix held two arrays of 6.1M positions, 55 MB, for four
    numbers). The same rule and the same float comparisons (`share * n - taken`, n and taken held as floats,
    which hold them exactly: the values Python computes for ints, without converting them at every step), so
    the same counts as np.bincount(blend(...)[0]). It stays a loop over positions: for three sources or more
    the greedy rule's counts have no closed form (they are not the largest-remainder rounding of share * total,
    which is not monotone in total); for two they are round-half-up of share * total in exact arithmetic only,
    and floats can tie otherwise."""
    taken = [0.0] * len(shares)  # floats hold these counts exactly (below 2**53), as they hold n
    rest = list(enumerate(shares))[1:]
    first = shares[0]
    n = 0.0
    for _ in range(total):
        n += 1.0
        best, best_err = 0, first * n - taken[0]
        for s, share in rest:
            err = share * n - taken[s]
            if err > best_err:
                best, best_err = s, err
        taken[best] += 1.0
    return [int(t) for t in taken]


@dataclass
class MixPlan:
    mix: Mix
    seq_len: int
    total_sequences: int
    available: list[int]  # tokens in each source's store
    sequences_per_pass: list[int]
    steps: tuple[int, int] | None = None  # the run's phases (phase 1, decay) in optimiser steps
    batch_size: int | None = None  # global sequences per step
    dedup: list[dict[str, int | None]] | None = None  # per source: source_streams' counts of documents left out
    # the per-position order (blend), built when the loader first reads it (order()); the table never needs it
    _order: tuple[np.ndarray, np.ndarray] | None = field(default=None, repr=False)
    _counts: dict[int, list[int]] = field(default_factory=dict, repr=False)

    def order(self) -> tuple[np.ndarray, np.ndarray]:
        """(source of each position, that source's sequence index): what MixedCorpus reads, built once."""
        if self._order is None:
            self._order = blend([s.share for s in self.mix.sources], self.total_sequences)
        return self._order

    @property
    def source_of(self) -> np.ndarray:
        return self.order()[0]

    @property
    def index_in(self) -> np.ndarray:
        return self.order()[1]

    def counts(self, upto: int | None = None) -> list[int]:
        """Sequences of each source among the first `upto` positions: from the order when it is built, else
        blend_counts (no per-position array; the greedy order's prefixes do not depend on its length)."""
        upto = self.total_sequences if upto is None else upto
        if self._order is not None:
            return np.bincount(self._order[0][:upto], minlength=len(self.available)).tolist()
        if upto not in self._counts:
            self._counts[upto] = blend_counts([s.share for s in self.mix.sources], upto)
        return self._counts[upto]

    def rows(self, upto: int | None = None) -> list[dict[str, Any]]:
        """Per source: tokens available, passes, tokens used, target and realised share (in tokens)."""
        counts = self.counts(upto)
        used = sum(counts) or 1
        return [{"name": s.name, "store": str(s.store), "available_tokens": avail,
                 "passes": round(c / n, 4) if n else 0.0, "max_passes": s.max_passes,
                 "used_tokens": c * self.seq_len, "target_share": round(s.share, 6),
                 "realised_share": round(c / used, 6), **(self.dedup[i] if self.dedup else {})}
                for i, (s, avail, n, c) in enumerate(zip(self.mix.sources, self.available, self.sequences_per_pass,
                                                         counts, strict=True))]

    def short(self) -> list[str]:
        """One line per source that cannot fill its share within its max_passes."""
        return [f"mix source '{r['name']}' cannot fill its share of {r['target_share']:.2%}: it needs "
                f"{r['passes']:.2f} passes over its {r['available_tokens']:,} tokens, max_passes is "
                f"{r['max_passes']:g} (raise max_passes, lower its share, or add tokens)"
                for r in self.rows() if r["passes"] > r["max_passes"] + 1e-9]

    def table(self) -> str:
        head = f"{'source':<18} {'available':>16} {'passes':>8} {'used':>16} {'target':>8} {'realised':>9}"
        if self.dedup:
            head += f" {'dups':>10} {'shared':>10}"
        heldout = self.dedup is not None and bool(self.dedup) and "heldout_documents" in self.dedup[0]
        if heldout:
            head += f" {'held out':>10}"
        phases = (f" ({self.steps[0]:,} phase-1 + {self.steps[1]:,} decay steps of {self.batch_size:,} sequences)"
                  if self.steps and self.batch_size else "")
        lines = [f"mix {self.mix.path.name}: {self.total_sequences:,} sequences x {self.seq_len:,} tokens"
                 f" = {self.total_sequences * self.seq_len:,} tokens read{phases}", head]
        for r in self.rows():
            line = (f"{r['name']:<18} {r['available_tokens']:>16,} {r['passes']:>8.3f} {r['used_tokens']:>16,} "
                    f"{r['target_share']:>8.2%} {r['realised_share']:>9.2%}")
            if self.dedup:
                line += "".join(f" {'?' if r[k] is None else format(r[k], ','):>10}"
                                for k in ("duplicates_dropped", "shared_dropped"))
            if heldout:
                line += f" {r['heldout_documents']:>10,}"
            lines.append(line)
        if heldout:
            lines.append("held out: documents of the source never trained on (--heldout-docs), its validation "
                         "set; available counts what remains")
        if self.dedup:
            lines.append("dups: exact duplicate documents its store's build dropped; shared: documents an earlier "
                         "source holds, read there only" + ("; ?: a store built before document hashes (dedup "
                         "unknown: rebuild it)" if any(None in d.values() for d in self.dedup) else ""))
        if any(s.tokens is not None for s in self.mix.sources):
            stated = sum(s.tokens or 0 for s in self.mix.sources)
            lines.append(f"note: the sources' `tokens` ({stated:,} in all) are ratios, not counts: each source "
                         "gets its tokens over their sum of the tokens this run reads (the target share above)")
        return "\n".join(lines)


def plan_run(mix: Mix, available: list[int], tokens: int, batch_size: int, seq_len: int,
             decay_ratio: float, dedup: list[dict[str, int | None]] | None = None) -> MixPlan:
    """What a run reads of the mix: both phases (schedules.phase_steps: phase 1 in whole batches of `tokens`,
    then the decay), in sequences of `seq_len`. The one plan `corpus plan` prints and `pretrain` trains on, so
    the two agree token for token and judge max_passes alike."""
    steps = phase_steps(tokens, batch_size, seq_len, decay_ratio)
    plan = plan_mix(mix, available, sum(steps) * batch_size, seq_len, steps, batch_size)
    plan.dedup = dedup
    return plan


def plan_mix(mix: Mix, available: list[int], total_sequences: int, seq_len: int,
             steps: tuple[int, int] | None = None, batch_size: int | None = None) -> MixPlan:
    """The order of a run of `total_sequences` sequences of `seq_len` tokens over the mix's sources, whose stores
    hold `available` tokens each (the manifests' counts: no token is read)."""
    if total_sequences < 1:
        raise ConfigError("a mix plan needs at least one sequence")
    if total_sequences > 1 << 31:
        raise ConfigError(f"{total_sequences:,} sequences: more than a mix plan holds; use longer sequences")
    per_pass = [max(1, math.ceil(a / seq_len)) for a in available]
    return MixPlan(mix, seq_len, total_sequences, list(available), per_pass, steps, batch_size)


@dataclass(frozen=True)
class _Length:
    n: int

    def __len__(self) -> int:
        return self.n


class MixedCorpus:
    """The sequences of a mix, position by position, with PackedCorpus's interface (`at`, `sequence`, `batch`,
    `sequence_tokens`): one PackedCorpus per source (its own stream, cut into sequences) and the plan's order."""

    def __init__(self, parts: list, plan: MixPlan, seed: int):
        if not parts or len(parts) != len(plan.available):
            raise DataError("a mixed corpus needs one packed corpus per mix source")
        self.parts, self.plan, self.seed = parts, plan, seed
        self.seq_len = parts[0].seq_len
        plan.order()  # built here, once, before the first batch

    @property
    def n_sequences(self) -> int:
        """Distinct sequences over all sources (what a pass over the mix would read; the trainer's corpus_passes)."""
        return sum(part.n_sequences for part in self.parts)

    @property
    def tokens(self) -> _Length:
        """The sources' token counts summed, for len() (the trainer's corpus_passes): the tokens are read per
        source, through `sequence`."""
        return _Length(sum(len(part.tokens) for part in self.parts))

    def at(self, position: int) -> int:
        return position % self.plan.total_sequences

    def _resolve(self, index: int):
        """(source's packed corpus, its sequence index): the plan's source for this position, and the sequence
        that source's own pass order reads at its `index_in` (PackedCorpus.at: documents reshuffled each pass)."""
        part = self.parts[int(self.plan.source_of[index])]
        return part, part.at(int(self.plan.index_in[index]))

    def sequence(self, index: int):
        part, j = self._resolve(index)
        return part.sequence(j)

    def fill(self, index: int, ids: np.ndarray, mask: np.ndarray, docs: np.ndarray) -> None:
        part, j = self._resolve(index)
        part.fill(j, ids, mask, docs)

    def sequence_tokens(self, index: int) -> np.ndarray:
        part, j = self._resolve(index)
        return part.sequence_tokens(j)

    def batch(self, positions: list[int]):
        # lazy: loads torch
        from biobench.training.packing import read_batch

        return read_batch(self, positions)
