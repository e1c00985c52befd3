"""The engine's fast paths against its straightforward path and an oracle.

``statistics`` takes the route ``statistics_route`` names (softmax:
``block_stats.softmax_stats``, one GEMM against centres scaled by ``1 / T``,
far scores skipped, normalisation folded into the weights; entmax-1.5:
one-hot blocks as Lloyd statistics). ``route="general"`` forces the straightforward path
(unscaled distances, every score exponentiated, normalised responsibilities),
so the two can be compared on the same inputs; the oracle of
``tests/_rbf_oracle.py`` (explicit differences, float64 logsumexp) is the
independent check of both.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _rbf_oracle import dense64, distortion, responsibilities, sq_distances
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import logsumexp, softmax

from skrbfkmeans._engine import block_stats
from skrbfkmeans._engine.blocks import PreparedCenters, ScaledCenters, temperature
from skrbfkmeans._engine.passes import (
    data_offset,
    free_energy_moments,
    squared_norms,
    statistics,
    statistics_route,
)


def _inputs(kind, dtype, rng):
    """Data and centres that exercise one situation of the fast path."""
    if kind == "random":
        X = rng.standard_normal((500, 5))
        C = rng.standard_normal((7, 5))
    elif kind == "many-centres":
        # More centres than the column-wise maximum handles (row-wise argmax).
        X = rng.standard_normal((600, 3))
        C = np.vstack([rng.standard_normal((39, 3)), X[:1]])
    elif kind == "ties":
        # Integer grid points and duplicated centres: many exact ties
        # between two or more centres, including at the row maximum.
        X = rng.integers(-2, 3, size=(400, 2)).astype(float)
        C = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 0.0], [-1.0, 0.0], [0, 1.0]])
    elif kind == "mixed":
        # Tight far clusters (one-hot rows) and points half-way between two
        # centres (dense rows) in one block.
        C = np.array([[0.0, 0.0], [40.0, 0.0], [0.0, 40.0], [20.0, 0.0]])
        tight = C[rng.integers(0, 4, 300)] + 0.01 * rng.standard_normal((300, 2))
        between = np.array([10.0, 0.0]) + rng.standard_normal((200, 2))
        X = np.vstack([tight, between])
    elif kind == "few-dense":
        # Mostly one-hot rows with a few rows near several centres and exact
        # ties: the one-hot rows go through the sparse product, the others
        # through the dense weights, in the same block.
        C = np.array([[0.0, 0.0], [40.0, 0.0], [0.0, 40.0], [20.0, 0.0]])
        tight = C[rng.integers(0, 4, 450)] + 0.01 * rng.standard_normal((450, 2))
        between = np.array([10.0, 0.0]) + rng.standard_normal((40, 2))
        tied = np.tile([[10.0, 0.0]], (10, 1))
        X = np.vstack([tight, between, tied])
    elif kind == "offset":
        # A large common offset: the centring must keep float32 accurate.
        X = 1e4 + rng.standard_normal((300, 3))
        C = 1e4 + rng.standard_normal((6, 3))
    elif kind == "all-equal":
        X = np.ones((50, 3))
        C = np.array([[1.0, 1.0, 1.0], [2.0, 1.0, 1.0], [1.0, 1.0, 1.0]])
    return X.astype(dtype), C.astype(dtype)


def _both_paths(X, w, C, sigma, prior=None):
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    fast = statistics(X, w, C, sigma, "softmax", offset, x_sq, prior=prior)
    slow = statistics(
        X, w, C, sigma, "softmax", offset, x_sq, prior=prior, route="general"
    )
    return fast, slow, offset


def _oracle_stats(X, w, C, sigma, prior=None):
    d = sq_distances(X, C)
    scores = -d / (2.0 * float(sigma) ** 2)
    if prior is not None:
        with np.errstate(divide="ignore"):
            scores = scores + np.log(prior)
    R = softmax(scores, axis=1)
    Xd = dense64(X)
    return w @ R, (R * w[:, None]).T @ Xd, float(w @ d.min(axis=1))


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize(
    "kind",
    ["random", "many-centres", "ties", "mixed", "few-dense", "offset", "all-equal"],
)
@pytest.mark.parametrize("scale", [0.05, 0.5, 3.0, 100.0], ids=lambda s: f"sigma{s}")
def test_fast_softmax_statistics_match_the_straightforward_path(
    kind, dtype, scale, global_random_seed
):
    # Check that the fast softmax statistics equal the straightforward path
    # and the float64 oracle to rounding, on one-hot, dense and mixed rows.
    rng = np.random.default_rng(global_random_seed)
    X, C = _inputs(kind, dtype, rng)
    w = rng.uniform(0.5, 2.0, X.shape[0]).astype(dtype)
    fast, slow, offset = _both_paths(X, w, C, scale)
    N_o, S_o, inertia_o = _oracle_stats(X, w, C, scale)

    eps = np.finfo(dtype).eps
    W = float(w.sum())
    x_scale = float(np.abs(dense64(X)).max()) + 1.0
    # Every path rounds the scores to an absolute error of a few eps times
    # their size |z| <= (2 |x - o| |mu - o| + |mu - o|^2) / T, and a
    # responsibility moves by at most |dz| / 2: statistics are sums of W
    # such terms (times |x| for S).
    x_c = np.sqrt(((dense64(X) - offset) ** 2).sum(axis=1).max())
    c_c = np.sqrt(((C.astype(np.float64) - offset) ** 2).sum(axis=1).max())
    z_scale = (2 * x_c * c_c + c_c**2) / (2.0 * scale**2)
    rtol = 200 * eps
    atol = (rtol + 16 * eps * z_scale) * W
    assert_allclose(fast.N, slow.N, rtol=rtol, atol=atol)
    assert_allclose(fast.N, N_o, rtol=rtol, atol=atol)
    # S is accumulated in centred coordinates.
    S_fast = fast.S + np.outer(fast.N, offset)
    S_slow = slow.S + np.outer(slow.N, offset)
    assert_allclose(S_fast, S_slow, rtol=rtol, atol=atol * x_scale)
    assert_allclose(S_fast, S_o, rtol=rtol, atol=atol * x_scale)
    # The inertia cancels ||x||^2 against 2 x.mu (centred coordinates):
    # absolute rounding on the scale of the centred squared norms.
    assert_allclose(fast.inertia, slow.inertia, atol=rtol * W * (x_c + c_c) ** 2)
    assert_allclose(fast.inertia, inertia_o, atol=rtol * W * (x_c + c_c) ** 2)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
def test_fast_path_with_prior_matches(dtype, global_random_seed):
    # Check that mass-constrained statistics (the annealing's E-step) agree,
    # including a centre of zero prior mass, which must receive nothing.
    rng = np.random.default_rng(global_random_seed)
    X, C = _inputs("mixed", dtype, rng)
    w = np.ones(X.shape[0], dtype=dtype)
    prior = np.array([0.5, 0.3, 0.2, 0.0])
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    kw = dict(prior=prior, inertia=False)
    fast = statistics(X, w, C, 2.0, "softmax", offset, x_sq, **kw)
    slow = statistics(X, w, C, 2.0, "softmax", offset, x_sq, route="general", **kw)
    N_o, S_o, _ = _oracle_stats(X, w, C, 2.0, prior)
    rtol = 200 * np.finfo(dtype).eps
    assert fast.N[3] == 0.0 and slow.N[3] == 0.0
    assert_allclose(fast.N, slow.N, rtol=rtol, atol=rtol * X.shape[0])
    assert_allclose(fast.N, N_o, rtol=rtol, atol=rtol * X.shape[0])
    assert_allclose(
        fast.S + np.outer(fast.N, offset), S_o, rtol=rtol, atol=rtol * 40 * X.shape[0]
    )


def test_fast_path_sparse_input_matches_dense():
    # Check that CSR input takes the fast path to the same statistics.
    rng = np.random.default_rng(0)
    X = sp.random(300, 6, density=0.4, random_state=0, format="csr")
    C = rng.standard_normal((4, 6)) * 0.3
    w = np.ones(300)
    fast, slow, _ = _both_paths(X, w, C, 0.4)
    dense, _, offset = _both_paths(X.toarray(), w, C, 0.4)
    assert_allclose(fast.N, slow.N, rtol=1e-12, atol=1e-12)
    assert_allclose(fast.S, slow.S, rtol=1e-12, atol=1e-12)
    assert_allclose(fast.S, dense.S + np.outer(dense.N, offset), atol=1e-11)


@pytest.mark.parametrize("sparse", [False, True])
def test_centre_far_from_every_row_gets_nothing(sparse):
    # Check that a centre whose scores are all far below their rows' maxima
    # receives exactly no mass on the fast path and keeps its place, dense
    # rows (the clamped dense route: most scores are near) and CSR alike;
    # the clamp's exp(-cut) per row once added up to a mass of about 1e-15
    # whose "mean" (the mean of every row) moved the centre far from any
    # row: a sparse fit then differed from the dense one (seed 21615 of
    # test_equivariance). The exact mass is below 1e-20: the straightforward
    # path agrees with 0 to the working precision of N.
    rng = np.random.default_rng(0)
    # Rows about 5 +- 1 on the first axis: between the first two centres,
    # scores 50 to 90 below their maxima at the third (the cut is 38).
    X = 0.3 * rng.standard_normal((300, 3))
    X[:, 0] += 5.0
    X_in = sp.csr_array(X) if sparse else X
    C = np.array([[4.5, 0.0, 0.0], [5.5, 0.0, 0.0], [-2.0, 0.0, 0.0]])
    w = np.ones(300)
    offset = data_offset(X_in, w)
    x_sq = squared_norms(X_in, offset)
    fast = statistics(X_in, w, C, 0.6, "softmax", offset, x_sq)
    slow = statistics(X_in, w, C, 0.6, "softmax", offset, x_sq, route="general")
    assert fast.N[2] == 0.0 and not fast.S[2].any()
    assert 0.0 < slow.N[2] < 1e-20
    assert_allclose(fast.N, slow.N, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("sigma", [1e-300, 1e-150, 1e150, 1e300])
def test_scaled_centres_refused_where_they_would_overflow(sigma):
    # Check that the scaled scores are used only where they stay finite, and
    # that either way the statistics are finite and equal the other path.
    rng = np.random.default_rng(0)
    X, C = _inputs("random", np.float64, rng)
    w = np.ones(X.shape[0])
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    T, _ = temperature(sigma, X.dtype)
    sc = ScaledCenters(PreparedCenters(C, offset, X.dtype), T, None, x_sq.max())
    # Scores of size |x| |mu| / T with |x|, |mu| ~ 3: about 1e301 at
    # sigma=1e-150 (representable), beyond the float64 range at 1e-300.
    assert sc.usable == (sigma > 1e-200)
    if sc.usable:
        assert np.all(np.isfinite(sc.A)) and np.all(np.isfinite(sc.bias))
    fast, slow, _ = _both_paths(X, w, C, sigma)
    assert np.all(np.isfinite(fast.N)) and np.all(np.isfinite(fast.S))
    assert_allclose(fast.N, slow.N, rtol=1e-12, atol=1e-9)
    assert_allclose(fast.S, slow.S, rtol=1e-12, atol=1e-9)


def test_statistics_only_pass_takes_the_fast_path(monkeypatch):
    # Check that the comparisons above compare two different code paths:
    # statistics alone go through softmax_weights, the gradient does not.
    import skrbfkmeans._engine.block_stats as block_stats

    calls = []
    original = block_stats.softmax_weights

    def spy(*args, **kwargs):
        calls.append(1)
        return original(*args, **kwargs)

    gathered = []
    original_sparse = block_stats._sparse_stats

    def spy_sparse(*args):
        gathered.append(np.count_nonzero(args[4], axis=1))  # near per row
        return original_sparse(*args)

    monkeypatch.setattr(block_stats, "softmax_weights", spy)
    monkeypatch.setattr(block_stats, "_sparse_stats", spy_sparse)
    rng = np.random.default_rng(0)
    X, C = _inputs("random", np.float64, rng)
    w = np.ones(X.shape[0])
    _both_paths(X, w, C, 1.0)
    assert len(calls) == 1 and gathered == []  # one dense block, fast path only
    X, C = _inputs("few-dense", np.float64, rng)
    _both_paths(X, np.ones(X.shape[0]), C, 1.0)
    # One mostly one-hot block, gathered: one-hot rows and rows with
    # several near scores (the 50 between centres) in the same product.
    (near,) = gathered
    assert len(calls) == 1 and np.sum(near == 1) > 400 and np.sum(near > 1) >= 40


@pytest.mark.parametrize(
    "dense_first", [True, False], ids=["dense-first", "one-hot-first"]
)
def test_fast_path_across_blocks_of_both_kinds(dense_first):
    # Check that a pass over many small blocks, some mostly one-hot and some
    # dense, equals the straightforward path (after a dense block the pass
    # stops testing for gathering).
    from sklearn import config_context

    rng = np.random.default_rng(0)
    C = np.array([[0.0, 0.0], [40.0, 0.0], [0.0, 40.0], [20.0, 0.0]])
    tight = C[rng.integers(0, 4, 600)] + 0.01 * rng.standard_normal((600, 2))
    between = np.array([10.0, 0.0]) + 0.1 * rng.standard_normal((600, 2))
    parts = [between, tight] if dense_first else [tight, between]
    X = np.vstack(parts)
    w = rng.uniform(0.5, 2.0, X.shape[0])
    # About 70 rows per block.
    with config_context(working_memory=0.01):
        fast, slow, _ = _both_paths(X, w, C, 1.0)
    assert_allclose(fast.N, slow.N, rtol=1e-13, atol=1e-10)
    assert_allclose(fast.S, slow.S, rtol=1e-13, atol=1e-9)
    assert_allclose(fast.inertia, slow.inertia, rtol=1e-12)


@pytest.mark.parametrize("dtype", [np.float64, np.float32], ids=["f64", "f32"])
@pytest.mark.parametrize("kind", ["random", "ties", "few-dense", "offset", "all-equal"])
@pytest.mark.parametrize("sigma", [0.0, 1e-3, 0.05, 1.0])
def test_one_hot_entmax_blocks_match_the_threshold_search(
    kind, dtype, sigma, global_random_seed
):
    # Check that entmax-1.5 statistics of blocks whose rows are all one-hot
    # (Lloyd's statistics, the sigma=0 case is Lloyd itself) equal those of
    # the threshold search, and that blocks with ties or near second
    # centres still get the threshold search.
    rng = np.random.default_rng(global_random_seed)
    X, C = _inputs(kind, dtype, rng)
    w = rng.uniform(0.5, 2.0, X.shape[0]).astype(dtype)
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    args = (X, w, C, sigma, "entmax15", offset, x_sq)
    fast = statistics(*args)
    slow = statistics(*args, route="general")
    eps = np.finfo(dtype).eps
    rtol = 200 * eps
    W = float(w.sum())
    x_scale = float(np.abs(dense64(X)).max()) + 1.0
    assert_allclose(fast.N, slow.N, rtol=rtol, atol=rtol * W)
    assert_allclose(fast.S, slow.S, rtol=rtol, atol=rtol * W * x_scale)
    # Both routes share the distances; the oracle checks them (and, at a
    # positive width, the statistics): the same rounding model as above,
    # scores rounded to eps |z| with |z| <= (2 |x - o| |mu - o| + |mu - o|^2) / T.
    x_c = np.sqrt(((dense64(X) - offset) ** 2).sum(axis=1).max())
    c_c = np.sqrt(((C.astype(np.float64) - offset) ** 2).sum(axis=1).max())
    assert_allclose(
        fast.inertia, distortion(X, C, w), rtol=rtol, atol=rtol * W * (x_c + c_c) ** 2
    )
    if sigma > 0:
        R = responsibilities(X, C, sigma, "entmax15")
        z_scale = (2 * x_c * c_c + c_c**2) / (2.0 * sigma**2)
        atol = (rtol + 16 * eps * z_scale) * W
        assert_allclose(fast.N, w @ R, rtol=rtol, atol=atol)
        S_o = (R * w[:, None]).T @ dense64(X)
        assert_allclose(
            fast.S + np.outer(fast.N, offset), S_o, rtol=rtol, atol=atol * x_scale
        )


def test_hard_blocks_taken_only_when_every_row_is_one_hot(monkeypatch):
    # Check which blocks skip the threshold search: all one-hot rows do, a
    # block with one exact tie does not.
    import skrbfkmeans._engine.passes as engine

    taken = []
    original = engine.hard_stats

    def spy(*args):
        result = original(*args)
        taken.append(result is not None)
        return result

    monkeypatch.setattr(engine, "hard_stats", spy)
    C = np.array([[0.0, 0.0], [4.0, 0.0]])
    X = np.array([[0.1, 0.0], [3.9, 0.0], [-1.0, 0.5]])
    # No centring, so that the tie below is exact in floating point.
    offset = np.zeros(2)
    statistics(X, np.ones(3), C, 0.0, "entmax15", offset, squared_norms(X, offset))
    tied = np.vstack([X, [[2.0, 1.0]]])  # equidistant from both centres
    x_sq = squared_norms(tied, offset)
    res = statistics(tied, np.ones(4), C, 0.0, "entmax15", offset, x_sq)
    assert taken == [True, False]
    # The tie is split evenly, as entmax-1.5 does at any width.
    assert_allclose(res.N, [2.5, 1.5])


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("d", [3, 20], ids=lambda d: f"d{d}")
@pytest.mark.parametrize("sigma", [0.05, 1.0, 30.0])
@pytest.mark.parametrize("k", [5, 60], ids=lambda k: f"k{k}")
def test_second_moments_match_explicit_sums(d, sigma, sparse, k, global_random_seed):
    # Check M_j = sum_i w_i r_ij x_i x_i^T (centred coordinates) against the
    # explicit sum over the oracle's responsibilities, for the outer-product
    # route (few features) and the gathered routes (16 features and more:
    # one GEMM per centre with 5 centres, one sparse product with 60 centres
    # of about 5 rows each at the small widths), with one-hot, mixed and
    # dense rows.
    rng = np.random.default_rng(global_random_seed)
    C = 3.0 * rng.standard_normal((k, d))
    X = C[rng.integers(0, k, 300)] + rng.standard_normal((300, d))
    w = rng.uniform(0.5, 2.0, 300)
    prior = rng.dirichlet(np.ones(k))
    offset = data_offset(X, w)
    Xin = sp.csr_matrix(X) if sparse else X
    if sparse:
        offset = np.zeros(d)
    x_sq = squared_norms(Xin, offset)
    res = free_energy_moments(Xin, w, C, sigma, "softmax", offset, x_sq, prior=prior)
    scores = -sq_distances(X, C) / (2 * sigma**2) + np.log(prior)
    R = softmax(scores, axis=1)
    Y = X - offset
    expected = np.einsum("ij,ia,ib->jab", R * w[:, None], Y, Y)
    scale = float(np.abs(expected).max())
    assert_allclose(res.moments, expected, rtol=1e-10, atol=1e-12 * scale)


@pytest.mark.parametrize("route", ["per-centre", "sparse product"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_gathered_moments_routes(route, dtype, monkeypatch, global_random_seed):
    # Both gathered routes against the explicit sum, on responsibilities with
    # one-hot rows, rows shared by a few centres, a centre of no weight,
    # exact zeros next to subnormal weights and a zero-weight row.
    rng = np.random.default_rng(global_random_seed)
    n, k, d = 200, 12, 17
    R = np.zeros((n, k), dtype=dtype)
    R[np.arange(n), rng.integers(0, k - 1, n)] = 1.0
    shared = rng.random((n, k)) < 0.1
    R[shared] = rng.random(np.count_nonzero(shared))
    R[:, k - 1] = 0.0
    R[:5, 0] = np.finfo(dtype).smallest_subnormal
    R /= R.sum(axis=1, keepdims=True)
    w = rng.uniform(0.0, 2.0, n)
    w[7] = 0.0
    X = rng.standard_normal((n, d)).astype(dtype) * 10.0 ** rng.integers(-3, 4, d)
    R_in, X_in, w_in = R.copy(), X.copy(), w.copy()
    threshold = 0 if route == "per-centre" else np.inf
    monkeypatch.setattr(block_stats, "_SPARSE_PER_CENTRE", threshold)
    M = np.zeros((k, d, d))
    block_stats.accumulate_moments(M, X, w, R)
    X64 = X.astype(np.float64)
    expected = np.einsum("ij,ia,ib->jab", R.astype(np.float64) * w[:, None], X64, X64)
    scale = np.abs(expected).max(axis=(1, 2), keepdims=True) + 1e-300
    assert_allclose(M / scale, expected / scale, rtol=0, atol=1e-12)
    assert not M[k - 1].any()
    for before, after in [(R_in, R), (X_in, X), (w_in, w)]:
        assert_array_equal(before, after)


@pytest.mark.parametrize(
    "activation, prior, inertia, route",
    [
        ("softmax", None, True, "scaled-softmax"),
        ("softmax", [0.5, 0.5], False, "scaled-softmax"),
        ("softmax", [0.5, 0.5], True, "general"),
        ("entmax15", None, True, "one-hot-blocks"),
    ],
)
def test_statistics_route_names(activation, prior, inertia, route, monkeypatch):
    # Check that the named route is the one statistics takes: the softmax
    # route runs _scaled_softmax_block exactly when it is named.
    import skrbfkmeans._engine.passes as engine

    assert statistics_route(activation, prior=prior, inertia=inertia) == route
    calls = []
    real = engine._scaled_softmax_block
    monkeypatch.setattr(
        engine, "_scaled_softmax_block", lambda *a: calls.append(1) or real(*a)
    )
    rng = np.random.default_rng(0)
    X, C = rng.standard_normal((50, 2)), rng.standard_normal((2, 2))
    w = np.ones(50)
    offset = data_offset(X, w)
    args = (X, w, C, 1.0, activation, offset, squared_norms(X, offset))
    statistics(*args, prior=prior, inertia=inertia)
    assert bool(calls) == (route == "scaled-softmax")
    calls.clear()
    statistics(*args, prior=prior, inertia=inertia, route="general")
    assert not calls


@pytest.mark.parametrize("sums", ["dense one-hot", "sparse", "blocks"])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_assignment_sums_match_explicit_sums(
    sums, dtype, monkeypatch, global_random_seed
):
    # Check Lloyd's pass against explicit loops in float64: each row's
    # nearest centre by explicit differences (where its margin is clear of
    # rounding), its partial distance, and every cluster's weight and
    # centred weighted sum, on each route of the sums (small data: a dense
    # one-hot product or a sparse one, by DENSE_SUMS; other data: blocks).
    from skrbfkmeans._engine import assign

    if sums == "dense one-hot":
        monkeypatch.setattr(assign, "DENSE_SUMS", np.inf)
    elif sums == "sparse":
        monkeypatch.setattr(assign, "DENSE_SUMS", 0)
    else:
        monkeypatch.setattr(assign, "SMALL_PASS", 0)
    rng = np.random.default_rng(global_random_seed)
    X = (rng.standard_normal((400, 6)) * 3 + 50).astype(dtype)
    C = X[rng.choice(400, 9, replace=False)] + rng.normal(size=(9, 6)).astype(dtype)
    w = rng.integers(0, 4, 400).astype(dtype)
    offset = data_offset(X, w)
    Xc = np.asarray(X - offset)
    labels, e_own, N, S = assign.assignment_sums(X, w, C, offset, centred=lambda: Xc)
    D = ((X.astype(np.float64)[:, None, :] - C.astype(np.float64)[None]) ** 2).sum(2)
    order = np.sort(D, axis=1)
    clear = order[:, 1] - order[:, 0] > 1e-3 * order[:, 1]
    np.testing.assert_array_equal(labels[clear], D.argmin(axis=1)[clear])
    x_sq = ((X.astype(np.float64) - offset) ** 2).sum(1)
    own = D[np.arange(400), labels]
    np.testing.assert_allclose(
        x_sq + e_own, own, rtol=1e-4 if dtype == np.float32 else 1e-9, atol=1e-2
    )
    for j in range(9):
        rows = labels == j
        wj = w[rows].astype(np.float64)
        assert N[j] == pytest.approx(wj.sum(), rel=1e-12)
        expected = wj @ (X[rows].astype(np.float64) - offset)
        np.testing.assert_allclose(
            S[j], expected, rtol=1e-9, atol=1e-9 * np.abs(Xc).sum()
        )
    assert N.dtype == S.dtype == np.float64


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sigma", [0.3, 3.0, 30.0])
def test_statistics_from_the_rows_augmented_copy_are_the_same_bits(
    dtype, sigma, monkeypatch, global_random_seed
):
    # Check that the scaled-softmax pass gives the same sums to the bit from
    # the rows' augmented copy (made once, MemoryRows.augmented) as from
    # blocks made pass by pass, at widths where the blocks take the sparse
    # and the dense route (which multiplies the rows by the weights: into a
    # buffer, so that the copy stays as it was), over several blocks; and
    # that sparse rows or rows beyond AUGMENTED_BYTES have no copy.
    from skrbfkmeans import _rows
    from skrbfkmeans._engine import blocks

    monkeypatch.setattr(blocks, "_TARGET_BLOCK_BYTES", 1 << 12)
    rng = np.random.default_rng(global_random_seed)
    X = (rng.standard_normal((700, 4)) * 3 + 20).astype(dtype)
    C = X[rng.choice(700, 6, replace=False)]
    w = rng.uniform(0.5, 2.0, 700)
    rows = _rows.MemoryRows(X, w, data_offset(X, w))
    plain = statistics(X, w, C, sigma, "softmax", rows.offset, rows.x_sq)
    copy = rows.augmented(C.dtype).copy()
    for _ in range(2):  # the second pass reads the copy the first one left
        res = rows.stats(C, sigma, "softmax")
        np.testing.assert_array_equal(res.N, plain.N)
        np.testing.assert_array_equal(res.S, plain.S)
        assert res.inertia == plain.inertia
    np.testing.assert_array_equal(rows.augmented(C.dtype), copy)
    expected = np.hstack([X - rows.offset, np.ones((700, 1))]).astype(C.dtype)
    np.testing.assert_array_equal(copy, expected)
    assert _rows.MemoryRows(sp.csr_matrix(X), w, rows.offset).augmented(X.dtype) is None
    monkeypatch.setattr(_rows, "AUGMENTED_BYTES", 1000)
    assert _rows.MemoryRows(X, w, rows.offset).augmented(X.dtype) is None


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_nearest_from_the_centred_view_is_the_same_bits(
    dtype, monkeypatch, global_random_seed
):
    # Check that the nearest-centre pass from the rows' centred view (the
    # augmented copy's first columns, MemoryRows.centred_view) gives the
    # labels and partial distances of the pass that centres each block
    # itself, over several blocks, for all rows and for a subset, with
    # centres in the rows' dtype and in float64 (the blocks are centred in
    # the centres' dtype: the view must be the copy in that dtype); that
    # the rows and their copy are left as they were; and that asking for
    # the view makes no copy (None until a statistics pass made one).
    from skrbfkmeans import _rows
    from skrbfkmeans._engine import assign, blocks

    monkeypatch.setattr(blocks, "_TARGET_BLOCK_BYTES", 1 << 12)
    rng = np.random.default_rng(global_random_seed)
    X = (rng.standard_normal((900, 5)) * 700 + 1e3).astype(dtype)
    C = X[rng.choice(900, 7, replace=False)] + rng.normal(size=(7, 5)).astype(dtype)
    # A float64 offset: float32 rows are then centred in the centres' dtype.
    offset = data_offset(X, np.ones(900)).astype(np.float64)
    rows = _rows.MemoryRows(X, np.ones(900), offset)
    X_before = X.copy()
    assert rows.centred_view(X.dtype) is None
    rows.stats(C, 1.0, "softmax")  # the statistics pass makes the copy
    view = rows.centred_view(X.dtype)
    assert not view.flags.owndata and view.base is rows.augmented(X.dtype)
    copy = view.copy()
    np.testing.assert_array_equal(view, (X - rows.offset).astype(X.dtype))
    subset = np.sort(rng.choice(900, 300, replace=False))
    for idx in (slice(None), subset):
        plain = assign.nearest(X[idx], C, rows.offset, second=True)
        got = assign.nearest(view[idx], C, rows.offset, second=True, centred=True)
        for a, b in zip(got, plain):
            np.testing.assert_array_equal(a, b)
    C64 = C.astype(np.float64) + 0.1
    rows.stats(C64, 1.0, "softmax")  # a copy in float64 too
    for idx in (None, subset):
        plain = assign.nearest(X[slice(None) if idx is None else idx], C64,
                               rows.offset, second=True)  # fmt: skip
        got = rows.nearest(C64, idx, second=True)
        for a, b in zip(got, plain):
            np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(X, X_before)
    np.testing.assert_array_equal(view, copy)
    monkeypatch.setattr(_rows, "AUGMENTED_BYTES", 1000)
    few = _rows.MemoryRows(X, np.ones(900), rows.offset)
    few.stats(C, 1.0, "softmax")
    assert few.centred_view(X.dtype) is None


def _softmax_oracle(X, w, C, sigma, prior, offset):
    """Free energy, N, S and second moments of softmax with a prior, explicitly.

    ``F_i = -T log sum_j p_j exp(-d_ij / T)`` by scipy's logsumexp, the
    responsibilities by its softmax; S and the moments about ``offset``.
    """
    d = sq_distances(X, C)
    T = 2.0 * sigma**2
    with np.errstate(divide="ignore"):
        scores = -d / T + np.log(prior)
    F = -T * logsumexp(scores, axis=1)
    WR = softmax(scores, axis=1) * w[:, None]
    Y = dense64(X) - offset
    M = np.einsum("ij,ia,ib->jab", WR, Y, Y)
    return float(w @ F), WR.sum(axis=0), WR.T @ Y, M


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("prior_kind", ["uniform", "spread", "dead"])
def test_gathered_softmax_energy_matches_oracle(
    prior_kind, sparse, dtype, monkeypatch, global_random_seed
):
    # Check the free energy, N, S and second moments of a pass whose blocks
    # take the gathered softmax route (most scores far below their row's
    # largest: 40 tight clusters) against explicit float64 sums (scipy's
    # logsumexp and softmax): without a prior; with one spread over twelve
    # orders of magnitude, where rows sit at a centre of tiny mass next to a
    # heavy one (the heavy one's score is near at a gap where, with equal
    # masses, it would be far). With groups of zero mass, which could be a
    # row's nearest, no gap is safe: the general route must run.
    from skrbfkmeans._engine import passes

    rng = np.random.default_rng(global_random_seed)
    k, d = 40, 3
    C = 20.0 * rng.standard_normal((k, d))
    X = C[rng.integers(0, k, 600)] + 0.3 * rng.standard_normal((600, d))
    prior = np.full(k, 1.0 / k)
    if prior_kind == "spread":
        prior = 10.0 ** rng.uniform(-12, 0, k)
        prior[0], prior[1] = 1e-12, 1.0
        C[1] = C[0] + [12.0, 0.0, 0.0]
        X[:20] = C[0] + 0.05 * rng.standard_normal((20, d))
    elif prior_kind == "dead":
        # Five groups of no mass, away from the rows.
        C = np.vstack([C, 200.0 + rng.standard_normal((5, d))])
        prior = np.concatenate([rng.uniform(0.5, 1.0, k), np.zeros(5)])
    prior = prior / prior.sum()
    w = rng.uniform(0.5, 2.0, X.shape[0])
    X, C = X.astype(dtype), C.astype(dtype)
    Xin = sp.csr_matrix(X) if sparse else X
    offset = np.zeros(d) if sparse else data_offset(X, w)
    x_sq = squared_norms(Xin, offset)
    sigma = 1.0
    original, taken = passes._Near, []

    def spy(*args):
        taken.append(True)
        return original(*args)

    monkeypatch.setattr(passes, "_Near", spy)
    given = None if prior_kind == "uniform" else prior
    res = free_energy_moments(Xin, w, C, sigma, "softmax", offset, x_sq, prior=given)
    assert bool(taken) == (prior_kind != "dead")
    F, N, S, M = _softmax_oracle(X, w, C, sigma, prior, offset)
    rtol = 1e-5 if dtype == np.float32 else 1e-10
    assert_allclose(res.objective, F, rtol=rtol)
    assert_allclose(res.N, N, rtol=rtol, atol=rtol * w.sum() / N.size)
    assert_allclose(res.S, S, rtol=rtol, atol=rtol * np.abs(S).max())
    assert_allclose(res.moments, M, rtol=rtol, atol=rtol * np.abs(M).max())


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(1, 30),
    d=st.sampled_from([1, 2, 5, 17]),
    log_sigma=st.floats(-3.0, 1.0),
    prior_decades=st.sampled_from([None, 0.0, 3.0, 9.0]),
    dtype=st.sampled_from([np.float64, np.float32]),
)
def test_gathered_free_energy_matches_oracle(
    seed, k, d, log_sigma, prior_decades, dtype
):
    # Check the gathered route of a softmax free-energy pass, forced on
    # every block where the gap allows it, against explicit float64 sums
    # (scipy's logsumexp and softmax of the rounded inputs): objective, N, S
    # and second moments, on blobs whose width runs from far below their
    # spacing to about it, with and without a prior (up to nine decades:
    # there the general route's float32 weights lose half a percent of a
    # light group's mass, which this route keeps).
    from skrbfkmeans._engine import passes

    rng = np.random.default_rng(seed)
    C = 5.0 * rng.standard_normal((k, d))
    X = C[rng.integers(0, k, 200)] + rng.standard_normal((200, d))
    w = rng.uniform(0.1, 2.0, 200)
    prior = np.full(k, 1.0 / k)
    if prior_decades is not None:
        prior = 10.0 ** rng.uniform(-prior_decades, 0.0, k)
        prior /= prior.sum()
    X, C = X.astype(dtype), C.astype(dtype)
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    sigma = 10.0**log_sigma
    given = None if prior_decades is None else prior
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(passes, "_SPARSE_ENERGY_DENSITY", 1.0)
        res = free_energy_moments(X, w, C, sigma, "softmax", offset, x_sq, prior=given)
    p = np.asarray(prior, dtype=dtype).astype(np.float64)
    F, N, S, M = _softmax_oracle(X, w, C, sigma, p / p.sum(), offset)
    # float32: the engine's float32 partial distances near ties move a
    # score by up to d eps32 / T, which at the smallest widths reached
    # 4.7e-4 of the moments' scale over 400 draws (float64: 2.9e-14).
    rtol = 1e-3 if dtype == np.float32 else 1e-11
    # F and S can cancel (a row at its centre, a centred sum): their scales
    # are the weighted squared norms and the weighted rows'.
    Y = np.abs(dense64(X) - offset) * w[:, None]
    assert_allclose(res.objective, F, rtol=rtol, atol=rtol * float(w @ x_sq))
    assert_allclose(res.N, N, rtol=rtol, atol=rtol * w.sum())
    assert_allclose(res.S, S, rtol=rtol, atol=rtol * float(Y.sum(axis=0).max()))
    assert_allclose(res.moments, M, rtol=rtol, atol=rtol * np.abs(M).max())
