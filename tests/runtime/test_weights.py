"""runtime.weights: a forged model folder (safetensors header, tokenizer.json) and a refused pickle are one line
naming the file and the fix, before any library parses them."""

import json
import pickle
import struct

import pytest
from biobench.errors import ModelLoadError
from biobench.runtime.weights import check_model_files, is_refused_pickle, untrusted_weights


def _safetensors(path, header: dict, data: bytes = b"") -> None:
    raw = json.dumps(header).encode()
    path.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def test_a_well_formed_folder_passes(tmp_path):
    _safetensors(tmp_path / "model.safetensors", {"w": {"dtype": "F32", "shape": [2], "data_offsets": [0, 8]},
                                                   "__metadata__": {"format": "pt"}}, b"\0" * 8)
    (tmp_path / "tokenizer.json").write_text('{"model": {"vocab": {"a": 0}}}')
    check_model_files(tmp_path, ModelLoadError)


@pytest.mark.parametrize(("write", "why"), [
    (lambda p: p.write_bytes(b"\1\2\3"), "3 bytes, shorter than a safetensors header"),
    (lambda p: p.write_bytes(struct.pack("<Q", 100 * 2**30) + b"{}"), "its header claims 107,374,182,400 bytes"),
    (lambda p: _safetensors(p, {"w": {"data_offsets": [0, 2**40]}}, b"\0" * 16),
     "tensor 'w' claims 1,099,511,627,776 bytes of data; the file holds 16"),
    (lambda p: _safetensors(p, {"w": {"data_offsets": [8, 4]}}), "tensor 'w' has no valid data_offsets"),
    (lambda p: _safetensors(p, [1, 2]), "its header is not a JSON object"),
])
def test_a_forged_safetensors_file_is_one_line(tmp_path, write, why):
    write(tmp_path / "model.safetensors")
    with pytest.raises(ModelLoadError) as err:
        check_model_files(tmp_path, ModelLoadError)
    text = str(err.value)
    assert text.startswith(f"{tmp_path / 'model.safetensors'}: not a usable safetensors file: {why}")
    assert text.endswith("re-download or re-save the weights") and "\n" not in text


def test_a_tokenizer_nested_too_deeply_is_one_line(tmp_path):
    (tmp_path / "tokenizer.json").write_text("[" * 200_000 + "]" * 200_000)
    with pytest.raises(ModelLoadError, match="tokenizer.json: JSON nested too deeply to be a tokenizer"):
        check_model_files(tmp_path, ModelLoadError)


def test_a_refused_pickle_anywhere_in_the_chain_becomes_one_line(tmp_path):
    (tmp_path / "pytorch_model.bin").write_bytes(b"")
    try:
        raise pickle.UnpicklingError("Weights only load failed")
    except pickle.UnpicklingError as inner:
        try:
            raise OSError("loading the model failed") from inner
        except OSError as outer:
            chained = outer
    assert is_refused_pickle(chained) and not is_refused_pickle(OSError("disk")) and not is_refused_pickle(None)
    with pytest.raises(ModelLoadError) as err:
        with untrusted_weights(tmp_path, ModelLoadError):
            raise chained
    assert str(err.value).startswith(f"{tmp_path / 'pytorch_model.bin'}: refused: a pickle")
    with pytest.raises(OSError, match="disk"):  # anything else passes through unchanged
        with untrusted_weights(tmp_path, ModelLoadError):
            raise OSError("disk")
