"""Incremental Lloyd against plain Lloyd, and the polish against a plain search.

``IncrementalLloyd`` recomputes only the samples a moved centre can take or
lose. The oracle is the engine's plain Lloyd (EM with entmax-1.5 at width 0:
every sample against every centre, every iteration) and, for single assignment steps, an
explicit nearest-centre search by differences.
"""

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from skrbfkmeans import _lloyd
from skrbfkmeans._engine import assign
from skrbfkmeans._engine.passes import data_offset, labels_inertia
from skrbfkmeans._hartigan import hartigan
from skrbfkmeans._iterations import em_fixed_sigma
from skrbfkmeans._lloyd import IncrementalLloyd
from skrbfkmeans._polish import Splits, _candidates, polish
from skrbfkmeans._rows import MemoryRows


def plain_lloyd(rows, centers, max_iter):
    # The engine's plain Lloyd: EM with entmax-1.5 at width 0, to a fixed point.
    return em_fixed_sigma(rows, centers, 0.0, "entmax15", max_iter=max_iter, tol=0.0)


@pytest.fixture(
    autouse=True, params=["incremental", "small-data", "bounded", "bounded-blocks"]
)
def steps(request, monkeypatch):
    # The test data are small: "small-data" makes every step a full pass on
    # the small-data route; "bounded" takes the bounded steps (Hamerly's
    # bounds) on dense rows whatever the number of centres, "bounded-blocks"
    # also with the block loop of large data; "incremental" makes every
    # step incremental where it can be, and full passes block by block.
    if request.param in ("incremental", "bounded-blocks"):
        monkeypatch.setattr(_lloyd, "SMALL_PASS", 0)
        monkeypatch.setattr(assign, "SMALL_PASS", 0)
    bounded = request.param.startswith("bounded")
    monkeypatch.setattr(
        _lloyd, "_use_bounds", lambda X, k: bounded and not sp.issparse(X)
    )
    return request.param


def _rows(X, w=None):
    w = np.ones(X.shape[0], dtype=X.dtype) if w is None else w
    return MemoryRows(X, w, data_offset(X, w))


def _explicit_labels(X, centers):
    X = X.toarray() if sp.issparse(X) else X
    d = (
        (X[:, None, :].astype(np.float64) - centers[None].astype(np.float64)) ** 2
    ).sum(2)
    order = np.sort(d, axis=1)
    margin = order[:, 1] - order[:, 0] if d.shape[1] > 1 else np.full(len(d), np.inf)
    return d.argmin(axis=1), margin, d


def _data(kind, seed):
    rng = np.random.default_rng(seed)
    if kind == "blobs":
        centers = rng.normal(scale=5, size=(6, 3))
        X = centers[rng.integers(0, 6, 400)] + rng.normal(size=(400, 3))
    elif kind == "duplicates":
        X = np.repeat(rng.normal(size=(12, 2)), 30, axis=0)
    elif kind == "ties":
        # Integer grid: many samples equidistant from two centres.
        X = np.array([(i, j) for i in range(8) for j in range(8)], float)
    elif kind == "uniform":
        X = rng.uniform(size=(500, 2))
    return X


def _explicit_lloyd(X, w, centers, max_iter=300):
    """Lloyd with every sample against every centre at every iteration.

    Labels by explicit differences (argmin, lowest index on ties); weighted
    means; an empty cluster's centre stays; stops when no centre moves.
    """
    X = X.toarray() if sp.issparse(X) else X
    centers = centers.astype(np.float64)
    for n_iter in range(1, max_iter + 1):
        labels = _explicit_labels(X, centers)[0]
        new = centers.copy()
        for j in range(len(centers)):
            mask = (labels == j) & (w > 0)
            if w[mask].sum() > 0:
                new[j] = w[mask] @ X[mask] / w[mask].sum()
        if np.array_equal(new, centers):
            return centers, labels, n_iter
        centers = new
    return centers, labels, max_iter


