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
need no distance but two to be settled. For a candidate nearest centre ``a``
(any guess: the engine's labels when the caller has them, else a float64
GEMM; a wrong guess only costs time), the explicit ``d_a``, the explicit
``d_n`` to the centre ``n`` nearest ``a``, and the explicit distances
between the centres bound every other distance by the triangle inequality,
``(||mu_a - mu_b|| - sqrt(d_a))^2 <= d_b <= (||mu_a - mu_b|| + sqrt(d_a))^2``,
each widened by a relative ``_SAFETY`` far above the rounding of the few
operations that make it. A sample whose bounds prove ``a`` strictly nearest,
and pass condition 3 with every ``d_b`` at its least favourable bound, is
settled: the test on its explicit distances would pass too (the change of
condition 3 grows with ``d_b``, its rounding bound with its upper bound).
Every other sample gets its ``k`` explicit distances, as do the samples
whose margin bound does not exceed the smallest explicit margin found, so
that the reported margin is the same smallest explicit margin: the
``_FIRST`` samples of smallest bound first, then the others in order of
bound, in batches that double, while a bound is below the margin found. On
separated blobs in 16-D, the block's smallest margin was below the bound of
6 to 240 of its 16384 rows; with ``d_a`` alone (every other centre at
least ``(||mu_a - mu_n|| - sqrt(d_a))^2`` away) it was below that of about
2500, and taking them unordered sent 3600 through every distance.

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
from ._engine.passes import labels_margins
from ._policy import one_blas_thread

# The certificate's blocks (``partition``'s rule): differences to every
# centre, float64.
_BLOCK_BYTES = 32 << 20

# Relative widening of the screening bounds, above the rounding of the float64
# operations that make them for up to about 10**3 features (``_safety``).
_SAFETY = 1e-12

# Samples of smallest margin bound whose explicit margins start the search
# for a block's smallest margin.
_FIRST = 64


class CheckPart(NamedTuple):
    """One block's (or all rows') share of the explicit check.

    ``margin`` is a lower bound of the smallest ``d_(2) - d_(1)`` (less its
    rounding bound); ``N`` and ``S`` the weight and weighted sum of the rows
    nearest each centre; ``n_samples`` the rows seen; ``moves`` whether
    condition 3 held (``None``: not asked, or not decided under weight
    bounds, which decide only a pass); ``A`` the weighted sums of the rows'
    absolute values (what bounds the rounding of ``S``).
    """

    margin: float
    N: np.ndarray
    S: np.ndarray
    n_samples: int
    moves: object
    A: np.ndarray


def _explicit_distances(Xb, centers):
    """``d_ij = sum_f (x_if - mu_jf)^2`` by explicit differences, float64."""
    diff = Xb[:, None, :] - centers[None, :, :]
    return np.einsum("ijf,ijf->ij", diff, diff)


def _margins(D, slack):
    """Nearest centre and smallest margin (less its rounding bound) of rows ``D``."""
    near = np.argmin(D, axis=1)
    two = np.partition(D, 1, axis=1)[:, :2]
    margins = two[:, 1] - two[:, 0] - slack * two[:, 1]
    return near, float(np.min(margins))


def _safety(n_features):
    return max(_SAFETY, 64.0 * (n_features + 2) * np.finfo(np.float64).eps)


def _weighted_blocks(X, sample_weight, C, guess):
    """Yield ``(rows, weights, guess)`` of the rows of positive weight, by blocks.

    The rows and weights are float64, in blocks of at most ``_BLOCK_BYTES``
    of differences to the centres ``C``; ``guess`` is sliced alike (None
    stays None). Dense rows of another dtype are converted into one buffer,
    valid until the next block.
    """
    n_clusters, n_features = C.shape
    n_samples = X.shape[0]
    step = block_rows(n_samples, 8 * n_clusters * n_features, _BLOCK_BYTES)
    buffer = None
    for sl in row_blocks(n_samples, step):
        w = np.asarray(sample_weight[sl], dtype=np.float64)
        keep = w > 0
        if not keep.any():
            continue
        if sp.issparse(X):
            Xb = np.asarray(X[sl].toarray(), dtype=np.float64)
        elif X.dtype == np.float64:
            Xb = X[sl]
        else:
            if buffer is None:
                buffer = np.empty((min(step, n_samples), n_features))
            Xb = buffer[: w.size]
            Xb[...] = X[sl]
        gb = None if guess is None else guess[sl]
        if keep.all():
            yield Xb, w, gb
        else:
            yield Xb[keep], w[keep], None if gb is None else gb[keep]


