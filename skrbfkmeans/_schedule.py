"""Temperatures, critical widths and splits: pure functions, no data passes.

Temperatures are ``T = 2 sigma^2`` throughout (doc/theory.rst, "Critical
widths"). Above a critical temperature the centres of a group coincide at
its (weighted) mean; below it the coincident configuration is unstable
along the principal axis of the group's posterior covariance ``C_j``:

- softmax: ``T_c = 2 lambda_max(C_j)``;
- entmax-1.5: the Jacobian gain at a ``K``-fold tie is ``K ** (alpha - 1)``
  times softmax's, so a group splitting in two (``K = 2``) has
  ``T_c = 2 sqrt(2) lambda_max(C_j)``.
"""

import numpy as np


def critical_factor(activation):
    """``T_c / lambda_max`` for a group splitting in two."""
    return 2.0 * np.sqrt(2.0) if activation == "entmax15" else 2.0


def weighted_top_eigen(M, N, S):
    """Largest eigenvalue and eigenvector of each group's posterior covariance.

    ``M_j = sum_i w_i r_ij x x^T``, ``N_j`` and ``S_j`` are the group's
    moments (centred coordinates); ``C_j = M_j / N_j - mu_j mu_j^T`` with
    ``mu_j = S_j / N_j``. Groups without mass, and eigenvalues within
    rounding of the trace of ``M_j / N_j``, get eigenvalue 0.

    Returns
    -------
    lam : ndarray of shape (n_groups,)
        ``lambda_max(C_j)``, clipped at 0.
    vec : ndarray of shape (n_groups, n_features)
        Unit principal axes.
    """
    n_groups, d = S.shape
    lam = np.zeros(n_groups)
    vec = np.zeros((n_groups, d))
    vec[:, 0] = 1.0
    alive = N > 0
    if not alive.any():
        return lam, vec
    mu = S[alive] / N[alive, None]
    C = M[alive] / N[alive, None, None] - mu[:, :, None] * mu[:, None, :]
    # Symmetrise: the two halves of M accumulate identical sums, but the
    # subtraction above may leave asymmetric rounding.
    C = 0.5 * (C + np.swapaxes(C, 1, 2))
    w, v = np.linalg.eigh(C)
    # M / N - mu mu^T cancels: an eigenvalue within rounding of the second
    # moment's trace (e.g. a group of identical points) is 0, not a spread
    # to split along.
    trace = np.trace(M[alive], axis1=1, axis2=2) / N[alive]
    noise = 64.0 * np.finfo(M.dtype).eps * np.abs(trace)
    lam[alive] = np.where(w[:, -1] > noise, w[:, -1], 0.0)
    vec[alive] = v[:, :, -1]
    return lam, vec


def choose_split(N, lam, T, activation, min_mass=2.0):
    """Index of the group to split at temperature ``T``, or ``None``.

    Eligible groups carry at least ``min_mass`` weight and have crossed their
    critical temperature (``T < T_c``). Among them the one with the largest
    ``N_j lambda_max(C_j)`` splits: about the distortion a split removes.
    """
    T_c = critical_factor(activation) * lam
    eligible = (N >= min_mass) & (T < T_c) & (lam > 0)
    if not eligible.any():
        return None
    score = np.where(eligible, N * lam, -np.inf)
    return int(np.argmax(score))


def next_critical_temperature(N, lam, activation, min_mass=2.0):
    """Return the largest critical temperature of the groups that can split.

    ``0.0`` when no group can split (all too light or without spread).
    """
    T_c = critical_factor(activation) * lam
    splittable = (N >= min_mass) & (lam > 0)
    return float(T_c[splittable].max()) if splittable.any() else 0.0


def split_children(mu, lam, vec):
    """Two children at ``mu +- 0.5 sqrt(lambda_max) v`` (centred coordinates)."""
    delta = 0.5 * np.sqrt(lam) * vec
    return mu - delta, mu + delta


def softmax_hard_fraction(margins, T, sample_weight, dtype):
    """Weight fraction of samples whose softmax is one-hot to working precision.

    The runner-up responsibility is at most ``exp(-margin / T)``; below half
    an ulp of 1 the row is one-hot in ``dtype``.
    """
    cut = T * np.log(2.0 / np.finfo(dtype).eps)
    return float(sample_weight @ (margins > cut) / sample_weight.sum())