@pytest.mark.parametrize("kind", ["blobs", "duplicates", "ties", "uniform"])
@pytest.mark.parametrize("sparse", [False, True])
def test_same_run_as_explicit_lloyd(kind, sparse, global_random_seed):
    # Check that the incremental run visits the same centres as Lloyd by
    # explicit differences (every sample against every centre, every
    # iteration): same iterations, final centres and labels, with duplicated
    # rows and zero weights; on an integer grid (ties), a fixed point.
    rng = np.random.default_rng(global_random_seed)
    X = _data(kind, global_random_seed)
    w = rng.integers(0, 3, X.shape[0]).astype(float)
    w[0] = 1
    distinct = np.unique(X, axis=0)
    init = distinct[rng.choice(distinct.shape[0], 5, replace=False)]
    Xs = sp.csr_matrix(X) if sparse else X
    rows = _rows(Xs, w)
    state = IncrementalLloyd(rows, init)
    n_iter, converged = state.run(300)
    positive = w > 0
    if kind == "ties":
        # Means of integer points tie only to rounding, and the rounding of
        # the sums differs between any two ways of adding them, so the path
        # may branch at such a tie. Check what any run must end on: a fixed
        # point of the full assignment (the engine's labels at the final
        # centres, each centre the weighted mean of its samples).
        assert converged
        labels = labels_inertia(Xs, w, state.centers, rows.offset, rows.x_sq)[0]
        np.testing.assert_array_equal(state.labels[positive], labels[positive])
        for j, center in enumerate(state.centers):
            mask = (labels == j) & positive
            if mask.any():
                mean = w[mask] @ X[mask] / w[mask].sum()
                np.testing.assert_allclose(center, mean, rtol=1e-12, atol=1e-12)
        return
    centers, labels, ref_iter = _explicit_lloyd(X, w, init)
    assert converged and n_iter == ref_iter
    np.testing.assert_allclose(state.centers, centers, rtol=1e-10, atol=1e-10)
    np.testing.assert_array_equal(state.labels[positive], labels[positive])


@pytest.mark.parametrize("kind", ["blobs", "duplicates", "uniform"])
@pytest.mark.parametrize("where", [-0.5, -1e-9, 1e-9, 0.5])
def test_trial_dropped_only_above_its_ceiling(kind, where, global_random_seed):
    # Check the drop of a trial that ends above the incumbent without the
    # confirming pass: a dropped run's partition (its labels) has, by
    # explicit differences about its own means, an inertia above the
    # ceiling; a run that is not dropped ends as without a ceiling. The
    # ceiling sits a relative ``where`` from that inertia, on either side.
    rng = np.random.default_rng(global_random_seed)
    X = _data(kind, global_random_seed)
    w = rng.integers(1, 3, X.shape[0]).astype(float)
    distinct = np.unique(X, axis=0)
    init = distinct[rng.choice(distinct.shape[0], 5, replace=False)]
    rows = _rows(X, w)
    plain = IncrementalLloyd(rows, init)
    plain.run(300)
    reference = float(_sse(X, w, plain.labels))
    ceiling = reference * (1 + where)
    state = IncrementalLloyd(rows, init)
    state.run(300, ceiling=ceiling)
    if state.dropped:
        assert float(_sse(X, w, state.labels)) > ceiling
        assert not state.below(np.inf)
    else:
        np.testing.assert_array_equal(state.labels, plain.labels)
        np.testing.assert_array_equal(state.centers, plain.centers)
    if where < 0 and not state.exact:
        assert state.dropped  # clearly above: no confirming pass


@pytest.mark.parametrize("kind", ["blobs", "uniform"])
def test_hopeless_trial_is_abandoned_where_explicit_lloyd_says(
    kind, steps, global_random_seed
):
    # Check the abandonment of a trial against explicit Lloyd: two centres
    # of a converged state moved onto one row (the polish's trials move
    # two), run with the state's inertia as ceiling. Where every step is a
    # full pass the run is dropped at the iteration where the explicit
    # run's inertia is above the ceiling by more than HOPELESS times its
    # last decrease, and ends as without a ceiling where it never is;
    # with other steps it is never abandoned.
    rng = np.random.default_rng(global_random_seed)
    X = _data(kind, global_random_seed)
    w = rng.integers(1, 3, X.shape[0]).astype(float)
    rows = _rows(X, w)
    distinct = np.unique(X, axis=0)
    state = IncrementalLloyd(
        rows, distinct[rng.choice(len(distinct), 6, replace=False)]
    )
    state.run(300)
    ceiling = state.inertia()
    abandoned = 0
    for a, b in [(0, 1), (2, 3), (4, 5), (1, 4)]:
        trial = state.copy()
        trial.centers[[a, b]] = X[rng.integers(X.shape[0])] + [[0.0], [1e-3]]
        start = trial.centers.copy()
        n_iter, _ = trial.run(
            300, moved=[a, b], ceiling=ceiling, incumbent=state.labels
        )
        plain = IncrementalLloyd(rows, start)
        plain.run(300)
        hopeless = _lloyd.HOPELESS if steps == "small-data" else np.inf
        at = _abandoned_at(X, w, start, ceiling, hopeless)
        if at is not None:
            abandoned += 1
            assert trial.dropped and n_iter == at
        elif not trial.dropped:
            np.testing.assert_array_equal(trial.labels, plain.labels)
    if steps == "small-data":
        assert abandoned >= 1


