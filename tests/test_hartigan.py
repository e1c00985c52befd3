"""Single-sample (Hartigan) moves and the certificate's stability condition.

The oracle recomputes the distortion of a partition from scratch, cluster by
cluster in extended precision, before and after each possible move: it shares
neither the package's move formula nor its distances. Hartigan stability
means that no single move lowers that distortion.
"""

import itertools
import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from _data import DTYPE_IDS, DTYPES
from hypothesis import example, given, settings
from hypothesis import strategies as st
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import load_iris, make_blobs
from sklearn.preprocessing import StandardScaler
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans, _hartigan, kmeans_hartigan
from skrbfkmeans._certificate import explicit_fixed_point
from skrbfkmeans._rows import MemoryRows


@pytest.fixture(autouse=True, params=["full", "bounded"])
def passes(request, monkeypatch):
    # Many rows take bounded passes (only the rows whose move may gain get
    # their distances); "bounded" takes them on the small test data too.
    if request.param == "bounded":
        monkeypatch.setattr(_hartigan, "is_small", lambda X, k: False)


def _sse(X, w, labels, k):
    """Distortion of a partition about its own means, extended precision."""
    X = np.asarray(X, dtype=np.longdouble)
    w = np.asarray(w, dtype=np.longdouble)
    total = np.longdouble(0)
    for j in range(k):
        m = labels == j
        if w[m].sum() > 0:
            mean = (w[m, None] * X[m]).sum(axis=0) / w[m].sum()
            total += (w[m] * ((X[m] - mean) ** 2).sum(axis=1)).sum()
    return total


def _best_single_move(X, w, labels, k):
    """The largest relative drop of the distortion by moving one sample.

    Returns ``(drop / distortion)`` over every sample of positive weight and
    every other cluster (0 when no move lowers it), each move evaluated by
    recomputing the distortion of the moved partition.
    """
    X = X.toarray() if sp.issparse(X) else X
    base = _sse(X, w, labels, k)
    best = np.longdouble(0)
    for i in np.flatnonzero(np.asarray(w) > 0):
        for b in range(k):
            if b == labels[i]:
                continue
            moved = labels.copy()
            moved[i] = b
            best = max(best, base - _sse(X, w, moved, k))
    return float(best / base) if base > 0 else 0.0


def _nearest(X, centers):
    X = X.toarray() if sp.issparse(X) else X
    d = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    return np.argmin(d, axis=1)


def _start_sse(X, w, centers, most_ties=10):
    """The distortion of the starting partition, at its worst over exact ties.

    A row of positive weight exactly as far from two starting centres may
    start in either (the engine's rounding decides, within ``||x||^2``'s
    ulps): the largest distortion over every choice (None beyond
    ``most_ties`` tied rows).
    """
    d = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    labels = np.argmin(d, axis=1)
    tied = np.flatnonzero((np.sum(d == d.min(axis=1)[:, None], axis=1) > 1) & (w > 0))
    if tied.size > most_ties:
        return None
    options = [np.flatnonzero(d[i] == d[i].min()) for i in tied]
    worst = 0.0
    for choice in itertools.product(*options):
        labels[tied] = choice
        worst = max(worst, float(_sse(X, w, labels, centers.shape[0])))
    return worst


def test_example_lloyd_fixed_point_that_one_move_improves():
    # Check the smallest case by hand: {0, 2} and {3, 4} are a Lloyd fixed
    # point (2 is nearer 1 than 3.5), but moving 2 over changes the
    # distortion by 2/3 * 1.5^2 - 2 * 1^2 = -0.5: Hartigan moves it, and the
    # certificate's stability condition rejects the Lloyd fixed point.
    X = np.array([[0.0], [2.0], [3.0], [4.0]])
    w = np.ones(4)
    lloyd_centers = np.array([[1.0], [3.5]])
    margin, fixed, stable = explicit_fixed_point(X, w, lloyd_centers)
    assert margin > 0 and fixed and not stable
    centers, labels, inertia, n_moves = kmeans_hartigan(X, lloyd_centers)
    assert_array_equal(labels, [0, 1, 1, 1])
    assert_allclose(centers, [[0.0], [3.0]])
    assert inertia == 2.0 and n_moves == 1
    assert all(explicit_fixed_point(X, w, centers)[1:])