def _move_test(w, a, d_a, d_lo, d_hi, N_lo, N_hi, shift, n_features):
    """Condition 3 for each row: ``(passes, lone)``.

    Each row (weight ``w``, nearest centre ``a`` at distance at most
    ``d_a``) passes when every move's change, with ``d_b`` in
    ``[d_lo, d_hi]`` and the weights in ``[N_lo, N_hi]``, exceeds its
    rounding bound; ``shift`` bounds each centre's distance from its exact
    mean (one bound for all, or one per centre). ``lone``: a row that may
    weigh all of its cluster (it cannot gain by leaving: with exact weights
    the test counts no gain; under bounds the caller decides).
    """
    eps = np.finfo(np.float64).eps
    rows = np.arange(a.size)

    def err(D, s):
        # Each distance to a centre is within ``err`` of the distance to the
        # exact mean: the sum's rounding and the centre's admitted shift.
        return 4.0 * (n_features + 2) * eps * D + 2.0 * np.sqrt(D) * s + s**2

    shift = np.asarray(shift, dtype=np.float64)
    own, every = (shift[a], shift[None, :]) if shift.ndim else (shift, shift)

    rest = N_lo[a] - w
    lone = rest <= 4.0 * eps * N_hi[a]
    with np.errstate(divide="ignore", invalid="ignore"):
        factor = np.where(lone, 0.0, N_lo[a] / rest)
    leave = w * factor * d_a
    leave_err = w * factor * err(d_a, own)
    join_lo = w[:, None] * N_lo[None, :] / (N_lo[None, :] + w[:, None])
    join_hi = join_lo if N_hi is N_lo else (
        w[:, None] * N_hi[None, :] / (N_hi[None, :] + w[:, None])
    )  # fmt: skip
    change = join_lo * d_lo - leave[:, None]
    bound = join_hi * err(d_hi, every) + leave_err[:, None]
    bound += 16.0 * eps * (join_hi * d_hi + leave[:, None])
    change[rows, a] = np.inf
    bound[rows, a] = 0.0
    return np.all(change > bound, axis=1), lone


class _Geometry:
    """The centres' explicit geometry the screening needs, made once.

    ``nearest`` is each centre's nearest other centre, ``near`` a lower
    bound of its distance to the nearest other centre but that one (``inf``
    for two centres), ``far`` an upper bound of its distance to the
    farthest.
    """

    def __init__(self, C, safety):
        self.c_sq = np.einsum("jf,jf->j", C, C)
        between = np.sqrt(_explicit_distances(C, C))
        np.fill_diagonal(between, np.inf)
        self.nearest = np.argmin(between, axis=1)
        rows = np.arange(C.shape[0])
        others = between.copy()
        others[rows, self.nearest] = np.inf
        self.near = others.min(axis=1) * (1.0 - 2.0 * safety)
        np.fill_diagonal(between, 0.0)
        self.far = between.max(axis=1) * (1.0 + 2.0 * safety)


class _Work:
    """Arrays the screening reuses from block to block.

    A fresh temporary of a block's length is a fresh mapping of zeroed pages
    wherever large allocations are not recycled (dask's workers set
    ``MALLOC_TRIM_THRESHOLD_``): there, with a temporary per operation, the
    screening took three times as long.
    """

    def __init__(self, n_rows, n_features):
        self.diff = np.empty((n_rows, n_features))
        self.f = np.empty((7, n_rows))
        self.b = np.empty((2, n_rows), dtype=bool)
        self.a = np.empty(n_rows, dtype=np.intp)
        self.a2 = np.empty(n_rows, dtype=np.intp)

    def vectors(self, n_rows):
        return self.f[:, :n_rows], self.b[:, :n_rows]


