"""The final phase of the annealed fit, against brute-force oracles.

``_finish.finish`` runs Lloyd to stable labels, then single-sample
(Hartigan) moves, the split/merge polish (``_polish.polish``) and boundary
moves (``_polish.boundary_moves``), to a fixed point of all of them. Each
test here would notice one of them breaking: skipped, keeping nothing, or
keeping a move that does not lower the distortion.

The oracles are plain NumPy and SciPy, sharing no code with the package:
the distortion and Lloyd's algorithm from explicit differences
(``scipy.spatial.distance.cdist``); the change of the distortion when one
sample moves (Hartigan's criterion); and every trial of the split/merge and
boundary searches, each run to the end by plain Lloyd on all rows. The
searches get explicit arguments (budgets far above what they spend), so
that what is checked does not depend on how the estimator budgets its
final phase; the estimator's tests compare with KMeans(n_init=10).
"""

from functools import lru_cache

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from scipy.spatial.distance import cdist
from sklearn.cluster import KMeans
from sklearn.datasets import (
    load_breast_cancer,
    load_diabetes,
    load_digits,
    load_iris,
    load_wine,
)
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import AnnealedRBFKMeans
from skrbfkmeans._finish import finish
from skrbfkmeans._polish import BOUNDARY_SHARES, boundary_moves, polish
from skrbfkmeans._rows import MemoryRows, working_units

MAX_ITER = 300
# Lloyd iterations for the searches: over four times what the longest
# search here spends (the phase on wine k=10: about 1100), so that none
# stops for want of them; finite, so that a search that would keep moves
# for ever (moves that do not lower the distortion) ends, and its test fails.
BUDGET = 5_000
# A move lowers the distortion when it does by more than this (relative):
# far above rounding, far below what the moves found here gain.
GAIN = 1e-9


@lru_cache
def _data(name):
    """A small data set, standardised (the uniform square as drawn)."""
    if name == "uniform":
        return np.random.default_rng(0).uniform(size=(1000, 2))
    load = {
        "iris": load_iris,
        "wine": load_wine,
        "digits": load_digits,
        "cancer": load_breast_cancer,
        "diabetes": load_diabetes,
    }[name]
    X = load().data
    if name == "digits":
        X = X[:400]
    return StandardScaler().fit_transform(X)


@lru_cache
def _start(name, k, seed):
    """A poor start: one k-means++ run of KMeans (a Lloyd fixed point)."""
    X = _data(name)
    return KMeans(k, n_init=1, random_state=seed).fit(X).cluster_centers_


class _Problem:
    """Rows in the package's working units, and the conversions of centres."""

    def __init__(self, name):
        self.X = _data(name)
        w = np.ones(self.X.shape[0])
        X, offset, _, self.units = working_units(self.X, w)
        self.rows = MemoryRows(X, w, offset, units=self.units)

    def working(self, centers):
        return self.units.to_working_points(np.asarray(centers, dtype=np.float64))

    def user(self, centers):
        return self.units.to_user_points(centers)


# -- Oracles ---------------------------------------------------------------


def _labels(X, centers):
    return cdist(X, centers, "sqeuclidean").argmin(axis=1)


def _distortion(X, centers):
    """Sum of squared distances to the nearest centre, explicit differences."""
    return float(cdist(X, centers, "sqeuclidean").min(axis=1).sum())


def _means(X, labels, centers):
    """The mean of each cluster (a cluster with no row keeps its centre)."""
    centers = np.array(centers, dtype=np.float64)
    for j in range(centers.shape[0]):
        mine = labels == j
        if mine.any():
            centers[j] = X[mine].mean(axis=0)
    return centers


def _lloyd(X, centers, max_iter=MAX_ITER):
    """Plain Lloyd until the labels repeat: the centres and their distortion."""
    labels = _labels(X, centers)
    for _ in range(max_iter):
        centers = _means(X, labels, centers)
        new = _labels(X, centers)
        if np.array_equal(new, labels):
            break
        labels = new
    return centers, _distortion(X, centers)


def _assert_lloyd_fixed_point(X, centers):
    # Every centre is the mean of the rows nearest it.
    labels = _labels(X, centers)
    assert np.bincount(labels, minlength=centers.shape[0]).min() > 0
    assert_allclose(_means(X, labels, centers), centers, rtol=1e-9, atol=1e-9)


