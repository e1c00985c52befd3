"""Tests for kmeans_polish and AnnealedRBFKMeans(polish=...)."""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import DTYPE_IDS, DTYPES, unequal_clusters
from _rbf_oracle import distortion, least_move_change, lloyd_step
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris, make_blobs
from sklearn.exceptions import ConvergenceWarning
from sklearn.metrics import adjusted_rand_score
from sklearn.preprocessing import StandardScaler
from sklearn.utils._param_validation import InvalidParameterError

from skrbfkmeans import AnnealedRBFKMeans, kmeans_hartigan, kmeans_polish
from skrbfkmeans._polish import Splits, _two_means
from skrbfkmeans._rows import MemoryRows


@pytest.mark.parametrize("n_clusters", [2, 5, 9], ids=lambda k: f"k{k}")
def test_inertia_never_increases(n_clusters, global_random_seed):
    # Check that the polished inertia is at most the input's, whatever the
    # input centres (random rows, not a fixed point), and that the result is a
    # Lloyd fixed point whose reported inertia and labels are exact.
    rng = np.random.default_rng(global_random_seed)
    X, _ = make_blobs(300, centers=6, cluster_std=1.5, random_state=global_random_seed)
    start = X[rng.choice(X.shape[0], n_clusters, replace=False)]
    centers, labels, inertia, n_moves = kmeans_polish(X, start)
    assert inertia <= distortion(X, start) * (1 + 1e-12)
    assert_allclose(inertia, distortion(X, centers), rtol=1e-10)
    assert_allclose(lloyd_step(X, centers), centers, rtol=1e-10, atol=1e-10)
    d = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    assert_array_equal(labels, d.argmin(axis=1))
    assert labels.dtype == np.int32 and n_moves >= 0


@pytest.mark.parametrize("seed", [0, 1, 2], ids=lambda s: f"data{s}")
def test_unequal_clusters_reach_the_optimum(seed):
    # Check that on four clusters of very unequal size the polish closes the
    # gap that annealing alone leaves: the polished annealing result is at
    # least as good as the best of 100 k-means++ restarts (an upper bound of
    # the optimum), while the unpolished one is far above it.
    X = unequal_clusters(seed)
    best = KMeans(4, n_init=100, random_state=0).fit(X).inertia_
    plain = AnnealedRBFKMeans(4, polish=False).fit(X)
    polished = AnnealedRBFKMeans(4).fit(X)
    assert plain.inertia_ > 1.1 * best
    assert polished.inertia_ <= best * (1 + 1e-9)
    assert polished.n_polish_moves_ >= 1 and plain.n_polish_moves_ == 0
    _, _, inertia, n_moves = kmeans_polish(X, plain.cluster_centers_)
    assert inertia <= best * (1 + 1e-9) and n_moves >= 1


def test_optimal_solution_comes_back_unchanged(global_random_seed):
    # Check that a solution no move can improve (well-separated blobs, one
    # centre each, at their Lloyd fixed point) comes back bit for bit with
    # zero moves.
    X, _ = make_blobs(
        400,
        centers=[[0, 0], [20, 0], [0, 20], [20, 20]],
        cluster_std=1.0,
        random_state=global_random_seed,
    )
    start = KMeans(4, n_init=10, random_state=0).fit(X).cluster_centers_
    start, *_ = kmeans_polish(X, start, max_moves=0)  # the fixed point itself
    centers, _, _, n_moves = kmeans_polish(X, start)
    assert n_moves == 0
    assert_array_equal(centers, start)


def test_max_moves_bounds_the_search():
    # Check that max_moves=0 only runs Lloyd and max_moves=1 stops after one
    # accepted move.
    X = unequal_clusters(0)
    start = AnnealedRBFKMeans(4, polish=False).fit(X).cluster_centers_
    assert kmeans_polish(X, start, max_moves=0)[3] == 0
    assert kmeans_polish(X, start, max_moves=1)[3] == 1


def test_weights_equal_repetition(global_random_seed):
    # Check that integer weights give the same result as repeated rows and
    # that a zero weight is the same as removing the row.
    rng = np.random.default_rng(global_random_seed)
    X, _ = make_blobs(120, centers=5, cluster_std=2.0, random_state=global_random_seed)
    w = rng.integers(0, 4, X.shape[0])
    start = X[np.flatnonzero(w)[:4]]
    weighted = kmeans_polish(X, start, sample_weight=w)
    repeated = kmeans_polish(np.repeat(X, w, axis=0), start)
    assert_allclose(weighted[0], repeated[0], rtol=1e-10, atol=1e-10)
    assert_allclose(weighted[2], repeated[2], rtol=1e-10)
    assert weighted[3] == repeated[3]
    assert_array_equal(np.repeat(weighted[1], w), repeated[1])