def _screen(Xb, w, C, geometry, weights, shift, safety, guess=None, work=None):
    """Settle the rows that two explicit distances settle (module docstring).

    A row whose guessed nearest centre is ``a`` gets two explicit
    distances: ``d_a`` and ``d_n`` to ``a``'s nearest other centre ``n``.
    Every other centre is at least ``near_a - sqrt(d_a)`` from it, and at
    most ``far_a + sqrt(d_a)``.
    Returns ``(a, bound, settled, lone)``: each row's guess, a lower bound of
    its margin (when the guess is its nearest), whether the bounds prove the
    guess strictly nearest and (with ``weights``) pass condition 3, and
    whether the row may weigh all of its cluster. With ``work``
    (``_Work``), the arrays returned are its own, valid until its next use.
    """
    n_rows, n_features = Xb.shape
    eps = np.finfo(np.float64).eps
    slack = 4.0 * (n_features + 2) * eps
    if guess is None:
        with np.errstate(over="ignore", invalid="ignore"):
            # The guess (a GEMM): only the bounds below are trusted.
            guess = np.argmin(geometry.c_sq[None, :] - 2.0 * (Xb @ C.T), axis=1)
    work = _Work(n_rows, n_features) if work is None else work
    (d_a, r, d_2, bound, t1, t2, d_n), (settled, lone) = work.vectors(n_rows)
    # A copy: the caller writes the labels.
    a = work.a[:n_rows]
    a[:] = guess
    # mode="clip" takes without a buffer (the labels are valid indices).
    diff = np.take(C, a, axis=0, out=work.diff[:n_rows], mode="clip")
    np.subtract(Xb, diff, out=diff)
    np.einsum("if,if->i", diff, diff, out=d_a)
    d_a *= 1.0 + safety
    np.sqrt(d_a, out=r)
    np.take(geometry.nearest, a, out=work.a2[:n_rows], mode="clip")
    np.take(C, work.a2[:n_rows], axis=0, out=diff, mode="clip")
    np.subtract(Xb, diff, out=diff)
    np.einsum("if,if->i", diff, diff, out=d_n)
    d_n *= 1.0 - safety
    # (||mu_a - mu_b|| - ||x - mu_a||)^2 <= d_b for every b != a, n.
    np.take(geometry.near, a, out=d_2, mode="clip")
    d_2 -= r
    np.maximum(d_2, 0.0, out=d_2)
    d_2 *= d_2
    np.minimum(d_2, d_n, out=d_2)
    np.greater(d_2, d_a, out=settled)
    np.multiply(d_2, 1.0 - slack, out=bound)
    bound -= d_a
    lone[:] = False
    if weights is not None:
        # Condition 3 at its least favourable weights and distances: the
        # gain of joining any b is at least ``w min_b N_b / (N_b + w_max)
        # d_2``; the loss of leaving a, its rounding and the join's rounding
        # (at the farthest centre's upper bound) at most ``w`` times ``rhs``:
        # ``factor (d_a (1 + slack + 16 eps) + 2 r shift + shift^2)`` plus
        # ``far ((slack + 16 eps) far + 2 shift) + shift^2``, with
        # ``factor = N_a / (N_a - w)`` (0 for a row that may be alone).
        N_lo, N_hi = weights
        rest, factor, rhs = t1, t2, d_a
        np.take(N_lo, a, out=rest, mode="clip")
        rest -= w
        np.take(N_hi, a, out=factor, mode="clip")
        factor *= 4.0 * eps
        np.less_equal(rest, factor, out=lone)
        np.take(N_lo, a, out=factor, mode="clip")
        with np.errstate(divide="ignore", invalid="ignore"):
            factor /= rest
        factor[lone] = 0.0
        rhs *= 1.0 + slack + 16.0 * eps  # d_a is not needed beyond here
        np.multiply(r, 2.0 * shift, out=rest)
        rhs += rest
        rhs += shift**2
        rhs *= factor
        far = factor
        np.take(geometry.far, a, out=far, mode="clip")
        far += r
        np.multiply(far, (slack + 16.0 * eps) * (1.0 + safety), out=rest)
        rest += 2.0 * shift
        rest *= far
        rhs += rest
        rhs += shift**2
        rhs *= 1.0 + safety
        gain = d_2
        gain *= float(np.min(N_lo / (N_lo + w.max()))) * (1.0 - safety)
        settled &= gain > rhs
    return a, bound, settled, lone