def _best_single_move(X, centers):
    """The largest drop of the distortion by moving one row to another cluster.

    Hartigan's criterion on the partition of ``centers``: a row ``x`` of
    cluster ``a`` (``n_a`` rows, mean ``mu_a``) moved to ``b`` lowers the
    distortion by ``|x - mu_a|^2 n_a / (n_a - 1) - |x - mu_b|^2 n_b / (n_b + 1)``
    (both means move with it). Relative to the distortion; 0 when no move
    lowers it.
    """
    labels = _labels(X, centers)
    k = centers.shape[0]
    n = np.bincount(labels, minlength=k).astype(np.float64)
    mu = _means(X, labels, centers)
    d = cdist(X, mu, "sqeuclidean")
    rows = np.arange(X.shape[0])
    own = n[labels]
    with np.errstate(divide="ignore", invalid="ignore"):
        # A row alone in its cluster sits on its mean: leaving costs nothing.
        leave = np.where(own > 1, own / (own - 1), 0.0) * d[rows, labels]
    join = d * (n / (n + 1))
    join[rows, labels] = np.inf
    drop = float((leave - join.min(axis=1)).max())
    return max(drop, 0.0) / _distortion(X, mu)


def _two_means(Xu):
    """2-means of ``Xu`` from the two sides of its principal axis (plain)."""
    Y = Xu - Xu.mean(axis=0)
    axis = np.linalg.eigh(Y.T @ Y)[1][:, -1]
    side = (Y @ axis > 0).astype(np.intp)
    start = np.array([Xu[side == 0].mean(axis=0), Xu[side == 1].mean(axis=0)])
    return _lloyd(Xu, start)[0]


def _split_merge_trials(X, centers):
    """Every split/merge trial's distortion, after plain Lloyd on all rows.

    Centre ``j`` leaves its cluster and, with centre ``c``, takes the two
    halves of cluster ``c``'s 2-means. Every ordered pair ``(j, c)``: the
    polish tries them all when ``k (k - 1)`` is at most 24 pairs (k <= 5).
    """
    labels = _labels(X, centers)
    out = []
    for c in range(centers.shape[0]):
        Xc = X[labels == c]
        if Xc.shape[0] < 2 or np.ptp(Xc, axis=0).max() == 0:
            continue
        kids = _two_means(Xc)
        for j in range(centers.shape[0]):
            if j != c:
                trial = centers.copy()
                trial[c], trial[j] = kids
                out.append(_lloyd(X, trial)[1])
    return np.array(out)


def _boundary_trials(X, centers):
    """Every boundary trial's distortion, after plain Lloyd on all rows.

    Pairs ``(a, b)`` share a boundary when a row's nearest centre is ``a``
    and its second-nearest ``b``. For each such pair, the union of the two
    clusters split afresh by 2-means, and each share of ``a``'s rows, those
    with the largest projection on ``mu_b - mu_a``, moved across to ``b``.
    """
    d = cdist(X, centers, "sqeuclidean")
    first, second = np.argsort(d, axis=1, kind="stable")[:, :2].T
    labels = first
    pairs = sorted(set(zip(first.tolist(), second.tolist())))
    out = []
    for a, b in sorted({(min(a, b), max(a, b)) for a, b in pairs}):
        union = np.isin(labels, (a, b))
        if union.sum() >= 2 and np.ptp(X[union], axis=0).max() > 0:
            trial = centers.copy()
            trial[a], trial[b] = _two_means(X[union])
            out.append(_lloyd(X, trial)[1])
    for a, b in pairs:
        idx = np.flatnonzero(labels == a)
        if idx.size < 2:
            continue
        order = idx[np.argsort(-(X[idx] @ (centers[b] - centers[a])), kind="stable")]
        for share in BOUNDARY_SHARES:
            m = min(max(round(share * idx.size), 1), idx.size - 1)
            moved = labels.copy()
            moved[order[:m]] = b
            trial = _means(X, moved, centers)
            out.append(_lloyd(X, trial)[1])
    return np.array(out)


def _lowers(trials, distortion):
    """The trials' distortions that are lower than ``distortion`` (beyond GAIN)."""
    return trials[trials < distortion * (1 - GAIN)]


def _case_id(case):
    name, k, seed = case
    return f"{name}-k{k}-start{seed}"


# -- finish: the whole phase -------------------------------------------------

# (data, k, start): from each start the phase keeps single-sample, split/merge
# and boundary moves (measured: at least one of each).
FINISH_CASES = [
    ("iris", 10, 1),
    ("wine", 10, 0),
    ("digits", 3, 1),
    ("cancer", 5, 1),
    ("diabetes", 3, 0),
]