def test_a_sample_alone_does_not_leave():
    # Check that a sample alone in its cluster stays (its move would empty
    # the cluster and cannot lower the distortion), and that the check
    # accepts such a solution.
    X = np.array([[0.0], [10.0], [10.5], [11.0]])
    centers, labels, _, n_moves = kmeans_hartigan(X, np.array([[0.0], [10.5]]))
    assert n_moves == 0
    assert_array_equal(labels, [0, 1, 1, 1])
    assert all(explicit_fixed_point(X, np.ones(4), centers)[1:])


def test_weights_enter_the_move():
    # Check that a heavy sample does not move where a light one would: the
    # gain depends on the moving sample's weight, as repeated rows do.
    X = np.array([[0.0], [2.0], [3.0], [4.0]])
    start = np.array([[1.0], [3.5]])
    w = np.array([1.0, 1.0, 1.0, 1.0])
    assert kmeans_hartigan(X, start, sample_weight=w)[3] == 1
    w_heavy = np.array([3.0, 3.0, 1.0, 1.0])
    centers = np.array([[1.0], [3.5]])
    _, labels, _, _ = kmeans_hartigan(X, centers, sample_weight=w_heavy)
    assert _best_single_move(X, w_heavy, labels, 2) == 0.0


@st.composite
def _problems(draw):
    n = draw(st.integers(4, 24))
    d = draw(st.integers(1, 3))
    k = draw(st.integers(2, 4))
    # Small integers: ties and duplicated samples are common.
    X = np.array(
        draw(st.lists(st.integers(-4, 4), min_size=n * d, max_size=n * d)), float
    ).reshape(n, d)
    w = np.array(draw(st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.0, 2.0, 3.0]),
                               min_size=n, max_size=n)))  # fmt: skip
    if not w.any():
        w[0] = 1.0
    seeds = draw(st.lists(st.integers(0, n - 1), min_size=k, max_size=k))
    return X, w, X[seeds] + 0.25 * np.arange(k)[:, None]


_TIED_START = (  # CI's draw: the weighted rows at 3 are tied between two centres
    np.array([0, 0, 2, -2, 0, 3, 0, 3, 0, 0, 4, 4.0])[:, None],
    np.array([0, 0, 0.5, 0.5, 0, 2, 0, 2, 0, 0.5, 0.5, 1.0]),
    np.array([[2.0], [2.25], [0.5], [3.75]]),
)


@settings(max_examples=150, deadline=None)
@given(problem=_problems())
@example(problem=_TIED_START)
def test_result_is_hartigan_stable(problem):
    # Check against the oracle that no single move lowers the distortion of
    # the result, that its labels are nearest centres (a Lloyd fixed point),
    # and that the distortion is never above the starting partition's.
    X, w, start = problem
    k = start.shape[0]
    centers, labels, inertia, _ = kmeans_hartigan(X, start, sample_weight=w)
    assert _best_single_move(X, w, labels, k) <= 1e-12
    # A row exactly between two starting centres may start in either (CI's
    # hypothesis draw: weighted rows at 3, between 2.25 and 3.75, started
    # in the second; from there the result was 9% above the partition that
    # puts them in the first, and below its own start).
    start_sse = _start_sse(X, w, start)
    # The reported inertia comes from ||x||^2 - 2 x.mu + ||mu||^2 (about the
    # data's mean): its rounding is relative to the squared norms, not to a
    # distortion that can be 0.
    rounding = 64 * np.finfo(np.float64).eps * float(w @ (X**2).sum(axis=1))
    if start_sse is not None:
        assert inertia <= start_sse * (1 + 1e-12) + rounding
    d = ((X[:, None, :] - centers[None, :, :]) ** 2).sum(axis=2)
    own = d[np.arange(X.shape[0]), labels]
    assert np.all(own <= d.min(axis=1) + 1e-12 * (1 + d.max()))


