"""What `pretrain --corpus` takes, made into packed sequences: a built token store, a mix file of stores, or raw
text (a file, a folder, a hub dataset id) that is built into a store first, in the cache.

Raw text is built by rank 0 while the other ranks wait on the store's completion marker (a file), never in a
collective: a process group's timeout no longer bounds the build. A raw corpus larger than RAW_BUILD_LIMIT is
refused in one line that gives the `biobench corpus build` command: a build of that size belongs on CPU nodes
with several workers, before any GPU is reserved (docs/PRETRAINING.md).
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
from biobench.errors import ConfigError
from biobench.training import corpus, mixture, token_store
from biobench.training.packing import PackedCorpus

STORE_SOURCE = "corpus"  # the one source of a run on a store (or raw text): its held-out set's name and key
RAW_BUILD_LIMIT = 2 << 30  # bytes of text (a .gz counted 4x): ~500M tokens, ~30 min in one process at 0.3M tok/s


def kind(source: str) -> str:
    if mixture.is_mix_file(source):
        return "mix"
    if token_store.is_store(source):
        return "store"
    return "raw"


def raw_bytes(source: str) -> int | None:
    """Bytes of text a local raw corpus holds (a .gz counted GZIP_UNIT_WEIGHT times); None for a hub dataset."""
    if not corpus.is_local(source):
        return None
    total = 0
    for path in corpus.corpus_files(source):
        size = path.stat().st_size if path.is_file() else 0
        total += size * (token_store.GZIP_UNIT_WEIGHT if path.suffix == ".gz" else 1)
    return total


def check_corpus(cfg) -> None:
    """Before any model is loaded: the corpus exists; a preset model (whose tokenizer is trained on raw text) has
    raw text; a raw corpus is small enough to build inside the run."""
    source = str(cfg.corpus)
    corpus.check_source(source)
    if token_store.is_unfinished(source):
        raise ConfigError(f"--corpus {source} is an unfinished token store (its build stopped or is still running): "
                          "finish it with the same biobench corpus build command, then pretrain again")
    what = kind(source)
    if what != "raw" and str(cfg.model).startswith("preset:"):
        raise ConfigError(f"--model {cfg.model} trains its tokenizer on raw text; --corpus {source} is a token "
                          f"{'store' if what == 'store' else 'mix'}: pass the raw corpus, or a model folder whose "
                          "tokenizer built the store")
    heldout = int(getattr(cfg, "heldout_docs", None) or 0)
    if heldout and what != "raw":  # a count beyond a store's documents: refused before the model loads
        stores = ([(f"mix source '{s.name}'", s.store) for s in mixture.read_mix(source).sources] if what == "mix"
                  else [(f"--corpus {source}", Path(source))])
        for where, folder in stores:
            if (folder / token_store.DONE).is_file():  # an unbuilt mix store is check_built's line, later
                mixture.check_heldout(heldout, token_store.open_store(folder, verify=False).n_documents, where)
    if what == "raw":
        size = raw_bytes(source)
        if size is not None and size > RAW_BUILD_LIMIT:
            raise ConfigError(f"corpus {source} holds ~{size / 2**30:.1f} GiB of text, more than the "
                              f"{RAW_BUILD_LIMIT >> 30} GiB pretrain builds itself: build its token store first, "
                              f"e.g. on CPU nodes: biobench corpus build {source} --tokenizer {cfg.model} --out STORE "
                              "--workers 16, then pretrain --corpus STORE")


def raw_store_folder(cfg, tokenizer) -> Path:
    """Where pretrain keeps the store of a raw corpus: keyed by the tokenizer and the corpus files."""
    key = hashlib.sha256(f"{token_store.tokenizer_fingerprint(tokenizer)}|"
                         f"{corpus.corpus_fingerprint(str(cfg.corpus), cfg.text_field, None)}".encode()).hexdigest()[:20]
    return Path(cfg.cache_dir or corpus.default_cache_dir()) / f"store-{key}"


def validation_corpus(store, documents: np.ndarray, seq_len: int, pad: int) -> PackedCorpus:
    """A source's held-out documents packed into fixed sequences: pass 0 of a PackedCorpus of seed 0, whatever
    the run's seeds, so every evaluation (and every run over the store) reads the same sequences."""
    view = token_store.DocumentView(store.tokens, store.offsets, documents)
    return PackedCorpus(view, view.offsets, seq_len, pad, seed=0)