def test_deterministic_and_random_state_unused():
    # Check that the search is deterministic: the same output twice and for
    # any random_state (deprecated: it warns), and the global NumPy random
    # state is not touched.
    X = unequal_clusters(1)
    start = AnnealedRBFKMeans(4, polish=False).fit(X).cluster_centers_
    state = np.random.get_state()  # noqa: NPY002 (the legacy global state)
    ref = kmeans_polish(X, start)
    for random_state in (0, 7, np.random.RandomState(3)):
        with pytest.warns(FutureWarning, match="random_state"):
            out = kmeans_polish(X, start, random_state=random_state)
        assert_array_equal(out[0], ref[0])
        assert_array_equal(out[1], ref[1])
        assert out[2:] == ref[2:]
    after = np.random.get_state()  # noqa: NPY002
    assert_array_equal(state[1], after[1])


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_sparse_and_dtypes(dtype):
    # Check that CSR input gives the dense result and that float32 stays
    # float32, close to the float64 result.
    X = unequal_clusters(2)
    start = AnnealedRBFKMeans(4, polish=False).fit(X).cluster_centers_
    dense = kmeans_polish(X.astype(dtype), start)
    sparse = kmeans_polish(sp.csr_matrix(X.astype(dtype)), start)
    assert dense[0].dtype == dtype
    rtol = 1e-4 if dtype == np.float32 else 1e-9
    assert_allclose(sparse[0], dense[0], rtol=rtol, atol=rtol)
    assert_allclose(sparse[2], dense[2], rtol=rtol)
    ref = kmeans_polish(X, start)
    assert_allclose(dense[2], ref[2], rtol=rtol)


def test_bad_input_and_input_untouched():
    # Check that bad input raises a clear error and that nothing the caller
    # passed is modified.
    X = unequal_clusters(0)
    start = X[:4].copy()
    X_copy, start_copy = X.copy(), start.copy()
    w = np.ones(X.shape[0])
    kmeans_polish(X, start, sample_weight=w)
    assert_array_equal(X, X_copy)
    assert_array_equal(start, start_copy)
    assert_array_equal(w, np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="features"):
        kmeans_polish(X, start[:, :1])
    with pytest.raises(ValueError, match="n_samples=3 should be >= n_clusters=4"):
        kmeans_polish(X[:3], start)
    with pytest.raises(ValueError, match="NaN"):
        kmeans_polish(np.where(X == X[0, 0], np.nan, X), start)
    with pytest.raises(ValueError, match="Negative values"):
        kmeans_polish(X, start, sample_weight=-w)
    with pytest.raises(ValueError, match="non-zero"):
        kmeans_polish(X, start, sample_weight=0 * w)
    with pytest.raises(InvalidParameterError, match="max_moves"):
        kmeans_polish(X, start, max_moves=-1)


def test_annealed_polish_is_certified(global_random_seed):
    # Check that after the polish the annealed result is still an exact,
    # certified Lloyd fixed point whose path ends on the polished centres.
    X = unequal_clusters(global_random_seed % 3)
    km = AnnealedRBFKMeans(4).fit(X)
    # The polish moves a centre here (annealing alone spends two on the
    # small far clusters): the checks below are about a polished result.
    assert km.n_polish_moves_ > 0
    assert km.certified_
    assert_array_equal(km.centers_path_[-1], km.cluster_centers_)
    assert_allclose(lloyd_step(X, km.cluster_centers_), km.cluster_centers_, rtol=1e-10)
    d = np.sort(((X[:, None, :] - km.cluster_centers_[None]) ** 2).sum(axis=2), axis=1)
    # The certified width is the smallest margin as the engine computes it
    # (partial distances ||mu||^2 - 2 x.mu), shrunk by 16 eps: these
    # differences agree with the explicit ones to the rounding of distances
    # of size d.max(), not of the margin.
    slack = 64 * np.finfo(X.dtype).eps * d.max()
    assert (d[:, 1] - d[:, 0]).min() >= 4 * km.sigma_**2 - slack
    assert_allclose(km.inertia_, distortion(X, km.cluster_centers_), rtol=1e-10)