@pytest.mark.filterwarnings("ignore:Number of distinct clusters")
@settings(max_examples=150, deadline=None)
@given(problem=_problems())
def test_certificate_never_passes_an_improvable_solution(problem):
    # Check that the stability condition is False whenever the oracle finds
    # a move that lowers the distortion, at Lloyd fixed points (where the
    # other conditions hold) and at arbitrary centres.
    X, w, start = problem
    k = start.shape[0]
    for centers in (start, RBFKMeans(k, sigma=0, init=start).fit(X, sample_weight=w)
                    .cluster_centers_):  # fmt: skip
        labels = _nearest(X, centers)
        _, _, stable = explicit_fixed_point(X, w, centers)
        if _best_single_move(X, w, labels, k) > 1e-12:
            assert not stable


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_dense_sparse_and_float32(sparse, dtype):
    # Check that CSR input gives the dense result, float32 stays float32,
    # and both end on a stable partition of the blobs.
    X, _ = make_blobs(n_samples=300, centers=6, cluster_std=2.5, random_state=0)
    X = X.astype(dtype)
    start = X[:6].copy()
    dense = kmeans_hartigan(X, start)
    out = kmeans_hartigan(sp.csr_matrix(X) if sparse else X, start)
    assert out[0].dtype == dtype
    assert_array_equal(out[1], dense[1])
    assert _best_single_move(X.astype(np.float64), np.ones(300), out[1], 6) <= 1e-6


def test_same_bytes_for_every_thread_count():
    # Check that the moves and centres do not depend on the thread count.
    X, _ = make_blobs(n_samples=3000, centers=8, cluster_std=3.0, random_state=1)
    start = X[:8].copy()
    results = []
    for n_threads in (1, 2):
        with threadpool_limits(n_threads):
            results.append(kmeans_hartigan(X, start))
    assert results[0][0].tobytes() == results[1][0].tobytes()
    assert_array_equal(results[0][1], results[1][1])


def test_far_from_origin_and_tiny():
    # Check that the moves follow the data through X -> a X + b: the same
    # labels at 1e-200 and offset by 1e6.
    X = np.array([[0.0], [2.0], [3.0], [4.0], [9.0], [9.5]])
    start = np.array([[1.0], [3.5], [9.25]])
    ref = kmeans_hartigan(X, start)[1]
    for a, b in [(1e-200, 0.0), (1.0, 1e6), (1e150, 0.0)]:
        assert_array_equal(kmeans_hartigan(a * X + b, a * start + b)[1], ref)


@pytest.mark.parametrize("k", [3, 5, 10])
def test_annealed_fit_is_certified_stable(k):
    # Check on standardised iris (where k=5 needed single moves to reach
    # KMeans(n_init=10)'s solution) that a certified fit has no improving
    # single move by the oracle.
    X = StandardScaler().fit_transform(load_iris().data)
    km = AnnealedRBFKMeans(k).fit(X)
    assert km.certified_
    assert _best_single_move(X, np.ones(len(X)), km.labels_, k) <= 1e-12


def _same_partition(a, b):
    """Whether two labelings split the rows alike, whatever the names."""
    pairs = set(zip(a.tolist(), b.tolist()))
    return len(pairs) == len(set(a.tolist())) == len(set(b.tolist()))


