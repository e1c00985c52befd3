"""Rows far from all the others: the inertia a fit reports, and where it centres.

A passes' distance ``||x - o||^2 + ||mu - o||^2 - 2 (x - o) . (mu - o)``
rounds at a few ulps of the squared norms from the offset ``o``. One row at
1e5 among 200 rows of size 1 pulls the mean about 500 away from the others,
and in float32 their distances then round at more than the distances
themselves: the reported inertia was the rounding (8239.5 for a labelling
whose inertia is 54), and the annealing moved by noise for 380 stages.
The reported inertia is now each row's distance to its labelled centre by
explicit differences, as KMeans reports it, and such data are centred on
the mean of the rows near one another.
"""

from fractions import Fraction

import numpy as np
import pytest
import scipy.sparse as sp
from _rbf_oracle import least_move_change
from hypothesis import given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans
from skrbfkmeans._engine.passes import data_offset, explicit_inertia, labels_inertia


def _exact_inertia(X, w, centers, labels):
    """The weighted inertia of a labelling in exact rational arithmetic."""
    X = np.asarray(X.toarray() if sp.issparse(X) else X, dtype=np.float64)
    C = np.asarray(centers, dtype=np.float64)
    total = Fraction(0)
    for x, wi, j in zip(X, np.asarray(w, dtype=np.float64), labels):
        d = sum((Fraction(a) - Fraction(b)) ** 2 for a, b in zip(x, C[j]))
        total += Fraction(wi) * d
    return float(total)


def _explicit(X, centers, labels, w=None):
    """The weighted inertia of a labelling by explicit differences in float64."""
    diff = np.asarray(X, dtype=np.float64) - np.asarray(centers, np.float64)[labels]
    d = np.einsum("ij,ij->i", diff, diff)
    return float(d.sum() if w is None else np.asarray(w, np.float64) @ d)


def _bulk_and_outlier(dtype, far, n=200, d=5, seed=0):
    """Rows uniform in the unit cube, the first moved to ``-far`` in every feature."""
    X = np.random.default_rng(seed).uniform(size=(n, d))
    X[0] = -far
    return X.astype(dtype)


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    dtype=st.sampled_from([np.float64, np.float32]),
    far=st.sampled_from([0.0, 1e3, 1e8, 1e15]),
    shift=st.sampled_from([0.0, 1e6]),
    sparse=st.booleans(),
    weighted=st.booleans(),
)
def test_explicit_inertia_is_the_exact_inertia_of_the_labels(
    seed, dtype, far, shift, sparse, weighted
):
    # Check explicit_inertia against exact rational arithmetic on rows with
    # a far row and a common shift, for any labelling (not only the nearest
    # centre), dense and CSR, weighted or not: within a few ulps of the
    # inertia itself, where the passes' expansion is off by up to eps times
    # the squared norms.
    rng = np.random.default_rng(seed)
    n, d, k = 30, 3, 4
    X = rng.normal(size=(n, d)) + shift
    X[0] += far
    if sparse:
        X[rng.random((n, d)) < 0.3] = 0.0
    X = X.astype(dtype)
    centers = X[rng.choice(n, k, replace=False)] + rng.normal(size=(k, d))
    centers = centers.astype(dtype)
    labels = rng.integers(0, k, n)
    w = rng.uniform(0.1, 3.0, n) if weighted else np.ones(n)
    Xin = sp.csr_array(X) if sparse else X
    got = explicit_inertia(Xin, w.astype(dtype), centers, labels)
    exact = _exact_inertia(X, w.astype(dtype), centers, labels)
    assert got == pytest.approx(exact, rel=1e-12)


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_explicit_inertia_reads_blocks_and_never_writes(sparse):
    # Check an input of several 1 MiB blocks (dense, or CSR with 30% of its
    # entries stored) against one explicit difference, and that neither the
    # rows nor the centres change.
    rng = np.random.default_rng(0)
    X = rng.normal(size=(40_000, 8)) + 1e4
    if sparse:
        X[rng.random(X.shape) < 0.7] = 0.0
    centers = X[:5] + 0.5
    labels = rng.integers(0, 5, X.shape[0])
    w = rng.uniform(size=X.shape[0])
    Xin = sp.csr_array(X) if sparse else X
    X0, c0 = Xin.copy(), centers.copy()
    got = explicit_inertia(Xin, w, centers, labels)
    assert got == pytest.approx(_explicit(X, centers, labels, w), rel=1e-12)
    assert_array_equal(Xin.toarray() if sparse else Xin, X0.toarray() if sparse else X0)
    assert_array_equal(centers, c0)


