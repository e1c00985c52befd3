"""An independent check of the certificate: explicit differences in float64.

The engine's distances come from ``||mu||^2 - 2 x . mu`` (one GEMM), whose
rounding grows with the squared norms: for data far from the origin, or in
float32, a margin can look positive where it is not. Before a fit reports
``certified_=True`` this module recomputes, with no shared code, every
squared distance as ``sum_f (x_if - mu_jf)^2`` in float64 and asks the two
questions the certificate answers:

1. every sample of positive weight has a unique nearest centre, with a
   margin ``d_(2) - d_(1)`` of at least ``4 sigma^2`` (entmax-1.5 is then
   exactly one-hot at width ``sigma``): the certified width is at most
   half the square root of the smallest explicit margin;
2. every centre is the weighted mean of its samples (a Lloyd step leaves it
   in place), to the rounding of that mean;
3. no single sample's move to another cluster lowers the distortion
   (Hartigan stability): moving ``x`` (weight ``w``) from ``a`` to ``b``
   changes it by ``w N_b / (N_b + w) d_b - w N_a / (N_a - w) d_a``, with the
   clusters' weights ``N`` of condition 2; every such change must exceed
   the bound of its rounding (the explicit sums' and the distance between
   a centre and its cluster's exact mean that condition 2 admits), so that
   the check can fail for a stable solution but never pass an unstable one.

Cost: ``n k d`` subtractions and products (no GEMM) per condition pass (two
passes), in blocks of at most ``_BLOCK_BYTES`` of differences; run once per
fit.
"""

import numpy as np
import scipy.sparse as sp

from ._engine.partition import block_rows, row_blocks

# The certificate's blocks (``partition``'s rule): differences to every
# centre, float64.
_BLOCK_BYTES = 8 << 20


def _explicit_distances(Xb, centers):
    """``d_ij = sum_f (x_if - mu_jf)^2`` by explicit differences, float64."""
    diff = Xb[:, None, :] - centers[None, :, :]
    return np.einsum("ijf,ijf->ij", diff, diff)


def _weighted_blocks(X, sample_weight, C):
    """Yield ``(rows, weights, D)`` for the rows of positive weight, by blocks.

    The rows and weights are float64; ``D`` their explicit squared distances
    to the centres ``C``, in blocks of at most ``_BLOCK_BYTES`` of
    differences.
    """
    n_clusters, n_features = C.shape
    n_samples = X.shape[0]
    step = block_rows(n_samples, 8 * n_clusters * n_features, _BLOCK_BYTES)
    for sl in row_blocks(n_samples, step):
        w = np.asarray(sample_weight[sl], dtype=np.float64)
        keep = w > 0
        if not keep.any():
            continue
        Xb = X[sl].toarray() if sp.issparse(X) else X[sl]
        Xb = np.asarray(Xb, dtype=np.float64)[keep]
        yield Xb, w[keep], _explicit_distances(Xb, C)


def explicit_block(X, sample_weight, centers):
    """Explicit margin bound and cluster sums of one block of rows.

    Returns ``(margin, N, S, n)``: a lower bound of ``min_i d_i(2) - d_i(1)``
    over the rows of positive weight (each margin less its rounding bound;
    ``inf`` for one centre or no such row), the weight ``N`` and weighted
    sum ``S`` of the rows nearest each centre (float64), and the number of
    rows. Blocks combine by the minimum and sums (``combine_blocks``).
    """
    n_samples, n_features = X.shape
    C = np.asarray(centers, dtype=np.float64)
    n_clusters = C.shape[0]
    eps = np.finfo(np.float64).eps
    margin = np.inf
    N = np.zeros(n_clusters)
    S = np.zeros((n_clusters, n_features))
    for Xb, w, D in _weighted_blocks(X, sample_weight, C):
        labels = np.argmin(D, axis=1)
        if n_clusters > 1:
            two = np.partition(D, 1, axis=1)[:, :2]
            # A sum of d rounded squares is exact to about d ulps of the
            # larger distance; the margin loses that much at most.
            slack = 4.0 * (n_features + 2) * eps * two[:, 1]
            margin = min(margin, float(np.min(two[:, 1] - two[:, 0] - slack)))
        rows = np.arange(labels.size)
        S += sp.csr_matrix((w, (labels, rows)), shape=(n_clusters, labels.size)) @ Xb
        N += np.bincount(labels, weights=w, minlength=n_clusters)
    return margin, N, S, n_samples


