"""Tests that RBFKMeans and AnnealedRBFKMeans pass alike.

Each test runs on both estimators (RBFKMeans with either map):
transform and the fit shortcuts, every scipy sparse format, clear errors
for bad input, the caller's arrays left untouched (also when read-only),
and scikit-learn composition (Pipeline, GridSearchCV). The tests of one
estimator live in ``test_rbf_kmeans.py``, ``test_rbf_kmeans_input.py`` and
``test_annealed.py``; scikit-learn's common checks (clone, pickle, get and
set_params, ...) in ``test_estimator_checks.py``.
"""

import functools

import numpy as np
import pytest
import scipy.sparse as sp
from _data import (
    DTYPE_IDS,
    DTYPES,
    METHODS,
    RTOL,
    blobs,
    csr_if,
    first_rows,
    separated_blobs,
    sparse_blobs,
    sparse_containers,
)
from _rbf_oracle import distortion
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.metrics.pairwise import euclidean_distances
from sklearn.model_selection import GridSearchCV
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

# (estimator, activation): RBFKMeans with each map, AnnealedRBFKMeans with
# its default (softmax while hot, entmax-1.5 at the end).
ESTIMATORS = [
    pytest.param(RBFKMeans, "softmax", id="RBFKMeans-softmax"),
    pytest.param(RBFKMeans, "entmax15", id="RBFKMeans-entmax15"),
    pytest.param(AnnealedRBFKMeans, "auto", id="AnnealedRBFKMeans"),
]


def _fixed_start(Estimator, X):
    # RBFKMeans starts from the first rows (the k-means++ draws aside);
    # AnnealedRBFKMeans from its anneal, which draws nothing.
    return {"init": first_rows(X)} if Estimator is RBFKMeans else {}


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("Estimator", [RBFKMeans, AnnealedRBFKMeans])
def test_transform_and_fit_shortcuts(Estimator, dtype, sparse, global_random_seed):
    # Check that transform gives the Euclidean distances to the centres (as
    # KMeans), that fit_transform / fit_predict equal fit then transform /
    # labels_, and that -score is inertia_, the weighted distortion.
    X = blobs(global_random_seed, n_samples=120, n_features=3, centers=4)
    X = csr_if(X.astype(dtype), sparse)
    w = np.random.RandomState(0).uniform(0.5, 2, X.shape[0])
    est = Estimator(4, random_state=global_random_seed)
    km = clone(est).fit(X, sample_weight=w)
    D = km.transform(X)
    assert D.shape == (X.shape[0], 4) and D.dtype == dtype
    assert_allclose(D, euclidean_distances(X, km.cluster_centers_), rtol=RTOL[dtype])
    assert_array_equal(clone(est).fit_transform(X, sample_weight=w), D)
    assert_array_equal(clone(est).fit_predict(X, sample_weight=w), km.labels_)
    assert -km.score(X, sample_weight=w) == pytest.approx(km.inertia_, rel=1e-12)
    expected = distortion(X, km.cluster_centers_, w)
    assert_allclose(km.inertia_, expected, rtol=RTOL[dtype])


@functools.cache
def _dense_fit(Estimator, activation):
    """The dense fit that every sparse format must give (fitted once)."""
    X = sparse_blobs(0)
    return Estimator(3, activation=activation, **_fixed_start(Estimator, X)).fit(X)


@pytest.mark.parametrize("container", sparse_containers())
@pytest.mark.parametrize("Estimator, activation", ESTIMATORS)
def test_every_sparse_format_gives_the_dense_fit(Estimator, activation, container):
    # Check that every scipy sparse format (and CSR with 64-bit indices) is
    # accepted by fit, predict, predict_proba, transform and score and gives
    # the dense result: the fit (centres, labels, width, and the annealing
    # path's distinct-centre counts and certificate) and the outputs on new
    # data, also of the dense-fitted model given the sparse container.
    X = sparse_blobs(0)
    X_new = sparse_blobs(1, n_samples=30)

    def make():
        return Estimator(3, activation=activation, **_fixed_start(Estimator, X))

    dense = _dense_fit(Estimator, activation)
    est = make().fit(container(X))
    assert_allclose(est.cluster_centers_, dense.cluster_centers_, rtol=1e-10)
    assert_array_equal(est.labels_, dense.labels_)
    assert est.sigma_ == pytest.approx(dense.sigma_, rel=1e-8)
    if Estimator is AnnealedRBFKMeans:
        assert_array_equal(est.n_distinct_centers_path_, dense.n_distinct_centers_path_)
        assert est.certified_ == dense.certified_
    for method in METHODS:
        got = getattr(est, method)(container(X_new))
        expected = getattr(dense, method)(X_new)
        assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=method)
        # The dense-fitted model also accepts the sparse container.
        got = getattr(dense, method)(container(X_new))
        assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=method)
    assert_array_equal(make().fit_predict(container(X)), dense.labels_)


