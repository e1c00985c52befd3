"""Tests of RBFKMeans on its inputs: sparse formats, bad input, warnings.

Sparse == dense for every scipy sparse format, clear errors for bad data,
weights and init, the ConvergenceWarnings, the caller's arrays left untouched
(also when read-only), and finite outputs without RuntimeWarning at widths
from 1e-300 to 1e300 times the data scale.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _rbf_oracle import free_energy
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from sklearn.exceptions import ConvergenceWarning

from skrbfkmeans import RBFKMeans

ACTIVATIONS = ["softmax", "entmax15"]
DTYPES = [np.float32, np.float64]
DTYPE_IDS = ["float32", "float64"]
METHODS = ["predict", "predict_proba", "transform", "score"]


def _sparse_data(seed, n_samples=100, n_features=5, dtype=np.float64):
    """Blobs with about half of the entries set to exactly zero."""
    X, _ = make_blobs(
        n_samples=n_samples,
        n_features=n_features,
        centers=3,
        cluster_std=2.0,
        random_state=seed,
    )
    rng = np.random.RandomState(seed)
    X[rng.uniform(size=X.shape) < 0.5] = 0.0
    return X.astype(dtype)


def _init(X, n_clusters=3):
    # The first rows, densified: a fixed init shared by dense and sparse fits.
    rows = X[:n_clusters]
    return rows.toarray() if sp.issparse(rows) else rows.copy()


def _with_int64_indices(A):
    A = A.copy()
    A.indices = A.indices.astype(np.int64)
    A.indptr = A.indptr.astype(np.int64)
    return A


def _sparse_containers():
    """Every scipy sparse format, matrix and array, plus 64-bit CSR indices."""
    out = []
    for fmt in ("csr", "csc", "coo", "lil", "dok", "dia", "bsr"):
        for kind in ("matrix", "array"):
            cls = getattr(sp, f"{fmt}_{kind}", None)
            if cls is not None:
                out.append(pytest.param(cls, id=f"{fmt}_{kind}"))
    out.append(
        pytest.param(
            lambda X: _with_int64_indices(sp.csr_matrix(X)), id="csr_matrix_int64"
        )
    )
    out.append(
        pytest.param(
            lambda X: _with_int64_indices(sp.csr_array(X)), id="csr_array_int64"
        )
    )
    return out


@pytest.mark.parametrize("weighted", [False, True], ids=["unweighted", "weighted"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_sparse_fit_equals_dense_fit(activation, dtype, weighted, global_random_seed):
    # Check that a CSR fit equals the dense fit on the same data and init:
    # centres, labels, inertia, objective, width and iterations.
    X = _sparse_data(global_random_seed, dtype=dtype)
    w = np.random.RandomState(0).uniform(0.5, 2, X.shape[0]) if weighted else None
    params = dict(activation=activation, init=_init(X))
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
    X = _sparse_data(global_random_seed) + 5.0
    dense = RBFKMeans(3, activation=activation, random_state=0).fit(X)
    sparse = RBFKMeans(3, activation=activation, random_state=0)
    sparse.fit(sp.csr_matrix(X))
    assert_allclose(sparse.cluster_centers_, dense.cluster_centers_, rtol=1e-10)
    assert sparse.sigma_ == pytest.approx(dense.sigma_, rel=1e-10)


@pytest.mark.parametrize("container", _sparse_containers())
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_every_sparse_format_is_accepted(activation, container):
    # Check that every scipy sparse format (and CSR with 64-bit indices) is
    # accepted by fit, predict, predict_proba, transform and score and gives
    # the dense result.
    X = _sparse_data(0)
    X_new = _sparse_data(1, n_samples=30)
    dense = RBFKMeans(3, activation=activation, init=_init(X)).fit(X)
    est = RBFKMeans(3, activation=activation, init=_init(X)).fit(container(X))
    assert_allclose(est.cluster_centers_, dense.cluster_centers_, rtol=1e-10)
    assert_array_equal(est.labels_, dense.labels_)
    for method in METHODS:
        got = getattr(est, method)(container(X_new))
        expected = getattr(dense, method)(X_new)
        assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=method)
        # The dense-fitted model also accepts the sparse container.
        got = getattr(dense, method)(container(X_new))
        assert_allclose(got, expected, rtol=1e-10, atol=1e-12, err_msg=method)
    assert_array_equal(
        RBFKMeans(3, activation=activation, init=_init(X)).fit_predict(container(X)),
        dense.labels_,
    )


def _bad_fit_inputs():
    X = _sparse_data(0, n_samples=10, n_features=2)
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
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_bad_fit_input_raises(activation, X, sample_weight, params, match):
    # Check that bad data, weights or init raise a ValueError naming the
    # problem.
    est = RBFKMeans(3, activation=activation, **params)
    with pytest.raises(ValueError, match=match):
        est.fit(X, sample_weight=sample_weight)


@pytest.mark.parametrize("method", METHODS)
def test_bad_predict_input_raises(method):
    # Check that prediction methods reject NaN and a wrong number of features.
    X = _sparse_data(0)
    est = RBFKMeans(3, random_state=0).fit(X)
    X_nan = X.copy()
    X_nan[0, 0] = np.nan
    with pytest.raises(ValueError, match="Input X contains NaN"):
        getattr(est, method)(X_nan)
    with pytest.raises(ValueError, match="features"):
        getattr(est, method)(X[:, :3])


def test_score_rejects_bad_weights():
    # Check that score validates its sample_weight like fit.
    X = _sparse_data(0)
    est = RBFKMeans(3, random_state=0).fit(X)
    with pytest.raises(ValueError, match="Negative values"):
        est.score(X, sample_weight=-np.ones(X.shape[0]))
    with pytest.raises(ValueError, match="sample_weight.shape"):
        est.score(X, sample_weight=np.ones(3))


@pytest.mark.parametrize("init", ["k-means++", "random"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fewer_distinct_points_than_clusters(activation, init):
    # Check that fewer distinct points than clusters warn, as KMeans does,
    # and still give a finite, usable result.
    X = np.repeat([[0.0, 0.0], [5.0, 1.0], [1.0, 7.0]], 10, axis=0)
    est = RBFKMeans(5, activation=activation, init=init, random_state=0)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        est.fit(X)
    assert np.unique(est.labels_).size <= 3
    assert np.isfinite(est.cluster_centers_).all()
    assert np.isfinite([est.objective_, est.inertia_, est.score(X)]).all()
    P = est.predict_proba(X)
    assert np.isfinite(P).all()
    assert_allclose(P.sum(axis=1), 1.0)
    assert np.isfinite(est.transform(X)).all()


@pytest.mark.parametrize("init", ["k-means++", "random"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_auto_sigma_keeps_duplicate_points_apart(activation, init):
    # Check that sigma="auto" keeps three distinct points (the best-separated
    # clusters there are) apart when n_clusters=5 forces coincident initial
    # centres: each point keeps a centre within a tenth of the spacing, as
    # KMeans (inertia 0) does. A width of the order of the spacing (5.1)
    # would pull the centres together.
    X = np.repeat([[0.0, 0.0], [5.0, 1.0], [1.0, 7.0]], 10, axis=0)
    est = RBFKMeans(5, activation=activation, init=init, random_state=0)
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        est.fit(X)
    points = X[::10]
    nearest = np.sqrt(((points[:, None] - est.cluster_centers_) ** 2).sum(-1)).min(1)
    assert (nearest < 0.51).all(), (est.sigma_, est.cluster_centers_)
    assert np.unique(est.labels_).size == 3


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_max_iter_reached_warns(activation):
    # Check that stopping at max_iter warns with a ConvergenceWarning naming
    # max_iter and tol, and that a converged fit does not warn.
    X = _sparse_data(0)
    est = RBFKMeans(3, activation=activation, init=_init(X), max_iter=1, tol=0)
    with pytest.warns(ConvergenceWarning, match=r"max_iter=1.*tol=0"):
        est.fit(X)
    assert not est.converged_ and est.n_iter_ == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error", ConvergenceWarning)
        est.set_params(max_iter=300, tol=1e-4).fit(X)
    assert est.converged_


@pytest.mark.parametrize("read_only", [False, True], ids=["writeable", "read-only"])
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_caller_arrays_not_modified(activation, sparse, read_only):
    # Check that fit and every method leave X, sample_weight and the init
    # array unchanged, and accept read-only arrays.
    X = _sparse_data(0)
    w = np.random.RandomState(0).uniform(0.5, 2, X.shape[0])
    C = _init(X)
    X_in = sp.csr_matrix(X) if sparse else X.copy()
    originals = (X.copy(), w.copy(), C.copy())
    arrays = (X_in.data if sparse else X_in, w, C)
    if read_only:
        for a in arrays:
            a.flags.writeable = False
    est = RBFKMeans(3, activation=activation, init=C)
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
