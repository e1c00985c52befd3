"""Tests of the annealing on a sample of many rows and its weight-space sample.

With more rows than ``_dask.sample_size`` (10000, or 100 per cluster), the
NumPy fit of ``AnnealedRBFKMeans`` anneals (and polishes) on a stratified
sample of units of weight (``_rows.weight_sample``), then runs Lloyd's
algorithm and the certificate on every row, as the dask fit does.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _data import blobs
from _rbf_oracle import dense64
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans
from skrbfkmeans._dask import sample_size
from skrbfkmeans._rows import weight_sample

N_ROWS = 12_000  # above the sample of 10000 units


def _means(X, w, labels, k):
    X = dense64(X)
    return np.array(
        [np.average(X[labels == j], axis=0, weights=w[labels == j]) for j in range(k)]
    )


# -- the sample ---------------------------------------------------------------


@settings(max_examples=200, deadline=None)
@given(
    weights=st.lists(
        st.one_of(st.just(0.0), st.floats(1e-3, 1e3)), min_size=1, max_size=60
    ),
    n_units=st.integers(1, 500),
)
def test_weight_sample_follows_the_weights(weights, n_units):
    # Check that the counts add up to the units drawn, that rows of weight
    # zero are never drawn, and that each row is drawn about w_i / step
    # times (a row covers w_i / step strata, each holding one point).
    w = np.array(weights)
    if not w.any():
        w[0] = 1.0
    idx, counts = weight_sample(w, n_units)
    assert counts.sum() == n_units
    assert np.all(np.diff(idx) > 0) and np.all(counts >= 1)
    assert np.all(w[idx] > 0)
    expected = w * n_units / w.sum()
    drawn = np.bincount(idx, weights=counts, minlength=w.size)
    assert np.all(np.abs(drawn - expected) < 2.0)


def test_weight_sample_weights_equal_repeated_rows():
    # Check that integer weights and the rows repeated in place draw the
    # same rows the same number of times.
    rng = np.random.default_rng(0)
    w = rng.integers(0, 4, size=3000)
    rep = np.repeat(np.arange(w.size), w)
    idx, counts = weight_sample(w.astype(float), 1000)
    idx_rep, counts_rep = weight_sample(np.ones(rep.size), 1000)
    assert_array_equal(
        np.bincount(idx, weights=counts, minlength=w.size),
        np.bincount(rep[idx_rep], weights=counts_rep, minlength=w.size),
    )


def test_weight_sample_is_stratified():
    # Check that with equal weights and more rows than units, no row is
    # drawn twice and every stretch of n / n_units rows gives exactly one
    # (periodic data cannot fall on one phase, unlike a systematic sample).
    idx, counts = weight_sample(np.ones(100_000), 1000)
    assert_array_equal(counts, 1)
    assert_array_equal(idx // 100, np.arange(1000))
    phases = np.bincount(idx % 10, minlength=10)
    assert phases.min() > 50  # about 100 each; all on one phase gives 1000


# -- the fit ------------------------------------------------------------------


def test_sample_size_rule():
    # Check the threshold: 10000 units, or 100 per cluster.
    assert sample_size(N_ROWS, 4) == 10_000
    assert sample_size(N_ROWS, 150) == N_ROWS
    assert sample_size(9_000, 4) == 9_000


@pytest.mark.parametrize("sparse", [False, True])
def test_fit_on_a_sample_ends_on_a_certified_fixed_point(sparse):
    # Check that the fit of many rows is a Lloyd fixed point of every row
    # (each centre the mean of its rows), certified, with KMeans's inertia
    # on separated blobs; and that its path is the fit of the sample.
    X = blobs(0, n_samples=N_ROWS, n_features=2, centers=4, cluster_std=0.8)
    X_in = sp.csr_array(X) if sparse else X
    km = AnnealedRBFKMeans(n_clusters=4).fit(X_in)
    w = np.ones(X.shape[0])
    assert km.certified_ and km.converged_
    assert_allclose(km.cluster_centers_, _means(X, w, km.labels_, 4), rtol=1e-10)
    ref = KMeans(4, n_init=3, random_state=0).fit(X)
    assert km.inertia_ <= ref.inertia_ * (1 + 1e-10)
    # The path: the fit of the sample (centred on all the rows' mean rather
    # than the sample's: equal to rounding).
    idx, counts = weight_sample(w, 10_000)
    sub = AnnealedRBFKMeans(n_clusters=4).fit(X_in[idx], sample_weight=counts)
    assert_array_equal(km.n_distinct_centers_path_, sub.n_distinct_centers_path_)
    assert_allclose(km.sigma_path_, sub.sigma_path_, rtol=1e-12)
    assert_allclose(km.centers_path_, sub.centers_path_, rtol=1e-12, atol=1e-12)
    assert_allclose(km.split_linkage_, sub.split_linkage_, rtol=1e-12)
    assert_allclose(km.inertia_path_, sub.inertia_path_, rtol=1e-12)
    assert km.n_iter_total_ - km.n_iter_ == sub.n_iter_total_


def test_fit_on_a_sample_is_deterministic():
    # Check that the sample depends on the data only: the same bytes for
    # every random_state.
    X = blobs(1, n_samples=N_ROWS, n_features=2, centers=4, cluster_std=0.8)
    a = AnnealedRBFKMeans(n_clusters=4, random_state=0).fit(X)
    b = AnnealedRBFKMeans(n_clusters=4, random_state=1).fit(X)
    assert a.cluster_centers_.tobytes() == b.cluster_centers_.tobytes()
    assert_array_equal(a.sigma_path_, b.sigma_path_)


def test_fit_on_a_sample_weights_equal_repeated_rows():
    # Check that integer weights give the fit of the rows repeated in place
    # (both sampled: the same rows drawn, the same Lloyd fixed point).
    X = blobs(2, n_samples=10_500, n_features=2, centers=4, cluster_std=0.8)
    w = np.random.default_rng(2).integers(1, 3, size=X.shape[0])
    km = AnnealedRBFKMeans(n_clusters=4).fit(X, sample_weight=w)
    rep = AnnealedRBFKMeans(n_clusters=4).fit(np.repeat(X, w, axis=0))
    assert_allclose(km.cluster_centers_, rep.cluster_centers_, rtol=1e-10)
    assert_allclose(km.inertia_, rep.inertia_, rtol=1e-10)
    assert_array_equal(km.n_distinct_centers_path_, rep.n_distinct_centers_path_)


def test_fit_on_a_sample_with_zero_weights_and_float_sigma_end():
    # Check that rows of weight zero are never drawn and that a float
    # sigma_end runs EM at that width on every row from the sample's
    # centres (a fixed point of the soft M-step on all rows).
    X = blobs(3, n_samples=N_ROWS, n_features=2, centers=4, cluster_std=0.8)
    w = np.ones(X.shape[0])
    w[::3] = 0.0
    w[1::3] = 2.5
    km = AnnealedRBFKMeans(n_clusters=4, sigma_end=0.5, tol=0.0, max_iter=500)
    km.fit(X, sample_weight=w)
    assert km.converged_
    assert km.sigma_ == 0.5
    R = km.predict_proba(X) * w[:, None]
    means = (R.T @ X) / R.sum(axis=0)[:, None]
    assert_allclose(km.cluster_centers_, means, rtol=1e-9)


def test_fit_on_a_sample_choose_count():
    # Check that n_clusters="auto" chooses the count on the sample and fits
    # it on every row.
    X = blobs(4, n_samples=N_ROWS, n_features=2, centers=5, cluster_std=0.8)
    km = AnnealedRBFKMeans(n_clusters="auto", max_clusters=8).fit(X)
    assert km.n_clusters_ == 5 and km.certified_
    assert km.cluster_count_lifetimes_.shape == (8,)


def test_fit_on_a_sample_keeps_the_input():
    # Check that the caller's arrays are not changed.
    X = blobs(5, n_samples=N_ROWS, n_features=2, centers=4, cluster_std=0.8)
    w = np.full(X.shape[0], 1.5)
    X0, w0 = X.copy(), w.copy()
    AnnealedRBFKMeans(n_clusters=4).fit(X, sample_weight=w)
    assert_array_equal(X, X0)
    assert_array_equal(w, w0)


def test_heavy_rows_leave_too_few_distinct_rows():
    # Check that when the sample draws fewer distinct rows than clusters
    # (nearly all the weight on a few rows), every row is annealed instead.
    X = blobs(6, n_samples=N_ROWS, n_features=2, centers=3, cluster_std=0.8)
    w = np.ones(X.shape[0])
    w[:2] = 1e12
    idx, _ = weight_sample(w, 10_000)
    assert idx.size < 4
    km = AnnealedRBFKMeans(n_clusters=4).fit(X, sample_weight=w)
    assert km.certified_
    assert km.n_clusters_ == 4


def test_range_error_names_all_the_data():
    # Check that data outside the working range raise the error of all the
    # rows (the factor for their total weight), not of the sample's.
    X = blobs(7, n_samples=N_ROWS, n_features=2, centers=4, cluster_std=0.8) * 1e200
    with pytest.raises(ValueError) as annealed:
        AnnealedRBFKMeans(n_clusters=4).fit(X)
    with pytest.raises(ValueError) as plain:
        RBFKMeans(n_clusters=4).fit(X)
    assert "too large to cluster" in str(annealed.value)
    assert str(annealed.value) == str(plain.value)


def test_one_convergence_warning():
    # Check that a final phase stopped by max_iter warns once (the sample's
    # own warning is the fit's): EM at a fixed final width on every row.
    X, _ = make_blobs(N_ROWS, centers=25, cluster_std=1.2, random_state=0)
    with pytest.warns(ConvergenceWarning) as record:
        km = AnnealedRBFKMeans(n_clusters=25, max_iter=2, sigma_end=0.3).fit(X)
    assert not km.converged_
    assert sum(issubclass(r.category, ConvergenceWarning) for r in record) == 1


def _best_single_move(X, labels, k):
    """The most any one sample's move to another cluster lowers the distortion.

    Hartigan's exact change ``N_b/(N_b+1) d_b - N_a/(N_a-1) d_a`` (unit
    weights) by explicit float64 differences, and the distortion's scale.
    """
    N = np.bincount(labels, minlength=k).astype(float)
    mu = np.array([X[labels == j].mean(axis=0) for j in range(k)])
    d = ((X[:, None, :] - mu[None, :, :]) ** 2).sum(axis=2)
    own = np.arange(X.shape[0]), labels
    with np.errstate(divide="ignore"):
        leave = np.where(N[labels] > 1, N[labels] / (N[labels] - 1), np.inf)
    change = N / (N + 1) * d - (leave * d[own])[:, None]
    change[own] = np.inf
    return -change.min(), d[own].sum()


def test_moves_on_every_row_reach_their_fixed_point(monkeypatch):
    # Check that the finish on every row after a sample's fit ends where no
    # single sample's move gains (by Hartigan's exact change, explicit
    # float64 differences), certified, even where max_iter is far below the
    # passes the moves need: they make at least MIN_MOVE_PASSES.
    from skrbfkmeans import _finish

    X, _ = make_blobs(N_ROWS, centers=25, cluster_std=1.2, random_state=0)
    km = AnnealedRBFKMeans(n_clusters=25, max_iter=2).fit(X)
    assert km.converged_ and km.certified_
    gain, scale = _best_single_move(X, km.labels_, 25)
    assert gain <= 1e-12 * scale
    # Here the moves need more than 2 passes: capped at max_iter, they stop
    # short and the fit says so.
    monkeypatch.setattr(_finish, "MIN_MOVE_PASSES", 0)
    with pytest.warns(ConvergenceWarning):
        capped = AnnealedRBFKMeans(n_clusters=25, max_iter=2).fit(X)
    assert not capped.converged_ and not capped.certified_
    assert _best_single_move(X, capped.labels_, 25)[0] > 1e-6 * scale
