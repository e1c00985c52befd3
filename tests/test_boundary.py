"""Boundary moves: two clusters' union split afresh, or a share of one
cluster's rows moved across to the other.

The final phase of ``AnnealedRBFKMeans`` tries them from the fixed point of
Lloyd, the single-sample moves and the polish, within a budget of Lloyd
iterations. The oracles are plain: the distortion computed from scratch and
Lloyd's step in float64 (``_rbf_oracle``), and the same fit with no budget.
"""

import numpy as np
import pytest
from _rbf_oracle import distortion, lloyd_step
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.cluster import KMeans
from sklearn.datasets import load_diabetes, make_blobs
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import AnnealedRBFKMeans, _anneal, kmeans_hartigan
from skrbfkmeans._engine.passes import squared_norms
from skrbfkmeans._lloyd import IncrementalLloyd
from skrbfkmeans._polish import (
    BOUNDARY_SHARES,
    Splits,
    _all_trials,
    _boundary_pairs,
    _boundary_trials,
    _resplit_trial,
    boundary_moves,
)
from skrbfkmeans._rows import MemoryRows


def _fixed_point(X, k, seed):
    """A Hartigan-stable (hence Lloyd) fixed point from random rows."""
    rng = np.random.default_rng(seed)
    start = X[rng.choice(X.shape[0], k, replace=False)]
    return kmeans_hartigan(X, start)[0]


@pytest.mark.parametrize("data", ["blobs", "uniform"])
def test_moves_only_lower_the_distortion(data, global_random_seed):
    # Check that a move kept gives a Lloyd fixed point of strictly lower
    # distortion, whose reported inertia is the distortion computed from
    # scratch, and that the centres come back unchanged when no move is
    # kept. 16 clusters of 400 rows, from a Hartigan fixed point: a move is
    # kept there (at every seed from 0 to 99); none on four well-separated
    # blobs at their optimum.
    if data == "blobs":
        X, _ = make_blobs(
            400, centers=6, cluster_std=2.0, random_state=global_random_seed
        )
    else:
        X = np.random.default_rng(global_random_seed).uniform(size=(400, 2))
    centers = _fixed_point(X, 16, global_random_seed)
    before = distortion(X, centers)
    w, offset = np.ones(X.shape[0]), np.zeros(X.shape[1])
    new, inertia, kept, _, spent = boundary_moves(
        MemoryRows(X, w, offset), centers, budget=1000
    )
    assert spent > 0 and kept
    assert distortion(X, new) < before
    assert_allclose(inertia, distortion(X, new), rtol=1e-10)
    assert_allclose(lloyd_step(X, new), new, rtol=1e-10, atol=1e-10)
    Z, _ = make_blobs(
        200,
        centers=[[0, 0], [20, 0], [0, 20], [20, 20]],
        cluster_std=1.0,
        random_state=global_random_seed,
    )
    optimum = kmeans_hartigan(Z, np.array([[0, 0], [20, 0], [0, 20], [20, 20.0]]))[0]
    w, offset = np.ones(Z.shape[0]), np.zeros(Z.shape[1])
    new, inertia, kept, _, spent = boundary_moves(
        MemoryRows(Z, w, offset), optimum, budget=1000
    )
    assert spent > 0 and not kept
    assert_array_equal(new, optimum)
    assert_allclose(inertia, distortion(Z, optimum), rtol=1e-10)


def test_budget_bounds_the_iterations():
    # Check that no trial starts once the budget of Lloyd iterations is
    # spent (the one that crosses it finishes its run of at most max_iter),
    # that a zero budget tries nothing, and that a larger budget searches at
    # least as far.
    X, _ = make_blobs(600, centers=8, cluster_std=2.5, random_state=0)
    centers = _fixed_point(X, 8, 0)
    w, offset = np.ones(X.shape[0]), np.zeros(X.shape[1])
    rows = MemoryRows(X, w, offset)
    _, _, kept, _, spent = boundary_moves(rows, centers, budget=0)
    assert not kept and spent == 0
    for budget in (1, 5, 12):
        *_, spent = boundary_moves(rows, centers, budget=budget, max_iter=3)
        assert spent < budget + 3
    *_, kept, _, spent_full = boundary_moves(rows, centers, budget=10**9, max_iter=3)
    assert spent_full >= spent


def test_trials_move_the_rows_nearest_the_other_cluster():
    # Check every share's trial against a direct construction: the share of
    # a's rows with the largest projection on mu_b - mu_a leaves a for b,
    # and the two centres become the weighted means of the clusters so
    # changed; the state the trials come from is untouched.
    rng = np.random.default_rng(3)
    X = np.vstack([rng.normal(0, 1, (50, 2)), rng.normal(5, 1, (30, 2))])
    w = rng.uniform(0.5, 2.0, X.shape[0])
    offset = X.mean(axis=0)
    centers = np.array([X[:50].mean(0), X[50:].mean(0)])
    state = IncrementalLloyd(
        MemoryRows(X, w, offset, squared_norms(X, offset)), centers
    )
    labels = state.labels.copy()
    trials = list(_boundary_trials(state, 0, 1))
    assert len(trials) == len(BOUNDARY_SHARES)
    a = np.flatnonzero(labels == 0)
    proj = (X[a] - offset) @ (centers[1] - centers[0])
    for share, trial in zip(BOUNDARY_SHARES, trials):
        moved = a[np.argsort(-proj, kind="stable")[: round(share * a.size)]]
        new = labels.copy()
        new[moved] = 1
        for j in (0, 1):
            mean = np.average(X[new == j], axis=0, weights=w[new == j])
            assert_allclose(trial.centers[j], mean, rtol=1e-12, atol=1e-12)
    assert_array_equal(state.labels, labels)
    assert_array_equal(state.centers, centers)
    # A cluster of one row has no trial (it would empty the cluster).
    Xl = np.vstack([X, [[100.0, 100.0]]])
    wl = np.append(w, 1.0)
    lone = IncrementalLloyd(
        MemoryRows(Xl, wl, offset, squared_norms(Xl, offset)),
        np.array([[100.0, 100.0], X.mean(0)]),
    )
    assert np.sum(lone.labels == 0) == 1
    assert list(_boundary_trials(lone, 0, 1)) == []


