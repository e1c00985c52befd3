"""Independent NumPy oracles for RBF K-Means (test use only).

Everything is computed in float64 from the direct formulas of doc/theory.rst
("The RBF free energy"), sharing no code with the package: squared distances by explicit
differences (no ``||x||^2 - 2 x.mu + ||mu||^2`` expansion, no centring),
softmax and the free energy through ``scipy.special`` (``softmax``,
``logsumexp``), entmax-1.5 through the sort-based algorithm of Peters,
Niculae and Martins (2019, Algorithm 2) in ``_oracle.py``.
"""

import numpy as np
import scipy.sparse as sp
from _oracle import entmax15_sort
from scipy.special import logsumexp, softmax


def dense64(X):
    """``X`` as a dense float64 ndarray (sparse input densified)."""
    if sp.issparse(X):
        X = X.toarray()
    return np.asarray(X, dtype=np.float64)


def sq_distances(X, centers):
    """``d_ij = ||x_i - mu_j||^2`` by explicit differences, in float64."""
    diff = dense64(X)[:, None, :] - dense64(centers)[None, :, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def weights(sample_weight, n_samples):
    if sample_weight is None:
        return np.ones(n_samples)
    return np.asarray(sample_weight, dtype=np.float64)


def distortion(X, centers, sample_weight=None):
    """The K-Means distortion ``J = sum_i w_i min_j d_ij``."""
    d = sq_distances(X, centers)
    return float(weights(sample_weight, d.shape[0]) @ d.min(axis=1))


def margins(X, centers):
    """``d_(2) - d_(1)``: the gap between each sample's two nearest centres."""
    d = np.sort(sq_distances(X, centers), axis=1)
    return d[:, 1] - d[:, 0]


def tsallis15_max(n_clusters):
    """``H_1.5`` of the uniform distribution: ``(4/3) (1 - k^-1/2)``."""
    return (4.0 / 3.0) * (1.0 - n_clusters**-0.5)


def responsibilities(X, centers, sigma, activation):
    """Softmax or entmax-1.5 of the scores ``-d / (2 sigma^2)``."""
    Z = -sq_distances(X, centers) / (2.0 * sigma**2)
    if activation == "softmax":
        return softmax(Z, axis=1)
    return entmax15_sort(Z, axis=1)


def free_energy(X, centers, sigma, activation, sample_weight=None):
    """The objective documented in ``RBFKMeans`` Notes, per the definitions.

    Softmax: ``-T sum_i w_i log(mean_j exp(-d_ij / T))`` with ``T = 2 sigma^2``
    (logsumexp minus ``log k``). Entmax-1.5:
    ``sum_i w_i (<r_i, d_i> + T (H_max - H_1.5(r_i)))`` at the minimiser
    ``r_i = entmax15(-d_i / T)`` (Tsallis entropy
    ``H_1.5(p) = (4/3) sum_j (p_j - p_j^1.5)``).
    """
    d = sq_distances(X, centers)
    n_samples, n_clusters = d.shape
    w = weights(sample_weight, n_samples)
    T = 2.0 * sigma**2
    if activation == "softmax":
        per_sample = -T * (logsumexp(-d / T, axis=1) - np.log(n_clusters))
    else:
        r = entmax15_sort(-d / T, axis=1)
        h = (4.0 / 3.0) * (r - r**1.5).sum(axis=1)
        per_sample = (r * d).sum(axis=1) + T * (tsallis15_max(n_clusters) - h)
    return float(w @ per_sample)


def m_step(X, resp, sample_weight=None):
    """Centres ``sum_i w_i r_ij x_i / N_j`` (every ``N_j`` must be > 0)."""
    X = dense64(X)
    wr = weights(sample_weight, X.shape[0])[:, None] * resp
    return (wr.T @ X) / wr.sum(axis=0)[:, None]


def lloyd_step(X, centers, sample_weight=None):
    """One Lloyd update: the weighted mean of each centre's Voronoi cell."""
    d = sq_distances(X, centers)
    hard = np.eye(d.shape[1])[d.argmin(axis=1)]
    return m_step(X, hard, sample_weight)


def lloyd_fixed_point(X, centers, max_iter=1000):
    """Iterate Lloyd until the labels repeat; return a fixed point and labels.

    At the returned point ``centers`` are exactly (to rounding) the means of
    their cells and every sample's nearest centre is its label.
    """
    labels = sq_distances(X, centers).argmin(axis=1)
    for _ in range(max_iter):
        centers = m_step(X, np.eye(centers.shape[0])[labels])
        new = sq_distances(X, centers).argmin(axis=1)
        if np.array_equal(new, labels):
            return centers, labels
        labels = new
    raise RuntimeError("Lloyd did not reach a fixed point")


def least_move_change(X, labels, n_clusters):
    """The least change of the distortion by moving one row to another cluster.

    Hartigan's closed form, ``N_b / (N_b + 1) d_b - N_a / (N_a - 1) d_a``
    for a row of cluster ``a`` (unit weights) with explicit squared
    distances ``d`` to the clusters' means in float64; rows alone in their
    cluster do not move. Positive: no single move lowers the distortion.
    """
    X = dense64(X)
    N = np.bincount(labels, minlength=n_clusters).astype(np.float64)
    means = np.array([X[labels == j].mean(axis=0) for j in range(n_clusters)])
    D = sq_distances(X, means)
    best = np.inf
    for i, a in enumerate(labels):
        if N[a] > 1:
            change = N / (N + 1) * D[i] - N[a] / (N[a] - 1) * D[i, a]
            change[a] = np.inf
            best = min(best, float(change.min()))
    return best
