"""Linear CKA: the invariances the paper's analysis relies on, the HSIC definition, float64, layer pairing."""

import numpy as np
import pytest
from biobench.analysis import cka
from biobench.errors import ConfigError


@pytest.fixture
def x():
    return np.random.default_rng(0).normal(size=(60, 12))


def hsic_cka(x: np.ndarray, y: np.ndarray) -> float:
    """CKA straight from its definition: HSIC of centred linear Gram matrices (Kornblith et al. 2019)."""
    n = x.shape[0]
    h = np.eye(n) - np.ones((n, n)) / n

    def hsic(k, l):  # noqa: E741
        return np.trace(k @ h @ l @ h) / (n - 1) ** 2

    k, l = x @ x.T, y @ y.T  # noqa: E741
    return hsic(k, l) / np.sqrt(hsic(k, k) * hsic(l, l))


def test_cka_of_a_representation_with_itself_is_one(x):
    assert cka.linear_cka(x, x) == pytest.approx(1.0, abs=1e-12)


def test_invariant_to_orthogonal_transform_and_isotropic_scaling(x):
    q, _ = np.linalg.qr(np.random.default_rng(1).normal(size=(12, 12)))
    assert cka.linear_cka(x, 3.7 * x @ q) == pytest.approx(1.0, abs=1e-12)
    assert cka.linear_cka(x, x + 5.0) == pytest.approx(1.0, abs=1e-12)  # translation: features are centred


def test_not_invariant_to_a_general_linear_map(x):
    a = np.diag(np.geomspace(0.05, 20, 12)) @ np.random.default_rng(2).normal(size=(12, 12))
    assert cka.linear_cka(x, x @ a) < 0.95


def test_equals_the_hsic_formula(x):
    y = np.tanh(x @ np.random.default_rng(3).normal(size=(12, 7))) + 0.3 * np.random.default_rng(4).normal(size=(60, 7))
    assert cka.linear_cka(x, y) == pytest.approx(hsic_cka(x, y), rel=1e-10)
    assert 0.0 < cka.linear_cka(x, y) < 1.0


def test_computed_in_float64(x):
    x32 = x.astype(np.float32)
    y32 = (x + 1e-3 * np.random.default_rng(5).normal(size=x.shape)).astype(np.float32)
    value = cka.linear_cka(x32, y32)
    assert value == cka.linear_cka(x32.astype(np.float64), y32.astype(np.float64))
    assert value == pytest.approx(hsic_cka(x32.astype(np.float64), y32.astype(np.float64)), rel=1e-12)
    assert 1.0 - value > 0  # the tiny divergence survives


def test_layer_pairs_same_depth_different_depth_and_relative():
    assert cka.layer_pairs(3, 3) == [(0, 0), (1, 1), (2, 2)]
    with pytest.raises(ConfigError) as err:
        cka.layer_pairs(5, 9)
    assert str(err.value) == (
        "models have different depths (4 and 8 layers); CKA compares layer l with layer l — pass "
        "--align-relative to pair layers by relative depth instead"
    )
    assert cka.layer_pairs(5, 9, align_relative=True) == [(0, 0), (1, 2), (2, 4), (3, 6), (4, 8)]
    assert cka.layer_pairs(9, 5, align_relative=True) == [(0, 0), (2, 1), (4, 2), (6, 3), (8, 4)]


def test_samples_are_deterministic_distinct_and_capped():
    a = cka.sample_indices(100, 10, [42, 43])
    assert np.array_equal(a[42], cka.sample_indices(100, 10, [42])[42])
    assert len(set(a[42])) == 10 and not np.array_equal(a[42], a[43])
    assert np.array_equal(cka.sample_indices(5, 10, [1])[1], np.arange(5))


def test_report_divergence_and_noise_ratio(x):
    rng = np.random.default_rng(6)
    b = [x, x @ rng.normal(size=(12, 12))]
    a = [x, b[1] + 2.0 * rng.normal(size=(60, 12))]
    noise = [x, b[1] + 0.5 * rng.normal(size=(60, 12))]
    samples = cka.sample_indices(60, 40, [1, 2])
    report = cka.cka_report({"a": a, "b": b, "n": noise}, "a", "b", "n", samples)
    first, (second,) = report["embeddings"], report["layers"]
    assert first["layer"] == "embeddings" and second["layer"] == 0
    assert first["divergence"] == pytest.approx(0.0, abs=1e-12) and first["ratio"] is None  # 0/0: undefined
    expected = np.mean([1 - cka.linear_cka(a[1][r], b[1][r]) for r in samples.values()])
    noise_div = np.mean([1 - cka.linear_cka(noise[1][r], b[1][r]) for r in samples.values()])
    assert second["divergence"] == pytest.approx(expected)
    assert second["ratio"] == pytest.approx(expected / noise_div)
    assert second["ratio"] > 1  # A is further from B than B's seed noise
