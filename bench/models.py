"""Model aliases and identity (id, revision, display name, results folder), torch-free.

Why: results are keyed by the exact weights they were computed with, so a model is always resolved to a hub
commit hash or, for a local folder, the sha256 of its weight files — before anything is trained, so a resumed
grid can skip finished runs without loading the model. Where its results live is the store's
(biobench.store.layout). Torch-free: the board and the service import it; loading an encoder (torch,
transformers) is biobench.eval.encoder's.
"""

from __future__ import annotations

import contextlib
import difflib
import hashlib
from dataclasses import asdict, dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from biobench.aliases import ALIASES, NO_HUB_ID, Alias, package_folder
from biobench.errors import ConfigError, ModelLoadError, NoModelFolder
from biobench.names import display_name
from biobench.runtime.jsonfile import UnsafeJSONError, read_json
from biobench.runtime.memory import check_model_memory
from biobench.runtime.paths import is_hub_id
from biobench.runtime.weights import check_model_files
from biobench.store.layout import model_slug, results_folder, results_slug
from biobench.store.metadata import apply_metadata
from biobench.tasks.hub import ensure_hub_mode, offline_reason

if TYPE_CHECKING:
    from biobench.runtime.memory import ParamEstimate

_BY_NAME = {a.name.lower(): a for a in ALIASES}
WEIGHT_PATTERNS = ("*.safetensors", "pytorch_model*.bin")
ROBERTA_LIKE = {"roberta", "camembert", "xlm-roberta", "xlm_roberta"}


def find_alias(name: str) -> Alias | None:
    return _BY_NAME.get(name.lower())


@dataclass(frozen=True)
class ModelRef:
    """Where a model comes from: `path` (a local folder) and/or `hub_id`; `alias` when named by one."""

    name: str
    alias: str | None
    hub_id: str | None
    path: Path | None

    @property
    def id(self) -> str:
        return self.hub_id or str(self.path)

    @property
    def legacy_slug(self) -> str:
        """The results folder name of biobench before 2026-12 (hub id, or the last two parts of a local path):
        only read, to find results written then (see results_folder)."""
        if self.hub_id:
            return model_slug(self.hub_id)
        assert self.path is not None  # a ModelRef is a local folder or a hub id
        return model_slug("__".join(self.path.parts[-2:]))

    @property
    def source(self) -> str:
        """What from_pretrained gets."""
        if self.path:
            return str(self.path)
        assert self.hub_id is not None  # a ModelRef is a local folder or a hub id
        return self.hub_id


def resolve_model(name: str) -> ModelRef:
    """An alias (case-insensitive), a local folder or a hub id -> ModelRef. Unknown bare names are errors."""
    alias = find_alias(name)
    if alias and alias.hub_id is None and package_folder(alias) is None:
        raise ConfigError(f"model alias '{alias.name}' is {alias.note.split(';')[0]}, but {NO_HUB_ID}, so biobench "
                          "does not guess one: pass --model ORG/NAME (its hub id) or a local model folder")
    if alias:
        return ModelRef(name, alias.name, alias.hub_id, package_folder(alias))
    path = Path(name).expanduser()
    if path.is_dir():
        if not (path / "config.json").is_file():
            raise ModelLoadError(f"model folder {path} has no config.json (expected a Hugging Face model folder: "
                                 "config.json, weights, tokenizer files)")
        return ModelRef(name, None, None, path.resolve())
    if name.startswith((".", "/", "~")) or name.count("/") > 1 or "\\" in name:
        raise NoModelFolder(f"model folder {name}: no such folder (pass --model a Hugging Face model folder, "
                            "an alias from `biobench models`, or a hub id org/name)")
    if is_hub_id(name):
        return ModelRef(name, None, name, None)
    close = difflib.get_close_matches(name.lower(), list(_BY_NAME), n=1, cutoff=0.5)
    hint = f"did you mean '{_BY_NAME[close[0]].name}'? " if close else ""
    raise ConfigError(f"unknown model '{name}': {hint}`biobench models` lists the aliases; a hub id "
                      "(org/name) or a local folder also works")


def offline_message(ref: ModelRef) -> str:
    """Why a hub model cannot be loaded, in biobench's words (the libraries' own messages are long and cut)."""
    named = f"alias '{ref.alias}' -> hub id '{ref.hub_id}'" if ref.alias else f"hub id '{ref.hub_id}'"
    why = offline_reason() or "the hub did not serve it (no such model, a gated model, or a network error)"
    return (f"cannot load model {ref.name!r} ({named}): it is not in the local Hugging Face cache, and {why}. "
            f"Download it where the hub is reachable (`hf download {ref.hub_id}`) and copy the cache "
            "or the folder here, then pass the local folder: --model /path/to/folder "
            "(config.json + weights + tokenizer files)")