@pytest.mark.parametrize("case", FINISH_CASES, ids=_case_id)
def test_finish_ends_where_no_move_gains(case):
    # Check that from a poor start (one k-means++ run of KMeans) the final
    # phase ends on a Lloyd fixed point where, by the oracles, no
    # single-sample move, no boundary trial and (k <= 5: the polish tries
    # every pair) no split/merge trial lowers the distortion, while at the
    # start such moves did; and that a boundary search from there keeps
    # nothing and gives the centres back unchanged.
    name, k, seed = case
    problem = _Problem(name)
    X = problem.X
    start = _start(name, k, seed)
    before = _distortion(X, start)
    assert (
        _best_single_move(X, start) > GAIN
        or _lowers(_boundary_trials(X, start), before).size
    )
    done = finish(
        problem.rows,
        problem.working(start),
        max_iter=MAX_ITER,
        polish_moves=True,
        budget=BUDGET,
        total=BUDGET,
    )
    centers = problem.user(done.centers)
    after = _distortion(X, centers)
    assert after < before * (1 - GAIN)
    _assert_lloyd_fixed_point(X, centers)
    assert _best_single_move(X, centers) <= GAIN
    assert not _lowers(_boundary_trials(X, centers), after).size
    if k <= 5:
        assert not _lowers(_split_merge_trials(X, centers), after).size
    new, inertia, kept, _, _ = boundary_moves(
        problem.rows, done.centers, budget=BUDGET, max_iter=MAX_ITER
    )
    assert not kept
    assert_array_equal(new, done.centers)
    assert_allclose(problem.units.to_user_energy(inertia), after, rtol=1e-10)


# (data, k, start): KMeans's fixed point that single-sample moves improve.
SINGLE_CASES = [
    ("iris", 10, 0),
    ("wine", 10, 0),
    ("digits", 5, 0),
    ("cancer", 8, 0),
    ("diabetes", 8, 1),
]


@pytest.mark.parametrize("case", SINGLE_CASES, ids=_case_id)
def test_single_moves_end_where_no_sample_gains(case):
    # Check that the phase without the polish (Lloyd, then single-sample
    # moves) ends on a Lloyd fixed point where, by Hartigan's criterion, no
    # one sample's move lowers the distortion, below the start, at which
    # the oracle finds such a move.
    name, k, seed = case
    problem = _Problem(name)
    X = problem.X
    start = _start(name, k, seed)
    assert _best_single_move(X, start) > 1e-6
    done = finish(problem.rows, problem.working(start), max_iter=MAX_ITER, total=BUDGET)
    centers = problem.user(done.centers)
    assert _distortion(X, centers) < _distortion(X, start) * (1 - GAIN)
    _assert_lloyd_fixed_point(X, centers)
    assert _best_single_move(X, centers) <= GAIN


# -- polish: the split/merge moves --------------------------------------------

# (data, k, start): the polish keeps two moves or more from each start.
POLISH_CASES = [
    ("iris", 5, 2),
    ("wine", 5, 0),
    ("digits", 5, 2),
    ("diabetes", 5, 1),
    ("uniform", 8, 0),
    ("digits", 8, 1),
]


@pytest.mark.parametrize("case", POLISH_CASES, ids=_case_id)
def test_polish_keeps_only_moves_that_lower_the_distortion(case):
    # Check the polish move by move (max_moves = 0, 1, 2, ...): each move
    # kept lowers the distortion computed from scratch and ends on a Lloyd
    # fixed point whose reported inertia is that distortion; the search
    # keeps at least one move and ends by itself, on a state where no
    # single-sample move and (k <= 5: every pair is tried) no split/merge
    # trial lowers the distortion, while at its starting state (after the
    # single-sample moves) a split/merge trial did.
    name, k, seed = case
    problem = _Problem(name)
    X = problem.X
    start = problem.working(_start(name, k, seed))
    history = []
    for max_moves in range(20):
        centers, inertia, moves, *_ = polish(
            problem.rows,
            start,
            max_moves=max_moves,
            max_iter=MAX_ITER,
            single_moves=True,
            budget=BUDGET,
        )
        user = problem.user(centers)
        distortion = _distortion(X, user)
        _assert_lloyd_fixed_point(X, user)
        assert_allclose(problem.units.to_user_energy(inertia), distortion, rtol=1e-10)
        if len(moves) < max_moves:
            # The search ended by itself: where it was one move earlier.
            assert_array_equal(centers, history[-1][0])
            break
        if history:
            assert distortion < history[-1][1] * (1 - GAIN)
        history.append((centers, distortion))
    else:
        pytest.fail("the polish kept 20 moves")
    assert len(history) >= 2  # the start, then at least one move kept
    assert _best_single_move(X, user) <= GAIN
    if k <= 5:
        first = problem.user(history[0][0])
        assert _lowers(_split_merge_trials(X, first), history[0][1]).size
        assert not _lowers(_split_merge_trials(X, user), distortion).size