def test_polish_needs_a_hard_solution():
    # Check that with a float sigma_end (a soft solution) no polish runs.
    X = unequal_clusters(0)
    km = AnnealedRBFKMeans(4, sigma_end=1.0).fit(X)
    assert km.n_polish_moves_ == 0


@pytest.mark.parametrize("k", [5, 10])
def test_annealed_fit_ends_where_neither_search_gains(k):
    # Check the final phase's fixed point: from the fitted centres, neither
    # a pass of the polish nor a single-sample move lowers the inertia (the
    # polish runs single-sample moves inside; standardised iris, where both
    # act during the fit).
    X = StandardScaler().fit_transform(load_iris().data)
    fitted = AnnealedRBFKMeans(k).fit(X)
    assert fitted.n_polish_moves_ >= 1
    _, _, inertia, n_moves = kmeans_polish(X, fitted.cluster_centers_)
    assert n_moves == 0
    assert inertia == pytest.approx(fitted.inertia_, rel=1e-12)
    assert kmeans_hartigan(X, fitted.cluster_centers_)[3] == 0


def _rounding_case():
    """Float32 rows that repeat three points, with weights 0 to 2.

    The partition's inertia is rounding noise (every cluster's rows nearly
    coincide): a search that keeps moves by a gain within rounding found a
    "lower" move and its inverse, and the annealed fit never ended.
    """
    rng = np.random.RandomState(24668)
    X = np.repeat(rng.randn(3, 3), 4, axis=0).astype(np.float32)
    w = rng.randint(0, 3, 12).astype(np.float32)
    return X, w


def test_a_gain_within_rounding_is_no_move():
    # Check that below/ceiling tell a real gain from rounding: a state is not
    # lower than itself nor than a copy whose partial distances moved by
    # less than the bound, and a state whose inertia is lower by more than
    # the bound is lower (the explicit inertias as the reference).
    from skrbfkmeans._lloyd import IncrementalLloyd
    from skrbfkmeans._rows import fit_rows

    X, _ = make_blobs(200, centers=4, random_state=0)
    rows, start = fit_rows(X, np.ones(X.shape[0]), X[[0, 60, 120, 180]])
    good = IncrementalLloyd(rows, start)
    good.run(300)
    bad = IncrementalLloyd(rows, rows.units.to_working_points(X[[0, 1, 2, 3]]))
    assert not good.below(good.ceiling())
    noisy = good.copy()
    noisy.e_own = noisy.e_own - 0.4 * good.inertia_rounding() / X.shape[0]
    assert not noisy.below(good.ceiling())
    user = rows.units.to_user_points
    assert distortion(X, user(good.centers)) < distortion(X, user(bad.centers))
    assert good.below(bad.ceiling()) and not bad.below(good.ceiling())


def test_searches_end_where_the_inertia_is_rounding():
    # Check that the annealed fit and kmeans_polish end on rows whose
    # inertia is rounding noise, at the inertia of KMeans(n_init=10).
    X, w = _rounding_case()
    with pytest.warns(ConvergenceWarning):
        est = AnnealedRBFKMeans(4).fit(X, sample_weight=w)
    km = KMeans(3, n_init=10, random_state=0).fit(X, sample_weight=w)
    assert est.inertia_ <= km.inertia_ + 1e-4
    centers, _, inertia, _ = kmeans_polish(X, X[:4], sample_weight=w)
    assert inertia <= km.inertia_ + 1e-4


@pytest.mark.parametrize("far", [1e14, 1e17, 1e20])
def test_searches_end_next_to_a_far_outlier(far):
    # Check that with one row at 1e14-1e20 next to three blobs (where the
    # inertia's rounding exceeds the blobs' whole distortion) the annealed
    # fit ends (at 1e17 it ran for ever), with the outlier alone in its
    # cluster and the blobs found as make_blobs drew them: the rows are
    # centred on the blobs' mean, not on the mean the outlier pulls 3e11 or
    # more away (where KMeans(n_init=10) finds no blob: its inertia is 20
    # times this one).
    Z, y = make_blobs(
        300, centers=[[0, 0], [10, 0], [0, 10]], cluster_std=1.0, random_state=0
    )
    X = np.vstack([Z, [[far, 0.0]]])
    est = AnnealedRBFKMeans(4).fit(X)
    assert np.sum(est.labels_ == est.labels_[-1]) == 1
    assert adjusted_rand_score(y, est.labels_[:-1]) == 1.0
    # Certified, and no single move gains (explicit search).
    assert est.certified_
    assert least_move_change(X, est.labels_, 4) > 0
    diff = X - est.cluster_centers_[est.labels_]
    assert est.inertia_ == pytest.approx(np.sum(diff**2), rel=1e-12)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        km = KMeans(4, n_init=10, random_state=0).fit(X)
    assert 10 * est.inertia_ < km.inertia_