@pytest.mark.parametrize("empty", ["all", "leading-block"])
def test_explicit_inertia_of_csr_rows_without_stored_entries(empty):
    # Check CSR input whose rows store nothing, all of them or the first
    # 200000 (more than one 1 MiB block of entries: a block with no stored
    # entry at all), against explicit differences; a block without entries
    # failed to add the centres' norms to its integer counts (float32 rows
    # scaled into underflow are all zero).
    rng = np.random.default_rng(0)
    n = 1000 if empty == "all" else 250_000
    X = np.zeros((n, 3))
    if empty != "all":
        X[200_000:] = rng.normal(size=(n - 200_000, 3))
    centers = rng.normal(size=(4, 3))
    labels = rng.integers(0, 4, n)
    w = rng.uniform(size=n)
    got = explicit_inertia(sp.csr_array(X), w, centers, labels)
    assert got == pytest.approx(_explicit(X, centers, labels, w), rel=1e-12)
    # A fit on rows that are all zero (the first 1000 in both cases).
    with pytest.warns(ConvergenceWarning, match="distinct clusters"):
        est = RBFKMeans(2, sigma=0, random_state=0).fit(sp.csr_matrix(X[:1000]))
    assert est.inertia_ == 0.0


@pytest.mark.parametrize(
    "dtype, far", [(np.float32, 1e5), (np.float64, 1e10), (np.float64, 1e14)]
)
@pytest.mark.parametrize(
    "make",
    [
        lambda: RBFKMeans(6, sigma=0, random_state=0),
        lambda: RBFKMeans(6, random_state=0),
        lambda: AnnealedRBFKMeans(6),
    ],
    ids=["sigma0", "softmax", "annealed"],
)
def test_reported_inertia_is_the_inertia_of_the_labels(make, dtype, far):
    # Check that inertia_ and score are the weighted distance of each row to
    # its labelled centre (explicit differences in float64, the oracle),
    # where the expansion from the mean rounds at more than the distances;
    # before, inertia_ was 8239.5, 1.3e5 or 2.7e8 for labellings of about 50.
    X = _bulk_and_outlier(dtype, far)
    # Weights in the rows' dtype, as the fit takes them.
    w = np.random.default_rng(1).uniform(0.5, 2.0, X.shape[0]).astype(dtype)
    est = make().fit(X, sample_weight=w)
    expected = _explicit(X, est.cluster_centers_, est.labels_, w)
    assert est.inertia_ == pytest.approx(expected, rel=1e-9)
    assert -est.score(X, sample_weight=w) == pytest.approx(expected, rel=1e-9)
    assert_array_equal(est.predict(X), est.labels_)


def test_partial_fit_reports_its_batch_inertia_explicitly():
    # Check the batch inertia of partial_fit (as MiniBatchKMeans reports it)
    # against explicit differences on a float32 batch with a far row.
    X = _bulk_and_outlier(np.float32, 1e5)
    est = RBFKMeans(4, random_state=0).partial_fit(X)
    expected = _explicit(X, est.cluster_centers_, est.labels_)
    assert est.inertia_ == pytest.approx(expected, rel=1e-9)


def test_dask_rows_report_the_explicit_inertia():
    # Check inertia_ and score of a fit on dask chunks against explicit
    # differences, where the chunks' expansion rounds at more than the
    # distances (a far row at 1e10 in float64).
    da = pytest.importorskip("dask.array")
    X = _bulk_and_outlier(np.float64, 1e10)
    est = RBFKMeans(4, sigma=0, random_state=0).fit(da.from_array(X, chunks=50))
    labels = np.asarray(est.labels_)
    expected = _explicit(X, est.cluster_centers_, labels)
    assert est.inertia_ == pytest.approx(expected, rel=1e-9)
    assert -est.score(da.from_array(X, chunks=70)) == pytest.approx(expected, rel=1e-9)


