"""Tests of dask input on a two-process ``dask.distributed.LocalCluster``.

A dask fit must give the NumPy fit's centres to rounding (same init, same
width), whatever the row chunks; prediction on dask input stays lazy and
equals the NumPy prediction. The module is skipped where the ``dask`` extra
is not installed; ``test_optional_dask.py`` covers the package without it.
Every fit here converges in a few iterations: each one costs a round trip
to the scheduler.
"""

import re
import warnings

import numpy as np
import pytest

distributed = pytest.importorskip("distributed")
da = pytest.importorskip("dask.array")

from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402
from sklearn.metrics import adjusted_rand_score  # noqa: E402

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans  # noqa: E402

ACTIVATIONS = ["softmax", "entmax15"]
# Block sums are added in another order than the in-memory engine's: the
# centres agree to a few hundred ulps after a handful of EM iterations
# (measured: at most 20 ulps in float64, 11 in float32).
RTOL = {np.float32: 3e-5, np.float64: 1e-13}


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(
        n_workers=2,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
    )
    client = distributed.Client(cluster)
    yield client
    client.close()
    cluster.close()


def _blobs(seed, n_samples=600, n_features=3, centers=4, dtype=np.float64):
    X, _ = make_blobs(
        n_samples=n_samples,
        n_features=n_features,
        centers=centers,
        cluster_std=0.6,
        random_state=seed,
    )
    return X.astype(dtype)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_fit_matches_numpy(client, activation, global_random_seed):
    # Check that a weighted k-means++ fit on a dask array gives the NumPy
    # fit's centres, width, inertia and objective (all rows are the sample).
    X = _blobs(global_random_seed)
    w = np.random.RandomState(global_random_seed).uniform(0.5, 2.0, X.shape[0])
    params = dict(n_clusters=4, activation=activation, random_state=0)
    ref = RBFKMeans(**params).fit(X, sample_weight=w)
    km = RBFKMeans(**params).fit(
        da.from_array(X, chunks=(150, 3)), sample_weight=da.from_array(w, chunks=100)
    )
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL[np.float64])
    assert km.sigma_ == ref.sigma_
    assert km.n_iter_ == ref.n_iter_
    assert km.converged_
    assert_allclose(km.inertia_, ref.inertia_, rtol=1e-12)
    assert_allclose(km.objective_, ref.objective_, rtol=1e-12)
    # labels_ stays lazy and equals predict, as for NumPy input.
    assert isinstance(km.labels_, da.Array)
    assert_array_equal(km.labels_.compute(), ref.labels_)


def test_chunking_invariance(client, global_random_seed):
    # Check that the row chunks (and a chunked feature axis) do not change
    # the centres beyond rounding.
    X = _blobs(global_random_seed)
    init = X[:: X.shape[0] // 4][:4]
    params = dict(n_clusters=4, init=init, sigma=0.5, activation="entmax15")
    fits = [
        RBFKMeans(**params).fit(da.from_array(X, chunks=chunks))
        for chunks in [(600, 3), (97, 3), (250, 1)]
    ]
    for km in fits[1:]:
        assert_allclose(
            km.cluster_centers_, fits[0].cluster_centers_, rtol=RTOL[np.float64]
        )
        assert km.n_iter_ == fits[0].n_iter_


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
def test_predictions_lazy_and_equal(client, dtype, global_random_seed):
    # Check that predict, transform and predict_proba return dask arrays
    # equal to the NumPy results, score a float, and that the dtype is kept.
    X = _blobs(global_random_seed, dtype=dtype)
    Xd = da.from_array(X, chunks=(128, 3))
    km = RBFKMeans(n_clusters=4, random_state=0).fit(Xd)
    ref = RBFKMeans(n_clusters=4, random_state=0).fit(X)
    assert km.cluster_centers_.dtype == dtype
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL[dtype])
    labels = km.predict(Xd)
    assert isinstance(labels, da.Array)
    assert labels.dtype == np.int32
    assert_array_equal(labels.compute(), km.predict(X))
    for method in ("transform", "predict_proba"):
        lazy = getattr(km, method)(Xd)
        assert isinstance(lazy, da.Array)
        assert lazy.dtype == dtype
        result = lazy.compute()
        assert result.dtype == dtype
        # The same fitted estimator row by row: equal up to a few ulps.
        eps = np.finfo(dtype).eps
        assert_allclose(result, getattr(km, method)(X), rtol=8 * eps, atol=8 * eps)
    score = km.score(Xd)
    assert isinstance(score, float)
    assert_allclose(score, km.score(X), rtol=RTOL[dtype])


