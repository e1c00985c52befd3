"""Tests of entmax15, sparsemax, entmax_bisect and entmax_backward.

Exactness against the sort oracles of ``_oracle.py``, optimality (KKT)
conditions, exact one-hot rows, limits, gradients, extreme inputs and input
validation. Property-based (hypothesis) tests live in
``test_entmax_properties.py``.
"""

import warnings
from functools import partial

import numpy as np
import pytest
from _data import DTYPE_IDS, DTYPES
from _oracle import (
    assert_kkt,
    assert_on_simplex,
    entmax15_sort,
    kkt_tolerance,
    sparsemax_sort,
)
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

from skrbfkmeans import entmax15, entmax_backward, entmax_bisect, sparsemax

# Every forward map with its alpha; "bisect-a" is entmax_bisect(alpha=a).
MAPS = {
    "entmax15": (entmax15, 1.5),
    "sparsemax": (sparsemax, 2.0),
    **{
        f"bisect-{a:g}": (partial(entmax_bisect, alpha=a), a)
        for a in (1.1, 1.25, 1.5, 2.0, 3.0)
    },
}
# Sort-based oracles (Peters et al. 2019 Alg. 2; Martins & Astudillo 2016 Alg. 1).
ORACLES = {1.5: entmax15_sort, 2.0: sparsemax_sort}


def _from_rows(rows, shape, axis):
    """Lay the rows of ``rows`` out as slices along ``axis`` of an array."""
    return np.moveaxis(rows.reshape(*shape, rows.shape[-1]), -1, axis)


def _scores(case, rng, m, k):
    """``m`` slices of ``k`` scores of the given kind, unscaled."""
    if case == "random":
        return rng.standard_normal((m, k))
    if case == "ties":
        # Half-integers: many ties, at the maximum too.
        return rng.integers(-3, 4, size=(m, k)) / 2
    if case == "constant":
        return np.repeat(rng.standard_normal((m, 1)), k, axis=1)
    # masked: about 40% of -inf entries, never a slice's first one.
    Z = rng.standard_normal((m, k))
    mask = rng.random((m, k)) < 0.4
    mask[:, 0] = False
    Z[mask] = -np.inf
    return Z


