"""``RBFKMeans(sigma=0)`` is K-Means: scikit-learn's KMeans is the oracle.

At zero width the fit is Lloyd's algorithm as KMeans runs it (same
iterations, stopping rules, relocation of empty clusters, ``n_iter_``), so
from the same ``init`` both must agree on labels, inertia, centres and
``n_iter_`` to rounding, on every kind of input KMeans takes.
"""

import io
import re
from contextlib import redirect_stdout

import numpy as np
import pytest
import scipy.sparse as sp
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from skrbfkmeans import RBFKMeans


def _pair(X, init=None, sample_weight=None, **params):
    kw = dict(n_init=1, **params) if init is not None else params
    if init is not None:
        kw["init"] = init
    km = KMeans(algorithm="lloyd", **kw).fit(X, sample_weight=sample_weight)
    rb = RBFKMeans(sigma=0, **kw).fit(X, sample_weight=sample_weight)
    return km, rb


def _assert_same(km, rb, rtol, X):
    assert rb.n_iter_ == km.n_iter_
    assert_array_equal(rb.labels_, km.labels_)
    # Distances from ||mu||^2 - 2 x . mu (on rows centred at their mean)
    # round to eps times the squared norms: a small inertia of data far from
    # its mean is exact only to that.
    X = X.toarray() if sp.issparse(X) else X
    spread = float(((X - X.mean(0)) ** 2).sum())
    eps = np.finfo(X.dtype).eps
    assert_allclose(rb.inertia_, km.inertia_, rtol=rtol, atol=64 * eps * spread)
    scale = np.abs(km.cluster_centers_).max()
    assert_allclose(rb.cluster_centers_, km.cluster_centers_, atol=rtol * scale)


@pytest.mark.parametrize("container", ["dense", "csr", "float32", "weighted"])
@pytest.mark.parametrize("tol", [0.0, 1e-4, 1e-2])
def test_same_fit_as_kmeans_from_the_same_init(container, tol, global_random_seed):
    # Check labels, inertia, centres and n_iter_ against KMeans (Lloyd) from
    # the same initial centres, with strict and tolerance-based stopping.
    X, _ = make_blobs(
        400, centers=6, n_features=4, cluster_std=2.5, random_state=global_random_seed
    )
    w = None
    if container == "float32":
        X = X.astype(np.float32)
    elif container == "csr":
        X = sp.csr_matrix(X)
    elif container == "weighted":
        w = np.random.RandomState(global_random_seed).uniform(0.2, 3.0, X.shape[0])
    init = (X[:6].toarray() if sp.issparse(X) else X[:6]).copy()
    km, rb = _pair(X, init=init, sample_weight=w, n_clusters=6, tol=tol)
    _assert_same(km, rb, rtol=1e-5 if container == "float32" else 1e-12, X=X)


def test_duplicated_points_and_relocation():
    # Check a fit that must relocate an empty cluster (a centre far from all
    # points) on data with duplicated rows, and the warning-free result.
    X = np.repeat(np.array([[0.0, 0.0], [0.1, 0.0], [10.0, 0.0], [10.1, 0.0]]), 5, 0)
    X = np.vstack([X, [[20.0, 0.0]]])
    init = np.array([[0.0, 0.0], [10.0, 0.0], [100.0, 0.0]])
    km, rb = _pair(X, init=init, n_clusters=3)
    _assert_same(km, rb, rtol=1e-12, X=X)
    assert_allclose(rb.cluster_centers_[2], [20.0, 0.0])


def test_same_fit_as_kmeans_with_kmeans_plus_plus(global_random_seed):
    # Check that k-means++ draws the same initial centres as KMeans for the
    # same random_state, so that whole fits with restarts agree.
    X, _ = make_blobs(300, centers=4, random_state=global_random_seed)
    km, rb = _pair(X, n_clusters=4, n_init=3, random_state=global_random_seed)
    _assert_same(km, rb, rtol=1e-12, X=X)


def test_hard_responsibilities_and_distances():
    # Check predict_proba is one-hot on the nearest centre and transform the
    # distances to the centres.
    X, _ = make_blobs(200, centers=3, random_state=0)
    rb = RBFKMeans(3, sigma=0, random_state=0).fit(X)
    proba = rb.predict_proba(X)
    assert_array_equal(proba, np.eye(3)[rb.predict(X)])
    d = np.sqrt(((X[:, None, :] - rb.cluster_centers_[None]) ** 2).sum(-1))
    assert_allclose(rb.transform(X), d, rtol=1e-10)


def test_verbose_lines_are_kmeans_lines():
    # Check that verbose=1 prints KMeans's lines, with the same numbers.
    X, _ = make_blobs(200, centers=4, random_state=0)
    init = X[:4].copy()
    outputs = []
    for Estimator, kw in ((KMeans, {}), (RBFKMeans, {"sigma": 0})):
        out = io.StringIO()
        with redirect_stdout(out):
            Estimator(4, init=init, n_init=1, verbose=1, **kw).fit(X)
        outputs.append(out.getvalue().splitlines())
    km_lines, rb_lines = outputs
    assert len(rb_lines) == len(km_lines)
    for ours, theirs in zip(rb_lines, km_lines):
        number = r"[-+0-9.e]+"
        assert re.sub(number, "#", ours) == re.sub(number, "#", theirs)
