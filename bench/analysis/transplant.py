"""Layer / component transplant (paper §5.2, Tables 3 and 6): copy a layer range of model A into model B.

Parameter names are matched relative to the encoder (`base_model`), so A and B may have different heads
(e.g. a MaskedLM checkpoint into a bare encoder). Norms go with the sub-layer they belong to:
- ModernBERT (pre-norm): `layers.N.attn_norm` + `layers.N.attn.*` = attention; `layers.N.mlp_norm` +
  `layers.N.mlp.*` = MLP (layer 0 has no attn_norm: it is an identity).
- BERT (post-norm): `encoder.layer.N.attention.*` (incl. its output LayerNorm) = attention;
  `encoder.layer.N.intermediate.*` + `encoder.layer.N.output.*` (incl. its LayerNorm) = MLP.
Embeddings, the final norm and the heads are never copied.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from biobench.errors import ConfigError, ModelLoadError
from biobench.models import check_memory, resolve_model
from biobench.runtime.files import atomic_write, disk_full_guard
from biobench.runtime.ownership import check_output_folder, remove_owned
from biobench.runtime.weights import untrusted_weights
from biobench.store.analysis import Transplant

COMPONENTS = ("all", "attention", "mlp")

# (layer-key regex, {component: regex on the rest of the name}) per naming scheme.
NAMING: dict[str, tuple[str, dict[str, str]]] = {
    "modernbert": (r"^layers\.(\d+)\.(.+)$", {"attention": r"^attn(_norm)?\.", "mlp": r"^mlp(_norm)?\."}),
    "bert": (r"^encoder\.layer\.(\d+)\.(.+)$", {"attention": r"^attention\.", "mlp": r"^(intermediate|output)\."}),
}


def select_keys(names: list[str], layers: list[int], component: str, n_layers: int) -> list[str]:
    """The encoder parameter names of `component` in `layers` (names relative to the base model)."""
    if component not in COMPONENTS:
        raise ConfigError(f"unknown component '{component}'; choose one of {', '.join(COMPONENTS)}")
    outside = [layer for layer in layers if not 0 <= layer < n_layers]
    if outside:
        raise ConfigError(
            f"layers {outside} are outside the model, which has {n_layers} layers (0-{n_layers - 1}); "
            "fix --layers"
        )
    for layer_re, parts in NAMING.values():
        matched = [(name, m) for name in names if (m := re.match(layer_re, name))]
        if not matched:
            continue
        wanted = set(layers)
        return [
            name for name, m in matched
            if int(m.group(1)) in wanted and (component == "all" or re.match(parts[component], m.group(2)))
        ]
    raise ModelLoadError(
        f"unknown layer naming (neither ModernBERT 'layers.N.' nor BERT 'encoder.layer.N.'); first names: {names[:3]}"
    )


def _load(name: str | Path):
    """Model and tokenizer source of a folder, alias or cached hub id, in its saved class (heads kept)."""
    import torch
    import transformers
    from transformers import AutoConfig

    ref = resolve_model(str(name))
    check_memory(ref, "cpu", training=False)  # before a config's claimed size is allocated (runtime.memory)
    source = ref.source
    config = AutoConfig.from_pretrained(source)
    cls = getattr(transformers, (config.architectures or ["AutoModel"])[0], transformers.AutoModel)
    with untrusted_weights(source, ModelLoadError):
        return cls.from_pretrained(source, dtype=torch.float32), source


def transplant(
    source: str | Path, target: str | Path, layers: list[int], component: str, out: str | Path
) -> dict[str, Any]:
    """Write to `out` model B (its class, head and tokenizer) with the selected encoder tensors of A."""
    import torch
    from transformers import AutoTokenizer

    if component not in COMPONENTS:
        raise ConfigError(f"unknown component '{component}'; choose one of {', '.join(COMPONENTS)}")
    created = not Path(out).exists()
    # checked before any model loads: a new folder (marked first), or one an earlier transplant wrote
    check_output_folder(out, "--out", "transplanted model", legacy=lambda folder: (folder / "transplant.json").is_file())
    (model_a, _), (model_b, target_source) = _load(source), _load(target)
    enc_a, enc_b = model_a.base_model.state_dict(), model_b.base_model.state_dict()
    n_layers = int(model_b.config.num_hidden_layers)
    if int(model_a.config.num_hidden_layers) < max(layers) + 1:
        raise ConfigError(
            f"layers {layers[0]}-{layers[-1]} are outside the source model '{source}', which has "
            f"{model_a.config.num_hidden_layers} layers; fix --layers"
        )
    keys = select_keys(list(enc_b), layers, component, n_layers)
    for key in keys:
        if key not in enc_a:
            raise ConfigError(f"tensor '{key}' of '{target}' does not exist in '{source}'; the models differ in architecture")
        if enc_a[key].shape != enc_b[key].shape:
            raise ConfigError(
                f"tensor '{key}' has shape {tuple(enc_a[key].shape)} in '{source}' but "
                f"{tuple(enc_b[key].shape)} in '{target}'; transplants need the same architecture"
            )
    params = dict(model_b.base_model.named_parameters())
    buffers = dict(model_b.base_model.named_buffers())
    with torch.no_grad():
        for key in keys:
            (params[key] if key in params else buffers[key]).copy_(enc_a[key])
    out = Path(out)
    prefix = model_b.base_model_prefix
    record = Transplant(str(source), str(target), list(layers), component,
                        [f"{prefix}.{k}" if model_b.base_model is not model_b else k for k in keys],
                        len(keys), int(sum(enc_a[k].numel() for k in keys))).to_dict()
    # a full disk: one line, and a model folder this call made is removed (a half-written model is worse than none)
    needed = sum(t.numel() * t.element_size() for t in model_b.state_dict().values())
    with disk_full_guard(out, needed, lambda: f"'{source}' and '{target}' are untouched",
                         cleanup=lambda: remove_owned(out) if created else None):
        model_b.save_pretrained(out)
        AutoTokenizer.from_pretrained(target_source).save_pretrained(out)
        atomic_write(out / "transplant.json", json.dumps(record, indent=2) + "\n")
    return record