@pytest.mark.parametrize("dtype, far", [(np.float32, 1e5), (np.float64, 1e10)])
def test_the_bulk_is_centred_on_its_own_mean(dtype, far):
    # Check that the offset of rows with one far row is the mean of the
    # others (the far row pulls the mean 5e2 or 5e7 away), that the passes'
    # inertia there is then within rounding of the exact one, and that the
    # annealed fit settles below KMeans(n_init=10) in fewer than 1000 EM
    # iterations (38186 before, in float32), certified, and that no single
    # row's move lowers its inertia (explicit search, the oracle of the
    # certificate's third condition).
    X = _bulk_and_outlier(dtype, far)
    w = np.ones(X.shape[0], dtype=dtype)
    offset = data_offset(X, w)
    assert_allclose(offset, X[1:].astype(np.float64).mean(axis=0), rtol=1e-5)
    bulk = X[1:]
    centers = bulk[:4]
    labels, inertia = labels_inertia(bulk, w[1:], centers, offset)
    exact = _exact_inertia(bulk, w[1:], centers, labels)
    assert inertia == pytest.approx(exact, rel=1e-4 if dtype == np.float32 else 1e-12)
    est = AnnealedRBFKMeans(6).fit(X)
    km = KMeans(6, n_init=10, random_state=0).fit(X)
    assert est.n_iter_total_ < 1000
    assert est.certified_
    assert least_move_change(X, est.labels_, 6) > 0
    assert est.inertia_ <= _explicit(X, km.cluster_centers_, km.labels_)


def test_a_far_centre_keeps_its_rounding_to_itself():
    # Check the certificate's bound on each centre's distance from its
    # cluster's exact mean: the far row's cluster (at 1e10) rounds at its
    # own magnitude, the others at theirs (a single bound for all, the far
    # one's, refused the stable fit of the test above in float64).
    from skrbfkmeans._certificate import check_block, fixed_point_test

    X = _bulk_and_outlier(np.float64, 1e10)
    est = AnnealedRBFKMeans(6).fit(X)
    parts = check_block(X, np.ones(X.shape[0]), est.cluster_centers_)
    _, fixed, shift = fixed_point_test(parts, est.cluster_centers_)
    far = est.labels_[0]
    assert fixed
    others = np.delete(shift, far)
    assert shift[far] > 1e-7 and others.max() < 1e-12


@pytest.mark.parametrize(
    "name",
    [
        "blobs",
        "unequal-groups",
        "far-groups",
        "high-dimensional",
        "constant",
        "far-origin",
    ],
)
def test_ordinary_data_keep_their_mean(name):
    # Check that data without far rows are centred on their weighted mean,
    # to the bit: blobs, groups of 90% and 10%, two equal groups 1e4 apart,
    # 60 rows in 5000 dimensions (a thin shell around the mean, but no
    # row far from it), constant rows, rows near 1e8.
    rng = np.random.default_rng(0)
    if name == "blobs":
        X = rng.normal(size=(300, 3)) + rng.integers(0, 4, (300, 1)) * 5.0
    elif name == "unequal-groups":
        X = np.vstack([rng.normal(size=(270, 2)), rng.normal(size=(30, 2)) + 50.0])
    elif name == "far-groups":
        X = np.vstack([rng.normal(size=(100, 2)), rng.normal(size=(100, 2)) + 1e4])
    elif name == "high-dimensional":
        X = rng.normal(size=(60, 5000))
    elif name == "constant":
        X = np.full((50, 3), 7.0)
    else:
        X = rng.normal(size=(200, 4)) + 1e8
    w = rng.uniform(0.5, 2.0, X.shape[0])
    mean = ((w @ X) / w.sum()).astype(X.dtype)
    assert_array_equal(data_offset(X, w), mean)