@settings(max_examples=200, deadline=None)
@given(
    labels=st.lists(st.integers(0, 3), min_size=1, max_size=12),
    swap=st.permutations(range(4)),
    change=st.one_of(st.none(), st.integers(0, 11)),
)
def test_same_partition_whatever_the_names(labels, swap, change):
    # Check _same_partition against the partitions as sets of row sets: a
    # renaming of the clusters is the same partition, a row moved (unless
    # it only renames a singleton) is another.
    labels = np.array(labels)
    other = np.array(swap)[labels]
    if change is not None and change < labels.size:
        other[change] = (other[change] + 1) % 5

    def blocks(lab):
        return {frozenset(np.flatnonzero(lab == j)) for j in np.unique(lab)}

    expected = blocks(labels) == blocks(other)
    assert _lloyd._same_partition(labels, other) == expected


@pytest.mark.parametrize("kind", ["blobs", "uniform"])
def test_trial_back_on_the_incumbent_is_dropped(kind, global_random_seed):
    # Check that a run ending on the partition it was to beat (here the
    # plain run's, under other cluster names) is dropped without the
    # confirming pass wherever its state is not already exact.
    rng = np.random.default_rng(global_random_seed)
    X = _data(kind, global_random_seed)
    distinct = np.unique(X, axis=0)
    init = distinct[rng.choice(distinct.shape[0], 5, replace=False)]
    rows = _rows(X)
    plain = IncrementalLloyd(rows, init)
    plain.run(300)
    renamed = rng.permutation(5)[plain.labels]
    state = IncrementalLloyd(rows, init)
    state.run(300, incumbent=renamed)
    assert state.dropped == (not state.exact)
    assert not state.below(np.inf) or not state.dropped
    np.testing.assert_array_equal(state.labels, plain.labels)


def _sse(X, w, labels):
    """Inertia of a partition about its own weighted means (float64)."""
    total = 0.0
    for j in np.unique(labels):
        mask = labels == j
        mean = w[mask] @ X[mask] / w[mask].sum()
        total += w[mask] @ ((X[mask] - mean) ** 2).sum(axis=1)
    return total


@pytest.mark.parametrize("kind", ["blobs", "uniform"])
def test_float32_same_as_plain_lloyd(kind, global_random_seed):
    # Check float32 rows against the engine's plain Lloyd (float32 distances
    # both): same iterations and centres to float32 rounding.
    rng = np.random.default_rng(global_random_seed)
    X = _data(kind, global_random_seed).astype(np.float32)
    rows = _rows(X)
    init = X[rng.choice(X.shape[0], 5, replace=False)]
    centers, n_iter, _ = plain_lloyd(rows, init, 300)
    state = IncrementalLloyd(rows, init)
    assert state.run(300) == (n_iter, True)
    assert state.centers.dtype == np.float32
    np.testing.assert_allclose(state.centers, centers, rtol=1e-5, atol=1e-5)


def test_coincident_centres_follow_plain_lloyd():
    # Check that coincident initial centres (annealing with fewer distinct
    # groups than clusters) run the engine's plain Lloyd, which moves them
    # together.
    X = np.random.default_rng(0).normal(size=(200, 2))
    init = np.array([[0.0, 0.0], [0.0, 0.0], [1.0, 1.0]])
    rows = _rows(X)
    state = IncrementalLloyd(rows, init)
    n_iter, _ = state.run(300)
    centers, ref_iter, _ = plain_lloyd(rows, init, 300)
    assert n_iter == ref_iter
    np.testing.assert_array_equal(state.centers, centers)
    np.testing.assert_array_equal(state.centers[0], state.centers[1])


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**32 - 1),
    n_moved=st.integers(1, 6),
    scale=st.sampled_from([1e-3, 1.0, 1e3]),
)
def test_assignment_step_misses_no_label_change(seed, n_moved, scale):
    # Check one incremental assignment step against an explicit search: after
    # moving some centres, every sample whose nearest centre is unambiguous
    # (margin above rounding) gets exactly that label, including samples
    # of unmoved clusters that a moved centre now attracts.
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(300, 3)) * scale
    centers = X[rng.choice(300, 8, replace=False)].copy()
    state = IncrementalLloyd(_rows(X), centers)
    moved = np.sort(rng.choice(8, n_moved, replace=False))
    step = np.zeros_like(centers)
    step[moved] = rng.normal(size=(n_moved, 3)) * scale
    state.centers += step
    state.assign(moved, shift=np.sqrt((step**2).sum(axis=1)))
    labels, margin, d = _explicit_labels(X, state.centers)
    clear = margin > 1e-9 * d.max()
    np.testing.assert_array_equal(state.labels[clear], labels[clear])
    if state.bounds is not None:
        return  # bounded steps leave the cleared rows' partial distances stale
    # The partial distances stay those of the own centre.
    own = d[np.arange(300), state.labels]
    x_sq = ((X - state.rows.offset) ** 2).sum(1)
    np.testing.assert_allclose(x_sq + state.e_own, own, atol=1e-9 * d.max())


