"""Tests of dask chunks of every shape, and of missing values in dask frames.

Filtering a dask DataFrame leaves partitions of 0 rows; ``DataFrame.values``
and ``to_dask_array()`` leave the row counts of the chunks unknown. Such input
is valid: every fit and prediction must give the NumPy results (to the
rounding of sums added in another order). A dask frame holding ``pd.NA`` must
raise the error scikit-learn raises for the pandas frame, word for word.
"""

import re

import numpy as np
import pytest

da = pytest.importorskip("dask.array")
dd = pytest.importorskip("dask.dataframe")
pd = pytest.importorskip("pandas")

from numpy.testing import assert_allclose, assert_array_equal  # noqa: E402
from sklearn.datasets import make_blobs  # noqa: E402

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans  # noqa: E402

# Block sums are added in another order than the in-memory engine's (as in
# test_dask.py); distances and responsibilities are computed row by row.
RTOL = 1e-12
ATOL = 1e-12

N_SAMPLES = 400

# Row chunks of the 400 rows: chunks of 0 rows in every position, unequal
# chunks (one of a single row).
CHUNKS = {
    "empty_first": (0, 200, 200),
    "empty_middle": (150, 0, 250),
    "empty_last": (400, 0),
    "empty_several": (0, 100, 0, 0, 300, 0),
    "unequal": (7, 193, 1, 199),
}

ESTIMATORS = {
    "hard_softmax": lambda: RBFKMeans(4, sigma=0, random_state=0),
    "hard_entmax15": lambda: RBFKMeans(
        4, sigma=0, activation="entmax15", random_state=0
    ),
    "soft_softmax": lambda: RBFKMeans(4, random_state=0),
    "soft_entmax15": lambda: RBFKMeans(4, activation="entmax15", random_state=0),
    "annealed": lambda: AnnealedRBFKMeans(4),
}


@pytest.fixture(scope="module")
def client():
    # In-process: these fits are small, and the chunks' path through the
    # cluster's workers is test_dask.py's (a LocalCluster here costs minutes
    # on two cores).
    import dask

    with dask.config.set(scheduler="synchronous"):
        yield


def _blobs(n_samples=N_SAMPLES, n_features=3, seed=0):
    X, _ = make_blobs(
        n_samples=n_samples,
        n_features=n_features,
        centers=4,
        cluster_std=0.6,
        random_state=seed,
    )
    return X


def _frame(X):
    return pd.DataFrame(X, columns=[f"x{j}" for j in range(X.shape[1])])


def _dask_input(X, layout):
    """``X`` as a dask array of the named chunk layout."""
    if layout in CHUNKS:
        return da.from_array(X, chunks=(CHUNKS[layout], X.shape[1]))
    # Four partitions of unknown length, then (for "unknown_empty") a
    # filtered frame that keeps nothing, whose chunk is empty and unknown.
    ddf = dd.from_pandas(_frame(X), npartitions=4)
    if layout == "unknown_to_dask_array":
        return ddf.to_dask_array()
    if layout == "unknown_values":
        return ddf.values
    nothing = ddf[ddf["x0"] > np.inf].to_dask_array()
    return da.concatenate([nothing, ddf.to_dask_array(), nothing])


LAYOUTS = [*CHUNKS, "unknown_to_dask_array", "unknown_values", "unknown_empty"]


def _assert_same_model(km, ref, Xd, X):
    """``km`` (fitted on ``Xd``) has the centres and predictions of ``ref``."""
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL, atol=ATOL)
    assert_array_equal(np.asarray(km.labels_.compute()), ref.labels_)
    assert_allclose(km.inertia_, ref.inertia_, rtol=RTOL)
    labels = km.predict(Xd)
    assert labels.shape == (X.shape[0],)
    assert_array_equal(labels.compute(), ref.predict(X))
    for method in ("predict_proba", "transform"):
        result = getattr(km, method)(Xd).compute()
        assert_allclose(result, getattr(ref, method)(X), rtol=1e-10, atol=ATOL)
    assert_allclose(km.score(Xd), ref.score(X), rtol=RTOL)


