"""Results do not depend on NumPy's error state.

The engine handles its floating-point events itself: underflow gives the
value at working precision, and the flags of its BLAS products (finite
operands) carry no information. So a caller working under
``np.errstate(all="raise")`` (or ``np.seterr``) gets the same results as
under NumPy's defaults, bit for bit, or the same clear error, at every scale
of the data.
"""

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import ACTIVATIONS
from numpy.testing import assert_array_equal
from sklearn.datasets import make_blobs

from skrbfkmeans import (
    AnnealedRBFKMeans,
    RBFKMeans,
    entmax15,
    kmeans_polish,
    rbf_kmeans_loss,
    sparsemax,
)

SCALES = [
    pytest.param(dtype, scale, id=f"{np.dtype(dtype).name}-{scale:g}")
    for dtype, scales in [
        (np.float64, [1e-300, 1e-150, 1.0, 1e150, 1e300, 1e307]),
        (np.float32, [1e-40, 1e-30, 1e30]),
    ]
    for scale in scales
]
ESTIMATORS = {
    "softmax": lambda: RBFKMeans(4, random_state=0, n_init=2),
    "entmax15": lambda: RBFKMeans(4, activation="entmax15", random_state=0, n_init=2),
    "sigma0": lambda: RBFKMeans(4, sigma=0, random_state=0, n_init=2),
    "annealed": lambda: AnnealedRBFKMeans(4),
    "auto": lambda: AnnealedRBFKMeans("auto", max_clusters=6),
}


def _data(dtype, scale, sparse):
    X, _ = make_blobs(150, centers=4, n_features=3, cluster_std=1.5, random_state=0)
    X = (X * scale).astype(dtype)
    return sp.csr_matrix(X) if sparse else X


def _outcome(func):
    """``func()``'s result, or the type and message of its exception."""
    with warnings.catch_warnings():
        # ConvergenceWarnings are not the point; they are the same in both.
        warnings.simplefilter("ignore")
        try:
            return func()
        except (ValueError, FloatingPointError) as exc:
            return type(exc), str(exc)


def _is_error(outcome):
    return isinstance(outcome, tuple) and bool(outcome) and isinstance(outcome[0], type)


def _assert_same(got, expected):
    if _is_error(got) or _is_error(expected):
        assert got == expected
        return
    assert len(got) == len(expected)
    for x, y in zip(got, expected):
        assert_array_equal(np.asarray(x), np.asarray(y))


def _fit_outputs(make, X):
    def run():
        est = make().fit(X)
        out = [est.cluster_centers_, est.labels_, est.inertia_, est.predict(X)]
        out += [est.transform(X), est.score(X)]
        if hasattr(est, "predict_proba"):
            out.append(est.predict_proba(X))
        if hasattr(est, "objective_path_"):
            out += [est.sigma_path_, est.objective_path_, est.inertia_path_]
        return out

    return run


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype, scale", SCALES)
@pytest.mark.parametrize("name", list(ESTIMATORS))
def test_estimators_ignore_the_callers_errstate(name, dtype, scale, sparse):
    # Check that fit and every method give the same bits under
    # np.errstate(all="raise") as under NumPy's defaults (or the same
    # ValueError where the data cannot be clustered), at scales 1e-300 to
    # 1e300: underflow in the scale analysis, the GEMMs and the mapping back
    # to the user's units used to raise there.
    X = _data(dtype, scale, sparse)
    run = _fit_outputs(ESTIMATORS[name], X)
    expected = _outcome(run)
    with np.errstate(all="raise"):
        got = _outcome(run)
    _assert_same(got, expected)


@pytest.mark.parametrize("dtype, scale", SCALES)
def test_functions_ignore_the_callers_errstate(dtype, scale):
    # Check the same for kmeans_polish, the loss and its gradients (both
    # activations, widths 1e-3 to 1e3 times the data's spread) and the
    # entmax maps.
    X = _data(dtype, scale, sparse=False)
    spread = scale * float(np.std(X.astype(np.float64) / scale))

    def run():
        out = list(kmeans_polish(X, X[:4].copy()))
        for activation in ACTIVATIONS:
            for factor in (1e-3, 1.0, 1e3):
                out += rbf_kmeans_loss(
                    X,
                    X[:4].copy(),
                    sigma=factor * spread,
                    activation=activation,
                    return_gradient=True,
                )
        out += [entmax15(X, axis=1), sparsemax(X, axis=0)]
        return out

    expected = _outcome(run)
    with np.errstate(all="raise"):
        got = _outcome(run)
    _assert_same(got, expected)
