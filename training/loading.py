"""The model and tokenizer a pretraining run starts from: `preset:tiny|small` (ModernBERT from a config,
tokenizer trained on the corpus), `preset:tiny-decoder` (Gemma-3 text model, for decoder recipes), a local
folder or a hub id (offline -> clear error), or a checkpoint.

Decoder recipes (decoder-control) load a causal LM (AutoModelForCausalLM, Gemma-3) and give its tokenizer a
`<mask>` token: an existing one is reused, else `<mask>` is added and the embeddings (tied LM head included)
are resized. What was done is recorded in the model config (`biobench_mask_token`), so it survives saving,
reloading and resuming, and the trainer copies it into biobench_pretrain.json."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path

from biobench.errors import ConfigError, ModelLoadError
from biobench.runtime.memory import check_model_memory
from biobench.runtime.weights import untrusted_weights
from biobench.training.causal import DECODER_FAMILIES, DECODER_SUPPORTED
from biobench.training.presets import (
    DECODER_PRESETS,
    PRESETS,
    build_gemma3_causal_lm,
    build_modernbert_mlm,
    train_tokenizer,
)

CAUSAL_FAMILIES = ("modernbert",)
MASK_TOKEN = "<mask>"
TOKENIZER_TRAINING_DOCS = 20_000


def decoder_attention(attn: str) -> str:
    """The attention backend for a decoder recipe: sdpa instead of flash-attention 2, whose kernels take no 4D
    mask and whose two-sided sliding window the bidirectional phase would need is not leak-tested here."""
    return "sdpa" if attn == "flash_attention_2" else attn


def check_architecture(model_type: str, recipe_name: str, needs_causal: bool, source: str,
                       decoder: bool = False) -> None:
    if decoder and model_type not in DECODER_FAMILIES:
        raise ConfigError(f"recipe '{recipe_name}' runs on a causal LM: {DECODER_SUPPORTED}, or "
                          f"preset:tiny-decoder; {source} is '{model_type}'")
    if not decoder and model_type in DECODER_FAMILIES:
        raise ConfigError(f"{source} is a decoder ('{model_type}'); recipe '{recipe_name}' trains encoders. "
                          f"Use --recipe decoder-control for Gemma-3 models")
    if needs_causal and not decoder and model_type not in CAUSAL_FAMILIES:
        raise ConfigError(
            f"recipe '{recipe_name}' trains with a causal mask, which biobench supports for ModernBERT models "
            f"only (model_type 'modernbert': ModernBERT-base/large, ModernCamemBERT, BioClinical-ModernBERT, "
            f"preset:tiny, preset:small); {source} is '{model_type}'. Use --recipe mlm for other encoders."
        )


def load(source: str, *, recipe_name: str, needs_causal: bool, attn: str, corpus_documents=None, seed: int = 0,
         tokenizer_dir: Path | None = None, train_tokenizer: bool = True, decoder: bool = False,
         device: str = "cpu", max_model_gb: float | None = None, sharded: bool = False):
    """(model, tokenizer) for `source`. For presets, the tokenizer is trained on `corpus_documents()` (an
    iterable factory) and saved to `tokenizer_dir`, or read from there when `train_tokenizer` is False (the
    other ranks, which wait for rank 0). `decoder`: the recipe runs on a causal LM (see the module doc).
    A model whose config implies more than `device` can train, or than `max_model_gb`, is refused before it
    is built (biobench.runtime.memory); `sharded` (FSDP: each GPU holds a part) checks only that it loads."""
    if source.startswith("preset:"):
        name = source.split(":", 1)[1]
        attn = decoder_attention(attn) if decoder else attn
        model, tokenizer = _preset(name, attn, corpus_documents, seed, tokenizer_dir, train_tokenizer)
        check_architecture(model.config.model_type, recipe_name, needs_causal, source, decoder)
        return (add_mask_token(model, tokenizer, seed) if decoder else model), tokenizer
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        where = "local folder" if Path(source).exists() else "hub model"
        hint = " (HF_HUB_OFFLINE=1: only local folders can be loaded)" if offline else ""
        raise ModelLoadError(f"cannot load {where} {source!r}: {str(err).splitlines()[0]}{hint}") from err
    check_architecture(config.model_type, recipe_name, needs_causal, source, decoder)
    check_model_memory(config.to_dict(), f"{source} (its config.json)", device, training=not sharded,
                       limit_gb=max_model_gb)
    if decoder:
        from transformers import AutoModelForCausalLM

        try:
            with untrusted_weights(source, ModelLoadError):
                model = AutoModelForCausalLM.from_pretrained(source, attn_implementation=decoder_attention(attn))
        except OSError as err:
            raise ModelLoadError(f"{source} has no causal-LM weights loadable with AutoModelForCausalLM: {err}") from err
        tokenizer = AutoTokenizer.from_pretrained(source)
        return add_mask_token(model, tokenizer, seed), tokenizer
    try:
        with untrusted_weights(source, ModelLoadError):
            try:
                model = AutoModelForMaskedLM.from_pretrained(source, attn_implementation=attn)
            except ValueError:  # backend not supported by this architecture
                model = AutoModelForMaskedLM.from_pretrained(source)
    except OSError as err:
        raise ModelLoadError(f"{source} has no masked-LM weights loadable with AutoModelForMaskedLM: {err}") from err
    tokenizer = AutoTokenizer.from_pretrained(source)
    if tokenizer.mask_token_id is None:
        raise ModelLoadError(f"the tokenizer of {source} has no mask token; MLM phases need one")
    return model, tokenizer


def add_mask_token(model, tokenizer, seed: int = 0):
    """Give a causal LM's tokenizer a mask token for MLM: its own when it has one, else `<mask>` (reused when
    the vocabulary already holds it, as Gemma's does, else added, with the embeddings and the tied LM head
    resized; new rows are drawn from the old embeddings' mean and covariance, seeded). Idempotent: a model
    whose config already records the mask token (a checkpoint) is returned unchanged. Returns the model."""
    import torch

    recorded = getattr(model.config, "biobench_mask_token", None)
    if recorded is not None and tokenizer.mask_token_id == recorded.get("id"):
        return model
    before = model.get_input_embeddings().weight.shape[0]
    vocab_before = len(tokenizer)
    if tokenizer.mask_token is None:
        tokenizer.add_special_tokens({"mask_token": MASK_TOKEN})
    added = len(tokenizer) > vocab_before
    if len(tokenizer) > before:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model.resize_token_embeddings(len(tokenizer), mean_resizing=True)
    model.config.biobench_mask_token = {
        "token": tokenizer.mask_token, "id": tokenizer.mask_token_id, "added_to_tokenizer": added,
        "embeddings": [before, model.get_input_embeddings().weight.shape[0]],
    }
    return model


def _preset(name: str, attn: str, corpus_documents, seed: int, tokenizer_dir: Path | None, train_new: bool):
    from transformers import AutoTokenizer

    presets = {**PRESETS, **DECODER_PRESETS}
    if name not in presets:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join('preset:' + p for p in presets)}")
    decoder = name in DECODER_PRESETS
    if tokenizer_dir is not None and (Path(tokenizer_dir) / "tokenizer.json").exists() and not train_new:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        docs = islice(corpus_documents(), TOKENIZER_TRAINING_DOCS)
        tokenizer = train_tokenizer(docs, vocab_size=presets[name]["vocab_size"], decoder=decoder)
        if tokenizer_dir is not None:
            tokenizer.save_pretrained(tokenizer_dir)
    if decoder:
        model = build_gemma3_causal_lm(tokenizer, name, seed=seed)
        model.set_attn_implementation(attn)
        return model, tokenizer
    model = build_modernbert_mlm(tokenizer, name, seed=seed)
    model.set_attn_implementation(attn)
    return model, tokenizer


def load_checkpoint(folder: Path, attn: str, device: str = "cpu", max_model_gb: float | None = None,
                    sharded: bool = False):
    """A biobench checkpoint: AutoModelForCausalLM for decoders (decoder-control), else AutoModelForMaskedLM;
    its config is checked against the device's memory first, as `load` does (an --out folder may be a copy)."""
    from transformers import AutoConfig, AutoModelForCausalLM, AutoModelForMaskedLM, AutoTokenizer

    config = AutoConfig.from_pretrained(folder)
    check_model_memory(config.to_dict(), f"{folder}/config.json", device, training=not sharded, limit_gb=max_model_gb)
    decoder = config.model_type in DECODER_FAMILIES
    auto = AutoModelForCausalLM if decoder else AutoModelForMaskedLM
    with untrusted_weights(folder, ModelLoadError):
        model = auto.from_pretrained(folder, attn_implementation=decoder_attention(attn) if decoder else attn)
    return model, AutoTokenizer.from_pretrained(folder)