@settings(max_examples=60, deadline=None)
@given(
    seed=st.integers(0, 2**16),
    kind=st.sampled_from(["blobs", "duplicates", "ties", "uniform"]),
    scale=st.sampled_from([1e-6, 1e-2, 1.0, 1e3]),
    n_steps=st.integers(1, 6),
)
def test_bounds_never_skip_a_label_change(seed, kind, scale, n_steps):
    # Check the bounded steps against an explicit search after each of a
    # few random moves of every centre (small, large, and none for some):
    # every sample whose nearest centre is unambiguous has that label; on
    # the integer grid ("ties", exact arithmetic) every sample has the full
    # pass's label, the lowest index among exact ties.
    rng = np.random.default_rng(seed)
    X = _data(kind, seed)
    k = 7
    centers = X[rng.choice(X.shape[0], k, replace=False)].copy()
    state = IncrementalLloyd(_rows(X), centers)
    spread = np.ptp(X, axis=0).max()
    for _ in range(n_steps):
        step = rng.normal(size=centers.shape) * scale * spread
        step[rng.random(k) < 0.3] = 0.0
        if kind == "ties":
            step = np.round(step)  # stay on the grid: exact distances
        state.centers += step
        moved = np.flatnonzero(step.any(axis=1))
        if moved.size:  # as in a run: an assignment only after a move
            state.assign(moved, shift=np.sqrt((step**2).sum(axis=1)))
        labels, margin, d = _explicit_labels(X, state.centers)
        clear = margin > 1e-9 * d.max() if kind != "ties" else slice(None)
        np.testing.assert_array_equal(state.labels[clear], labels[clear])
        # The sums follow the labels.
        N = np.bincount(state.labels, minlength=k)
        np.testing.assert_allclose(state.N, N, atol=1e-9)


def test_bounded_run_ends_on_the_canonical_state():
    # Check that two runs ending on the same partition by different paths
    # (from the fixed point itself, and from centres moved by 1e-9 of the
    # data's scale) give the same bits: centres, inertia. The polish
    # compares such inertias: a difference by rounding once let a trial
    # that returned to the current partition look like a win.
    rng = np.random.default_rng(1)
    X = np.concatenate([rng.normal(c, 0.6, size=(100, 2)) for c in range(5)])
    state = IncrementalLloyd(_rows(X), X[::100].copy())
    assert state.run(300)[1]
    trial = state.copy()
    trial.centers += 1e-9 * rng.normal(size=trial.centers.shape)
    assert trial.run(300, moved=np.arange(5))[1]
    assert trial.centers.tobytes() == state.centers.tobytes()
    assert trial.inertia() == state.inertia()


def test_trial_move_equals_lloyd_from_the_trial():
    # Check that a trial started from a solution's labels (the polish's
    # moves) ends where plain Lloyd from the trial centres ends.
    rng = np.random.default_rng(3)
    X = np.concatenate([rng.normal(c, 0.3, size=(60, 2)) for c in range(6)])
    rows = _rows(X)
    state = IncrementalLloyd(rows, X[:5].copy())
    state.run(300)
    trial = state.copy()
    trial.centers[1] = X[-1]
    trial.centers[3] = X[100]
    start = trial.centers.copy()
    it, ok = trial.run(300, moved=[1, 3])
    centers, n_iter, conv = plain_lloyd(rows, start, 300)
    assert ok and conv
    np.testing.assert_allclose(trial.centers, centers, rtol=1e-12)
    # The state it came from is untouched by the trial.
    assert not np.array_equal(state.centers, trial.centers)


