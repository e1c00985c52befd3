"""Tests of the pure functions of ``skrbfkmeans._schedule``.

Critical factors from doc/theory.rst, posterior covariances against a
direct weighted ``numpy.cov``-style oracle, the split rule (eligibility and
score) on hand-made groups, the children of a split, and the softmax
hardness fraction against an exact softmax of the two nearest scores.
"""

import numpy as np
import pytest
from _data import ACTIVATIONS, DTYPE_IDS, DTYPES
from numpy.testing import assert_allclose, assert_array_equal
from scipy.special import softmax

from skrbfkmeans._schedule import (
    choose_split,
    critical_factor,
    next_critical_temperature,
    softmax_hard_fraction,
    split_children,
    weighted_top_eigen,
)


def _moments(X, w, R):
    """``M_j = sum_i w_i r_ij x x^T``, ``N_j``, ``S_j``: the direct sums."""
    wr = w[:, None] * R
    M = np.einsum("ij,ik,il->jkl", wr, X, X)
    return M, wr.sum(axis=0), wr.T @ X


def _weighted_cov(X, weights):
    """Weighted covariance ``sum_i a_i (x_i - mu)(x_i - mu)^T / sum_i a_i``."""
    mu = np.average(X, axis=0, weights=weights)
    Xc = X - mu
    return (weights[:, None] * Xc).T @ Xc / weights.sum()


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_critical_factor(activation):
    # Check T_c / lambda_max (doc/theory.rst, critical widths): softmax splits at
    # sigma_c^2 = lambda_max, i.e. T_c = 2 lambda_max; entmax-1.5 with K = 2
    # coincident centres at sigma_c^2 = sqrt(2) lambda_max.
    expected = {"softmax": 2.0, "entmax15": 2.0 * np.sqrt(2.0)}[activation]
    assert critical_factor(activation) == pytest.approx(expected, rel=1e-15)


@pytest.mark.parametrize("n_features", [1, 2, 5], ids=lambda d: f"d{d}")
def test_weighted_top_eigen_matches_posterior_covariance(
    n_features, global_random_seed
):
    # Check that lambda_max and the principal axis of each group's posterior
    # covariance sum_i w_i r_ij (x_i - mu_j)(x_i - mu_j)^T / N_j equal those
    # of the directly computed matrix (numpy.linalg.eigh), for random soft
    # responsibilities and weights.
    rng = np.random.RandomState(global_random_seed)
    X = rng.normal(size=(60, n_features)) * rng.uniform(0.5, 3.0, n_features)
    w = rng.uniform(0.2, 2.0, 60)
    R = rng.dirichlet(np.ones(4), size=60)
    lam, vec = weighted_top_eigen(*_moments(X, w, R))
    assert lam.shape == (4,) and vec.shape == (4, n_features)
    for j in range(4):
        C = _weighted_cov(X, w * R[:, j])
        vals, vecs = np.linalg.eigh(C)
        assert_allclose(lam[j], vals[-1], rtol=1e-10)
        assert_allclose(np.linalg.norm(vec[j]), 1.0, rtol=1e-12)
        # An eigenvector up to sign: C v = lambda v.
        assert_allclose(C @ vec[j], lam[j] * vec[j], atol=1e-10 * vals[-1])
        if n_features > 1 and vals[-1] - vals[-2] > 1e-3 * vals[-1]:
            assert abs(vec[j] @ vecs[:, -1]) == pytest.approx(1.0, rel=1e-8)


def test_weighted_top_eigen_massless_group():
    # Check that a group without mass gets eigenvalue 0 and a unit axis
    # (no division by N_j = 0, no NaN).
    rng = np.random.RandomState(0)
    X = rng.normal(size=(20, 3))
    R = np.zeros((20, 2))
    R[:, 0] = 1.0
    lam, vec = weighted_top_eigen(*_moments(X, np.ones(20), R))
    assert lam[1] == 0.0
    assert_allclose(np.linalg.norm(vec, axis=1), 1.0)
    assert np.isfinite(lam).all() and np.isfinite(vec).all()
    lam0, _ = weighted_top_eigen(*_moments(X, np.ones(20), np.zeros((20, 2))))
    assert_array_equal(lam0, 0.0)


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_choose_split_rule(activation):
    # Check the split rule: among groups with N_j >= 2 whose critical
    # temperature c lambda_j exceeds T, the largest N_j lambda_j splits;
    # None when no group is eligible.
    c = critical_factor(activation)
    N = np.array([10.0, 1.5, 4.0, 30.0])
    lam = np.array([1.0, 100.0, 3.0, 0.2])
    # At T just below c * 3 only groups 1 (too light) and 2 have crossed.
    assert choose_split(N, lam, 0.99 * c * 3.0, activation) == 2
    # At T below every T_c, N lam = [10, 150, 12, 6]: group 1 is too light.
    assert choose_split(N, lam, 0.1 * c * 0.2, activation) == 2
    assert choose_split(N, lam, 0.1 * c * 0.2, activation, min_mass=1.0) == 1
    # Above every critical temperature of an eligible group: nothing splits.
    assert choose_split(N, lam, 1.01 * c * 3.0, activation) is None
    # At exactly T = T_c the configuration is still stable (strict <).
    assert choose_split(N[2:3], lam[2:3], c * 3.0, activation) is None
    # A group without spread never splits, whatever T.
    assert choose_split(np.array([50.0]), np.array([0.0]), 1e-300, activation) is None


