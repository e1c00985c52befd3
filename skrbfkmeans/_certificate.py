"""An independent check of the certificate: explicit differences in float64.

The engine's distances come from ``||mu||^2 - 2 x . mu`` (one GEMM), whose
rounding grows with the squared norms: for data far from the origin, or in
float32, a margin can look positive where it is not. Before a fit reports
``certified_=True`` this module recomputes, with no shared code, the squared
distances it needs as ``sum_f (x_if - mu_jf)^2`` in float64 and asks the
three questions the certificate answers:

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

**Screening.** Most samples are far from every centre but their own, and
need no distance but one to be settled. For a candidate nearest centre ``a``
(any guess: a float64 GEMM here, whose rounding only costs time when it
guesses wrong) the explicit ``d_a`` and the explicit distances between the
centres bound every other distance by the triangle inequality,
``(||mu_a - mu_b|| - sqrt(d_a))^2 <= d_b <= (||mu_a - mu_b|| + sqrt(d_a))^2``,
each widened by a relative ``_SAFETY`` far above the rounding of the few
operations that make it. A sample whose bounds prove ``a`` strictly nearest,
and pass condition 3 with every ``d_b`` at its least favourable bound, is
settled: the test on its explicit distances would pass too (the change of
condition 3 grows with ``d_b``, its rounding bound with its upper bound).
Every other sample gets its ``k`` explicit distances, as do the samples
whose margin bound does not exceed the smallest explicit margin found, so
that the reported margin is the same smallest explicit margin.

**Weights known in advance.** Condition 3 needs every cluster's weight,
which condition 2's sums give only after a pass over all rows. Given
bounds ``N_lo <= N <= N_hi`` beforehand (a previous pass's weights, widened
by their rounding), conditions 1-3 run in one pass, with each move's change
at its least favourable ``N``; ``check`` then confirms the weights it finds
are within the bounds and that no cluster is one sample alone (whose leaving
gain the bounds cannot decide), or the rows are checked again with the
weights found (``single_move_block``).

Cost: ``n d`` explicit differences per pass for the settled samples and
``n k d`` for the others, in blocks of at most ``_BLOCK_BYTES`` of
differences (the same blocks for every check: the sums of condition 2 add
in that order); one pass per fit with weight bounds, two without.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp

from ._engine.partition import block_rows, row_blocks

# The certificate's blocks (``partition``'s rule): differences to every
# centre, float64.
_BLOCK_BYTES = 32 << 20

# Relative widening of the screening bounds, above the rounding of the float64
# operations that make them for up to about 10**3 features (``_safety``).
_SAFETY = 1e-12


class CheckPart(NamedTuple):
    """One block's (or all rows') share of the explicit check.

    ``margin`` is a lower bound of the smallest ``d_(2) - d_(1)`` (less its
    rounding bound); ``N`` and ``S`` the weight and weighted sum of the rows
    nearest each centre; ``n_samples`` the rows seen; ``moves`` whether
    condition 3 held (``None``: not asked, or not decided under weight
    bounds, which decide only a pass).
    """

    margin: float
    N: np.ndarray
    S: np.ndarray
    n_samples: int
    moves: object


def _explicit_distances(Xb, centers):
    """``d_ij = sum_f (x_if - mu_jf)^2`` by explicit differences, float64."""
    diff = Xb[:, None, :] - centers[None, :, :]
    return np.einsum("ijf,ijf->ij", diff, diff)


def _safety(n_features):
    return max(_SAFETY, 64.0 * (n_features + 2) * np.finfo(np.float64).eps)


def _weighted_blocks(X, sample_weight, C):
    """Yield ``(rows, weights)`` of the rows of positive weight, by blocks.

    The rows and weights are float64, in blocks of at most ``_BLOCK_BYTES``
    of differences to the centres ``C``.
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
        yield np.asarray(Xb, dtype=np.float64)[keep], w[keep]