def test_rbf_kmeans_hartigan_algorithm():
    # Check that RBFKMeans(sigma=0, algorithm="hartigan") is never above
    # Lloyd's inertia from the same starts and ends on a stable partition;
    # the other algorithms stay KMeans.
    X = StandardScaler().fit_transform(load_iris().data)
    for seed in range(3):
        lloyd = RBFKMeans(5, sigma=0, random_state=seed).fit(X)
        hart = RBFKMeans(5, sigma=0, algorithm="hartigan", random_state=seed).fit(X)
        if _same_partition(hart.labels_, lloyd.labels_):
            # One partition: its inertia at means that differ by rounding.
            assert hart.inertia_ == pytest.approx(lloyd.inertia_, rel=1e-13)
        else:
            assert hart.inertia_ < lloyd.inertia_
        assert _best_single_move(X, np.ones(len(X)), hart.labels_, 5) <= 1e-12
        assert_array_equal(hart.labels_, hart.predict(X))


def test_hartigan_on_dask_input_is_refused():
    # Check that dask input with algorithm="hartigan" gives a clear error
    # instead of silently running Lloyd.
    da = pytest.importorskip("dask.array")
    X = da.from_array(np.random.RandomState(0).normal(size=(40, 2)), chunks=20)
    with pytest.raises(ValueError, match="algorithm='hartigan'.*in memory"):
        RBFKMeans(2, sigma=0, algorithm="hartigan").fit(X)


@settings(max_examples=100, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 5),
    d=st.integers(1, 3),
    step=st.sampled_from([0.0, 1e-6, 0.01, 0.3, 2.0]),
    dtype=st.sampled_from([np.float64, np.float32]),
    shift=st.sampled_from([0.0, 1e3]),
    empty=st.booleans(),
)
def test_bounds_keep_every_candidate(seed, k, d, step, dtype, shift, empty):
    # Check the bounded pass against the full one (every row's distances):
    # after the means move and some rows change cluster, each row that the
    # full pass names a candidate is computed by the bounded pass, with the
    # same gain, and no other row is named.
    from skrbfkmeans._engine.assign import single_move_gains

    rng = np.random.default_rng(seed)
    n = 120
    # Ties are common; far from the origin the rows are centred on an offset.
    X = (np.round(rng.normal(size=(n, d)) * 2) / 2 + shift).astype(dtype)
    w = rng.choice([0.0, 1.0, 1.0, 2.0], size=n).astype(dtype)
    offset = np.full(d, shift, dtype=dtype)
    x_sq = ((X - offset) ** 2).sum(axis=1)
    labels = rng.integers(0, k - 1 if empty else k, n)  # cluster k-1 empty
    centers = (rng.normal(size=(k, d)) + shift).astype(dtype)
    bounds = _hartigan._MoveBounds(MemoryRows(X, w, offset, x_sq), X.dtype)

    def check(labels, centers):
        N = np.bincount(labels, weights=w, minlength=k)
        full = single_move_gains(X, w, labels, centers, N, offset, x_sq)
        got = bounds.gains(X, w, labels, centers, N, offset, x_sq)
        room = np.sqrt(np.finfo(X.dtype).eps)
        named = np.flatnonzero(full[0] < room * full[1])
        assert_array_equal(np.flatnonzero(got[0] < room * got[1]), named)
        assert_array_equal(got[0][named], full[0][named])

    check(labels, centers)
    movers = rng.choice(n, size=5, replace=False)
    labels = labels.copy()
    labels[movers] = (labels[movers] + 1) % k
    bounds.moved(movers)
    check(labels, (centers + step * rng.normal(size=(k, d))).astype(dtype))