def test_resplit_is_a_two_means_of_the_union():
    # Check the union trial: its two centres are a fixed point of weighted
    # Lloyd on the rows of a and b together (each the weighted mean of the
    # union's rows nearest it), the other centres are kept, and the state
    # it comes from is untouched; a union of identical rows has no trial.
    rng = np.random.default_rng(5)
    X = np.vstack(
        [rng.normal(m, 1.0, (40, 3)) for m in ([0, 0, 0], [3, 0, 0], [0, 9, 0])]
    )
    w = rng.uniform(0.5, 2.0, X.shape[0])
    offset = X.mean(axis=0)
    centers = np.array([X[:60].mean(0), X[60:80].mean(0), X[80:].mean(0)])
    state = IncrementalLloyd(
        MemoryRows(X, w, offset, squared_norms(X, offset)), centers
    )
    labels, before = state.labels.copy(), state.centers.copy()
    trial = _resplit_trial(state, 0, 1, Splits(state.rows))
    union = np.isin(labels, (0, 1))
    kids = trial.centers[[0, 1]]
    assert_allclose(lloyd_step(X[union], kids, w[union]), kids, rtol=1e-10)
    assert_array_equal(trial.centers[2], before[2])
    assert not np.allclose(kids, before[[0, 1]])  # a fresh split of the union
    assert_array_equal(state.labels, labels)
    assert_array_equal(state.centers, before)
    # Cluster 2 is empty: the union of 0 and 2 is five equal rows.
    same = np.vstack([np.zeros((5, 3)), np.full((5, 3), 7.0)])
    ones, zero = np.ones(10), np.zeros(3)
    twin = IncrementalLloyd(
        MemoryRows(same, ones, zero, squared_norms(same, zero)),
        np.array([[0.0, 0.0, 0.0], [7.0, 7.0, 7.0], [99.0, 99.0, 99.0]]),
    )
    assert _resplit_trial(twin, 0, 2, Splits(twin.rows)) is None
    assert _resplit_trial(twin, 0, 1, Splits(twin.rows)) is not None


def test_trials_come_unions_first_then_shares():
    # Check the order of the trials against the pair order: every
    # neighbouring pair's union once (where either direction first comes),
    # then each ordered pair's shares.
    X, _ = make_blobs(300, centers=5, random_state=2)
    centers = _fixed_point(X, 5, 2)
    w = np.ones(X.shape[0])
    offset = np.zeros(2)
    state = IncrementalLloyd(
        MemoryRows(X, w, offset, squared_norms(X, offset)), centers
    )
    pairs = _boundary_pairs(X, w, centers, offset)
    unions = []
    for a, b in pairs:
        if (min(a, b), max(a, b)) not in unions:
            unions.append((min(a, b), max(a, b)))
    expected = unions + [p for p in pairs for _ in BOUNDARY_SHARES]
    assert [(a, b) for a, b, _ in _all_trials(state, Splits(state.rows))] == expected


def test_pairs_rank_the_shared_boundary():
    # Check the pair order against a brute-force count: the weight of a's
    # rows whose second-nearest centre is b, largest first.
    X, _ = make_blobs(300, centers=5, random_state=1)
    centers = _fixed_point(X, 5, 1)
    w = np.random.default_rng(0).uniform(0.1, 1.0, X.shape[0])
    d = ((X[:, None, :] - centers[None]) ** 2).sum(-1)
    first, second = np.argsort(d, axis=1)[:, :2].T
    shared = {}
    for a, b, wi in zip(first, second, w):
        shared[a, b] = shared.get((a, b), 0.0) + wi
    pairs = _boundary_pairs(X, w, centers, np.zeros(2))
    assert set(pairs) == set(shared)
    weights = [shared[p] for p in pairs]
    assert all(x >= y * (1 - 1e-12) for x, y in zip(weights, weights[1:]))


def test_annealed_fit_never_above_its_fit_without_them(monkeypatch):
    # Check the final phase: boundary moves start from the fixed point the
    # other moves reach, so a fit with them is never above the same fit
    # without them and stays certified; on standardised diabetes (k=3),
    # where single-sample moves and the polish stop above ten k-means++
    # restarts, they reach those restarts' solution.
    diabetes = StandardScaler().fit_transform(load_diabetes(return_X_y=True)[0])
    blobs = make_blobs(500, centers=7, cluster_std=2.0, random_state=0)[0]
    for X, k in [(diabetes, 3), (blobs, 6)]:
        with monkeypatch.context() as mp:
            mp.setattr(_anneal, "BOUNDARY_BUDGET", 0.0)
            without = AnnealedRBFKMeans(k).fit(X)
        fitted = AnnealedRBFKMeans(k).fit(X)
        assert fitted.inertia_ <= without.inertia_
        assert fitted.certified_
        if X is diabetes:
            assert fitted.inertia_ < without.inertia_ * (1 - 1e-5)
            km = KMeans(3, n_init=10, random_state=0).fit(X)
            assert without.inertia_ > km.inertia_ * (1 + 1e-6)
            assert fitted.inertia_ <= km.inertia_ * (1 + 1e-9)
