"""The certificate's screening changes its cost, never its answer.

``_certificate.check_block`` settles most rows with one explicit distance
and triangle-inequality bounds. The oracle here is the same check with the
screening switched off (every row through the explicit distances to every
centre): on adversarial inputs (ties, duplicates, a sample alone in its
cluster, zero and extreme weights, float32, data far from the origin) the
screened check returns the same margin, sums and verdicts, and with weight
bounds given in advance it never passes a solution that the exact weights
refuse.
"""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import skrbfkmeans._certificate as certificate
from skrbfkmeans._certificate import (
    check,
    check_block,
    combine_blocks,
    explicit_fixed_point,
    shift_bound,
    single_move_block,
    weight_bounds,
)


def _unscreened(monkeypatch):
    """Switch the screening off: no row is settled by its bounds."""
    real = certificate._screen

    def settle_nothing(*args):
        a, bound, settled, lone = real(*args)
        return a, np.full_like(bound, -np.inf), np.zeros_like(settled), lone

    monkeypatch.setattr(certificate, "_screen", settle_nothing)


def _lloyd(X, w, centers, n_iter=30):
    """A few plain Lloyd steps in float64 (empty clusters keep their centre)."""
    C = np.array(centers, dtype=np.float64)
    for _ in range(n_iter):
        d = ((X[:, None, :] - C[None]) ** 2).sum(-1)
        labels = d.argmin(1)
        for j in range(C.shape[0]):
            mass = w[labels == j].sum()
            if mass > 0:
                C[j] = (w[labels == j, None] * X[labels == j]).sum(0) / mass
    return C