def test_bulk_offset_weights_are_counts():
    # Check that integer weights give the offset of the rows repeated, to
    # the bit, where the far row moves it (the quantiles and the bulk's
    # mean are taken under the weights).
    X = _bulk_and_outlier(np.float64, 1e10, n=60)
    counts = np.random.default_rng(2).integers(1, 4, X.shape[0])
    repeated = np.repeat(X, counts, axis=0)
    by_weight = data_offset(X, counts.astype(np.float64))
    by_rows = data_offset(repeated, np.ones(repeated.shape[0]))
    assert_allclose(by_weight, by_rows, rtol=1e-14)
    assert np.abs(by_weight).max() < 1.0  # inside the bulk, not 1e10 / 60 away


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n=st.integers(1, 60),
    weights=st.sampled_from(["equal", "integer", "spread"]),
    ties=st.booleans(),
)
def test_weighted_quantiles_are_numpys_inverted_cdf(seed, n, weights, ties):
    # Check the offset's quantiles against numpy.quantile(method=
    # "inverted_cdf", weights=...), equal weights (no sort) and others, with
    # ties among the values.
    from skrbfkmeans._engine.passes import _weighted_quantiles

    rng = np.random.default_rng(seed)
    values = rng.integers(0, 4, n).astype(float) if ties else rng.normal(size=n)
    w = {
        # Integers: the cumulative weights are exact (with 0.7, numpy's own
        # cumulative sum rounds across a quantile's boundary).
        "equal": np.full(n, 2.0),
        "integer": rng.integers(1, 5, n).astype(float),
        "spread": 10.0 ** rng.uniform(-3, 3, n),
    }[weights]
    qs = (0.1, 0.5, 0.9)
    expected = np.quantile(values, qs, method="inverted_cdf", weights=w)
    assert_array_equal(_weighted_quantiles(values, w, qs), expected)


@pytest.mark.parametrize("dtype, far", [(np.float32, 1e5), (np.float64, 1e10)])
def test_polish_and_hartigan_report_the_explicit_inertia(dtype, far):
    # Check the inertia kmeans_polish and kmeans_hartigan return against
    # explicit differences of their labels and centres, next to a far row.
    from skrbfkmeans import kmeans_hartigan, kmeans_polish

    X = _bulk_and_outlier(dtype, far)
    start = KMeans(6, n_init=1, random_state=0).fit(X).cluster_centers_
    for func in (kmeans_polish, kmeans_hartigan):
        centers, labels, inertia, _ = func(X, start)
        assert inertia == pytest.approx(_explicit(X, centers, labels), rel=1e-9)


def _weighted_blobs_and_light_far_row(seed, n_blobs=8):
    """Blobs of 30 heavy rows (weights near 1e5), one row of weight 2 at 3000."""
    rng = np.random.default_rng(seed)
    C = rng.uniform(0, 10 * n_blobs, size=(n_blobs, 2))
    blobs = [c + rng.normal(0, 0.3, size=(30, 2)) for c in C]
    X = np.concatenate(blobs + [np.full((1, 2), 3000.0)])
    w = np.concatenate([rng.uniform(0.5e5, 1.5e5, size=30 * n_blobs), [2.0]])
    return X, w


@pytest.mark.parametrize("seed", [0, 2, 3, 5])
def test_a_light_far_row_gets_the_spare_centre(seed):
    # Check that with one centre more than blobs the spare centre takes the
    # light far row (its cost alone, 2 x 2 x 3000^2, is far above a second
    # centre's gain in any blob), as KMeans(n_init=10) finds: the annealing
    # ended certified on 9-11 times KMeans's inertia, the far row in a blob's
    # cluster (weighted blobs, 7-D grids with weights from 1e-6 to 1e6).
    X, w = _weighted_blobs_and_light_far_row(seed)
    est = AnnealedRBFKMeans(9).fit(X, sample_weight=w)
    km = KMeans(9, n_init=10, random_state=0).fit(X, sample_weight=w)
    assert np.count_nonzero(est.labels_ == est.labels_[-1]) == 1
    assert est.certified_
    assert est.inertia_ <= km.inertia_ * (1 + 1e-9)
    assert_allclose(est.inertia_, _explicit(X, est.cluster_centers_, est.labels_, w))