def test_final_phase_budget_bounds_every_trial():
    # Check the final phase's total budget (issue: the polish passes after
    # kept boundary moves were not counted): the trials of the polish and
    # the boundary moves together spend at most the budget plus the run that
    # crosses it and the single-sample moves' Lloyd runs; a larger budget
    # follows the same search further, so it never ends higher; a budget
    # nothing reaches is the unbounded search, bit for bit. Standardised
    # digits, k=3, from KMeans(n_init=1): the search keeps moves there.
    from sklearn.datasets import load_digits

    from skrbfkmeans._finish import finish
    from skrbfkmeans._rows import MemoryRows, working_units

    X = StandardScaler().fit_transform(load_digits().data[:600])
    w = np.ones(X.shape[0])
    start = KMeans(3, n_init=1, random_state=0).fit(X).cluster_centers_
    Xw, offset, start_w, units = working_units(X, w, start)
    rows = MemoryRows(Xw, w, offset, units=units)
    max_iter = 8

    def run(total):
        done = finish(
            rows, start_w, max_iter=max_iter, polish_moves=True, budget=50,
            total=total,
        )  # fmt: skip
        inertia = distortion(Xw - offset, done.centers - offset)
        return done, inertia

    unbounded, best = run(None)
    assert unbounded.moves or unbounded.n_boundary  # the search keeps moves
    previous = np.inf
    for total in (0, 5, 20, 60, 10**9):
        done, inertia = run(total)
        spent = done.n_iter - done.n_iter_first
        settles = len(done.moves) + done.n_boundary + 1
        assert spent <= total + max_iter * (1 + settles)
        assert inertia <= previous * (1 + 1e-12)
        previous = inertia
    assert_array_equal(done.centers, unbounded.centers)
    assert run(0)[1] > best * (1 + 1e-6)  # the budget did cut the search


def test_verbose_says_when_the_budget_ended_the_search(monkeypatch, capsys):
    # Check that the final phase's line says when its budget, not a fixed
    # point, ended the search (a tiny budget: the first trial crosses it),
    # and says nothing of it when the search ended by itself.
    from skrbfkmeans import _anneal

    X = StandardScaler().fit_transform(load_iris().data)
    AnnealedRBFKMeans(5, verbose=1).fit(X)
    assert "their budget spent" not in capsys.readouterr().out
    monkeypatch.setattr(_anneal, "FINAL_BUDGET", 1e-3)
    monkeypatch.setattr(_anneal, "FINAL_BUDGET_MIN", 1)
    AnnealedRBFKMeans(5, verbose=1).fit(X)
    final = [line for line in capsys.readouterr().out.splitlines() if "final" in line]
    assert len(final) == 1 and "; their budget spent)" in final[0]


def test_splits_are_those_of_the_rows_alone():
    # Check the splits kept from pass to pass against a fresh 2-means of the
    # same rows: equal to the bit whether taken from this pass, the pass
    # before or computed again after two passes without them; None for one
    # row or identical rows; other rows give their own split.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(60, 3))
    X[50:] = X[50]  # ten identical rows
    w = rng.integers(1, 3, 60).astype(float)
    idx = np.arange(0, 40, 2)
    fresh = _two_means(X[idx], w[idx])
    splits = Splits(MemoryRows(X, w, np.zeros(3)))
    first = splits.split(idx)
    splits.next_pass()
    again = splits.split(idx)
    splits.next_pass()
    splits.next_pass()
    later = splits.split(idx)
    for got in (first, again, later):
        np.testing.assert_array_equal(got[0], fresh[0])
        assert got[1] == fresh[1]
    assert again is first and later is not first
    other = splits.split(idx[:-1])
    np.testing.assert_array_equal(other[0], _two_means(X[idx[:-1]], w[idx[:-1]])[0])
    assert splits.split(np.array([3])) is None
    assert splits.split(np.arange(50, 60)) is None