def check_block(X, sample_weight, centers, weights=None, shift=None, guess=None):
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
    shift : float or ndarray of shape (n_clusters,), default=None
        An upper bound of the distance ``fixed_point_test`` admits between a
        centre and its cluster's mean (with ``weights``): one for all
        centres, or each centre's.
    guess : ndarray of shape (n_samples,), default=None
        A guess of each row's nearest centre (the engine's labels): it
        chooses which distance each row gets first and changes nothing but
        the time. ``None``: a float64 GEMM guesses.

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
    A = np.zeros((n_clusters, n_features))
    moves, lone_seen = weights is not None, False
    geometry = _Geometry(C, safety) if n_clusters > 1 else None
    # The screening's bounds take the largest centre's shift.
    widest = None if shift is None else float(np.max(shift))
    work = None
    for Xb, w, gb in _weighted_blocks(X, sample_weight, C, guess):
        rows = np.arange(w.size)
        labels = np.zeros(w.size, dtype=np.intp)
        if n_clusters > 1:
            if work is None or work.a.size < w.size:
                work = _Work(w.size, n_features)
            labels, bound, settled, lone = _screen(
                Xb, w, C, geometry, weights, widest, safety, gb, work
            )
            lone_seen |= bool(np.any(lone & settled))
            # Every unsettled row gets its explicit distances, and so does
            # every row whose margin bound does not exceed the smallest
            # explicit margin found: that one is the reported margin.
            exact = ~settled
            if bound.size > _FIRST:
                exact[np.argpartition(bound, _FIRST)[:_FIRST]] = True
            else:
                exact[:] = True
            sub = np.flatnonzero(exact)
            D = _explicit_distances(Xb[sub], C)
            near, found = _margins(D, slack)
            margin = min(margin, found)
            labels[sub] = near
            if weights is not None:
                ok, lone = _move_test(
                    w[sub], near, D[np.arange(sub.size), near], D, D,
                    *weights, shift, n_features,
                )  # fmt: skip
                lone_seen |= bool(np.any(lone))
                moves &= bool(ok.all())
            # The settled rows left, smallest bound first, in growing
            # batches while a bound may be below the margin found.
            rest = np.flatnonzero(~exact & (bound <= margin))
            rest = rest[np.argsort(bound[rest], kind="stable")]
            start, size = 0, _FIRST
            while start < rest.size and bound[rest[start]] <= margin:
                pick = rest[start : start + size]
                pick = pick[bound[pick] <= margin]
                near, found = _margins(_explicit_distances(Xb[pick], C), slack)
                margin = min(margin, found)
                labels[pick] = near
                start, size = start + size, 2 * size
        M = sp.csr_matrix((w, (labels, rows)), shape=(n_clusters, labels.size))
        S += M @ Xb
        A += M @ np.abs(Xb)
        N += np.bincount(labels, weights=w, minlength=n_clusters)
    if weights is None:
        moves = None
    elif weights[0] is not weights[1]:
        # Under bounds only a pass decides, and a lone row never does.
        moves = True if moves and not lone_seen else None
    return CheckPart(margin, N, S, n_samples, moves, A)


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
        sum(p.A for p in parts),
    )


def _fixed_tolerance(centers, n_samples):
    eps = np.finfo(np.float64).eps
    return 64.0 * max(np.finfo(centers.dtype).eps, eps * np.log2(n_samples + 2))