def test_integer_input_and_dataframe(client):
    # Check that integer dask input becomes float64 and that a dask
    # DataFrame records its feature names like a pandas one.
    dd = pytest.importorskip("dask.dataframe")
    pd = pytest.importorskip("pandas")
    X = np.round(_blobs(0) * 10).astype(np.int64)
    km = RBFKMeans(n_clusters=4, random_state=0).fit(da.from_array(X, chunks=200))
    assert km.cluster_centers_.dtype == np.float64
    ref = RBFKMeans(n_clusters=4, random_state=0).fit(X)
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL[np.float64])

    df = pd.DataFrame(_blobs(1), columns=["a", "b", "c"])
    ddf = dd.from_pandas(df, npartitions=3)
    km = RBFKMeans(n_clusters=4, random_state=0).fit(ddf)
    assert_array_equal(km.feature_names_in_, ["a", "b", "c"])
    ref = RBFKMeans(n_clusters=4, random_state=0).fit(df)
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL[np.float64])
    assert_array_equal(km.predict(ddf).compute(), ref.predict(df))


def test_annealed_matches_numpy(client):
    # Check that AnnealedRBFKMeans on a dask array (all rows are the sample)
    # ends on the NumPy fit's certified solution.
    X = _blobs(3)
    ref = AnnealedRBFKMeans(n_clusters=4).fit(X)
    km = AnnealedRBFKMeans(n_clusters=4).fit(da.from_array(X, chunks=200))
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL[np.float64])
    assert km.certified_ and ref.certified_
    assert_allclose(km.sigma_, ref.sigma_, rtol=1e-12)
    assert_allclose(km.inertia_, ref.inertia_, rtol=1e-12)
    assert_array_equal(km.sigma_path_, ref.sigma_path_)


def test_annealed_on_a_sample(client):
    # Check that with more rows than the sample, the schedule runs on the
    # sample and the final Lloyd phase and certificate on every row: the
    # result is a certified Lloyd fixed point of all the data.
    X = _blobs(4, n_samples=12_000, n_features=2, centers=3)
    km = AnnealedRBFKMeans(n_clusters=3, random_state=0).fit(
        da.from_array(X, chunks=4000)
    )
    assert km.certified_
    labels = km.predict(X)
    means = np.array([X[labels == j].mean(axis=0) for j in range(3)])
    assert_allclose(km.cluster_centers_, means, rtol=1e-10)
    ref = AnnealedRBFKMeans(n_clusters=3).fit(X)
    assert_allclose(km.inertia_, ref.inertia_, rtol=1e-8)


def test_bad_values_raise(client):
    # Check that NaN in the data and negative weights raise at fit, and that
    # a NaN reaching predict raises when its block is computed.
    X = _blobs(0)
    bad = X.copy()
    bad[7, 1] = np.nan
    with pytest.raises(ValueError, match="NaN"):
        RBFKMeans(n_clusters=4).fit(da.from_array(bad, chunks=200))
    w = np.ones(X.shape[0])
    w[3] = -1.0
    with pytest.raises(ValueError, match="Negative"):
        RBFKMeans(n_clusters=4).fit(da.from_array(X, chunks=200), sample_weight=w)
    with pytest.raises(ValueError, match="n_samples=3 should be >= n_clusters=4"):
        RBFKMeans(n_clusters=4).fit(da.from_array(X[:3], chunks=2))
    km = RBFKMeans(n_clusters=4, random_state=0).fit(X)
    with pytest.raises(ValueError, match="NaN"):
        km.predict(da.from_array(bad, chunks=200)).compute()
    with pytest.raises(ValueError, match="2 features"):
        km.predict(da.from_array(X[:, :2], chunks=200))


def _assert_same_weight_error(X, w, fragment):
    """The NumPy fit's error names ``fragment``; dask's is the same, word for word."""
    with pytest.raises(ValueError, match=re.escape(fragment)) as ref:
        RBFKMeans(n_clusters=4).fit(X, sample_weight=w)
    for weights in (w, da.from_array(w, chunks=100)):
        with pytest.raises(ValueError) as exc:
            RBFKMeans(n_clusters=4).fit(
                da.from_array(X, chunks=200), sample_weight=weights
            )
        assert str(exc.value) == str(ref.value)


@pytest.mark.parametrize("dtype", [np.float32, np.float64], ids=["f32", "f64"])
@pytest.mark.parametrize(
    "bad, fragment",
    [
        (np.nan, "Input sample_weight contains NaN."),
        (np.inf, "Input sample_weight contains infinity"),
        (-np.inf, "Input sample_weight contains infinity"),
        (-1.0, "Negative values in data passed to `sample_weight`"),
    ],
    ids=["nan", "inf", "-inf", "negative"],
)
def test_bad_sample_weight_message(client, dtype, bad, fragment):
    # Check that a NaN, infinite or negative weight raises the NumPy path's
    # error word for word (NaN and infinity named as such, before a negative
    # weight elsewhere), for NumPy and for dask weights.
    X = _blobs(0, dtype=dtype)
    w = np.ones(X.shape[0])
    w[[5, 450]] = bad
    w[300] = -2.0
    _assert_same_weight_error(X, w, fragment)


def test_weights_adding_up_to_infinity(client):
    # Check that weights whose sum overflows float64 raise the NumPy path's
    # error, naming the weights, for NumPy and for dask weights.
    X = _blobs(0)
    _assert_same_weight_error(X, np.full(X.shape[0], 1e308), "sample_weight adds up to")