def packed_corpus(cfg, tokenizer, main: bool, total_sequences: int, seed: int,
                  say: Callable[[str], None]) -> tuple[Any, dict[str, Any], list[tuple[str, PackedCorpus]]]:
    """(packed corpus, summary for biobench_pretrain.json, validation sets) for the run's `total_sequences`
    sequences; the validation sets are (source name, its held-out documents packed: validation_corpus), one per
    source when `cfg.heldout_docs` is set, else none."""
    source = str(cfg.corpus)
    pad = tokenizer.pad_token_id
    heldout = int(getattr(cfg, "heldout_docs", None) or 0)
    if kind(source) == "mix":
        mix = mixture.read_mix(source)
        mix.check_built(cfg.model)
        stores = [token_store.open_store(s.store) for s in mix.sources]
        for store in stores:
            store.check_tokenizer(tokenizer, cfg.model)
        streams, dedup, held = mixture.split_sources(mix, stores, heldout)
        plan = mixture.plan_run(mix, [len(tokens) for tokens, _, _ in streams], cfg.tokens, cfg.batch_size,
                                cfg.seq_len, cfg.decay_ratio, dedup)
        assert plan.total_sequences == total_sequences, "the mix plan and the trainer's steps disagree"
        plan.order()  # what the loader reads, built once now: the table below counts from it (no second loop)
        say(plan.table())
        short = plan.short()
        if short:
            raise ConfigError(short[0])
        parts = [PackedCorpus(tokens, offsets, cfg.seq_len, pad, seed, stream=s, groups=groups)
                 for s, (tokens, offsets, groups) in enumerate(streams)]
        summary: dict[str, Any] = {"mix": str(Path(source).resolve()), "plan": plan.rows(),
                   "stores": [{"name": m.name, "store": str(s.path), "id": token_store.store_id(s.path),
                               "tokens": len(s.tokens)} for m, s in zip(mix.sources, stores, strict=True)]}
        validation = [(m.name, validation_corpus(s, h, cfg.seq_len, pad))
                      for m, s, h in zip(mix.sources, stores, held, strict=True) if h is not None]
        return mixture.MixedCorpus(parts, plan, seed), summary, validation
    if kind(source) == "store":
        folder = Path(source)
    else:
        folder = raw_store_folder(cfg, tokenizer)
        if main:
            token_store.build([source], folder, None, tokenizer=tokenizer, text_field=cfg.text_field, log=say)
        else:
            token_store.wait_for(folder)
    store = token_store.open_store(folder, max_documents=cfg.max_documents)
    store.check_tokenizer(tokenizer, cfg.model)
    summary = {"store": str(folder), "id": token_store.store_id(folder), "tokens": len(store.tokens),
               "documents": store.n_documents, "raw": kind(source) == "raw"}
    if not heldout:
        return PackedCorpus(store.tokens, store.offsets, cfg.seq_len, pad, seed), summary, []
    # one source, named "corpus": its held-out documents drawn as a mix source's are (mixture.split_source)
    lone = mixture.MixSource(STORE_SOURCE, folder, 1.0, math.inf)
    tokens, offsets, _, documents = mixture.split_source(lone, store, None, heldout, f"--corpus {source}")
    assert documents is not None  # split_source holds out documents whenever heldout > 0
    checked = validation_corpus(store, documents, cfg.seq_len, pad)
    summary.update(heldout_documents=len(documents), heldout_tokens=len(checked.tokens))
    say(f"corpus: {len(documents):,} document(s) ({len(checked.tokens):,} tokens) held out for validation "
        f"(--heldout-docs), {len(tokens):,} tokens left to train on")
    return PackedCorpus(tokens, offsets, cfg.seq_len, pad, seed), summary, [(STORE_SOURCE, checked)]


def corpus_record(cfg, summary: dict[str, Any]) -> dict[str, Any]:
    """What biobench_pretrain.json records of the corpus: the raw files (paths, sizes, sha256: what
    `eval --check-contamination` reads) when given raw text, else the store or the mix and its plan table."""
    source = str(cfg.corpus)
    if summary.get("raw"):
        return {**corpus.corpus_record(source, cfg.text_field), "token_store": summary}
    return {"text_field": cfg.text_field, "files": [], "bytes": None, "token_store": summary}