@pytest.mark.parametrize("activation", ACTIVATIONS)
def test_next_critical_temperature(activation):
    # Check that the next critical temperature is the largest c lambda_j of
    # the groups that can split (N_j >= 2, lambda_j > 0), 0 when none can.
    c = critical_factor(activation)
    N = np.array([10.0, 1.5, 4.0, 30.0])
    lam = np.array([1.0, 100.0, 3.0, 0.0])
    assert next_critical_temperature(N, lam, activation) == pytest.approx(3.0 * c)
    assert next_critical_temperature(N[[1, 3]], lam[[1, 3]], activation) == 0.0


def test_split_children():
    # Check that the children lie at mu +- 0.5 sqrt(lambda) v: symmetric about
    # the parent, sqrt(lambda) apart, along v.
    rng = np.random.RandomState(0)
    mu = rng.normal(size=4)
    v = rng.normal(size=4)
    v /= np.linalg.norm(v)
    left, right = split_children(mu, 9.0, v)
    assert_allclose(0.5 * (left + right), mu, rtol=1e-14)
    assert_allclose(right - left, 3.0 * v, rtol=1e-14)


@pytest.mark.parametrize("dtype", DTYPES, ids=DTYPE_IDS)
def test_softmax_hard_fraction_is_exact_one_hot(dtype):
    # Check that the rows counted as hard are those whose softmax is exactly
    # one-hot in ``dtype``: the two-score softmax (the runner-up dominates the
    # others) of rows just above the cut rounds to (1, 0) in the dtype, rows
    # well below it do not; the fraction is weighted.
    T = 0.7
    cut = T * np.log(2.0 / np.finfo(dtype).eps)
    margins = np.array([1.01 * cut, 2.0 * cut, 0.8 * cut, 0.1 * cut, 50.0 * cut])
    w = np.array([1.0, 2.0, 3.0, 4.0, 0.5])
    hard = margins > cut
    scores = np.stack([np.zeros_like(margins), -margins / T], axis=1).astype(dtype)
    top = softmax(scores, axis=1).astype(dtype)[:, 0]
    assert_array_equal(top == 1, hard)
    expected = w @ hard / w.sum()
    assert softmax_hard_fraction(margins, T, w, dtype) == pytest.approx(expected)
    assert softmax_hard_fraction(margins, T, np.ones(5), dtype) == pytest.approx(0.6)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_one_hot_rows_step_is_the_em_step(dtype, global_random_seed):
    # Check that the bounded EM step of the stages (rows surely one-hot add
    # w and w x to their group without scores) gives the plain step's N, S
    # and centres, computed independently here (explicit float64 distances
    # and scipy's softmax with the prior), over a run of steps that moves
    # the groups a little, jumps twelve far across the data, splits one and
    # removes one (drop): the bounds must follow each change.
    # The bounded route must be taken (most rows frozen after the first).
    from skrbfkmeans._rows import MemoryRows
    from skrbfkmeans._schedule import Groups, _OneHotRows

    rng = np.random.default_rng(global_random_seed)
    k, d = 70, 3
    centers = 30.0 * rng.standard_normal((k, d))
    X = centers[rng.integers(0, k, 3000)] + 0.5 * rng.standard_normal((3000, d))
    w = rng.uniform(0.5, 2.0, X.shape[0])
    X = X.astype(dtype)
    offset = X.mean(axis=0).astype(np.float64)
    rows = MemoryRows(X, w, offset)
    groups = Groups(centers.astype(dtype), np.ones(k), np.arange(k))
    sigma = 0.8
    one_hot = _OneHotRows(rows, groups.centers)
    shares = []
    for step in range(8):
        mass = rng.uniform(0.5, 2.0, groups.n)
        prior = mass / mass.sum()
        new, res = one_hot.em_step(groups.centers, sigma, prior, groups.changes)
        shares.append(one_hot.active_share)
        # The oracle: softmax of -d / T + log p, explicit float64.
        C = groups.centers.astype(np.float64)
        dist = ((X.astype(np.float64)[:, None, :] - C[None]) ** 2).sum(axis=2)
        R = softmax(-dist / (2 * sigma**2) + np.log(prior), axis=1) * w[:, None]
        N = R.sum(axis=0)
        S = R.T @ (X.astype(np.float64) - offset)
        tol = 1e-4 if dtype == np.float32 else 1e-9
        assert_allclose(res.N, N, rtol=tol, atol=tol * w.sum())
        assert_allclose(res.S, S, rtol=tol, atol=tol * np.abs(S).max())
        assert_allclose(new, S / N[:, None] + offset, rtol=tol, atol=tol)
        # The next step's groups: small moves, then the structural changes.
        moved = new + 0.05 * rng.standard_normal(new.shape)
        groups.centers = moved.astype(dtype)
        if step == 2:
            # Twelve groups jump onto others' rows: more than the groups
            # whose distances are taken, so that the bounds' shift matters.
            groups.centers[5:17] = groups.centers[30:42] + 0.1
        if step == 4:
            mu = groups.centers[10].astype(np.float64)
            groups.split(10, mu - 0.3, mu + 0.3, sigma)
            groups.mass = np.ones(groups.n)
        if step == 5:
            groups.mass = np.ones(groups.n)
            groups.mass[20] = 0.0
            groups.drop_light(0.5)
    assert shares[0] == 1.0 and min(shares[1:]) < 0.2
