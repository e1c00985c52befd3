"""Tests of RBFKMeans on its inputs: sparse data, bad input, warnings.

A CSR fit equals the dense fit (dtypes, weights, k-means++ draws), clear
errors from the prediction methods and score, the ConvergenceWarnings, and
finite outputs without RuntimeWarning at widths from 1e-300 to 1e300 times
the data scale. Every sparse format, bad fit input and the caller's arrays
left untouched are tested for both estimators in ``test_estimators.py``.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import ACTIVATIONS, DTYPE_IDS, DTYPES, METHODS, first_rows, sparse_blobs
from _rbf_oracle import free_energy
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from skrbfkmeans import RBFKMeans


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_sparse_fit_equals_dense_fit(activation, dtype, weighted, global_random_seed):
    # Check that a CSR fit equals the dense fit on the same data and init:
    # centres, labels, inertia, objective, width and iterations.
    X = sparse_blobs(global_random_seed, dtype=dtype)
    w = np.random.RandomState(0).uniform(0.5, 2, X.shape[0]) if weighted else None
    params = dict(activation=activation, init=first_rows(X))
    dense = RBFKMeans(3, **params).fit(X, sample_weight=w)
    sparse = RBFKMeans(3, **params).fit(sp.csr_matrix(X), sample_weight=w)
    rtol = 1e-10 if dtype == np.float64 else 1e-4
    scale = np.abs(X).max()
    assert sparse.cluster_centers_.dtype == dtype
    assert_allclose(
        sparse.cluster_centers_, dense.cluster_centers_, rtol=rtol, atol=rtol * scale
    )
    assert_array_equal(sparse.labels_, dense.labels_)
    assert sparse.sigma_ == pytest.approx(dense.sigma_, rel=rtol)
    assert sparse.n_iter_ == dense.n_iter_
    assert_allclose(sparse.inertia_, dense.inertia_, rtol=rtol)
    assert_allclose(sparse.objective_, dense.objective_, rtol=rtol)
    expected = free_energy(X, sparse.cluster_centers_, sparse.sigma_, activation, w)
    assert_allclose(sparse.objective_, expected, rtol=rtol)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_sparse_fit_equals_dense_fit_kmeans_plusplus(activation, global_random_seed):
    # Check that with the default k-means++ init and the same random_state a
    # CSR fit equals the dense fit: the draws depend on distances only, so
    # they must not depend on how (centred or not) the rows are stored.
    X = sparse_blobs(global_random_seed) + 5.0
    dense = RBFKMeans(3, activation=activation, random_state=0).fit(X)
    sparse = RBFKMeans(3, activation=activation, random_state=0)
    sparse.fit(sp.csr_matrix(X))
    assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=1e-10)
    assert sparse.sigma_ == pytest.approx(dense.sigma_, rel=1e-10)


@pytest.mark.parametrize("method", METHODS)
def test_bad_predict_input_raises(method):
    # Check that prediction methods reject NaN and a wrong number of features.
    X = sparse_blobs(0)
    est = RBFKMeans(3, random_state=0).fit(X)
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        getattr(est, method)(X_nan)
    with pytest.raises(ValueError, match="features"):
        getattr(est, method)(X[:, :3])


def test_score_rejects_bad_weights():
    # Check that score validates its sample_weight like fit.
    X = sparse_blobs(0)
    est = RBFKMeans(3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="Negative values"):
        est.score(X, sample_weight=-np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="sample_weight.shape"):
        est.score(X, sample_weight=np.ones(3))


@pytest.mark.parametrize("init", ["k-means++", "random"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fewer_distinct_points_than_clusters(activation, init):
    # Check that fewer distinct points than clusters warn, as KMeans does,
    # and still give a finite, usable result; and that sigma="auto" keeps
    # the three distinct points (the best-separated clusters there are)
    # apart when n_clusters=5 forces coincident initial centres: each point
    # keeps a centre within a tenth of the spacing, as KMeans (inertia 0)
    # does. A width of the order of the spacing (5.1) would pull the
    # centres together.
    X = np.repeat([[0.0, 0.0], [5.0, 1.0], [1.0, 7.0]], 10, axis=0)
    est = RBFKMeans(5, activation=activation, init=init, random_state=0)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        est.fit(X)
    assert np.unique(est.labels_).size == 3
    assert np.isfinite(est.cluster_centers_).all()
    assert np.isfinite([est.objective_, est.inertia_, est.score(X)]).all()
    P = est.predict_proba(X)
    assert np.isfinite(P).all()
    assert_allclose(P.sum(axis=1), 1.0)
    assert np.isfinite(est.transform(X)).all()
    points = X[::10]
    nearest = np.sqrt(((points[:, None] - est.cluster_centers_) ** 2).sum(-1)).min(1)
    assert (nearest < 0.51).all(), (est.sigma_, est.cluster_centers_)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_max_iter_reached_warns(activation):
    # Check that stopping at max_iter warns with a ConvergenceWarning naming
    # max_iter and tol, and that a converged fit does not warn.
    X = sparse_blobs(0)
    est = RBFKMeans(3, activation=activation, init=first_rows(X), max_iter=1, tol=0)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=1.*tol=0"):
        est.fit(X)
    assert not est.converged_ and est.n_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.set_params(max_iter=300, tol=1e-4).fit(X)
    assert est.converged_


@pytest.mark.parametrize(
    "factor", [1e-300, 1e-100, 1e-10, 1e10, 1e100, 1e300], ids=lambda f: f"{f:g}"
)
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_extreme_sigma_outputs_finite(activation, dtype, factor):
    # Check that no output is NaN or inf and no RuntimeWarning escapes for
    # sigma from 1e-300 to 1e300 times the data scale.
    X, _ = make_blobs(n_samples=80, centers=3, cluster_std=3.0, random_state=0)
    X = (X + 100.0).astype(dtype)
    sigma = factor * float(X.std())
    est = RBFKMeans(3, sigma=sigma, activation=activation, random_state=0)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        # At huge widths centres merge (a ConvergenceWarning, not the point).
        warnings.simplefilter("ignore", ConvergenceWarning)
        with np.errstate(all="raise"):
            est.fit(X)
            P = est.predict_proba(X)
            outputs = [
                est.cluster_centers_,
                est.objective_,
                est.inertia_,
                P,
                est.transform(X),
                est.score(X),
                est.fit_transform(X),
            ]
    for out in outputs:
        assert np.isfinite(out).all()
    assert (P >= 0).all()
    assert_allclose(P.sum(axis=1), 1.0, atol=1e-5)
    assert_array_equal(est.labels_, est.predict(X))
    # The objective keeps its bounds: inertia_ <= objective_ (to rounding).
    assert est.objective_ >= est.inertia_ * (1 - 1e-5)
    if factor <= 1e-10:
        # Hard limit: the objective is the inertia (to the float64 rounding
        # of the sums), and entmax rows are exactly one-hot.
        assert_allclose(est.objective_, est.inertia_, rtol=1e-5)
        if activation == "entmax15":
            assert_array_equal(P.max(axis=1), 1.0)
    else:
        # Uniform limit: every centre at the data mean.
        mean = X.astype(np.float64).mean(axis=0)
        assert_allclose(est.cluster_centers_, np.tile(mean, (3, 1)), rtol=1e-5)