def _move_test(w, a, d_a, d_lo, d_hi, N_lo, N_hi, shift, n_features):
    """Condition 3 for each row: ``(passes, lone)``.

    Each row (weight ``w``, nearest centre ``a`` at distance at most
    ``d_a``) passes when every move's change, with ``d_b`` in
    ``[d_lo, d_hi]`` and the weights in ``[N_lo, N_hi]``, exceeds its
    rounding bound. ``lone``: a row that may weigh all of its cluster (it
    cannot gain by leaving: with exact weights the test counts no gain; under
    bounds the caller decides).
    """
    eps = np.finfo(np.float64).eps
    rows = np.arange(a.size)

    def err(D):
        # Each distance to a centre is within ``err`` of the distance to the
        # exact mean: the sum's rounding and the centre's admitted shift.
        return 4.0 * (n_features + 2) * eps * D + 2.0 * np.sqrt(D) * shift + shift**2

    rest = N_lo[a] - w
    lone = rest <= 4.0 * eps * N_hi[a]
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(lone, 0.0, N_lo[a] / rest)
    leave = w * factor * d_a
    leave_err = w * factor * err(d_a)
    join_lo = w[:, None] * N_lo[None, :] / (N_lo[None, :] + w[:, None])
    join_hi = join_lo if N_hi is N_lo else (
        w[:, None] * N_hi[None, :] / (N_hi[None, :] + w[:, None])
    )  # fmt: skip
    change = join_lo * d_lo - leave[:, None]
    bound = join_hi * err(d_hi) + leave_err[:, None]
    bound += 16.0 * eps * (join_hi * d_hi + leave[:, None])
    change[rows, a] = np.inf
    bound[rows, a] = 0.0
    return np.all(change > bound, axis=1), lone


class _Geometry:
    """The centres' explicit geometry the screening needs, made once.

    ``near`` is a lower bound of each centre's distance to the nearest
    other centre, ``far`` an upper bound of its distance to the farthest.
    """

    def __init__(self, C, safety):
        self.c_sq = np.einsum("jf,jf->j", C, C)
        between = np.sqrt(_explicit_distances(C, C))
        np.fill_diagonal(between, np.inf)
        self.near = between.min(axis=1) * (1.0 - 2.0 * safety)
        np.fill_diagonal(between, 0.0)
        self.far = between.max(axis=1) * (1.0 + 2.0 * safety)


def _screen(Xb, w, C, geometry, weights, shift, safety):
    """Settle the rows that one explicit distance settles (module docstring).

    Every other centre is at least ``near_a - sqrt(d_a)`` from a row whose
    guessed nearest centre is ``a``, and at most ``far_a + sqrt(d_a)``.
    Returns ``(a, bound, settled, lone)``: each row's guess, a lower bound of
    its margin (when the guess is its nearest), whether the bounds prove the
    guess strictly nearest and (with ``weights``) pass condition 3, and
    whether the row may weigh all of its cluster.
    """
    n_features = Xb.shape[1]
    eps = np.finfo(np.float64).eps
    slack = 4.0 * (n_features + 2) * eps
    with np.errstate(over="ignore", invalid="ignore"):
        # The guess (a GEMM): only the bounds below are trusted.
        a = np.argmin(geometry.c_sq[None, :] - 2.0 * (Xb @ C.T), axis=1)
    diff = Xb - C[a]
    d_a = np.einsum("if,if->i", diff, diff) * (1.0 + safety)
    r = np.sqrt(d_a)
    # (||mu_a - mu_b|| - ||x - mu_a||)^2 <= d_b for every b != a.
    d_2 = np.maximum(geometry.near[a] - r, 0.0)
    d_2 *= d_2
    settled = d_2 > d_a
    bound = d_2 * (1.0 - slack) - d_a
    lone = np.zeros(a.size, dtype=bool)
    if weights is not None:
        # Condition 3 at its least favourable weights and distances: the
        # gain of joining any b is at least ``w min_b N_b / (N_b + w_max)
        # d_2``; the loss of leaving a, its rounding and the join's rounding
        # (at the farthest centre's upper bound) at most ``w`` times ``rhs``.
        N_lo, N_hi = weights
        gain = d_2 * float(np.min(N_lo / (N_lo + w.max())))
        rest = N_lo[a] - w
        lone = rest <= 4.0 * eps * N_hi[a]
        with np.errstate(divide="ignore", invalid="ignore"):
            factor = np.where(lone, 0.0, N_lo[a] / rest)
        far = geometry.far[a] + r
        rhs = (1.0 + 16.0 * eps) * factor * d_a
        rhs += factor * (slack * d_a + 2.0 * r * shift + shift**2)
        rhs += (slack + 16.0 * eps) * far * far * (1.0 + safety)
        rhs += 2.0 * far * shift + shift**2
        settled &= gain * (1.0 - safety) > rhs * (1.0 + safety)
    return a, bound, settled, lone