def _abandoned_at(X, w, centers, ceiling, hopeless, max_iter=300):
    """The iteration at which the polish abandons Lloyd from ``centers``, or None.

    Explicit Lloyd (labels by explicit differences, weighted means):
    ``J_t`` is the inertia of the ``t``-th labels about their own means;
    the run is abandoned at the first ``t >= 2`` with ``J_t - ceiling >
    hopeless (J_(t-1) - J_t)``, before it reaches a fixed point.
    """
    last = None
    for t in range(1, max_iter + 1):
        labels = _explicit_labels(X, centers)[0]
        now = float(_sse(X, w, labels))
        if (
            hopeless < np.inf
            and last is not None
            and now - ceiling > hopeless * (last - now)
        ):
            return t
        last = now
        new = centers.copy()
        for j in range(len(centers)):
            if np.any(labels == j):
                new[j] = w[labels == j] @ X[labels == j] / w[labels == j].sum()
        if np.array_equal(new, centers):
            return None
        centers = new
    return None


def _reference_polish(
    X, w, centers, offset, x_sq, max_iter=300, single_moves=False, hopeless=np.inf
):
    """The search with plain Lloyd on all rows for every trial (the oracle).

    With ``single_moves``, Hartigan's passes and plain Lloyd from their
    means settle the start and every kept move. A trial whose explicit run
    is abandoned (``_abandoned_at``, with ``hopeless`` times its decrease)
    is not kept.
    """
    rows = MemoryRows(X, w, offset, x_sq)

    def settle(centers):
        centers, _, _ = plain_lloyd(rows, centers, max_iter)
        if single_moves:
            moved, _, n_moved, _ = hartigan(rows, centers)
            if n_moved:
                centers, _, _ = plain_lloyd(rows, moved, max_iter)
        return centers, labels_inertia(X, w, centers, offset, x_sq)[1]

    centers, inertia = settle(centers)
    moves = []
    while True:
        pairs, children = _candidates(rows, centers, Splits(rows))
        for _, j, c in pairs:
            trial = centers.copy()
            trial[c], trial[j] = children[c]
            if _abandoned_at(X, w, trial, inertia, hopeless, max_iter):
                continue
            trial, _, _ = plain_lloyd(rows, trial, max_iter)
            _, trial_inertia = labels_inertia(X, w, trial, offset, x_sq)
            if trial_inertia < inertia:
                centers, inertia = settle(trial)
                moves.append((j, c))
                break
        else:
            return centers, inertia, moves


@pytest.mark.parametrize("abandon", [True, False])
@pytest.mark.parametrize("single_moves", [False, True])
@pytest.mark.parametrize("seed", range(6))
def test_polish_accepts_the_moves_of_the_plain_search(
    seed, single_moves, abandon, steps, monkeypatch
):
    # Check that the incremental polish keeps the same moves as the search
    # that runs plain Lloyd on all rows for every trial: same centres, same
    # inertia, same moves; with single-sample moves too, and then the
    # result is a fixed point of both: no single move gains. Trials whose
    # steps are all full passes are abandoned as the explicit search
    # abandons them (``abandon``; without it, never: HOPELESS = inf).
    if not abandon:
        monkeypatch.setattr(_lloyd, "HOPELESS", np.inf)
    hopeless = _lloyd.HOPELESS if steps == "small-data" else np.inf
    rng = np.random.default_rng(seed)
    k = [3, 4, 6, 8, 10, 12][seed]
    means = rng.uniform(-10, 10, size=(k + 2, 2))
    X = np.concatenate(
        [rng.normal(m, rng.uniform(0.3, 2), size=(80, 2)) for m in means]
    )
    w = np.ones(X.shape[0])
    offset = data_offset(X, w)
    x_sq = ((X - offset) ** 2).sum(1)
    init = X[rng.choice(X.shape[0], k, replace=False)]
    ref = _reference_polish(
        X, w, init, offset, x_sq, single_moves=single_moves, hopeless=hopeless
    )
    rows = MemoryRows(X, w, offset, x_sq)
    centers, inertia, moves, *_ = polish(rows, init, single_moves=single_moves)
    assert moves == ref[2]
    np.testing.assert_allclose(centers, ref[0], rtol=1e-10, atol=1e-10)
    assert inertia == pytest.approx(ref[1], rel=1e-12)
    if single_moves:
        assert hartigan(rows, centers)[2] == 0