def combine_blocks(*parts):
    """Combine ``explicit_block`` results: minimum margin, summed rest."""
    margins, Ns, Ss, ns = zip(*parts)
    return min(margins), sum(Ns), sum(Ss), sum(ns)


def fixed_point_test(parts, centers):
    """Condition 2 from combined block sums; returns ``(margin, fixed, shift)``.

    ``fixed`` says whether every centre with samples equals their weighted
    mean to the rounding of that mean: a few ulps of the magnitude (times
    the depth of the sums), and the centres' own dtype's rounding. ``shift``
    is the largest distance that test admits between a centre and its
    cluster's mean (its per-coordinate bound times ``sqrt(n_features)``).
    """
    margin, N, S, n_samples = parts
    C = np.asarray(centers, dtype=np.float64)
    alive = N > 0
    means = S[alive] / N[alive, None]
    eps = np.finfo(np.float64).eps
    magnitude = np.abs(means).max(initial=0.0) + np.abs(C[alive]).max(initial=0.0)
    tol = 64.0 * max(np.finfo(centers.dtype).eps, eps * np.log2(n_samples + 2))
    fixed = bool(np.all(np.abs(means - C[alive]) <= tol * magnitude))
    return margin, fixed, tol * magnitude * np.sqrt(C.shape[1])


def single_move_block(X, sample_weight, centers, N, shift):
    """Condition 3 on one block of rows: no single move lowers the distortion.

    ``N`` are the clusters' weights (of the explicit nearest centres, over
    all rows) and ``shift`` the bound of ``fixed_point_test``. A sample
    whose cluster it alone weighs cannot gain by leaving it (it sits on the
    mean). Returns True when every move's change exceeds its rounding bound.
    """
    C = np.asarray(centers, dtype=np.float64)
    n_clusters, n_features = C.shape
    if n_clusters < 2:
        return True
    eps = np.finfo(np.float64).eps
    N = np.asarray(N, dtype=np.float64)
    for _, w, D in _weighted_blocks(X, sample_weight, C):
        rows = np.arange(D.shape[0])
        a = np.argmin(D, axis=1)
        # Each distance to a centre is within ``err`` of the distance to the
        # exact mean: the sum's rounding and the centre's admitted shift.
        err = 4.0 * (n_features + 2) * eps * D + 2.0 * np.sqrt(D) * shift + shift**2
        rest = N[a] - w
        lone = rest <= 4.0 * eps * N[a]
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(lone, 0.0, N[a] / rest)
        leave = w * factor * D[rows, a]
        leave_err = w * factor * err[rows, a]
        join_factor = w[:, None] * N[None, :] / (N[None, :] + w[:, None])
        change = join_factor * D - leave[:, None]
        bound = join_factor * err + leave_err[:, None]
        bound += 16.0 * eps * (join_factor * D + leave[:, None])
        change[rows, a] = np.inf
        if np.any(change <= bound):
            return False
    return True


def explicit_fixed_point(X, sample_weight, centers):
    """Smallest margin, the fixed-point and single-move tests, explicitly.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The data, in the units of ``centers``.
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights; samples of weight 0 do not enter the check.
    centers : ndarray of shape (n_clusters, n_features)
        The centres to check.

    Returns
    -------
    margin : float
        A lower bound of ``min_i d_i(2) - d_i(1)`` over the samples of
        positive weight; ``inf`` for one centre. Condition 1 holds at every
        ``sigma`` with ``4 sigma^2 <= margin`` when ``margin > 0``.
    fixed : bool
        Whether condition 2 holds.
    stable : bool
        Whether condition 3 holds (checked only when condition 2 does; False
        otherwise).
    """
    parts = explicit_block(X, sample_weight, centers)
    margin, fixed, shift = fixed_point_test(parts, centers)
    stable = fixed and single_move_block(X, sample_weight, centers, parts[1], shift)
    return margin, fixed, stable