def check_block(X, sample_weight, centers, weights=None, shift=None):
    """Conditions 1-3 (or 1-2) on one block of rows, with screening.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The rows, in the units of ``centers``.
    sample_weight : ndarray of shape (n_samples,)
        Their weights; rows of weight 0 do not enter the check.
    centers : ndarray of shape (n_clusters, n_features)
        The centres to check.
    weights : tuple of two ndarrays of shape (n_clusters,), default=None
        Bounds ``(N_lo, N_hi)`` of the clusters' weights over all rows (the
        same array twice for the weights themselves); ``None``: condition 3
        is not checked.
    shift : float, default=None
        An upper bound of the distance ``fixed_point_test`` admits between a
        centre and its cluster's mean (with ``weights``).

    Returns
    -------
    CheckPart
        This block's share; blocks combine with ``combine_blocks``.
    """
    n_samples, n_features = X.shape
    C = np.asarray(centers, dtype=np.float64)
    n_clusters = C.shape[0]
    slack = 4.0 * (n_features + 2) * np.finfo(np.float64).eps
    safety = _safety(n_features)
    margin = np.inf
    N = np.zeros(n_clusters)
    S = np.zeros((n_clusters, n_features))
    moves, lone_seen = weights is not None, False
    geometry = _Geometry(C, safety) if n_clusters > 1 else None
    for Xb, w in _weighted_blocks(X, sample_weight, C):
        rows = np.arange(w.size)
        labels = np.zeros(w.size, dtype=np.intp)
        if n_clusters > 1:
            labels, bound, settled, lone = _screen(
                Xb, w, C, geometry, weights, shift, safety
            )
            lone_seen |= bool(np.any(lone & settled))
            # Every unsettled row gets its explicit distances, and so does
            # every row whose margin bound does not exceed the smallest
            # explicit margin found: that one is the reported margin.
            exact = ~settled
            exact[np.argmin(bound)] = True
            pick = exact
            while pick.any():
                D = _explicit_distances(Xb[pick], C)
                near = np.argmin(D, axis=1)
                two = np.partition(D, 1, axis=1)[:, :2]
                margins = two[:, 1] - two[:, 0] - slack * two[:, 1]
                margin = min(margin, float(np.min(margins)))
                labels[pick] = near
                if weights is not None and pick is exact:
                    sub = np.flatnonzero(pick)
                    ok, lone = _move_test(
                        w[sub], near, D[np.arange(sub.size), near], D, D,
                        *weights, shift, n_features,
                    )  # fmt: skip
                    lone_seen |= bool(np.any(lone))
                    moves &= bool(ok.all())
                pick = ~exact & (bound <= margin)
                exact |= pick
        S += sp.csr_matrix((w, (labels, rows)), shape=(n_clusters, labels.size)) @ Xb
        N += np.bincount(labels, weights=w, minlength=n_clusters)
    if weights is None:
        moves = None
    elif weights[0] is not weights[1]:
        # Under bounds only a pass decides, and a lone row never does.
        moves = True if moves and not lone_seen else None
    return CheckPart(margin, N, S, n_samples, moves)


def combine_blocks(*parts):
    """Combine ``check_block`` results: minimum margin, summed sums.

    The moves combine as False if any block failed, else None if any is
    undecided (or not asked), else True.
    """
    moves = [p.moves for p in parts]
    if any(m is False for m in moves):
        verdict = False
    else:
        verdict = None if any(m is None for m in moves) else True
    return CheckPart(
        min(p.margin for p in parts),
        sum(p.N for p in parts),
        sum(p.S for p in parts),
        sum(p.n_samples for p in parts),
        verdict,
    )