@pytest.mark.parametrize("axis", [0, 1, -1], ids=lambda a: f"axis{a}")
@pytest.mark.parametrize("scale", [1e-6, 0.5, 2.0, 100.0], ids=lambda s: f"x{s:g}")
@pytest.mark.parametrize("case", ["random", "ties", "constant", "masked"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.5", "bisect-2"])
def test_matches_sort_oracle(name, dtype, case, scale, axis, global_random_seed):
    # Check that the Newton and bisection kernels agree with the sort-based
    # oracles, on 3-D arrays along every axis.
    f, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = _from_rows(_scores(case, rng, 20, 7) * scale, (4, 5), axis).astype(dtype)
    P = f(Z, axis=axis)
    assert P.dtype == dtype and P.shape == Z.shape
    tol = 1e-12 if dtype == np.float64 else 1e-6
    assert_allclose(P, ORACLES[alpha](Z, axis=axis), rtol=tol, atol=tol)


@pytest.mark.parametrize("k", [2, 7, 300])
@pytest.mark.parametrize("scale", [0.3, 3.0], ids=lambda s: f"x{s:g}")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(
    "name",
    [f"bisect-{a:g}" for a in (1.1, 1.25, 1.5, 2, 3)] + ["entmax15", "sparsemax"],
)
def test_kkt_conditions(name, dtype, scale, k, global_random_seed):
    # Check that the output solves the optimality conditions of alpha-entmax:
    # one threshold tau on the support, (alpha-1) z_j <= tau off it.
    f, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = (rng.standard_normal((64, k)) * scale).astype(dtype)
    assert_kkt(Z, f(Z), alpha, dtype)


@pytest.mark.parametrize("value", [-1e8, 0.0, 3.5, 1e300], ids=lambda v: f"{v:g}")
@pytest.mark.parametrize("k", [1, 2, 3, 7, 300])
@pytest.mark.parametrize("name", list(MAPS))
def test_constant_slice_is_uniform(name, k, value):
    # Check that a slice of equal scores gives the uniform distribution.
    f, _ = MAPS[name]
    P = f(np.full((3, k), value))
    assert_allclose(P, 1.0 / k, rtol=4 * np.finfo(np.float64).eps * k)


@pytest.mark.parametrize("offset", [0.0, 5.0, -3.25, 1024.0], ids=lambda c: f"c{c:g}")
@pytest.mark.parametrize("gap", ["at", "above", "far", "below"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(
    "name",
    ["entmax15", "sparsemax", "bisect-1.25", "bisect-1.5", "bisect-2", "bisect-3"],
)
def test_exact_one_hot_threshold(name, dtype, gap, offset):
    # Check that a slice is exactly one-hot iff its top gap is >= 1/(alpha-1).
    # alpha-1 is a power of two here, so the threshold and the scores are exact
    # in both dtypes.
    f, alpha = MAPS[name]
    threshold = 1.0 / (alpha - 1.0)
    # "below": a relative step the dtype resolves even at an offset of 1024.
    below = 1e-9 if dtype == np.float64 else 1e-3
    g = {"at": 1.0, "above": 1.0 + 1e-3, "far": 1e6, "below": 1.0 - below}[gap]
    z = np.array([offset - g * threshold, offset, offset - 3 * threshold, -np.inf])
    P = f(z.astype(dtype))
    if gap == "below":
        # The top entry may round to 1: its complement can be below an ulp.
        assert P[0] > 0
    else:
        assert_array_equal(P, np.array([0, 1, 0, 0], dtype=dtype))


def test_alpha_to_one_tends_to_softmax(global_random_seed):
    # Check that entmax_bisect approaches softmax (scipy) as alpha -> 1, with
    # an error of order alpha - 1: (1 + (a-1) z) ** (1 / (a-1)) =
    # exp(z - (a-1) z**2 / 2 + ...), so the logits move by (a-1) ptp(z)**2.
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((50, 6))
    expected = softmax(Z, axis=-1)
    alphas = [1.1, 1.01, 1.001]
    errors = [np.abs(entmax_bisect(Z, alpha=a) - expected).max() for a in alphas]
    assert all(fine < coarse / 5 for coarse, fine in zip(errors, errors[1:]))
    assert errors[-1] <= (alphas[-1] - 1) * np.ptp(Z, axis=1).max() ** 2


@pytest.mark.parametrize("alpha", [1 + 1e-6, 10.0, 1e3, 1e10, 1e39, 1e300], ids=repr)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_extreme_alpha(dtype, alpha, global_random_seed):
    # Check that any finite alpha > 1 (even beyond the dtype's range) gives a
    # point of the simplex solving the KKT conditions, uniform on a constant
    # slice and one-hot on a slice with a gap of 1/(alpha-1) or more, with no
    # overflow, invalid or division error. As alpha -> inf the support shrinks
    # to the ties. Underflow is let be: the bracket's upper end
    # -(1/k)**(alpha-1) underflows to its value at working precision, -0.
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((20, 6))
    Z[0] = 0.0
    # A gap of 1.5 thresholds, or the smallest one the dtype holds.
    gap = max(1.5 / (alpha - 1), float(np.finfo(dtype).smallest_subnormal))
    Z[1] = [0.0, -gap] + [-3 * gap] * 4
    Z = Z.astype(dtype)
    errors = {"over": "raise", "invalid": "raise", "divide": "raise"}
    with np.errstate(**errors, under="ignore"), warnings.catch_warnings():
        warnings.simplefilter("error")
        P = entmax_bisect(Z, alpha)
    assert_on_simplex(P)
    assert_allclose(P[0], 1 / 6, rtol=8 * np.finfo(dtype).eps)
    assert_array_equal(P[1], [1, 0, 0, 0, 0, 0])
    assert_kkt(Z, P, alpha, dtype)


@pytest.mark.parametrize("k", [2, 5, 300])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_bisect_alpha_two_is_sparsemax(dtype, k, global_random_seed):
    # Check that entmax_bisect(alpha=2) and sparsemax compute the same map.
    rng = np.random.default_rng(global_random_seed)
    Z = (rng.standard_normal((100, k)) * rng.uniform(0.1, 3)).astype(dtype)
    eps = np.finfo(dtype).eps
    assert_allclose(entmax_bisect(Z, alpha=2), sparsemax(Z), rtol=0, atol=8 * eps * k)


@pytest.mark.parametrize("n_iter", [0, 1, 5, 20, None])
@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 3.0])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_bisect_without_normalisation(dtype, alpha, n_iter, global_random_seed):
    # Check that ensure_sum_one=False returns the map at the lower end of a
    # bracket of width <= 2**-n_iter around tau: its sum is >= 1, and moving
    # the threshold up by that width gives a sum <= 1. Also that the
    # normalised output is its rescaling and even n_iter=0 is finite.
    rng = np.random.default_rng(global_random_seed)
    Z = (rng.standard_normal((60, 8)) * 0.5).astype(dtype)
    raw = entmax_bisect(Z, alpha, n_iter=n_iter, ensure_sum_one=False)
    P = entmax_bisect(Z, alpha, n_iter=n_iter)
    assert raw.dtype == P.dtype == dtype
    assert np.isfinite(raw).all() and (raw >= 0).all()
    assert_on_simplex(P)
    raw64 = raw.astype(np.float64)
    eps = np.finfo(dtype).eps
    tol = 16 * eps * Z.shape[1]
    assert_allclose(P, raw64 / raw64.sum(axis=1, keepdims=True), rtol=tol, atol=tol)
    width = 2.0 ** -(n_iter if n_iter is not None else np.finfo(dtype).nmant)
    q = 1 / (alpha - 1)
    # v_j = raw_j ** (alpha - 1) is (alpha-1) z_j - lo on the support.
    upper = np.clip(raw64 ** (alpha - 1) - width, 0, None) ** q
    assert (raw64.sum(axis=1) >= 1 - tol).all()
    assert (upper.sum(axis=1) <= 1 + tol).all()
    if n_iter is None:
        # The default resolves tau to an ulp: the sum is 1 up to the
        # condition number of the normalisation (see kkt_tolerance).
        bound = q * kkt_tolerance(raw, alpha, dtype) + tol
        assert (np.abs(raw64.sum(axis=1) - 1) <= bound).all()


def _constructed(rng, alpha, m, k, n_support):
    """Scores whose alpha-entmax is known, with a stable support.

    Pick ``p`` on the simplex with ``p_j >= 0.5 / n_support`` on a random
    support, a threshold ``tau`` and scores ``(alpha-1) z_j = p_j ** (alpha-1)
    + tau`` there, and ``(alpha-1) z_j <= tau - 0.2`` off it: a perturbation of
    the scores much below 0.2 changes neither the support nor the formula.
    """
    Z = np.empty((m, k))
    P = np.zeros((m, k))
    for i in range(m):
        support = rng.permutation(k)[:n_support]
        p = 0.5 / n_support + 0.5 * rng.dirichlet(np.ones(n_support))
        tau = rng.uniform(-2, 2)
        P[i, support] = p
        Z[i] = tau - 0.2 - rng.exponential(size=k)
        Z[i, support] = p ** (alpha - 1) + tau
    return Z / (alpha - 1), P


@pytest.mark.parametrize("name", list(MAPS))
def test_matches_constructed_solution(name, global_random_seed):
    # Check the forward maps on inputs built from a known solution (an oracle
    # that inverts the closed form instead of solving for tau).
    f, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z, expected = _constructed(rng, alpha, 30, 9, 4)
    assert_allclose(f(Z), expected, rtol=1e-12, atol=1e-13)


FD_CASES = [
    ("entmax15", 1.5),
    ("sparsemax", 2.0),
    ("bisect-1.25", 1.25),
    ("bisect-3", 3.0),
]


@pytest.mark.parametrize("axis", [0, 1, 2])
@pytest.mark.parametrize("name,alpha", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_backward_matches_finite_differences(name, alpha, axis, global_random_seed):
    # Check entmax_backward against central differences of
    # L(Z) = sum(G * entmax(Z)), along every axis of a 3-D array. The inputs
    # keep their support under the step (see _constructed); the error is
    # O(h**2 p''') ~ 1e-8 (p >= 0.1) plus O(k eps / h) ~ 1e-9.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    rows, _ = _constructed(rng, alpha, 6, 5, 3)
    Z = _from_rows(rows, (2, 3), axis)
    G = rng.standard_normal(Z.shape)
    P = f(Z, axis=axis)
    P_copy, G_copy = P.copy(), G.copy()
    P.flags.writeable = G.flags.writeable = False
    dZ = entmax_backward(P, G, alpha=alpha, axis=axis)
    assert_array_equal(P, P_copy)
    assert_array_equal(G, G_copy)
    h = 1e-6
    fd = np.empty_like(Z)
    for idx in np.ndindex(Z.shape):
        E = np.zeros_like(Z)
        E[idx] = h
        fd[idx] = (G * (f(Z + E, axis=axis) - f(Z - E, axis=axis))).sum() / (2 * h)
    assert dZ.shape == Z.shape and dZ.dtype == np.float64
    assert_allclose(dZ, fd, rtol=1e-5, atol=1e-6)
    # Exact zeros off the support; the gradient is orthogonal to shifts.
    assert_array_equal(dZ[P == 0], 0.0)
    assert_allclose(dZ.sum(axis=axis), 0.0, atol=64 * np.finfo(float).eps)


@pytest.mark.parametrize("name,alpha", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_backward_dense_jacobian(name, alpha, global_random_seed):
    # Check the Jacobian built from entmax_backward (one VJP per unit vector)
    # against the Jacobian built column by column by central differences, and
    # that both are symmetric.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    k = 7
    (z,), (p,) = _constructed(rng, alpha, 1, k, 4)
    h = 1e-6
    J_fd = np.column_stack([(f(z + h * e) - f(z - h * e)) / (2 * h) for e in np.eye(k)])
    # entmax_backward(p, e_i) = J^T e_i, row i of J (J is symmetric).
    J = entmax_backward(np.tile(f(z), (k, 1)), np.eye(k), alpha=alpha)
    assert_allclose(J, J_fd, rtol=1e-5, atol=1e-6)
    assert_allclose(J_fd, J_fd.T, rtol=1e-5, atol=1e-6)
    assert_allclose(J, J.T, rtol=1e-14, atol=1e-15)


@pytest.mark.parametrize("name,alpha", FD_CASES, ids=[c[0] for c in FD_CASES])
def test_backward_float32(name, alpha, global_random_seed):
    # Check that float32 P and G give a float32 gradient close to float64's
    # (P and s = P**(2-alpha) carry a few ulps of relative error), float16 a
    # float32 one and integers a float64 one.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z, _ = _constructed(rng, alpha, 20, 6, 3)
    G = rng.standard_normal(Z.shape)
    dZ32 = entmax_backward(f(Z.astype(np.float32)), G.astype(np.float32), alpha=alpha)
    dZ64 = entmax_backward(f(Z), G, alpha=alpha)
    assert dZ32.dtype == np.float32
    atol = 64 * np.finfo(np.float32).eps * np.abs(G).max()
    assert_allclose(dZ32, dZ64, rtol=0, atol=atol)
    # float16 computes in float32; integers (a one-hot P) in float64.
    P16, G16 = f(Z).astype(np.float16), G.astype(np.float16)
    dZ16 = entmax_backward(P16, G16, alpha=alpha)
    assert dZ16.dtype == np.float32
    assert_array_equal(dZ16, entmax_backward(P16.astype(np.float32), G16, alpha=alpha))
    one_hot = np.eye(6, dtype=np.int64)
    assert entmax_backward(one_hot, one_hot, alpha=alpha).dtype == np.float64


@pytest.mark.parametrize("alpha", [1.25, 1.5, 2.0, 3.0])
def test_backward_one_hot_is_zero(alpha):
    # Check that the gradient through an exactly one-hot slice is exactly 0.
    P = np.array([[0.0, 1.0, 0.0], [1.0, 0.0, 0.0]])
    assert_array_equal(entmax_backward(P, [[1.0, 2.0, 3.0]] * 2, alpha=alpha), 0.0)


EXTREME_SCALES = {
    np.float64: [1e-300, 1e-10, 1.0, 1e10, 1e300],
    np.float32: [1e-30, 1e-10, 1.0, 1e10, 1e30],
}
EXTREME_CASES = [(d, s) for d, scales in EXTREME_SCALES.items() for s in scales]


@pytest.mark.parametrize("offset", [0.0, 1e8, -1e8, 1e15], ids=lambda c: f"c{c:g}")
@pytest.mark.parametrize(
    "dtype,scale",
    EXTREME_CASES,
    ids=[f"{d.__name__}-x{s:g}" for d, s in EXTREME_CASES],
)
@pytest.mark.parametrize("name", list(MAPS))
def test_extreme_scales_and_offsets(name, dtype, scale, offset, global_random_seed):
    # Check that scores at any scale and offset give a finite point of the
    # simplex, equal to the oracle's, without any floating-point error.
    f, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = (rng.standard_normal((40, 9)) * scale + offset).astype(dtype)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        P = f(Z)
    assert_on_simplex(P)
    if alpha in ORACLES:
        # The oracle squares scores of 1e300: it may overflow where it does
        # not matter (outside the support).
        with np.errstate(all="ignore"):
            expected = ORACLES[alpha](Z)
        tol = 1e-12 if dtype == np.float64 else 1e-6
        assert_allclose(P, expected, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", list(MAPS))
def test_extreme_subnormal_scores(name, dtype, global_random_seed):
    # Check that subnormal scores still give a point of the simplex without
    # any floating-point error: underflow there is expected and must be
    # silenced narrowly inside the kernels, not left to numpy's defaults.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    tiny = float(np.finfo(dtype).smallest_normal)
    Z = np.stack([rng.standard_normal(9) * tiny * s for s in (1e-1, 1e-3, 1e-6)])
    Z = Z.astype(dtype)
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        P = f(Z)
    assert_on_simplex(P)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", list(MAPS))
def test_full_float_range(name, dtype):
    # Check finite scores spread over the whole float range: the largest
    # float, its negative (their difference overflows to -inf, its exact
    # limit) and a score a largest-float below the maximum.
    f, _ = MAPS[name]
    big = float(np.finfo(dtype).max)
    Z = np.array([[big, 0.0, -big, 1.0], [0.0, big, big / 2, -big], [big, big, 0, 0]])
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        P = f(Z.astype(dtype))
    expected = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0.5, 0.5, 0, 0]], dtype=dtype)
    assert_array_equal(P, expected)


INVALID_SCORES = [(np.nan, "contains NaN"), (np.inf, "contains \\+inf")]
INVALID_SCORES += [(-np.inf, "all -inf")]


@pytest.mark.parametrize("where", ["first", "last"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize(
    "value,message", INVALID_SCORES, ids=["nan", "posinf", "all-neginf"]
)
@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.5", "bisect-3"])
def test_invalid_scores_raise(name, value, message, dtype, where, global_random_seed):
    # Check that NaN, +inf and all--inf slices raise a ValueError saying so,
    # wherever they are (the last row lies in a later block of the kernel),
    # and that the input is not modified.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z = rng.standard_normal((3000, 20)).astype(dtype)
    row = 0 if where == "first" else -1
    if value == -np.inf:
        Z[row] = value
    else:
        Z[row, 3] = value
    Z_copy = Z.copy()
    with pytest.raises(ValueError, match=message):
        f(Z)
    assert_array_equal(Z, Z_copy)


@pytest.mark.parametrize(
    "dtype,expected",
    [
        (np.float16, np.float32),
        (np.float32, np.float32),
        (np.float64, np.float64),
        (np.int32, np.float64),
        (np.int64, np.float64),
        (np.uint8, np.float64),
        (bool, np.float64),
    ],
    ids=["float16", "float32", "float64", "int32", "int64", "uint8", "bool"],
)
@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.25"])
def test_dtypes_layouts_and_read_only(name, dtype, expected, global_random_seed):
    # Check the output dtype, that non-contiguous and read-only inputs give
    # the result of a contiguous copy computed in the output dtype, and that
    # the input is never modified.
    f, _ = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    X = np.abs(rng.standard_normal((6, 10))) * 3
    # Small integers (0 included) for the integer and boolean dtypes.
    X = (np.floor(X) if np.dtype(dtype).kind in "biu" else X).astype(dtype)
    X_copy = X.copy()
    X.flags.writeable = False
    for view in (X, np.asfortranarray(X), X[:, ::2], X[::-1]):
        expected_P = f(np.ascontiguousarray(view, dtype=expected))
        P = f(view)
        assert P.dtype == expected
        assert_array_equal(P, expected_P)
    assert_array_equal(X, X_copy)
    assert_array_equal(f(X.tolist()), f(np.asarray(X.tolist())))


@pytest.mark.parametrize("name", list(MAPS))
def test_empty_inputs(name):
    # Check that no slices give an empty result and empty slices raise.
    f, _ = MAPS[name]
    P = f(np.zeros((0, 5), dtype=np.float32))
    assert P.shape == (0, 5) and P.dtype == np.float32
    assert f(np.zeros((3, 0)), axis=0).shape == (3, 0)
    for shape, axis in [((3, 0), -1), ((0, 5), 0), ((0,), -1), ((2, 0, 4), 1)]:
        with pytest.raises(ValueError):
            f(np.zeros(shape), axis=axis)
    assert entmax_backward(np.zeros((0, 5)), np.zeros((0, 5))).shape == (0, 5)


BAD_ALPHAS = [1, 1.0, 0.5, -2.0, np.inf, np.nan, True, "1.5", None, 1.5 + 0j]


@pytest.mark.parametrize("alpha", BAD_ALPHAS, ids=repr)
def test_invalid_alpha(alpha):
    # Check that alpha must be a finite real number > 1 (bool excluded).
    with pytest.raises(ValueError, match="alpha"):
        entmax_bisect(np.zeros(3), alpha=alpha)
    with pytest.raises(ValueError, match="alpha"):
        entmax_backward(np.ones(3) / 3, np.zeros(3), alpha=alpha)


@pytest.mark.parametrize("n_iter", [-1, 2.5, True, "10", np.float64(3.0)], ids=repr)
def test_invalid_n_iter(n_iter):
    # Check that n_iter must be a non-negative integer (bool excluded).
    with pytest.raises(ValueError, match="n_iter"):
        entmax_bisect(np.zeros(3), n_iter=n_iter)


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect-1.5", "backward"])
def test_invalid_axis(name):
    # Check that an out-of-range axis raises ValueError, a non-integer one
    # TypeError, and that numpy integers are accepted.
    X = np.ones((2, 3)) / 3
    f = partial(entmax_backward, G=X) if name == "backward" else MAPS[name][0]
    for axis in (2, -3):
        with pytest.raises(ValueError, match="axis"):
            f(X, axis=axis)
    for axis in (1.0, "0", None, True):
        with pytest.raises(TypeError, match="axis"):
            f(X, axis=axis)
    assert f(X, axis=np.int64(0)).shape == X.shape


def test_backward_invalid_inputs():
    # Check that entmax_backward rejects mismatched shapes, non-finite
    # entries, negative probabilities and slices without a positive entry,
    # and does not modify its inputs.
    P = np.array([[0.25, 0.75, 0.0], [1.0, 0.0, 0.0]])
    G = np.ones_like(P)
    P_copy, G_copy = P.copy(), G.copy()
    with pytest.raises(ValueError, match="shape"):
        entmax_backward(P, G[:, :2])
    for bad in (np.nan, np.inf):
        with pytest.raises(ValueError, match="NaN or infinity"):
            entmax_backward(np.where(P == 1, bad, P), G)
        with pytest.raises(ValueError, match="NaN or infinity"):
            entmax_backward(P, np.where(P == 1, bad, G))
    with pytest.raises(ValueError, match="negative"):
        entmax_backward(P - 0.5, G)
    with pytest.raises(ValueError, match="no positive entry"):
        entmax_backward(np.zeros_like(P), G)
    assert_array_equal(P, P_copy)
    assert_array_equal(G, G_copy)


def _adversarial_rows(rng, k, alpha, m=256):
    """Rows that stress the one-hot split and the support search.

    Returns the scores and, per row, whether it must be exactly one-hot (the
    top gap, computed exactly since offsets keep the top two within a factor
    2 or at 0, is >= 1 / (alpha - 1)) or must not be.
    """
    threshold = 1 / (alpha - 1)
    kinds = ["dense", "wide", "at", "above", "below", "ties", "tie-gap", "edge"]
    kinds += ["masked"]
    Z = np.empty((m, k))
    for i in range(m):
        kind = kinds[i % len(kinds)]
        z = rng.standard_normal(k) * (5 if kind == "wide" else 0.5)
        gap = {"at": 1.0, "above": 1 + 1e-12, "below": 1 - 1e-12}.get(kind)
        if gap is not None and k > 1:
            # Top score 0, second exactly -gap * threshold, rest far below.
            z = -threshold * (2 + rng.exponential(size=k))
            z[rng.integers(k)] = 0.0
            z[np.argmin(z)] = -gap * threshold
        elif kind == "ties":
            z[rng.random(k) < 0.5] = z.max()
        elif kind == "tie-gap":
            # Several tied maxima and everything else exactly a gap below.
            z[:] = 0.0
            z[rng.random(k) < 0.7] = -threshold
        elif kind == "edge" and k > 2:
            # t tied maxima put tau at -(1/t)**(alpha-1) (scaled): one entry
            # within an ulp of it, the others far below.
            t = rng.integers(2, k)
            z = -threshold * (2 + rng.exponential(size=k))
            z[:t] = 0.0
            edge = -threshold * t ** (1 - alpha)
            z[t] = np.nextafter(edge, rng.choice([-np.inf, 0.0, np.inf]))
            z = rng.permutation(z)
        elif kind == "masked" and k > 1:
            z[rng.random(k) < 0.5] = -np.inf
            z[rng.integers(k)] = 0.0
        Z[i] = z + rng.choice([0.0, -4.0, 64.0, 1e6]) * (kind in ("at", "above"))
    Z = Z[rng.permutation(m)]
    srt = np.sort(Z, axis=1)
    gaps = srt[:, -1] - srt[:, -2] if k > 1 else np.full(m, np.inf)
    return Z, gaps >= threshold


@pytest.mark.parametrize("k", [1, 2, 3, 5, 17, 64, 300])
@pytest.mark.parametrize("name", ["entmax15", "sparsemax"])
def test_fast_path_adversarial(name, k, global_random_seed):
    # Check the exact fast paths against entmax_bisect and the sort oracle on
    # rows that mix one-hot and dense slices, gaps at the threshold and within
    # 1e-12 of it, many tied maxima, entries at the edge of the support; at
    # k = 300 the rows span several kernel blocks.
    f, alpha = MAPS[name]
    rng = np.random.default_rng(global_random_seed)
    Z, one_hot = _adversarial_rows(rng, k, alpha)
    P = f(Z)
    assert_on_simplex(P)
    assert_allclose(P, ORACLES[alpha](Z), rtol=1e-12, atol=1e-12)
    assert_allclose(P, entmax_bisect(Z, alpha), rtol=1e-12, atol=1e-12)
    assert_array_equal(P[one_hot].max(axis=1), 1.0)
    assert_array_equal(np.count_nonzero(P[one_hot], axis=1), 1)
    # Not one-hot when the gap is short of the threshold, even by 1e-12 (the
    # top entry may still round to 1).
    assert (np.count_nonzero(P[~one_hot], axis=1) > 1).all()
    assert_kkt(Z, P, alpha, np.float64)


@pytest.mark.parametrize("dense_every", [3, 20, 300], ids=lambda d: f"every{d}")
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("name", ["entmax15", "sparsemax"])
def test_many_blocks_of_mostly_one_hot_rows(
    name, dtype, dense_every, global_random_seed, monkeypatch
):
    # Check the pooling of threshold searches across row blocks: one-hot
    # rows (gap above 2) with a dense row every few rows, over many blocks
    # of 64 rows, against the sort oracle row for row.
    import skrbfkmeans._engine.entmax_rows as rows_module

    monkeypatch.setattr(rows_module, "_BLOCK_ELEMENTS", 64 * 64)
    rng = np.random.default_rng(global_random_seed)
    m, k = 1500, 64
    Z = rng.standard_normal((m, k)) - 10.0
    Z[np.arange(m), rng.integers(0, k, m)] = 0.0
    dense = np.arange(0, m, dense_every)
    Z[dense] = rng.standard_normal((dense.size, k))
    Z = Z.astype(dtype)
    f, alpha = MAPS[name]
    P = f(Z)
    expected = ORACLES[alpha](Z.astype(np.float64))
    # Measured: at most 5 eps; the KKT bound for k=64 is about 4 eps (1 + 8).
    tol = 40 * np.finfo(dtype).eps
    assert_allclose(P, expected, rtol=tol, atol=tol)
    assert_on_simplex(P)
    assert np.all(np.count_nonzero(np.delete(P, dense, axis=0), axis=1) == 1)