@settings(max_examples=80, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    k=st.integers(2, 9),
    d=st.integers(1, 4),
    dtype=st.sampled_from([np.float64, np.float32]),
    weights=st.sampled_from(["equal", "integers", "spread"]),
    empty=st.booleans(),
    shift=st.sampled_from([0.0, 1e3]),
)
def test_room_keeps_every_candidate_and_its_gain(
    seed, k, d, dtype, weights, empty, shift
):
    # Check the pass that evaluates only the rows that may be candidates
    # (room) against the pass that evaluates every row: the same rows named
    # candidates at that room, with the same gain, target and size to the
    # bit, and the same distances to the own and the nearest other centre;
    # on rows with ties (a rounded grid), zero weights, unequal weights, an
    # empty cluster, float32 far from the origin, and labels that are not
    # the nearest centre (a partition in the middle of the moves).
    from skrbfkmeans._engine.assign import single_move_gains

    rng = np.random.default_rng(seed)
    n = 150
    X = (np.round(rng.normal(size=(n, d)) * 2) / 2 + shift).astype(dtype)
    w = {
        "equal": np.ones(n),
        "integers": rng.choice([0.0, 1.0, 1.0, 3.0], size=n),
        "spread": rng.uniform(0.01, 10.0, size=n),
    }[weights].astype(dtype)
    offset = np.full(d, shift, dtype=dtype)
    x_sq = ((X - offset) ** 2).sum(axis=1)
    centers = (X[rng.choice(n, k)] + 0.3 * rng.normal(size=(k, d))).astype(dtype)
    labels = _hartigan.nearest(X, centers, offset)[0]
    flip = rng.random(n) < 0.2
    labels[flip] = rng.integers(0, k, flip.sum())
    if empty:
        labels[labels == k - 1] = 0
    N = np.bincount(labels, weights=w, minlength=k)
    room = np.sqrt(np.finfo(dtype).eps)
    args = (X, w, labels, centers, N, offset, x_sq)
    full = single_move_gains(*args, distances=True)
    got = single_move_gains(*args, distances=True, room=room)
    named = np.flatnonzero(full[0] < room * full[1])
    assert_array_equal(np.flatnonzero(got[0] < room * got[1]), named)
    for a, b in zip(got[:3], full[:3]):
        assert_array_equal(a[named], b[named])
    assert_array_equal(got[3], full[3])
    assert_array_equal(got[4], full[4])
    # The distances against explicit differences (the engine's rounding).
    X64, C64 = X.astype(np.float64), centers.astype(np.float64)
    D = ((X64[:, None, :] - C64[None]) ** 2).sum(2)
    own = D[np.arange(n), labels]
    D[np.arange(n), labels] = np.inf
    tol = 1e-3 if dtype == np.float32 else 1e-9
    scale = (x_sq.max() + (centers.astype(np.float64) - offset) ** 2).sum() + 1.0
    assert_allclose(got[3], own, atol=tol * scale)
    assert_allclose(got[4], D.min(axis=1), atol=tol * scale)
    # The rows left out are those that cannot gain at all: their exact best
    # change is positive beyond the room.
    left_out = np.isinf(got[0]) & np.isfinite(full[0])
    assert (full[0][left_out] > room * full[1][left_out]).all()


@pytest.mark.parametrize("seed", range(6))
def test_bounded_passes_give_the_full_passes_bits(seed, monkeypatch):
    # Check the bounded passes against the full ones on data with ties,
    # float32 far from the origin and zero weights: the same centres,
    # labels and number of moves, to the bit.
    rng = np.random.default_rng(seed)
    n, d, k = 2000, 1 + seed % 3, 3 + seed
    if seed % 3 == 0:
        X = rng.integers(0, 6, size=(n, d)).astype(np.float32)
    elif seed % 3 == 1:
        X = (rng.normal(size=(n, d)) * 100 + 1e4).astype(np.float32)
    else:
        X = np.round(rng.normal(size=(n, d)) * 2) / 2
    w = rng.choice([0.0, 1.0, 1.0, 3.0], n).astype(X.dtype)
    start = X[rng.choice(n, k, replace=False)] + 0.1 * rng.normal(size=(k, d))
    start = start.astype(X.dtype)
    results = []
    for small in (True, False):
        monkeypatch.setattr(_hartigan, "is_small", lambda X, k: small)
        results.append(kmeans_hartigan(X, start, sample_weight=w))
    full, bounded = results
    assert full[0].tobytes() == bounded[0].tobytes()
    assert_array_equal(full[1], bounded[1])
    assert full[3] == bounded[3] > 0