def _bad_fit_inputs():
    X = sparse_blobs(0, n_samples=10, n_features=2)
    X_nan, X_inf = X.copy(), X.copy()
    X_nan[3, 1] = np.nan
    X_inf[5, 0] = np.inf
    ones = np.ones(10)
    negative = ones.copy()
    negative[2] = -1.0
    return [
        pytest.param(X_nan, None, {}, "Input X contains NaN", id="nan"),
        pytest.param(X_inf, None, {}, "Input X contains infinity", id="inf"),
        pytest.param(
            sp.csr_matrix(X_nan), None, {}, "Input X contains NaN", id="nan-csr"
        ),
        pytest.param(X[:, 0], None, {}, "Expected 2D array, got 1D array", id="1d"),
        pytest.param(
            X[:2], None, {}, r"n_samples=2 should be >= n_clusters=3", id="few"
        ),
        pytest.param(
            X,
            negative,
            {},
            "Negative values in data passed to `sample_weight`",
            id="neg-w",
        ),
        pytest.param(X, 0 * ones, {}, "at least one non-zero", id="zero-w"),
        pytest.param(
            X,
            np.full(10, 1e308),
            {},
            "sample_weight adds up to more than the largest float64",
            id="huge-w",
        ),
        pytest.param(
            X,
            ones[:7],
            {},
            r"sample_weight.shape == \(7,\), expected \(10,\)",
            id="len-w",
        ),
        pytest.param(
            X,
            ones,
            {"init": np.zeros((2, 2))},
            "shape of the initial centers",
            id="init-k",
        ),
        pytest.param(
            X,
            ones,
            {"init": np.zeros((3, 3))},
            "shape of the initial centers",
            id="init-d",
        ),
        pytest.param(
            X,
            None,
            {"init": lambda X, k, random_state: np.zeros((k + 1, X.shape[1]))},
            "does not match the number of clusters",
            id="init-callable",
        ),
    ]


@pytest.mark.parametrize("X, sample_weight, params, match", _bad_fit_inputs())
@pytest.mark.parametrize("Estimator, activation", ESTIMATORS)
def test_bad_fit_input_raises(Estimator, activation, X, sample_weight, params, match):
    # Check that bad data, weights or init raise a ValueError naming the
    # problem.
    est = Estimator(3, activation=activation, **params)
    with pytest.raises(ValueError, match=match):
        est.fit(X, sample_weight=sample_weight)


@pytest.mark.parametrize("read_only", [False, True], ids=["writeable", "read-only"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize(
    "Estimator, activation, init",
    [
        pytest.param(RBFKMeans, "softmax", "array", id="RBFKMeans-softmax"),
        pytest.param(RBFKMeans, "entmax15", "array", id="RBFKMeans-entmax15"),
        pytest.param(AnnealedRBFKMeans, "auto", "anneal", id="AnnealedRBFKMeans"),
        pytest.param(
            AnnealedRBFKMeans, "auto", "array", id="AnnealedRBFKMeans-array-init"
        ),
    ],
)
def test_caller_arrays_not_modified(Estimator, activation, init, sparse, read_only):
    # Check that fit and every method leave X, sample_weight and the init
    # array unchanged, and accept read-only arrays.
    X = sparse_blobs(0)
    w = np.random.RandomState(0).uniform(0.5, 2, X.shape[0])
    C = first_rows(X)
    X_in = sp.csr_matrix(X) if sparse else X.copy()
    originals = (X.copy(), w.copy(), C.copy())
    arrays = (X_in.data if sparse else X_in, w, C)
    if read_only:
        for a in arrays:
            a.flags.writeable = False
    est = Estimator(3, activation=activation, init=C if init == "array" else init)
    est.fit(X_in, sample_weight=w)
    est.fit_predict(X_in, sample_weight=w)
    est.fit_transform(X_in, sample_weight=w)
    for method in METHODS:
        getattr(est, method)(X_in)
    est.score(X_in, sample_weight=w)
    X_after = X_in.toarray() if sparse else X_in
    for before, after in zip(originals, (X_after, w, C)):
        assert_array_equal(after, before)
    # Fitted centres are a new array, not a view of the init.
    assert not np.shares_memory(est.cluster_centers_, C)


@pytest.mark.parametrize("Estimator", [RBFKMeans, AnnealedRBFKMeans])
def test_pipeline_and_grid_search(Estimator, global_random_seed):
    # Check that the estimator works after a StandardScaler in a Pipeline
    # and that GridSearchCV chooses n_clusters by score sensibly: on
    # well-separated blobs the held-out score jumps up to the true k = 4.
    X, _ = separated_blobs(global_random_seed, 300)
    X = 3.0 * StandardScaler().fit_transform(X) + 10.0
    pipe = make_pipeline(StandardScaler(), Estimator(4, random_state=0)).fit(X)
    Xs = StandardScaler().fit_transform(X)
    alone = Estimator(4, random_state=0).fit(Xs)
    assert_array_equal(pipe.predict(X), alone.labels_)
    assert_allclose(pipe.predict_proba(X), alone.predict_proba(Xs))
    assert_allclose(pipe.transform(X), alone.transform(Xs))
    assert pipe.score(X) == pytest.approx(alone.score(Xs))

    grid = [2, 3, 4, 5]
    search = GridSearchCV(Estimator(random_state=0), {"n_clusters": grid}, cv=3)
    search.fit(Xs)
    scores = search.cv_results_["mean_test_score"]
    assert np.isfinite(scores).all()
    assert search.best_params_["n_clusters"] in grid
    assert search.best_params_["n_clusters"] >= 4
    assert scores[2] > scores[1] > scores[0]