# -- boundary moves -------------------------------------------------------------

# (data, k, start): at the fixed point of the polish (single-sample moves
# included) reached from each start, a boundary move lowers the distortion.
BOUNDARY_CASES = [
    ("iris", 10, 2),
    ("wine", 10, 2),
    ("digits", 3, 1),
    ("cancer", 5, 2),
    ("diabetes", 3, 1),
    ("uniform", 16, 0),
]


@pytest.mark.parametrize("case", BOUNDARY_CASES, ids=_case_id)
def test_boundary_search_keeps_a_move_that_lowers(case):
    # Check that where the oracle finds a boundary trial that lowers the
    # distortion (at the polish's fixed point), a search with an unlimited
    # budget keeps a move, whose result is one of those trials' (plain
    # Lloyd from the same redrawn boundary): a Lloyd fixed point of lower
    # distortion, which is the reported inertia.
    name, k, seed = case
    problem = _Problem(name)
    X = problem.X
    fixed, *_ = polish(
        problem.rows,
        problem.working(_start(name, k, seed)),
        max_iter=MAX_ITER,
        single_moves=True,
        budget=BUDGET,
    )
    before = _distortion(X, problem.user(fixed))
    lower = _lowers(_boundary_trials(X, problem.user(fixed)), before)
    assert lower.size
    new, inertia, kept, _, spent = boundary_moves(
        problem.rows, fixed, budget=BUDGET, max_iter=MAX_ITER
    )
    assert kept and spent > 0
    centers = problem.user(new)
    after = _distortion(X, centers)
    assert after < before * (1 - GAIN)
    assert np.isclose(lower, after, rtol=1e-9, atol=0).any()
    _assert_lloyd_fixed_point(X, centers)
    assert_allclose(problem.units.to_user_energy(inertia), after, rtol=1e-10)


# -- the estimator ----------------------------------------------------------------

# Standardised sets where the fit's final phase keeps moves and ends below
# (or, diabetes k=3, at) KMeans(n_init=10); without boundary moves, digits
# and diabetes k=3 end above it.
FIT_CASES = [
    ("iris", 10),
    ("digits", 3),
    ("wine", 10),
    ("digits", 5),
    ("cancer", 10),
    ("diabetes", 3),
    ("diabetes", 10),
]


@pytest.mark.parametrize("case", FIT_CASES, ids=lambda c: f"{c[0]}-k{c[1]}")
def test_annealed_fit_ends_where_no_sample_gains_below_kmeans(case):
    # Check the fit's end against the oracles and KMeans: a certified Lloyd
    # fixed point whose inertia is its distortion, where no single-sample
    # move lowers the distortion, at or below the inertia of
    # KMeans(n_init=10).
    name, k = case
    X = _data(name)
    fitted = AnnealedRBFKMeans(k).fit(X)
    centers = fitted.cluster_centers_
    assert fitted.certified_
    _assert_lloyd_fixed_point(X, centers)
    assert_allclose(fitted.inertia_, _distortion(X, centers), rtol=1e-10)
    assert _best_single_move(X, centers) <= GAIN
    reference = KMeans(k, n_init=10, random_state=0).fit(X).inertia_
    assert fitted.inertia_ <= reference * (1 + 1e-9)


@pytest.mark.parametrize("case", FIT_CASES, ids=lambda c: f"{c[0]}-k{c[1]}")
def test_annealed_fit_without_polish_ends_where_no_sample_gains(case):
    # Check that without the polish the fit still ends with single-sample
    # moves: a certified Lloyd fixed point where, by Hartigan's criterion,
    # no one sample's move lowers the distortion.
    name, k = case
    X = _data(name)
    fitted = AnnealedRBFKMeans(k, polish=False).fit(X)
    centers = fitted.cluster_centers_
    assert fitted.certified_
    _assert_lloyd_fixed_point(X, centers)
    assert _best_single_move(X, centers) <= GAIN