def _creeping_blob():
    # One Gaussian blob and two centres far from its symmetric split: Lloyd
    # and the single-sample moves creep towards it for dozens of steps.
    X = np.random.default_rng(0).normal(size=(400, 2))
    return X, np.ones(400), np.array([[-0.05, 0.0], [2.5, 0.0]])


def _moves_fixed_point(X, w, centers):
    """Whether ``centers`` are their clusters' means and no single move gains."""
    labels = _nearest(X, centers)
    means = np.array([X[labels == j].mean(axis=0) for j in range(len(centers))])
    return bool(
        np.allclose(means, centers, rtol=0, atol=1e-9)
        and _best_single_move(X, w, labels, len(centers)) == 0.0
    )


def test_finish_converged_says_the_moves_ended_on_their_fixed_point():
    # Check Finished.converged against the oracle for every max_iter from 1
    # to 40 on a creeping start: converged only on a fixed point of Lloyd
    # and of the single-sample moves, and converged where the single-sample
    # moves end on one even though max_iter stopped Lloyd before them (it
    # said False there: the fit warned and reported converged_=False on
    # centres it certified).
    from skrbfkmeans._engine.passes import data_offset
    from skrbfkmeans._finish import finish, lloyd

    X, w, start = _creeping_blob()
    rows = MemoryRows(X, w, data_offset(X, w))
    after_stopped_lloyd = 0
    for max_iter in range(1, 41):
        done = finish(rows, start, max_iter=max_iter)
        if done.converged:
            assert _moves_fixed_point(X, w, done.centers), max_iter
            after_stopped_lloyd += not lloyd(rows, start, max_iter)[2]
        else:
            assert done.n_single > 0
    assert done.converged
    assert after_stopped_lloyd >= 3


def test_hartigan_estimator_converged_and_its_warning_follow_the_moves():
    # Check RBFKMeans(sigma=0, algorithm="hartigan") with a pass limit: a fit
    # reported converged is the oracle's fixed point, one that is not warns.
    from sklearn.exceptions import ConvergenceWarning

    X, w, start = _creeping_blob()
    seen = set()
    for max_iter in (1, 2, 4, 8, 300):
        est = RBFKMeans(2, sigma=0, algorithm="hartigan", init=start, max_iter=max_iter)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            est.fit(X)
        warned = any(issubclass(c.category, ConvergenceWarning) for c in caught)
        assert warned == (not est.converged_)
        if est.converged_:
            assert _moves_fixed_point(X, w, est.cluster_centers_)
        seen.add(est.converged_)
    assert seen == {True, False}


@pytest.mark.parametrize("scale", [1.0, 1e111])
def test_moves_that_trade_rounding_end_the_search(scale):
    # Check that rows equal to one another, whose clusters' means round
    # apart, do not trade places: 1422 copies of one point and 3 of another
    # 100 times farther, from seven centres on the two points, made 426001
    # moves in 300 passes (each "gaining" the rounding of a mean) and took
    # 7 s. The start's distortion is 0 (explicit oracle), so no move can
    # lower it: none is made, the result's partition has distortion 0, and
    # the inertia at its centres (means that round off the point) is that
    # rounding, far below the data's scatter.
    p = np.array([1.39, -0.91, 2.34, 0.80])
    X = np.vstack([np.repeat([p], 1422, axis=0), np.repeat([p + 100.0], 3, axis=0)])
    X *= scale
    start = np.vstack([np.repeat(X[:1], 6, axis=0), X[-1:]])
    assert _sse(X, np.ones(X.shape[0]), _nearest(X, start), 7) == 0.0
    centers, labels, inertia, n_moves = kmeans_hartigan(X, start)
    assert n_moves == 0
    assert _sse(X, np.ones(X.shape[0]), labels, 7) == 0.0
    scatter = _sse(X, np.ones(X.shape[0]), np.zeros(X.shape[0], dtype=int), 1)
    assert inertia <= 1e-20 * scatter