@st.composite
def problems(draw):
    """Rows, weights and centres: Lloyd fixed points, perturbed or not."""
    seed = draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    n = draw(st.integers(2, 300))
    d = draw(st.integers(1, 6))
    k = draw(st.integers(1, min(n, 6)))
    kind = draw(st.sampled_from(["blobs", "grid", "duplicates", "lone"]))
    if kind == "blobs":
        X = rng.normal(size=(k, d))[rng.integers(k, size=n)] * 10
        X += rng.normal(size=(n, d))
    elif kind == "grid":  # ties: integer points
        X = rng.integers(0, 4, size=(n, d)).astype(float)
    elif kind == "duplicates":
        X = np.repeat(rng.normal(size=(n // 4 + 1, d)), 4, axis=0)[:n]
    else:  # one far sample alone in its cluster
        X = rng.normal(size=(n, d))
        X[0] += 100.0
    X = X * 10.0 ** draw(st.integers(-3, 3)) + draw(st.sampled_from([0.0, 1e4]))
    w = draw(
        st.sampled_from(["ones", "uniform", "zeros", "heavy"]).map(
            lambda s: {
                "ones": np.ones(n),
                "uniform": rng.uniform(0.1, 3.0, n),
                "zeros": np.where(rng.random(n) < 0.3, 0.0, 1.0),
                "heavy": np.where(np.arange(n) == 0, 1e6, 1.0),
            }[s]
        )
    )
    if not (w > 0).any():
        w[0] = 1.0
    dtype = draw(st.sampled_from([np.float64, np.float32]))
    X = X.astype(dtype)
    start = X[rng.choice(n, size=k, replace=False)].astype(np.float64)
    centers = _lloyd(X.astype(np.float64), w, start)
    if draw(st.booleans()):
        centers += (
            rng.normal(size=centers.shape)
            * draw(st.sampled_from([1e-14, 1e-8, 1e-2]))
            * (np.abs(centers).max() + 1)
        )
    return X, w, centers.astype(dtype)


@settings(max_examples=150, deadline=None)
@given(problem=problems())
def test_screening_changes_no_answer(problem):
    X, w, centers = problem
    screened = check_block(X, w, centers)
    with pytest.MonkeyPatch.context() as mp:
        _unscreened(mp)
        exact = check_block(X, w, centers)
        exact_verdict = explicit_fixed_point(X, w, centers)
    assert screened.margin == exact.margin
    np.testing.assert_array_equal(screened.N, exact.N)
    np.testing.assert_array_equal(screened.S, exact.S)
    assert explicit_fixed_point(X, w, centers) == exact_verdict


@settings(max_examples=100, deadline=None)
@given(problem=problems(), kind=st.sampled_from(["nearest", "random", "zeros"]))
def test_guesses_change_no_answer(problem, kind):
    # Check that the caller's guess of each row's nearest centre (the
    # engine's labels) only orders the work: right, random or constant
    # guesses give the unguessed check's margin, sums and verdicts, with and
    # without weight bounds; and the guess array is left as it was.
    X, w, centers = problem
    rng = np.random.default_rng(0)
    k = centers.shape[0]
    if kind == "nearest":
        guess = ((X[:, None, :] - centers[None]) ** 2).sum(-1).argmin(1)
    elif kind == "random":
        guess = rng.integers(k, size=X.shape[0])
    else:
        guess = np.zeros(X.shape[0], dtype=np.int32)
    before = guess.copy()
    with pytest.MonkeyPatch.context() as mp:
        # A small first search, so that blocks of a few rows use it too.
        mp.setattr(certificate, "_FIRST", 2)
        _check_guesses(X, w, centers, guess)
    np.testing.assert_array_equal(guess, before)


def _check_guesses(X, w, centers, guess):
    plain = check_block(X, w, centers)
    guessed = check_block(X, w, centers, guess=guess)
    assert guessed.margin == plain.margin
    np.testing.assert_array_equal(guessed.N, plain.N)
    np.testing.assert_array_equal(guessed.S, plain.S)
    bounds = weight_bounds(plain.N, X.dtype)
    shift = shift_bound(centers, X.shape[0])
    assert (
        check_block(X, w, centers, bounds, shift, guess).moves
        == check_block(X, w, centers, bounds, shift).moves
    )
    assert explicit_fixed_point(X, w, centers, guess) == explicit_fixed_point(
        X, w, centers
    )


@settings(max_examples=150, deadline=None)
@given(problem=problems(), error=st.sampled_from([0.0, 1e-12, 1e-6, 1e-3]))
def test_weight_bounds_never_pass_what_exact_weights_refuse(problem, error):
    # Check the one-pass path: bounds from weights off by ``error`` (a
    # previous pass's rounding, or wrong) decide condition 3 only when the
    # weights found are within them, and then as the exact weights do; and
    # explicit_fixed_point with such bounds (rows in memory) gives the
    # verdicts of its two passes.
    X, w, centers = problem
    parts = check_block(X, w, centers)
    guess = parts.N * (1.0 + error)
    bounds = weight_bounds(guess, X.dtype)
    shift = shift_bound(centers, X.shape[0])
    one_pass = check_block(X, w, centers, bounds, shift)
    margin, fixed, stable, found = check(
        combine_blocks(one_pass), centers, bounds, shift
    )
    assert margin == parts.margin
    _, fixed_exact, stable_exact = explicit_fixed_point(X, w, centers)
    assert fixed == fixed_exact
    if stable is None:  # the second pass decides
        stable = fixed and single_move_block(X, w, centers, one_pass.N, found)
    assert stable == stable_exact
    assert explicit_fixed_point(X, w, centers, weights=bounds) == (
        parts.margin, fixed_exact, stable_exact,
    )  # fmt: skip


def test_screening_settles_separated_rows():
    # Check that the screening does its work: on well separated blobs
    # nearly every row is settled by two explicit distances.
    rng = np.random.default_rng(0)
    centers = np.array([[0.0, 0.0], [50.0, 0.0], [0.0, 50.0]])
    X = centers[rng.integers(3, size=3000)] + rng.normal(size=(3000, 2))
    C = _lloyd(X, np.ones(3000), centers)
    geometry = certificate._Geometry(C, certificate._safety(2))
    _, _, settled, _ = certificate._screen(
        X, np.ones(3000), C, geometry, None, None, certificate._safety(2)
    )
    assert settled.mean() > 0.99


def test_few_rows_need_every_distance(monkeypatch):
    # Check the search for the smallest margin: on blobs in 16-D (the
    # spread of dask's scale benchmark) the rows that get all k explicit
    # distances are about those whose bound is below the smallest margin
    # (237 of the first block's 16384 rows here), taken smallest bound
    # first, not the 18% that the bound from d_a alone sent there.
    rng = np.random.default_rng(0)
    centers = rng.uniform(-10, 10, size=(16, 16))
    X = centers[rng.integers(16, size=20_000)] + rng.normal(size=(20_000, 16))
    C = _lloyd(X, np.ones(X.shape[0]), centers, n_iter=20)
    rows = []
    real = certificate._explicit_distances

    def counted(Xb, centers):
        rows.append(Xb.shape[0])
        return real(Xb, centers)

    monkeypatch.setattr(certificate, "_explicit_distances", counted)
    part = check_block(X, np.ones(X.shape[0]), C)
    monkeypatch.undo()
    assert part.margin == check_block(X, np.ones(X.shape[0]), C).margin
    assert sum(rows) - C.shape[0] < 0.02 * X.shape[0]


def test_bounds_refuse_a_move_to_a_near_empty_cluster():
    # Check a case the bounds must not settle: a second cluster of tiny
    # weight, into which a sample's move lowers the distortion.
    X = np.array([[0.0], [1.0], [2.0], [10.0]])
    w = np.array([1.0, 1.0, 1.0, 1e-9])
    centers = np.array([[1.0], [10.0]])
    N = np.array([3.0, 1e-9])
    one_pass = check_block(X, w, centers, (N, N), shift_bound(centers, 4))
    assert one_pass.moves == single_move_block(X, w, centers, N, 0.0)


@pytest.mark.parametrize("gain", [-5e-3, -1e-6, 1e-6, 5e-3])
def test_heavy_sample_on_the_edge_of_a_move(gain, monkeypatch):
    # Check the screened single-move test where it is closest to its limit:
    # a sample of weight 1e6 with one light companion leaves its cluster
    # for a far, light one, with a change of ``gain`` relative to its size
    # (a settled row for the nearest-centre bounds).
    W, c = 1e6, 100.0
    join = 3.0 * c**2 / (3.0 + W)  # N_b d_b / (N_b + W), per unit weight
    t = np.sqrt(join * (1.0 - gain) * (W + 1.0))  # leave = W t^2 / (W + 1)
    X = np.array([[0.0], [t], [-c - 1.0], [-c], [-c + 1.0]])
    w = np.array([W, 1.0, 1.0, 1.0, 1.0])
    centers = np.array([[t / (W + 1.0)], [-c]])
    N = np.array([W + 1.0, 3.0])
    stable = single_move_block(X, w, centers, N, 0.0)
    assert stable == (gain > 0)
    bounds = weight_bounds(N, np.float64)
    one_pass = check_block(X, w, centers, bounds, shift_bound(centers, 5))
    assert one_pass.moves in (None, stable)
    _unscreened(monkeypatch)
    assert single_move_block(X, w, centers, N, 0.0) == stable