def _best_two_split(X, w):
    # Oracle: the least weighted SSE over every split of the rows in two
    # (brute force, row 0 on the first side).
    n, best = X.shape[0], np.inf
    for code in range(2 ** (n - 1)):
        side = np.array([0] + [(code >> b) & 1 for b in range(n - 1)], dtype=bool)
        if side.all():
            continue
        sse = 0.0
        for part in (side, ~side):
            mu = w[part] @ X[part] / w[part].sum()
            sse += float(w[part] @ ((X[part] - mu) ** 2).sum(axis=1))
        best = min(best, sse)
    return best


@pytest.mark.parametrize("far", [1000.0, 3000.0])
@pytest.mark.parametrize("seed", range(3))
def test_two_means_takes_a_light_far_row_on_its_own(far, seed):
    # Check the split of heavy rows near one another beside one light row far
    # out against the best split by brute force: the far row sets the
    # principal axis, whose halves ended on the heavy rows with the far row
    # still in one of them (9 times KMeans's inertia on weighted blobs).
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 0.5, size=(11, 2)), np.full((1, 2), far)])
    w = np.append(rng.uniform(0.5e5, 1.5e5, 11), 2.0)
    centers, sse = _two_means(X, w)
    assert_allclose(sse, _best_two_split(X, w), rtol=1e-9)
    assert np.isclose(centers, far).all(axis=1).any()


@pytest.mark.parametrize("seed", range(4))
def test_two_means_is_the_best_split_of_small_sets(seed):
    # Check _two_means against brute force on small unweighted and weighted
    # sets where Lloyd from the principal axis finds the best split.
    rng = np.random.default_rng(seed)
    X = np.vstack([rng.normal(0, 1, (6, 3)), rng.normal(6, 1, (5, 3))])
    w = rng.uniform(0.5, 2.0, 11) if seed % 2 else np.ones(11)
    assert_allclose(_two_means(X, w)[1], _best_two_split(X, w), rtol=1e-9)


def test_many_rows_with_few_centres_take_bounded_steps():
    # Check the rule that bounds Lloyd's steps beyond small data with fewer
    # than 16 centres, against the engine's plain Lloyd (every row against
    # every centre): the incremental run has bounds and ends on its centres.
    from skrbfkmeans._engine.passes import data_offset
    from skrbfkmeans._iterations import em_fixed_sigma
    from skrbfkmeans._lloyd import IncrementalLloyd

    X, _ = make_blobs(30000, n_features=2, centers=4, random_state=0)
    w = np.ones(X.shape[0])
    rows = MemoryRows(X, w, data_offset(X, w))
    start = X[:8].copy()
    state = IncrementalLloyd(rows, start)
    assert state.bounds is not None
    n_iter, converged = state.run(300)
    plain, plain_iter, _ = em_fixed_sigma(
        rows, start, 0.0, "entmax15", max_iter=300, tol=0.0
    )
    assert converged and n_iter == plain_iter
    assert_allclose(state.centers, plain, rtol=1e-10, atol=1e-10)


@pytest.mark.parametrize("kind", ["gaussian", "grid", "far", "close"])
def test_bounded_split_steps_give_the_plain_steps_bits(kind, monkeypatch):
    # Check the 2-means with bounded steps against the plain steps (every
    # row's distances at every step): the same centres and SSE to the bit,
    # on integer ties, rows far from the origin, two close halves, weights.
    from skrbfkmeans import _polish

    rng = np.random.default_rng(3)
    n, d = 3000, 3
    X = {
        "gaussian": rng.normal(size=(n, d)),
        "grid": rng.integers(0, 4, size=(n, d)).astype(float),
        "far": rng.normal(size=(n, d)) * 1e-3 + 1e5,
        "close": np.vstack([rng.normal(size=(n // 2, d)),
                            rng.normal(size=(n // 2, d)) + 0.5]),
    }[kind]  # fmt: skip
    w = rng.choice([0.0, 1.0, 2.0], n)
    results = []
    for rows in (n + 1, 0):  # plain, then bounded
        monkeypatch.setattr(_polish, "BOUNDED_SPLIT_ROWS", rows)
        results.append(_two_means(X, w))
    (plain, plain_sse), (bounded, bounded_sse) = results
    assert plain.tobytes() == bounded.tobytes() and plain_sse == bounded_sse