def _hub_file(ref: ModelRef, filename: str, required: bool = True) -> Path | None:
    """A file of a hub model from the cache (or the hub when online)."""
    from huggingface_hub import hf_hub_download
    from huggingface_hub.errors import RemoteEntryNotFoundError

    ensure_hub_mode()
    assert ref.hub_id is not None  # only a model without a local folder reads the hub
    try:
        return Path(hf_hub_download(ref.hub_id, filename))
    except RemoteEntryNotFoundError:  # the repo exists but lacks the file (a missing local copy is not this)
        if required:
            raise ModelLoadError(f"hub model '{ref.hub_id}' has no {filename}") from None
        return None
    except Exception:  # offline, not cached, unknown repo, network: one clear message
        if not required:
            return None
        raise ModelLoadError(offline_message(ref)) from None


def _model_file(ref: ModelRef, filename: str, required: bool = True) -> Path | None:
    if ref.path:
        path = ref.path / filename
        if path.is_file():
            return path
        if required:
            raise ModelLoadError(f"model folder {ref.path} has no {filename}")
        return None
    return _hub_file(ref, filename, required)


@cache
def _sha256_files(paths: tuple[Path, ...], stamps: tuple[tuple[int, int], ...]) -> str:
    digest = hashlib.sha256()
    for path in paths:
        with path.open("rb") as handle:
            for chunk in iter(lambda: handle.read(1 << 22), b""):  # noqa: B023 - consumed immediately
                digest.update(chunk)
    return "sha256:" + digest.hexdigest()


def weights_checksum(folder: Path) -> str:
    """sha256 over the weight files of a local model folder (sorted by name)."""
    files = tuple(sorted({p for pattern in WEIGHT_PATTERNS for p in folder.glob(pattern)}))
    if not files:
        raise ModelLoadError(f"model folder {folder} holds no weights ({' or '.join(WEIGHT_PATTERNS)})")
    odd = next((p for p in files if not p.is_file()), None)  # a FIFO would hang the hash, /dev/zero never end
    if odd is not None:
        raise ModelLoadError(f"{odd}: not a regular file (a FIFO, device or folder); model weights must be files")
    return _sha256_files(files, tuple((p.stat().st_size, p.stat().st_mtime_ns) for p in files))


def _read_json(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}

    try:  # bounded: a config.json that is a FIFO or /dev/zero is refused, not read forever
        data = read_json(path, 16 << 20)
    except UnsafeJSONError as err:
        raise ModelLoadError(f"{path}: unreadable model file ({err.reason})") from None
    except OSError as err:
        raise ModelLoadError(f"{path}: unreadable model file ({err})") from None
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: unreadable model file (a JSON {type(data).__name__}, not an object)")
    return data


def usable_context(config: dict[str, Any], tokenizer_config: dict[str, Any]) -> int | None:
    """Longest input the model takes: max_position_embeddings (minus RoBERTa's 2 offset positions), capped by
    the tokenizer's model_max_length when that is set to something sensible."""
    context = config.get("max_position_embeddings")
    if context and config.get("model_type") in ROBERTA_LIKE:
        context -= 2
    tok_max = tokenizer_config.get("model_max_length")
    if isinstance(tok_max, int) and tok_max < 1_000_000:
        context = min(context, tok_max) if context else tok_max
    return context


@dataclass(frozen=True)
class ModelInfo:
    """What a result records about its model (docs/FORMATS.md)."""

    id: str
    alias: str | None
    slug: str
    revision: str
    params: int | None
    context: int | None
    architecture: str | None
    lineage: dict[str, Any] | None
    source: str
    # what a reader needs to judge the model (license, base_model, training_data, open_weights), from its model
    # card and a pretraining checkpoint's lineage; None values when not stated (docs/LEADERBOARD.md)
    metadata: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


MAX_CARD_BYTES = 2**20


def card_metadata(card_path: Path | None, lineage: dict[str, Any] | None) -> dict[str, Any]:
    """License, base model, training data (corpus names) and open weights from a model card's YAML header
    (README.md: `license`, `base_model`, `datasets`) and, for a `biobench pretrain` checkpoint, its lineage (the
    base model and the corpus files it recorded, by name). A card that cannot be read states nothing."""
    header: dict[str, Any] = {}
    if card_path is not None and card_path.is_file() and card_path.stat().st_size <= MAX_CARD_BYTES:
        try:
            from huggingface_hub.repocard import metadata_load

            header = metadata_load(card_path) or {}
        except Exception:  # a malformed YAML header (any of the parser's errors) states nothing
            header = {}
    lineage = lineage or {}
    found = lineage.get("corpus_record")
    record: dict[str, Any] = found if isinstance(found, dict) else {}
    corpus = [Path(str(f.get("path"))).name for f in record.get("files") or [] if isinstance(f, dict)]
    if not corpus and record.get("hub"):
        corpus = [str(record["hub"])]
    datasets = header.get("datasets")
    training = ([str(d) for d in datasets] if isinstance(datasets, list) else [str(datasets)] if datasets
                else corpus or None)
    base = header.get("base_model") or lineage.get("base_model")
    license_ = header.get("license")
    return {"license": str(license_) if license_ else None,
            "base_model": str(base) if isinstance(base, str) and not Path(base).is_absolute() else
            (Path(str(base)).name if base else None),
            "training_data": training, "open_weights": None}


