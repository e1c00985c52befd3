"""Property-based (hypothesis) tests of the entmax family.

The invariants every output must satisfy, on arrays of any shape, axis,
dtype, magnitude (1e-300 to 1e300 times the data) and offset: a point of the
simplex, the optimality conditions, invariance to a per-slice shift,
equivariance to permutations, and agreement with the sort oracle.
"""

import warnings

import hypothesis.extra.numpy as hnp
import numpy as np
import pytest
from _data import DTYPES
from _oracle import assert_kkt, assert_on_simplex, entmax15_sort, sparsemax_sort
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal

from skrbfkmeans import entmax15, entmax_bisect, sparsemax

# name -> strategy of (map, alpha); the fast paths have a fixed alpha.
FAST = {"entmax15": (entmax15, 1.5), "sparsemax": (sparsemax, 2.0)}


def _maps(name, max_alpha=4.0):
    if name in FAST:
        return st.just(FAST[name])
    return st.floats(1.05, max_alpha).map(
        lambda a: (lambda X, axis=-1: entmax_bisect(X, a, axis), a)
    )


FLOAT_DTYPES = st.sampled_from(DTYPES)
# Offsets include 1e8 and beyond: the kernels shift by the slice maximum first.
OFFSETS = st.sampled_from([0.0, 1.0, -3.5, 1e8, -1e8, 1e12])


@st.composite
def scores(draw, max_dims=4, max_side=6, masked=True):
    """Scores of any shape, a valid axis and a dtype, at any magnitude.

    Elements lie in [-10, 10] (ties drawn often), times ``10**e`` with ``e``
    up to +-300 for float64 and within float32's range for float32, plus an
    offset; optionally some entries are -inf, never a slice's first one.
    """
    dtype = draw(FLOAT_DTYPES)
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=max_dims, max_side=max_side))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    elements = st.floats(-10, 10) | st.sampled_from([0.0, 1.0, -1.0, 2.0])
    base = draw(hnp.arrays(np.float64, shape, elements=elements))
    top = 300 if dtype == np.float64 else 36
    exponent = draw(st.integers(-top, top))
    with np.errstate(all="ignore"):
        Z = (base * 10.0**exponent + draw(OFFSETS)).astype(dtype)
    if masked and draw(st.booleans()):
        mask = draw(hnp.arrays(bool, shape))
        first = [slice(None)] * len(shape)
        first[axis] = 0
        mask[tuple(first)] = False
        Z[mask] = -np.inf
    return Z, axis


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect"])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_output_on_simplex(name, data):
    # Check that every slice of the output is a point of the simplex (within
    # a few ulps per entry), in the input's float dtype and shape, with no
    # floating-point error, whatever the shape, axis, scale and offset.
    f, _ = data.draw(_maps(name))
    Z, axis = data.draw(scores())
    with np.errstate(all="raise"), warnings.catch_warnings():
        warnings.simplefilter("error")
        P = f(Z, axis=axis)
    assert P.shape == Z.shape and P.dtype == Z.dtype
    assert_on_simplex(P, axis)


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_kkt_any_alpha(name, data):
    # Check the optimality conditions of alpha-entmax (see kkt_tolerance in
    # _oracle.py for the tolerance) for any alpha in [1.05, 4], at any shape,
    # axis, scale and offset.
    f, alpha = data.draw(_maps(name))
    Z, axis = data.draw(scores())
    assert_kkt(Z, f(Z, axis=axis), alpha, Z.dtype, axis=axis)


