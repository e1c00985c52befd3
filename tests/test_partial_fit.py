"""Tests of RBFKMeans.partial_fit: stepwise online EM over batches.

The update rule against a direct computation, the first call, the
scikit-learn incremental conventions, sample weights, dtypes, and the
requirement that several passes over 20 blocks end within 1% of the full
fit's inertia.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from _data import (
    ACTIVATIONS,
    DTYPE_IDS,
    DTYPES,
    STREAM_BLOBS,
    STREAM_BLOCKS,
    STREAM_FEATURES,
    STREAM_PASSES,
    STREAM_RTOL,
    STREAM_SAMPLES,
    blobs,
)
from _rbf_oracle import distortion, free_energy, sq_distances
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.base import clone
from sklearn.cluster import kmeans_plusplus
from sklearn.exceptions import ConvergenceWarning

from skrbfkmeans import RBFKMeans
from skrbfkmeans._engine.passes import data_offset, squared_norms, statistics


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_several_passes_reach_full_fit_inertia(activation, global_random_seed):
    # Check that STREAM_PASSES passes over STREAM_BLOCKS blocks (a new row
    # order each pass) end within STREAM_RTOL of the inertia of the full fit
    # from the same init and width.
    X = blobs(
        global_random_seed,
        n_samples=STREAM_SAMPLES,
        n_features=STREAM_FEATURES,
        centers=STREAM_BLOBS,
        cluster_std=2.0,
    )
    rng = np.random.RandomState(global_random_seed)
    init, _ = kmeans_plusplus(X, STREAM_BLOBS, random_state=global_random_seed)
    params = dict(n_clusters=STREAM_BLOBS, init=init, sigma=1.0, activation=activation)
    full = RBFKMeans(**params).fit(X)
    km = RBFKMeans(**params)
    for _ in range(STREAM_PASSES):
        for block in np.array_split(rng.permutation(X.shape[0]), STREAM_BLOCKS):
            km.partial_fit(X[block])
    assert km.n_steps_ == STREAM_PASSES * STREAM_BLOCKS
    assert abs(-km.score(X) / full.inertia_ - 1.0) < STREAM_RTOL


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_update_rule(activation, global_random_seed):
    # Check that the first call is one EM iteration on the first batch and
    # the second moves the normalised statistics by rho_2 = (21 / 20)^-0.6.
    X = blobs(global_random_seed, n_samples=400, n_features=3, centers=4)
    w = np.random.RandomState(global_random_seed).uniform(0.5, 2.0, X.shape[0])
    A, B, wa, wb = X[:150], X[150:], w[:150], w[150:]
    init = X[[0, 100, 200, 300]]
    km = RBFKMeans(n_clusters=4, init=init, sigma=0.8, activation=activation)
    km.partial_fit(A, sample_weight=wa)
    with pytest.warns(ConvergenceWarning):
        one = RBFKMeans(
            n_clusters=4, init=init, sigma=0.8, activation=activation, max_iter=1
        ).fit(A, sample_weight=wa)
    assert_allclose(km.cluster_centers_, one.cluster_centers_, rtol=1e-12)
    km.partial_fit(B, sample_weight=wb)

    # Direct computation, in the coordinates centred on the first batch.
    offset = data_offset(A, wa)

    def normalised(Xb, wb_, centers):
        res = statistics(Xb, wb_, centers, 0.8, activation, offset,
                       squared_norms(Xb, offset))  # fmt: skip
        return res.N / wb_.sum(), res.S / wb_.sum()

    n1, s1 = normalised(A, wa, init)
    n2, s2 = normalised(B, wb, one.cluster_centers_)
    rho = (21 / 20) ** -0.6
    n, s = (1 - rho) * n1 + rho * n2, (1 - rho) * s1 + rho * s2
    assert_allclose(km.cluster_centers_, s / n[:, None] + offset, rtol=1e-12)
    assert km.n_steps_ == 2


def test_first_call_initialises(global_random_seed):
    # Check that the first call runs k-means++ on the first batch with
    # random_state, resolves sigma="auto" and sets MiniBatchKMeans's
    # attributes (labels_ and inertia_ of the batch, no n_iter_).
    X = blobs(global_random_seed, n_samples=400, n_features=3, centers=4)
    km = RBFKMeans(n_clusters=4, random_state=global_random_seed)
    km.partial_fit(X[:100])
    with pytest.warns(ConvergenceWarning):
        ref = RBFKMeans(n_clusters=4, random_state=global_random_seed, max_iter=1)
        ref.fit(X[:100])
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12)
    assert km.sigma_ == ref.sigma_
    assert km.n_features_in_ == 3
    assert km.n_steps_ == 1
    assert km.labels_.shape == (100,) and np.isfinite(km.inertia_)
    assert not hasattr(km, "n_iter_") and not hasattr(km, "converged_")
    assert_array_equal(km.predict(X).shape, (X.shape[0],))


def test_first_batch_too_small_and_later_batches_any_size():
    # Check that only the first batch must hold n_clusters samples.
    X = blobs(0, n_samples=400, n_features=3, centers=4)
    with pytest.raises(ValueError, match="first call to partial_fit"):
        RBFKMeans(n_clusters=4).partial_fit(X[:3])
    km = RBFKMeans(n_clusters=4, random_state=0).partial_fit(X[:50])
    km.partial_fit(X[50:51])
    assert np.isfinite(km.cluster_centers_).all()


def test_n_features_mismatch_and_bad_weights():
    # Check that a later batch with other features, or all-zero weights,
    # raises a ValueError naming the problem.
    X = blobs(0, n_samples=400, n_features=3, centers=4)
    km = RBFKMeans(n_clusters=4, random_state=0).partial_fit(X)
    with pytest.raises(ValueError, match="2 features"):
        km.partial_fit(X[:, :2])
    with pytest.raises(ValueError, match="non-zero"):
        km.partial_fit(X, sample_weight=np.zeros(X.shape[0]))
    with pytest.raises(ValueError, match="Negative"):
        km.partial_fit(X, sample_weight=-np.ones(X.shape[0]))


def test_weighted_equals_repeated(global_random_seed):
    # Check that integer weights equal repeated rows, batch by batch.
    X = blobs(global_random_seed, n_samples=400, n_features=3, centers=4)
    counts = np.random.RandomState(global_random_seed).randint(0, 4, X.shape[0])
    counts[:4] = 1
    init = X[:4]
    weighted = RBFKMeans(n_clusters=4, init=init, sigma=1.0)
    repeated = RBFKMeans(n_clusters=4, init=init, sigma=1.0)
    for sl in (slice(0, 200), slice(200, 400), slice(0, 400)):
        weighted.partial_fit(X[sl], sample_weight=counts[sl])
        repeated.partial_fit(np.repeat(X[sl], counts[sl], axis=0))
    # The offset is the weighted mean either way: only the rounding differs.
    assert_allclose(weighted.cluster_centers_, repeated.cluster_centers_, rtol=1e-10)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dtype_kept(dtype):
    # Check that the first batch's dtype is kept, later batches cast to it.
    X = blobs(0, n_samples=400, n_features=3, centers=4).astype(dtype)
    km = RBFKMeans(n_clusters=4, random_state=0).partial_fit(X)
    km.partial_fit(X.astype(np.float64))
    assert km.cluster_centers_.dtype == dtype
    assert km.predict_proba(X).dtype == dtype


def test_after_fit_and_sparse():
    # Check that partial_fit continues from fitted centres (restarting the
    # step counter) and accepts CSR batches after a dense start.
    X = blobs(0, n_samples=400, n_features=3, centers=4)
    km = RBFKMeans(n_clusters=4, random_state=0, tol=1e-14).fit(X)
    centers = km.cluster_centers_.copy()
    km.partial_fit(X)
    assert km.n_steps_ == 1
    # From a fixed point of EM on X, one step with rho = 1 stays there.
    assert_allclose(km.cluster_centers_, centers, rtol=1e-6)
    dense = RBFKMeans(n_clusters=4, init=centers, sigma=km.sigma_).partial_fit(X)
    csr = RBFKMeans(n_clusters=4, init=centers, sigma=km.sigma_).partial_fit(X)
    dense.partial_fit(X[:200])
    csr.partial_fit(sp.csr_matrix(X[:200]))
    assert_allclose(csr.cluster_centers_, dense.cluster_centers_, rtol=1e-12)


def _assert_describes(km, batch, sample_weight=None, given=None):
    # The batch at the centres as they are, by the oracle's explicit
    # distances: its nearest centres, its distortion, its free energy.
    # ``given`` is the batch as the user passed it (a CSR matrix).
    centers = km.cluster_centers_
    assert km.labels_.dtype == np.int32
    assert_array_equal(km.labels_, sq_distances(batch, centers).argmin(axis=1))
    assert_allclose(km.inertia_, distortion(batch, centers, sample_weight), rtol=1e-9)
    want = free_energy(batch, centers, km.sigma_, km.activation, sample_weight)
    assert_allclose(km.objective_, want, rtol=1e-9)
    # And as the user reads the model: predict and score of the batch.
    given = batch if given is None else given
    assert_array_equal(km.labels_, km.predict(given))
    assert km.inertia_ == -km.score(given, sample_weight=sample_weight)


@pytest.mark.parametrize("activation", ACTIVATIONS)
@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_after_fit_stream_attributes_describe_the_last_batch(activation, sparse):
    # Check that after fit(X) then partial_fit(batch), labels_ and inertia_
    # are the batch's at the moved centres (MiniBatchKMeans's choice): they
    # were the fit's, labels_ of all of X at the old centres, and inertia_
    # (1137.5 in the report) unlike -score(X) (12098.7) or anything else.
    X = blobs(3, n_samples=600, n_features=3, centers=4, cluster_std=2.0)
    km = RBFKMeans(n_clusters=4, sigma=1.0, activation=activation, random_state=0)
    km.fit(X)
    fitted = km.cluster_centers_.copy()
    w = np.random.RandomState(0).uniform(0.5, 2.0, 150)
    batch = X[:150] + 1.0
    given = sp.csr_matrix(batch) if sparse else batch
    km.partial_fit(given, sample_weight=w)
    assert not np.array_equal(km.cluster_centers_, fitted)
    _assert_describes(km, batch, w, given)
    km.partial_fit(X[150:200])
    _assert_describes(km, X[150:200])


def test_stream_attributes_far_from_the_origin():
    # Check that the batch's labels_ and inertia_ are those of the centres
    # as returned, also where the stream works on centred rows (an offset of
    # 1e15 rounds the returned centres to multiples of 0.125).
    X = blobs(4, n_samples=400, n_features=2, centers=3) + 1e15
    km = RBFKMeans(n_clusters=3, sigma=0.5, random_state=0)
    for start in range(0, 400, 100):
        km.partial_fit(X[start : start + 100])
        assert_array_equal(km.labels_, km.predict(X[start : start + 100]))
        assert km.inertia_ == -km.score(X[start : start + 100])
    assert km.labels_.shape == (100,)


def test_stream_attributes_of_a_dask_array_are_its_last_block(synchronous_dask):
    # Check that a dask array, one step per block, leaves labels_ and
    # inertia_ of its last block: as the same blocks fed one by one.
    import dask.array as da

    X = blobs(5, n_samples=600, n_features=2, centers=3)
    km = RBFKMeans(n_clusters=3, random_state=0).partial_fit(
        da.from_array(X, chunks=(250, 2))
    )
    ref = RBFKMeans(n_clusters=3, random_state=0)
    for start in (0, 250, 500):
        ref.partial_fit(X[start : start + 250])
    assert isinstance(km.labels_, np.ndarray)
    assert_array_equal(km.labels_, ref.labels_)
    assert_allclose(km.inertia_, ref.inertia_, rtol=1e-12)
    _assert_describes(km, X[500:])


@pytest.mark.parametrize("start", ["fit", "partial_fit"])
def test_other_n_clusters_raises_naming_it(start):
    # Check that set_params(n_clusters=5) on a model of 3 centres, then
    # partial_fit, raises a ValueError naming n_clusters and both counts
    # (it was a raw "operands could not be broadcast together with shapes
    # (5,) (3,)"), leaves the model as it was, and that the model continues
    # with n_clusters set back and a clone streams with 5.
    X = blobs(6, n_samples=300, n_features=2, centers=3)
    km = RBFKMeans(n_clusters=3, random_state=0)
    getattr(km, start)(X)
    centers = km.cluster_centers_.copy()
    km.set_params(n_clusters=5)
    with pytest.raises(ValueError, match=r"n_clusters=5 .* 3 centres.* n_clusters=3"):
        km.partial_fit(X[:100])
    assert_array_equal(km.cluster_centers_, centers)
    km.set_params(n_clusters=3).partial_fit(X[:100])
    assert km.cluster_centers_.shape == (3, 2)
    fresh = clone(km).set_params(n_clusters=5).partial_fit(X)
    assert fresh.cluster_centers_.shape == (5, 2)