def inspect_model(name_or_ref: str | ModelRef) -> ModelInfo:
    """Identity of a model without loading its weights (revision, context, lineage); `params` is filled by
    load_encoder."""
    ref = name_or_ref if isinstance(name_or_ref, ModelRef) else resolve_model(name_or_ref)
    config_path = _model_file(ref, "config.json")
    config = _read_json(config_path)
    tokenizer_config = _read_json(_model_file(ref, "tokenizer_config.json", required=False))
    if ref.path:
        # forged headers and tokenizer files: one line while planning (before any claim, data or weights), not the
        # libraries' tracebacks at load time (docs/RELIABILITY.md)
        check_model_files(ref.path, ModelLoadError)
        revision = weights_checksum(ref.path)
    else:  # hub cache layout: .../snapshots/<commit>/config.json
        assert config_path is not None  # required=True: found or raised
        revision = config_path.parent.name if config_path.parent.parent.name == "snapshots" else "unknown"
    lineage_path = _model_file(ref, "biobench_pretrain.json", required=False) if ref.path else None
    lineage = _read_json(lineage_path) if lineage_path else None
    architectures = config.get("architectures") or [None]
    name = display_name({"alias": ref.alias, "lineage": lineage, "id": ref.id})
    return ModelInfo(
        id=ref.id, alias=ref.alias, slug=results_slug(name, revision), revision=revision, params=None,
        context=usable_context(config, tokenizer_config), architecture=architectures[0],
        lineage=lineage, source=ref.source,
        metadata=card_metadata(_model_file(ref, "README.md", required=False) if ref.path else None, lineage),
    )


@dataclass(frozen=True)
class ModelIdentity:
    """A model given on the command line, resolved once: where it comes from (`ref`), what its results record
    (`info`), the display name they record and the results sub-folder they live in (`slug`)."""

    ref: ModelRef
    info: ModelInfo
    name: str
    slug: str
    stated: dict[str, Any] = field(default_factory=dict)  # metadata stated in a grid file (store.metadata)

    def record(self, info: ModelInfo | None = None) -> dict[str, Any]:
        """The result's `model` object: the identity plus its display name and results folder (`info`: the
        same model as loaded, with its parameter count and architecture filled in), with the stated metadata
        over the card's and the measured values (biobench.store.metadata.apply_metadata)."""
        return apply_metadata({**(info or self.info).to_dict(), "slug": self.slug, "name": self.name}, self.stated)


def identify_model(model: str, results_dir: str | Path, name: str | None = None,
                   stated: dict[str, Any] | None = None) -> ModelIdentity:
    """Resolve an alias, hub id or local folder once: its revision (without loading weights), its display name
    (`name` when given) and the results folder its runs go to (biobench.store.layout.results_folder)."""
    ref = resolve_model(model)
    info = inspect_model(ref)
    display = display_name(info.to_dict(), name)
    return ModelIdentity(ref, info, display, results_folder(results_dir, display, info.revision).name, dict(stated or {}))


def check_memory(name_or_ref: str | ModelRef, device: str, *, training: bool = True, limit_gb: float | None = None,
                 use_torch: bool = True) -> ParamEstimate:
    """Refuse in one line (ModelLoadError) a model whose config.json implies more memory than `device` has to
    fine-tune it (`training`) or load it, or more than the operator's --max-model-gb / $BIOBENCH_MAX_MODEL_GB,
    before a byte of it is allocated (biobench.runtime.memory). Returns the parameter estimate."""
    ref = name_or_ref if isinstance(name_or_ref, ModelRef) else resolve_model(name_or_ref)
    config, where = model_config(ref)
    return check_model_memory(config, where, device, training=training, limit_gb=limit_gb, use_torch=use_torch,
                              weight_bytes=weight_bytes(ref.path) if ref.path else None)


def weight_bytes(folder: Path) -> int | None:
    """The size of a local model folder's safetensors files (None without any). Pickled `.bin` weights are left
    to the weights-only loader, whose refusal names the file (runtime.weights): a planted pickle is a few bytes,
    and 'a pickle, refused' says more than 'the config does not describe these weights'."""
    sizes = [p.stat().st_size for p in folder.glob("*.safetensors") if p.is_file()]
    return sum(sizes) if sizes else None


def model_config(name_or_ref: str | ModelRef) -> tuple[dict[str, Any], str]:
    """A model's config.json (read bounded) and how to name it in a message: its path for a local folder, the
    model's name otherwise (the hub cache's path says nothing to the user)."""
    ref = name_or_ref if isinstance(name_or_ref, ModelRef) else resolve_model(name_or_ref)
    config_path = _model_file(ref, "config.json")
    where = str(config_path) if ref.path and not ref.alias else f"model {ref.name!r} (its config.json)"
    return _read_json(config_path), where


def offline_status(alias: Alias) -> str:
    """How an alias is available without the hub: 'package', 'cache', or '' (needs the hub)."""
    if package_folder(alias):
        return "package"
    if alias.hub_id is None:
        return ""
    with contextlib.suppress(Exception):
        from huggingface_hub import try_to_load_from_cache

        if isinstance(try_to_load_from_cache(alias.hub_id, "config.json"), str):
            return "cache"
    return ""
