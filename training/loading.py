"""The model and tokenizer a pretraining run starts from: `preset:tiny|small` (ModernBERT from a config,
tokenizer trained on the corpus), a local folder or a hub id (offline -> clear error), or a checkpoint."""

from __future__ import annotations

import os
from itertools import islice
from pathlib import Path

from biobench.errors import ConfigError, ModelLoadError

CAUSAL_FAMILIES = ("modernbert",)
TOKENIZER_TRAINING_DOCS = 20_000


def default_attention(device_type: str) -> str:
    """flash-attention 2 on CUDA when installed (is_causal path), else PyTorch sdpa."""
    if device_type == "cuda":
        try:
            import flash_attn  # noqa: F401

            return "flash_attention_2"
        except ImportError:
            return "sdpa"
    return "sdpa"


def check_architecture(model_type: str, recipe_name: str, needs_causal: bool, source: str) -> None:
    if needs_causal and model_type not in CAUSAL_FAMILIES:
        raise ConfigError(
            f"recipe '{recipe_name}' trains with a causal mask, which biobench supports for ModernBERT models "
            f"only (model_type 'modernbert': ModernBERT-base/large, ModernCamemBERT, BioClinical-ModernBERT, "
            f"preset:tiny, preset:small); {source} is '{model_type}'. Use --recipe mlm for other encoders."
        )


def load(source: str, *, recipe_name: str, needs_causal: bool, attn: str, corpus_documents=None, seed: int = 0,
         tokenizer_dir: Path | None = None, train_tokenizer: bool = True):
    """(model, tokenizer) for `source`. For presets, the tokenizer is trained on `corpus_documents()` (an
    iterable factory) and saved to `tokenizer_dir`, or read from there when `train_tokenizer` is False (the
    other ranks, which wait for rank 0)."""
    if source.startswith("preset:"):
        return _preset(source.split(":", 1)[1], attn, corpus_documents, seed, tokenizer_dir, train_tokenizer)
    from transformers import AutoConfig, AutoModelForMaskedLM, AutoTokenizer

    try:
        config = AutoConfig.from_pretrained(source)
    except (OSError, ValueError) as err:
        offline = os.environ.get("HF_HUB_OFFLINE") == "1"
        where = "local folder" if Path(source).exists() else "hub model"
        hint = " (HF_HUB_OFFLINE=1: only local folders can be loaded)" if offline else ""
        raise ModelLoadError(f"cannot load {where} {source!r}: {str(err).splitlines()[0]}{hint}") from err
    check_architecture(config.model_type, recipe_name, needs_causal, source)
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


def _preset(name: str, attn: str, corpus_documents, seed: int, tokenizer_dir: Path | None, train_new: bool):
    from biobench.training.presets import PRESETS, build_modernbert_mlm, train_tokenizer
    from transformers import AutoTokenizer

    if name not in PRESETS:
        raise ConfigError(f"unknown preset {name!r}; choose one of: {', '.join('preset:' + p for p in PRESETS)}")
    if tokenizer_dir is not None and (Path(tokenizer_dir) / "tokenizer.json").exists() and not train_new:
        tokenizer = AutoTokenizer.from_pretrained(tokenizer_dir)
    else:
        docs = islice(corpus_documents(), TOKENIZER_TRAINING_DOCS)
        tokenizer = train_tokenizer(docs, vocab_size=PRESETS[name]["vocab_size"])
        if tokenizer_dir is not None:
            tokenizer.save_pretrained(tokenizer_dir)
    model = build_modernbert_mlm(tokenizer, name, seed=seed)
    model.set_attn_implementation(attn)
    return model, tokenizer


def load_checkpoint(folder: Path, attn: str):
    from transformers import AutoModelForMaskedLM, AutoTokenizer

    model = AutoModelForMaskedLM.from_pretrained(folder, attn_implementation=attn)
    return model, AutoTokenizer.from_pretrained(folder)
