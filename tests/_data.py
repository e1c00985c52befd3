"""Parameter lists and data sets shared by the test modules.

A plain module, imported as ``from _data import ...`` like ``_oracle.py``:
the lists parametrise tests when a module is imported, where a fixture
cannot reach, and pytest advises against importing ``conftest``.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs

ACTIVATIONS = ["softmax", "entmax15"]
DTYPES = [np.float32, np.float64]
DTYPE_IDS = ["float32", "float64"]
# The methods of a fitted estimator that take new data.
METHODS = ["predict", "predict_proba", "transform", "score"]
# Relative rounding allowed on sums over ~100 samples computed in the dtype
# (float32 buffers are summed in float32 inside a block).
RTOL = {np.float32: 1e-5, np.float64: 1e-11}

# The stream of test_partial_fit.py that the user guide describes ("five
# passes over 20 blocks of 20000 samples (ten blobs in 5-D) ... within 1%";
# test_docs_claims.py checks the sentence against these numbers).
STREAM_SAMPLES, STREAM_FEATURES, STREAM_BLOBS = 20_000, 5, 10
STREAM_BLOCKS, STREAM_PASSES, STREAM_RTOL = 20, 5, 0.01

# Four centres 12 standard deviations (0.5) apart.
SQUARE = np.array([[0.0, 0.0], [0.0, 6.0], [6.0, 0.0], [6.0, 6.0]])


def blobs(seed, *, n_samples, n_features, centers, cluster_std=1.0):
    """The rows of ``make_blobs`` drawn with ``random_state=seed``.

    Every size is stated by the caller: the tests' data sets differ.
    """
    X, _ = make_blobs(
        n_samples=n_samples,
        n_features=n_features,
        centers=centers,
        cluster_std=cluster_std,
        random_state=seed,
    )
    return X


def separated_blobs(seed, n_samples):
    """``(X, y)``: blobs around the corners of ``SQUARE``, far apart.

    Fixed centres: make_blobs's random centres sometimes overlap, and then
    KMeans does not recover them either.
    """
    return make_blobs(n_samples, centers=SQUARE, cluster_std=0.5, random_state=seed)


def sparse_blobs(seed, n_samples=100, n_features=5, dtype=np.float64):
    """Blobs (3, std 2) with about half of the entries set to exactly zero."""
    X = blobs(
        seed, n_samples=n_samples, n_features=n_features, centers=3, cluster_std=2.0
    )
    rng = np.random.RandomState(seed)
    X[rng.uniform(size=X.shape) < 0.5] = 0.0
    return X.astype(dtype)


def csr_if(X, sparse):
    """``X``, or if ``sparse`` a CSR copy with entries under 0.5 set to zero."""
    if not sparse:
        return X
    X = X.copy()
    X[np.abs(X) < 0.5] = 0.0
    return sp.csr_matrix(X)


def first_rows(X, n_clusters=3):
    """The first rows, densified: a fixed init shared by dense and sparse fits."""
    rows = X[:n_clusters]
    return rows.toarray() if sp.issparse(rows) else rows.copy()


def unequal_clusters(seed):
    """Four clusters of sizes 2000/150/60/40, the small ones far and tight.

    The small clusters' union has a far larger spread than the big cluster,
    so annealing splits them first and spends all k=4 centres on them, while
    the optimum splits the big cluster and merges the two lightest (doc/theory.rst,
    the polish: pure annealing ends ~20% above the optimum here).
    """
    rng = np.random.default_rng(seed)
    sizes = [2000, 150, 60, 40]
    centers = np.array([[0.0, 0.0], [50.0, 0.0], [50.0, 25.0], [50.0, 40.0]])
    stds = np.array([3.0, 0.5, 0.5, 0.5])
    labels = np.repeat(np.arange(4), sizes)
    return centers[labels] + rng.standard_normal((labels.size, 2)) * stds[labels, None]


def _with_int64_indices(A):
    A = A.copy()
    A.indices = A.indices.astype(np.int64)
    A.indptr = A.indptr.astype(np.int64)
    return A


def sparse_containers():
    """Every scipy sparse format, matrix and array, plus 64-bit CSR indices."""
    out = []
    for fmt in ("csr", "csc", "coo", "lil", "dok", "dia", "bsr"):
        for kind in ("matrix", "array"):
            cls = getattr(sp, f"{fmt}_{kind}", None)
            if cls is not None:
                out.append(pytest.param(cls, id=f"{fmt}_{kind}"))
    for kind in ("matrix", "array"):
        cls = getattr(sp, f"csr_{kind}")
        out.append(
            pytest.param(
                lambda X, cls=cls: _with_int64_indices(cls(X)), id=f"csr_{kind}_int64"
            )
        )
    return out