def fixed_point_test(parts, centers):
    """Condition 2 from combined block sums; returns ``(margin, fixed, shift)``.

    ``fixed`` says whether every centre with samples equals their weighted
    mean to the rounding of that mean: a few ulps of the magnitude (times
    the depth of the sums), and the centres' own dtype's rounding. ``shift``
    bounds, for each centre, the distance between it and its cluster's
    exact mean: the distance measured to the computed mean, plus the
    rounding of that mean (``_mean_rounding``), or the distance the test
    admits (its per-coordinate bound times ``sqrt(n_features)``) where that
    is smaller (and for a centre with no samples): centres in float32 far
    from the origin sit within an ulp of their means, where the test admits
    64. Each centre has its own: one far from the others (a far row's,
    rounded at its own magnitude) would otherwise widen every move's bound.
    """
    C = np.asarray(centers, dtype=np.float64)
    alive = parts.N > 0
    means = parts.S[alive] / parts.N[alive, None]
    magnitude = np.abs(means).max(initial=0.0) + np.abs(C[alive]).max(initial=0.0)
    tol = _fixed_tolerance(centers, parts.n_samples)
    fixed = bool(np.all(np.abs(means - C[alive]) <= tol * magnitude))
    admitted = tol * magnitude * np.sqrt(C.shape[1])
    shift = np.full(C.shape[0], admitted)
    if not fixed:
        return parts.margin, False, shift
    apart = np.sqrt(np.sum((means - C[alive]) ** 2, axis=1))
    shift[alive] = np.minimum(apart + _mean_rounding(parts, alive, means), admitted)
    return parts.margin, True, shift


def _mean_rounding(parts, alive, means):
    """Bound the distance between each computed mean ``S / N`` and the exact one.

    The sums add at most ``m = n_samples`` rounded products each (and the
    blocks' partial sums, fewer): each coordinate of ``S`` is within ``m
    eps`` of ``A``, the sum of the terms' absolute values, and ``N`` within
    ``m eps`` of itself (weights are not negative), so the mean is within
    ``2 m eps A / N`` plus its own rounding; doubled for the second-order
    terms. Per cluster, the Euclidean norm of the coordinates' bounds.
    """
    eps = np.finfo(np.float64).eps
    m = parts.n_samples + 2
    per_coordinate = 4.0 * m * eps * parts.A[alive] / parts.N[alive, None]
    per_coordinate += 2.0 * eps * np.abs(means)
    return np.sqrt(np.sum(per_coordinate**2, axis=1))


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
        if exact or (within and np.all(found <= shift)):
            stable = parts.moves
            if not exact and not stable:
                stable = None
    return margin, fixed, stable, found


def single_move_block(X, sample_weight, centers, N, shift, guess=None):
    """Condition 3 on one block of rows, with the clusters' weights ``N``.

    ``N`` are the weights of the explicit nearest centres over all rows and
    ``shift`` the bound of ``fixed_point_test``. A sample whose cluster it
    alone weighs cannot gain by leaving it (it sits on the mean). Returns
    True when every move's change exceeds its rounding bound.
    """
    N = np.asarray(N, dtype=np.float64)
    part = check_block(X, sample_weight, centers, (N, N), shift, guess)
    return bool(part.moves)