def test_convergence_warning(client):
    # Check that hitting max_iter warns as for NumPy input.
    X = _blobs(0)
    with pytest.warns(Warning) as record:
        RBFKMeans(n_clusters=4, max_iter=1, tol=0, random_state=0).fit(
            da.from_array(X, chunks=300)
        )
    assert any("did not converge" in str(r.message) for r in record)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        RBFKMeans(n_clusters=4, random_state=0).fit(da.from_array(X, chunks=300))


def test_fit_on_a_sample(client):
    # Check that with more rows than the initialisation sample, k-means++ on
    # the sample is reproducible with random_state (to rounding: block sums
    # on the workers may round differently with memory alignment) and
    # finds the NumPy fit's clusters (the width, from other initial centres,
    # differs a little, and so do the soft centres and boundary labels).
    X = _blobs(5, n_samples=12_000, n_features=2, centers=3)
    Xd = da.from_array(X, chunks=5000)
    fits = [RBFKMeans(n_clusters=3, random_state=0).fit(Xd) for _ in range(2)]
    assert_allclose(fits[0].cluster_centers_, fits[1].cluster_centers_, rtol=1e-12)
    ref = RBFKMeans(n_clusters=3, random_state=0).fit(X)
    assert adjusted_rand_score(fits[0].labels_.compute(), ref.labels_) > 0.95
    assert_allclose(fits[0].inertia_, ref.inertia_, rtol=1e-4)


def test_partial_fit_steps_per_block(client):
    # Check that partial_fit on a dask array takes one online EM step per
    # row block, as the same blocks fed one by one in memory would.
    X = _blobs(6)
    w = np.random.RandomState(6).uniform(0.5, 2.0, X.shape[0])
    params = dict(n_clusters=4, random_state=0)
    km = RBFKMeans(**params).partial_fit(
        da.from_array(X, chunks=(200, 3)), sample_weight=w
    )
    ref = RBFKMeans(**params)
    for start in range(0, X.shape[0], 200):
        ref.partial_fit(X[start : start + 200], sample_weight=w[start : start + 200])
    assert km.n_steps_ == ref.n_steps_ == 3
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-12)


def test_certificate_checks_every_row_explicitly(client):
    # Check that the dask certificate runs the explicit-difference check on
    # every chunk: centres moved off their means by 1e-6 of the spread, with
    # margins that the engine alone would accept, are refused.
    from skrbfkmeans._dask import as_dask_array, dask_rows
    from skrbfkmeans._iterations import certify

    X = np.array([[0.0], [2.0], [4.0], [10.0], [12.0], [14.0]]) * 1e-20
    Xd = da.from_array(X, chunks=(2, 1))
    Xd = as_dask_array(RBFKMeans(2), Xd, reset=True, check_finite=False)
    rows = dask_rows(Xd, None, "RBFKMeans")
    centers = np.array([[2.0], [12.0]]) * 1e-20
    _, certified = certify(rows, centers, 1e-20)
    assert certified is True
    moved = centers + np.array([[1e-26], [0.0]])
    _, certified = certify(rows, moved, 1e-20)
    assert certified is False


@pytest.mark.parametrize("scale", [1e-155, 1e200])
def test_extreme_scales_raise(client, scale):
    # Check that dask rows outside the working range (squared distances
    # subnormal or overflowing) are a clear error, not a collapsed fit.
    X = _blobs(0) * scale
    with pytest.raises(ValueError, match="X"):
        AnnealedRBFKMeans(3).fit(da.from_array(X, chunks=200))
    with pytest.raises(ValueError, match="Multiply the dask array|Divide X"):
        RBFKMeans(3).fit(da.from_array(X, chunks=200))


@pytest.mark.parametrize("weights", ["none", "integer", "float"])
def test_annealed_on_a_sample_is_the_numpy_fit(client, weights):
    # Check that with more rows than the sample, the dask fit anneals on the
    # NumPy fit's sample (the same rows drawn, chunk by chunk): the same
    # path and, after Lloyd on every row, the same centres to rounding.
    X = _blobs(6, n_samples=12_000, n_features=2, centers=4)
    rng = np.random.default_rng(6)
    w = {
        "none": np.ones(X.shape[0]),
        "integer": rng.integers(0, 3, size=X.shape[0]).astype(float),
        "float": rng.uniform(0.5, 2.0, size=X.shape[0]),
    }[weights]
    ref = AnnealedRBFKMeans(n_clusters=4).fit(X, sample_weight=w)
    km = AnnealedRBFKMeans(n_clusters=4).fit(
        da.from_array(X, chunks=2500), sample_weight=da.from_array(w, chunks=2500)
    )
    assert km.certified_ and ref.certified_
    assert_array_equal(km.n_distinct_centers_path_, ref.n_distinct_centers_path_)
    assert_allclose(km.sigma_path_, ref.sigma_path_, rtol=1e-10)
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=1e-10)
    assert_allclose(km.inertia_, ref.inertia_, rtol=1e-10)