def _fixed_tolerance(centers, n_samples):
    eps = np.finfo(np.float64).eps
    return 64.0 * max(np.finfo(centers.dtype).eps, eps * np.log2(n_samples + 2))


def fixed_point_test(parts, centers):
    """Condition 2 from combined block sums; returns ``(margin, fixed, shift)``.

    ``fixed`` says whether every centre with samples equals their weighted
    mean to the rounding of that mean: a few ulps of the magnitude (times
    the depth of the sums), and the centres' own dtype's rounding. ``shift``
    is the largest distance that test admits between a centre and its
    cluster's mean (its per-coordinate bound times ``sqrt(n_features)``).
    """
    C = np.asarray(centers, dtype=np.float64)
    alive = parts.N > 0
    means = parts.S[alive] / parts.N[alive, None]
    magnitude = np.abs(means).max(initial=0.0) + np.abs(C[alive]).max(initial=0.0)
    tol = _fixed_tolerance(centers, parts.n_samples)
    fixed = bool(np.all(np.abs(means - C[alive]) <= tol * magnitude))
    return parts.margin, fixed, tol * magnitude * np.sqrt(C.shape[1])


def shift_bound(centers, n_samples):
    """Bound ``fixed_point_test``'s ``shift`` from above, before any pass.

    When the test passes, ``|mean| <= |mu| + tol m`` in every coordinate,
    so its magnitude ``m`` is at most ``2 max|mu| / (1 - tol)``.
    """
    C = np.asarray(centers, dtype=np.float64)
    tol = _fixed_tolerance(centers, n_samples)
    magnitude = 2.0 * np.abs(C).max(initial=0.0) / (1.0 - tol)
    return tol * magnitude * np.sqrt(C.shape[1]) * (1.0 + _SAFETY)


def weight_bounds(N, dtype):
    """Bounds ``(N_lo, N_hi)`` around weights ``N`` summed in ``dtype``.

    ``N`` are the clusters' weights from another pass over the same labels
    (the engine's sums, in the data's dtype): the explicit sums differ by
    their rounding, well within ``1024 eps`` of ``dtype`` (``1e-9`` at
    least); ``check`` confirms it.
    """
    N = np.asarray(N, dtype=np.float64)
    r = max(1e-9, 1024.0 * np.finfo(dtype).eps)
    return N * (1.0 - r), N * (1.0 + r)


def check(parts, centers, weights=None, shift=None):
    """Conditions 1-3 from combined ``check_block`` parts.

    Returns ``(margin, fixed, stable, shift)``: ``stable`` is None when the
    weight bounds ``weights`` (with the ``shift`` bound) did not decide
    condition 3, which ``single_move_block`` with the weights found and
    the returned ``shift`` then decides.
    """
    margin, fixed, found = fixed_point_test(parts, centers)
    if not fixed:
        return margin, False, False, found
    stable = None
    if weights is not None and parts.moves is not None:
        N_lo, N_hi = weights
        within = np.all(N_lo <= parts.N) and np.all(parts.N <= N_hi)
        exact = N_lo is N_hi
        if exact or (within and found <= shift):
            stable = parts.moves
            if not exact and not stable:
                stable = None
    return margin, fixed, stable, found


def single_move_block(X, sample_weight, centers, N, shift):
    """Condition 3 on one block of rows, with the clusters' weights ``N``.

    ``N`` are the weights of the explicit nearest centres over all rows and
    ``shift`` the bound of ``fixed_point_test``. A sample whose cluster it
    alone weighs cannot gain by leaving it (it sits on the mean). Returns
    True when every move's change exceeds its rounding bound.
    """
    N = np.asarray(N, dtype=np.float64)
    return bool(check_block(X, sample_weight, centers, (N, N), shift).moves)


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
    parts = check_block(X, sample_weight, centers)
    margin, fixed, shift = fixed_point_test(parts, centers)
    stable = fixed and single_move_block(X, sample_weight, centers, parts.N, shift)
    return margin, fixed, stable