def explicit_fixed_point(X, sample_weight, centers, guess=None, weights=None):
    """Smallest margin, the fixed-point and single-move tests, explicitly.

    Parameters
    ----------
    X : {ndarray, sparse matrix} of shape (n_samples, n_features)
        The data, in the units of ``centers``.
    sample_weight : ndarray of shape (n_samples,)
        Non-negative weights; samples of weight 0 do not enter the check.
    centers : ndarray of shape (n_clusters, n_features)
        The centres to check.
    guess : ndarray of shape (n_samples,), default=None
        A guess of each sample's nearest centre (``check_block``).
    weights : tuple of two ndarrays of shape (n_clusters,), default=None
        Bounds of the clusters' weights known before the pass
        (``weight_bounds`` of another pass's sums): condition 3 is then
        checked in the same pass, as on dask rows (``check``), and a second
        pass with the weights found runs only where the bounds do not
        decide it. The verdicts are those of the two passes.

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
    shift = None if weights is None else shift_bound(centers, X.shape[0])
    parts = check_block(X, sample_weight, centers, weights, shift, guess=guess)
    margin, fixed, stable, found = check(parts, centers, weights, shift)
    if fixed and stable is None:
        stable = single_move_block(X, sample_weight, centers, parts.N, found, guess)
    return margin, fixed, bool(stable)


def margin_checks(rows, centers):
    """Return the engine's smallest margin and the explicit check of ``rows``.

    Returns ``(margin, explicit)``: the smallest margin ``d_(2) - d_(1)``
    of the engine's distances over the rows of positive weight, and
    ``explicit_fixed_point``'s ``(margin, fixed, stable)``, or None where
    the engine's margin already refuses. Where the units of rows in memory
    round the centres the user gets (``Units.returned_points``), both margins
    are the smaller of those of ``centers`` and of the returned centres
    (one more pass each), and a nearest centre that the rounding changes
    refuses (margin 0). Rows in memory take two passes (the engine's
    margins, then the explicit check, with the single-move condition in
    the same pass under the weights of the engine's labels); dask rows one
    (``_margin_checks_block``, which reads every chunk once for both), with
    the single-move condition in the same pass when the last pass was a
    Lloyd pass at these centres (its weights bound the clusters' weights).
    Either takes a second explicit pass only when those bounds do not
    decide it (``check``).
    """
    if rows.in_memory:
        labels, margins, _ = labels_margins(rows.X, centers, rows.offset)
        # Rows of weight 0 do not enter the fixed point: they cannot break it.
        positive = rows.w > 0
        margin = float(margins[positive].min())
        if not margin > 0 or not np.isfinite(margin):
            return margin, None
        # The engine's labels only order the explicit check's work, and
        # their clusters' weights bound the explicit ones: condition 3 in
        # the same pass where they decide it.
        N = np.bincount(labels, weights=rows.w, minlength=centers.shape[0])
        weights = weight_bounds(N, rows.X.dtype)
        explicit = explicit_fixed_point(rows.X, rows.w, centers, labels, weights)
        returned = rows.units.returned_points(centers)
        if returned is None:
            return margin, explicit
        # The width must make the centres the user gets one-hot too: their
        # margins as predict_proba computes them (the engine's) and as they
        # are (explicit). A label they change refuses the certificate.
        moved, margins, _ = labels_margins(rows.X, returned, rows.offset)
        if np.any(moved[positive] != labels[positive]):
            return 0.0, None
        margin = min(margin, float(margins[positive].min()))
        part = check_block(rows.X, rows.w, returned, guess=labels)
        return margin, (min(explicit[0], part.margin), *explicit[1:])
    weights = shift = None
    last = rows.last_pass(centers, 0.0, "entmax15")
    if last is not None:
        weights = weight_bounds(last.N, rows.dtype)
        shift = shift_bound(centers, rows.n_samples)
    margin, parts = rows.reduce(
        _margin_checks_block, centers, rows.offset, weights, shift,
        combine=_combine_margin_checks,
    )  # fmt: skip
    if not margin > 0 or not np.isfinite(margin):
        return margin, None
    explicit, fixed, stable, shift = check(parts, centers, weights, shift)
    if stable is None:
        stable = rows.reduce(single_move_block, centers, parts.N, shift, combine=_all)
    return margin, (explicit, fixed, bool(stable))


@one_blas_thread
def _margin_checks_block(Xb, wb, centers, offset, weights, shift):
    """Return the engine's smallest margin and ``check_block`` of one block.

    Two independent computations on the block the task reads once: the
    engine's margins (its GEMM distances) and the explicit check, which
    shares no arithmetic with them: the engine's labels are only its
    guesses, which order its work.
    """
    labels, margins, _ = labels_margins(np.ascontiguousarray(Xb), centers, offset)
    margins = margins[wb > 0]
    margin = float(margins.min()) if margins.size else np.inf
    # The engine's labels are the explicit check's guesses: they change
    # which distance a row gets first, never a verdict or a margin.
    return margin, check_block(Xb, wb, centers, weights, shift, guess=labels)


def _combine_margin_checks(*parts):
    return min(p[0] for p in parts), combine_blocks(*(p[1] for p in parts))


def _all(*parts):
    return all(parts)