@st.composite
def grid_scores(draw):
    """Scores on a dyadic grid and per-slice shifts that keep them exact.

    float64: multiples of 2**-20 below 2**5 plus integers below 2**31 (1e8
    included) need at most 52 bits; float32: multiples of 2**-8 below 2**2
    plus integers below 2**15 need at most 24. The shifted scores are then
    exactly the mathematical ``z + c``.
    """
    dtype = draw(FLOAT_DTYPES)
    frac, top, shift = (20, 5, 2**31 - 1) if dtype == np.float64 else (8, 2, 2**15 - 1)
    shape = draw(hnp.array_shapes(min_dims=1, max_dims=3, max_side=8))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    ints = st.integers(-(2 ** (top + frac)) + 1, 2 ** (top + frac) - 1)
    Z = draw(hnp.arrays(np.int64, shape, elements=ints)) / 2.0**frac
    c_shape = list(shape)
    c_shape[axis] = 1
    shifts = st.integers(-shift, shift) | st.sampled_from([10**8, -(10**8)])
    if dtype == np.float32:
        shifts = st.integers(-shift, shift)
    C = draw(hnp.arrays(np.int64, tuple(c_shape), elements=shifts))
    return Z.astype(dtype), (Z + C).astype(dtype), axis


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_shift_invariance_exact(name, data):
    # Check that adding a constant to a slice leaves its output bit for bit
    # unchanged when the shifted scores are exact: the kernels shift by the
    # slice maximum first, so they see the same numbers.
    f, _ = data.draw(_maps(name))
    Z, Zc, axis = data.draw(grid_scores())
    assert_array_equal(np.diff(Zc - Z, axis=axis), 0)
    assert_array_equal(f(Zc, axis=axis), f(Z, axis=axis))


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect"])
@settings(max_examples=100, deadline=None)
@given(data=st.data(), offset=st.sampled_from([1e8, -1e8, 12345.678, 1e-3]))
def test_shift_invariance_rounding(name, data, offset):
    # Check that adding a constant c changes the output by no more than the
    # rounding of z + c allows. For alpha <= 2 the map is 2-Lipschitz in the
    # max norm (its Jacobian is diag(s) - s s^T / sum(s) with 0 <= s <= 1),
    # so |f(fl(z + c)) - f(z)| <= 2 max |fl(z + c) - (z + c)| + rounding.
    f, _ = data.draw(_maps(name, max_alpha=2.0))
    Z, axis = data.draw(scores(max_dims=3, masked=False))
    with np.errstate(over="ignore"):
        Zc = Z + Z.dtype.type(offset)
    if not np.isfinite(Zc).all():
        return
    eps = np.finfo(Z.dtype).eps
    # The rounding error of z + c is at most half an ulp of the largest sum.
    error = 0.5 * float(np.spacing(np.abs(Zc).max()))
    k = Z.shape[axis]
    atol = 2 * error + 16 * eps * k
    assert_allclose(f(Zc, axis=axis), f(Z, axis=axis), rtol=0, atol=atol)


@pytest.mark.parametrize("name", ["entmax15", "sparsemax", "bisect"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_permutation_equivariance(name, data):
    # Check that permuting a slice permutes its output. Only the order of the
    # sums changes, a few ulps per sum; alpha <= 2 keeps the map Lipschitz so
    # the output moves by as little (above 2, p ** (1 / (alpha - 1)) is not
    # Lipschitz at the edge of the support).
    f, _ = data.draw(_maps(name, max_alpha=2.0))
    Z, axis = data.draw(scores(max_dims=3))
    perm = data.draw(st.permutations(range(Z.shape[axis])))
    P = f(Z, axis=axis)
    Pp = f(np.take(Z, perm, axis=axis), axis=axis)
    k = Z.shape[axis]
    atol = 16 * np.finfo(Z.dtype).eps * k
    assert_allclose(Pp, np.take(P, perm, axis=axis), rtol=0, atol=atol)


@pytest.mark.parametrize("name", ["entmax15", "sparsemax"])
@settings(max_examples=100, deadline=None)
@given(data=st.data())
def test_fast_paths_match_oracle(name, data):
    # Check entmax15 and sparsemax against the sort-based oracles
    # (Peters et al. 2019 Alg. 2; Martins & Astudillo 2016 Alg. 1) and
    # against entmax_bisect, on arbitrary arrays with ties and masks.
    f, alpha = FAST[name]
    oracle = entmax15_sort if alpha == 1.5 else sparsemax_sort
    Z, axis = data.draw(scores(max_dims=3, max_side=10))
    P = f(Z, axis=axis)
    # The oracle may overflow squaring scores far outside the support.
    with np.errstate(all="ignore"):
        expected = oracle(Z, axis=axis)
    tol = 1e-12 if Z.dtype == np.float64 else 1e-6
    assert_allclose(P, expected, rtol=tol, atol=tol)
    assert_allclose(P, entmax_bisect(Z, alpha, axis), rtol=tol, atol=tol)