@pytest.mark.parametrize("estimator", list(ESTIMATORS), ids=list(ESTIMATORS))
@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUTS)
def test_chunks_of_every_shape_match_numpy(client, layout, estimator):
    # Check that chunks of 0 rows (first, middle, last, several), unequal
    # chunks and chunks of unknown size give the NumPy fit's centres, labels,
    # inertia and predictions, for hard and soft widths, both activations
    # and the annealed estimator.
    X = _blobs()
    Xd = _dask_input(X, layout)
    ref = ESTIMATORS[estimator]().fit(X)
    km = ESTIMATORS[estimator]().fit(Xd)
    _assert_same_model(km, ref, Xd, X)


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUTS)
def test_predictions_on_chunks_of_every_shape(client, layout):
    # Check that a model fitted in memory predicts on dask input of every
    # chunk layout what it predicts on the NumPy array, and that the lazy
    # outputs keep one row per input row.
    X = _blobs()
    w = np.random.RandomState(0).uniform(0.5, 2.0, X.shape[0])
    Xd = _dask_input(X, layout)
    km = RBFKMeans(4, random_state=0).fit(X)
    assert_array_equal(km.predict(Xd).compute(), km.predict(X))
    for method in ("predict_proba", "transform"):
        lazy = getattr(km, method)(Xd)
        assert lazy.shape == (X.shape[0], 4)
        assert_allclose(lazy.compute(), getattr(km, method)(X), rtol=1e-12)
    assert_allclose(km.score(Xd, sample_weight=w), km.score(X, sample_weight=w))


@pytest.mark.parametrize("layout", LAYOUTS, ids=LAYOUTS)
def test_partial_fit_skips_empty_chunks(client, layout):
    # Check that partial_fit on dask input takes one step per chunk that
    # holds rows, as those chunks fed one by one in memory would: an empty
    # chunk is skipped (no step, n_steps_ unchanged by it).
    X = _blobs()
    w = np.random.RandomState(1).uniform(0.5, 2.0, X.shape[0])
    Xd = _dask_input(X, layout)
    sizes = [int(n) for n in Xd.compute_chunk_sizes().chunks[0]]
    km = RBFKMeans(4, random_state=0).partial_fit(Xd, sample_weight=w)
    ref = RBFKMeans(4, random_state=0)
    for end, size in zip(np.cumsum(sizes), sizes):
        if size:
            ref.partial_fit(X[end - size : end], sample_weight=w[end - size : end])
    assert km.n_steps_ == ref.n_steps_ == sum(1 for n in sizes if n)
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL)


def test_partial_fit_of_an_empty_chunk_alone(client):
    # Check that a later partial_fit call whose dask input holds rows only
    # after an empty chunk takes exactly one step.
    X = _blobs()
    km = RBFKMeans(4, random_state=0).partial_fit(X[:200])
    ref = RBFKMeans(4, random_state=0).partial_fit(X[:200]).partial_fit(X[200:])
    km.partial_fit(da.from_array(X[200:], chunks=((0, 200, 0), 3)))
    assert km.n_steps_ == ref.n_steps_ == 2
    assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL)


def test_filtered_frame_with_weights(client):
    # Check that a filtered dask DataFrame (partitions left empty) with its
    # weight column as a dask Series, or as a dask array of unknown chunks,
    # gives the fit of the filtered pandas frame.
    X = _blobs()
    df = _frame(X)
    df["w"] = np.random.RandomState(2).uniform(0.5, 2.0, X.shape[0])
    # Rows sorted by x0, so that whole partitions fall outside the filter.
    df = df.sort_values("x0", ignore_index=True)
    ddf = dd.from_pandas(df, npartitions=8)
    kept = ddf[ddf["x0"] > df["x0"].quantile(0.4)]
    pieces = kept.map_partitions(len).compute()
    assert (pieces == 0).sum() >= 2
    columns = ["x0", "x1", "x2"]
    pdf = df[df["x0"] > df["x0"].quantile(0.4)]
    ref = RBFKMeans(3, random_state=0).fit(pdf[columns], sample_weight=pdf["w"])
    for weights in (kept["w"], kept["w"].values):
        km = RBFKMeans(3, random_state=0).fit(kept[columns], sample_weight=weights)
        assert_allclose(km.cluster_centers_, ref.cluster_centers_, rtol=RTOL)
        labels = km.predict(kept[columns]).compute()
        assert_array_equal(labels, ref.predict(pdf[columns]))


@pytest.mark.parametrize("estimator", ["rbf", "annealed"])
def test_sample_of_many_rows_skips_empty_chunks(client, estimator):
    # Check that with more rows than the in-memory sample, the sample drawn
    # from chunks with empty ones between them is the sample drawn without
    # them (uniform rows for RBFKMeans, rows by weight for the annealing).
    X = _blobs(n_samples=12_000, n_features=2, seed=5)
    w = np.random.default_rng(0).integers(0, 3, X.shape[0]).astype(float)
    chunks = (0, 3000, 0, 2999, 1, 6000, 0)
    make = {
        "rbf": lambda: RBFKMeans(3, random_state=0),
        "annealed": lambda: AnnealedRBFKMeans(3, random_state=0),
    }[estimator]
    km = make().fit(
        da.from_array(X, chunks=(chunks, 2)),
        sample_weight=da.from_array(w, chunks=(chunks,)),
    )
    plain = make().fit(
        da.from_array(X, chunks=3000), sample_weight=da.from_array(w, chunks=3000)
    )
    assert_allclose(km.cluster_centers_, plain.cluster_centers_, rtol=1e-10)


def test_all_chunks_empty(client):
    # Check that dask input with no rows at all raises the error of an empty
    # array, not a division by zero.
    X = da.from_array(np.empty((0, 3)), chunks=((0, 0), 3))
    with pytest.raises(ValueError, match="0 sample"):
        RBFKMeans(2).fit(X)


def _nullable_frames():
    """Frames with one missing value: nullable float, nullable int, object."""
    X = np.round(_blobs(n_samples=60) * 10)
    float_frame = _frame(X).astype("Float64")
    float_frame.iloc[7, 1] = pd.NA
    int_frame = _frame(X).astype("Int64")
    int_frame.iloc[7, 1] = pd.NA
    object_frame = float_frame.astype(object)
    return {"Float64": float_frame, "Int64": int_frame, "object": object_frame}


def _nan_message(estimator, frame):
    """scikit-learn's error for a pandas frame holding NaN, word for word."""
    with pytest.raises(ValueError, match="Input X contains NaN") as exc:
        estimator.fit(frame.astype("Float64").to_numpy(np.float64, na_value=np.nan))
    return str(exc.value)


@pytest.mark.filterwarnings("ignore:Dask currently has limited support")
@pytest.mark.parametrize("kind", ["Float64", "Int64", "object"])
def test_missing_values_in_a_dask_frame(client, kind):
    # Check that pd.NA in a dask DataFrame raises scikit-learn's ValueError
    # for NaN, word for word the pandas frame's, at fit, partial_fit and in
    # every prediction (lazily: when its block is computed).
    frame = _nullable_frames()[kind]
    ddf = dd.from_pandas(frame, npartitions=3)
    message = _nan_message(RBFKMeans(3), frame)
    if kind != "object":
        # scikit-learn's conversion of the nullable pandas frame itself.
        with pytest.raises(ValueError) as exc:
            RBFKMeans(3).fit(frame)
        assert str(exc.value) == message
    for estimator in (RBFKMeans(3), AnnealedRBFKMeans(3)):
        with pytest.raises(ValueError) as exc:
            estimator.fit(ddf)
        assert str(exc.value) == _nan_message(estimator, frame)
    with pytest.raises(ValueError) as exc:
        RBFKMeans(3, random_state=0).partial_fit(ddf)
    assert str(exc.value) == message
    km = RBFKMeans(3, random_state=0).fit(frame.dropna().astype(np.float64))
    for method in ("predict", "predict_proba", "transform"):
        with pytest.raises(ValueError) as exc:
            getattr(km, method)(ddf).compute()
        assert str(exc.value) == message
    with pytest.raises(ValueError) as exc:
        km.score(ddf)
    assert str(exc.value) == message


@pytest.mark.parametrize("bad", [np.nan, np.inf], ids=["nan", "inf"])
def test_non_finite_dask_array_message(client, bad):
    # Check that NaN or infinity in a dask array raises the NumPy fit's
    # error word for word (NaN named before infinity, the dtype named), at
    # fit and when a prediction's block is computed.
    X = _blobs(n_samples=60).astype(np.float32)
    X[5, 0] = bad
    X[40, 1] = np.inf
    with pytest.raises(ValueError) as ref:
        RBFKMeans(3).fit(X)
    with pytest.raises(ValueError) as exc:
        RBFKMeans(3).fit(da.from_array(X, chunks=((0, 20, 40), 3)))
    assert str(exc.value) == str(ref.value)
    km = RBFKMeans(3, random_state=0).fit(np.nan_to_num(X, posinf=0.0))
    with pytest.raises(ValueError) as ref:
        km.predict(X)
    # Both bad values in one block: each block reports its own when it runs.
    with pytest.raises(ValueError) as exc:
        km.predict(da.from_array(X, chunks=((50, 10), 3))).compute()
    assert str(exc.value) == str(ref.value)


@pytest.mark.filterwarnings("ignore:Dask currently has limited support")
def test_missing_weights_in_a_dask_series(client):
    # Check that pd.NA in a nullable dask Series of weights raises the error
    # for NaN weights, not a TypeError.
    frame = _frame(_blobs(n_samples=60))
    weights = pd.Series(np.ones(60)).astype("Float64")
    weights.iloc[3] = pd.NA
    ddf = dd.from_pandas(frame, npartitions=3)
    with pytest.raises(ValueError, match=re.escape("sample_weight contains NaN")):
        RBFKMeans(3).fit(ddf, sample_weight=dd.from_pandas(weights, npartitions=3))
