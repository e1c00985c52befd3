"""Single-sample (Hartigan) moves: a K-Means solution no one sample can improve.

Moving a sample ``x`` of weight ``w`` from its cluster ``a`` (weight ``N_a``,
mean ``mu_a``) to a cluster ``b`` changes the distortion by exactly

    ``Delta = w N_b / (N_b + w) ||x - mu_b||^2 - w N_a / (N_a - w) ||x - mu_a||^2``

(both means move with it). Lloyd's algorithm compares the plain distances,
so a Lloyd fixed point can still hold samples whose move lowers the
distortion (``Delta < 0`` while ``||x - mu_a|| <= ||x - mu_b||``). Hartigan's
method makes these moves; a partition where none lowers the distortion is a
Lloyd fixed point too (``Delta >= 0`` for every ``b`` implies ``x`` is
nearest its own mean), so its fixed points are a subset of Lloyd's
(Telgarsky & Vattani, AISTATS 2010).

The exact method moves one sample at a time, which in NumPy would cost a
pass over the data per move. Here a pass computes every sample's best move
in row blocks (one pass of partial distances, as a Lloyd iteration) to find
the candidates; then, best first, each candidate's best move is recomputed
by explicit float64 differences at the current means (the earlier moves of
the pass included) and made if it lowers the distortion: each move made is
a step of the sequential method, so each lowers the distortion by its own
``Delta``.

On many rows (beyond ``is_small``) a late pass moves a few samples near the
boundaries: Hamerly's bounds on each row's distances (``_MoveBounds``) name
the rows whose move may gain, and only those get their distances; the sums
are then recomputed only for the clusters a move touched. The candidates
are those of a full pass (their distances from a product over fewer rows,
which may round differently), and the sums the same bits.
"""

from functools import partial
from numbers import Integral

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, validate_params

from ._engine.assign import is_small, nearest, single_move_gains
from ._engine.passes import explicit_inertia
from ._lloyd import Bounds
from ._policy import one_blas_thread
from ._rows import MemoryRows, working_units
from ._validation import check_data_centers, check_n_samples

# A move must lower the distortion by more than this many ulps of the terms
# it compares (float64, explicit differences), so that rounding never makes
# a move that does not lower the distortion: each applied move then strictly
# lowers it, and the passes end.
_ULPS = 64

# A bounded pass that would recompute more than this share of the rows runs
# the full pass instead (no copy of the rows); so does a refresh of the sums.
_FULL_PASS_SHARE = 0.5


def _candidate_room(dtype):
    """Return the room, relative to ``size``, below which a move is a candidate.

    The engine's distances round at about ``eps`` of their terms; a move
    whose gain is within ``sqrt(eps)`` of them is confirmed by explicit
    differences. ``_MoveBounds`` clears rows against the same room.
    """
    return float(np.sqrt(np.finfo(dtype).eps))


def _row(X, i, offset):
    """Row ``i`` of ``X`` minus ``offset``, float64."""
    x = X[i].toarray().ravel() if sp.issparse(X) else X[i]
    return np.asarray(x, dtype=np.float64) - offset


def cluster_sums(X, w, labels, offset, n_clusters, rows=None):
    """Weights ``N`` and sums ``S = sum w (x - offset)`` of the clusters, float64.

    ``rows`` (ascending indices; None: all) restricts the sums to those rows,
    read in place: each cluster adds its rows in the same order either way.
    """
    if rows is None:
        rows = np.arange(labels.size)
    else:
        w, labels = np.asarray(w)[rows], labels[rows]
    N = np.bincount(labels, weights=w, minlength=n_clusters).astype(np.float64)
    M = sp.csr_matrix(
        (np.asarray(w, dtype=np.float64), (labels, rows)),
        shape=(n_clusters, X.shape[0]),
    )
    S = M @ X
    S = S.toarray() if sp.issparse(S) else np.asarray(S, dtype=np.float64)
    return N, S - N[:, None] * np.asarray(offset, dtype=np.float64)


def _refresh_sums(X, w, labels, offset, N, S, touched):
    """``cluster_sums`` of the clusters ``touched``; the others' as they are.

    A cluster no move touched keeps the exact sums of the pass before. The
    sums of the others are taken over their rows in the same order as in
    ``cluster_sums``, and so are the same bits.
    """
    touched = np.fromiter(sorted(touched), dtype=np.intp)
    if touched.size <= 4:
        inside = labels == touched[0]
        for j in touched[1:]:
            inside |= labels == j
    else:
        inside = np.isin(labels, touched)
    idx = np.flatnonzero(inside)
    if idx.size > _FULL_PASS_SHARE * labels.size:
        return cluster_sums(X, w, labels, offset, N.size)
    if X.dtype == np.float64:
        # The rows in place (the product would convert all of another dtype).
        N_t, S_t = cluster_sums(X, w, labels, offset, N.size, rows=idx)
    else:
        N_t, S_t = cluster_sums(X[idx], w[idx], labels[idx], offset, N.size)
    N[touched], S[touched] = N_t[touched], S_t[touched]
    return N, S


def _means(N, S, centers, offset):
    """Centred means ``S / N`` (float64); a cluster with no weight keeps its centre."""
    means = np.asarray(centers, dtype=np.float64) - offset
    alive = N > 0
    means[alive] = S[alive] / N[alive, None]
    return means


class _MeanRounding:
    """Each cluster's bound on the distance between its mean and the exact one.

    A mean is ``S_j / N_j`` with ``S_j = sum w_i x_i - N_j offset``
    (``cluster_sums``: float64 sums of at most ``n`` terms, then the
    running updates of a pass): each coordinate is within ``(n + 2) eps``
    of ``sum w_i |x_i| + N_j |offset|``. Over the features, with
    ``Q_j = sum w_i ||x_i - offset||^2`` (Cauchy-Schwarz, and ``||x|| <=
    ||x - offset|| + ||offset||``), the mean is within ``(n + 2) eps
    sqrt(2 d) (sqrt(Q_j / N_j) + 2 ||offset||)``. Rows equal to one another
    have means that round apart by that much, and without this bound a move
    between two of their clusters "gained" a rounding error at every pass
    (1422 copies of one point traded places 426001 times in 300 passes).
    ``Q`` follows the moves (``move``).
    """

    def __init__(self, w, x_sq, offset, labels, n_clusters):
        self.w = np.asarray(w, dtype=np.float64)
        self.x_sq = np.asarray(x_sq, dtype=np.float64)
        self.Q = np.bincount(labels, weights=self.w * self.x_sq, minlength=n_clusters)
        eps = np.finfo(np.float64).eps
        self.factor = (self.w.size + 2) * eps * np.sqrt(2.0 * offset.size)
        self.far = 2.0 * float(np.sqrt(offset @ offset))

    def move(self, i, a, b):
        """Row ``i`` moved from cluster ``a`` to ``b``."""
        q = self.w[i] * self.x_sq[i]
        self.Q[a] = max(self.Q[a] - q, 0.0)
        self.Q[b] += q

    def bound(self, j, N_j):
        """Return cluster ``j``'s bound at weight ``N_j`` (0 where it has none)."""
        if not N_j > 0:
            return 0.0
        return self.factor * (np.sqrt(self.Q[j] / N_j) + self.far)


def _explicit_best(x, w, a, N, means, rounding):
    """Return the best move of ``x`` (in cluster ``a``), explicitly.

    ``x`` and ``means`` are centred on the same offset; ``rounding``
    (``_MeanRounding``) bounds each mean's distance from the exact one. Returns
    ``(b, delta, slack)``: the cluster whose move changes the distortion the
    most, that change, and the rounding bound it must exceed: ``_ULPS``
    ulps of the two terms compared, and what the means' rounding can move
    the two distances by, ``2 sqrt(d) r + r^2`` for a mean within ``r``.
    """
    d = np.sum((x - means) ** 2, axis=1)
    rest = N[a] - w
    g = w * N[a] / rest if rest > 0 else 0.0
    leave = g * d[a]
    join = w * N / (N + w) * d
    join[a] = np.inf
    b = int(np.argmin(join))
    eps = np.finfo(np.float64).eps
    slack = _ULPS * (x.size + 2) * eps * (join[b] + leave)
    r_a, r_b = rounding.bound(a, N[a]), rounding.bound(b, N[b])
    slack += g * (2.0 * np.sqrt(d[a]) * r_a + r_a**2)
    slack += w * N[b] / (N[b] + w) * (2.0 * np.sqrt(d[b]) * r_b + r_b**2)
    return b, join[b] - leave, slack


class _MoveBounds:
    """Which rows' best move may gain, from bounds on their distances.

    Hamerly's bounds (``_lloyd.Bounds``): ``upper`` bounds each row's
    distance to its own mean from above, ``lower`` its distance to every
    other mean from below; when the means move by ``shift``, ``upper +=
    shift[own]`` and ``lower -= max(shift)``. A row's move changes the
    distortion by at least ``w (f lower^2 - g upper^2)``, with ``f = N_min
    / (N_min + w)`` (the smallest join factor ``N_b / (N_b + w)``) and
    ``g = N_a / (N_a - w)``; a row whose bound clears the candidates' room
    (``hartigan``) is no candidate, and only the others get their
    distances. Late passes move a few rows near the boundaries, and a pass
    then costs a few vectors of ``n`` instead of ``n k d``. Both bounds keep
    the engine's rounding (``Bounds.slack``) as room.
    """

    def __init__(self, rows, dtype):
        self.bounds = Bounds(rows, dtype)
        self.moved(slice(None))  # every row computed in the first pass
        self.room = _candidate_room(dtype)
        self.centers = None
        self.rows, self.dtype = rows, dtype

    def _pass(self, idx, *args):
        """``single_move_gains`` of rows ``idx`` (None: all), with distances."""
        X, centred = self.rows.pass_rows(self.dtype, idx)
        return single_move_gains(
            X, *args, distances=True, room=self.room, centred=centred
        )

    def gains(self, X, w, labels, centers, N, offset, x_sq):
        """``single_move_gains`` of the rows the bounds do not clear.

        The others get ``delta = inf`` (no candidate); the bounds of the
        rows computed become exact. The signature is ``single_move_gains``'s;
        the rows' values come from the record (``MemoryRows.pass_rows``), not
        ``X``.
        """
        n, bounds = labels.shape[0], self.bounds
        if self.centers is not None:
            step = centers.astype(np.float64) - self.centers
            bounds.move(labels, np.sqrt(np.einsum("ij,ij->i", step, step)))
        self.centers = centers.astype(np.float64)
        wf = np.asarray(w, dtype=np.float64)
        own = N[labels]
        rest = own - wf
        n_min = N.min()
        with np.errstate(divide="ignore", invalid="ignore"):
            g = np.where(rest > 0, own / rest, 0.0)
            up_sq = g * bounds.upper**2
            low = n_min / (n_min + wf) * np.maximum(bounds.lower, 0.0) ** 2 - up_sq
            # delta >= room (delta + 2 w leave) follows from this:
            cleared = low * (1.0 - self.room) > 2.0 * self.room * up_sq
        cleared |= ~(wf > 0)
        idx = np.flatnonzero(~cleared)
        if idx.size > _FULL_PASS_SHARE * n:
            delta, size, target, d_own, d_other = self._pass(
                None, w, labels, centers, N, offset, x_sq
            )
            self._set(slice(None), d_own, d_other)
            return delta, size, target
        delta, size = np.full(n, np.inf), np.zeros(n)
        target = np.zeros(n, dtype=np.intp)
        if idx.size:
            out = self._pass(idx, w[idx], labels[idx], centers, N, offset, x_sq[idx])
            delta[idx], size[idx], target[idx] = out[:3]
            self._set(idx, *out[3:])
        return delta, size, target

    def _set(self, idx, d_own, d_other):
        slack = self.bounds.slack
        self.bounds.set(idx, np.sqrt(d_own) + slack, np.sqrt(d_other))

    def moved(self, idx):
        """Rows ``idx`` changed cluster: their bounds are recomputed next pass."""
        self.bounds.upper[idx], self.bounds.lower[idx] = np.inf, 0.0


def hartigan(rows, centers, *, max_iter=300):
    """Single-sample moves from the partition of ``centers`` until none gains.

    Parameters
    ----------
    rows : _rows.MemoryRows
        Rows in working units (the engine's), with their weights, centring
        offset and squared norms about it.
    centers : ndarray of shape (n_clusters, n_features)
        The starting solution; the samples start at their nearest centre.
    max_iter : int, default=300
        Most passes.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The means of the final partition (dtype of ``centers``); a cluster
        left with no weight keeps its centre.
    labels : ndarray of shape (n_samples,)
        The final partition (int32).
    n_moves : int
        Number of moves made.
    converged : bool
        Whether the last pass found no move (else ``max_iter`` stopped it).

    Notes
    -----
    Stopping rule: a pass finds no sample whose move lowers the distortion by
    more than the rounding of explicit float64 differences (``_ULPS`` ulps of
    the compared terms) and of the two means (``_MeanRounding``). Cost per
    pass: one block pass of partial distances (``O(n k d)``, as a Lloyd
    iteration) to find the candidates (samples whose move may gain, by those
    distances with room for their rounding; a sample whose nearest other centre
    is too far for any move to gain is settled by its two distances, without
    the arithmetic of every move), then ``O(k d)`` explicit differences per
    candidate, whose best move at the current means is made when it gains; the
    means of the two clusters a move touches are updated from running float64
    sums, recomputed exactly from the labels at the end of the pass. On many
    rows (beyond ``is_small``, dense) only the rows that the bounds of
    ``_MoveBounds`` do not clear get their distances (a pass costs a few
    vectors of ``n`` and those rows), and only the clusters a move touched get
    their sums again.
    """
    X, w, x_sq = rows.X, rows.w, rows.x_sq
    dtype = centers.dtype
    n_clusters = centers.shape[0]
    offset = np.asarray(rows.offset, dtype=np.float64)
    labels = nearest(X, centers, offset.astype(dtype))[0].astype(np.int32)
    N, S = cluster_sums(X, w, labels, offset, n_clusters)
    means = _means(N, S, centers, offset)
    n_moves, converged = 0, n_clusters < 2
    rounding = _MeanRounding(w, x_sq, offset, labels, n_clusters)
    # Many rows: bounds leave out the rows whose move cannot gain.
    bounds = None
    if not sp.issparse(X) and not is_small(X, n_clusters):
        bounds = _MoveBounds(rows, dtype)
    if bounds is None:
        gains = partial(single_move_gains, room=_candidate_room(dtype))
    else:
        gains = bounds.gains
    for _ in range(max_iter if n_clusters > 1 else 0):
        current = (means + offset).astype(dtype)
        delta, size, target = gains(
            X, w, labels, current, N, offset.astype(dtype), x_sq
        )
        # Candidates by the engine's distances (with room for their rounding,
        # larger than that of explicit differences), confirmed by explicit
        # differences; best first, ties by row.
        room = _candidate_room(dtype) * size
        cand = np.flatnonzero(delta < room)
        cand = cand[np.lexsort((cand, delta[cand]))]
        moved, touched = 0, set()
        for i in cand:
            # Sequentially, as Hartigan's method: each candidate's best move
            # at the current means (earlier moves of this pass included).
            x, wi = _row(X, i, offset), float(w[i])
            a = labels[i]
            b, change, slack = _explicit_best(x, wi, a, N, means, rounding)
            if not change < -slack:
                continue
            rounding.move(i, a, b)
            S[a] -= wi * x
            N[a] -= wi
            S[b] += wi * x
            N[b] += wi
            for j in (a, b):
                if N[j] > 0:
                    means[j] = S[j] / N[j]
            labels[i] = b
            moved += 1
            if bounds is not None:
                bounds.moved(i)
                touched.update((a, b))
        if not moved:
            converged = True
            break
        n_moves += moved
        # Exact sums of the new partition: running updates drift.
        if bounds is None:
            N, S = cluster_sums(X, w, labels, offset, n_clusters)
        else:
            N, S = _refresh_sums(X, w, labels, offset, N, S, touched)
        means = _means(N, S, centers, offset)
    centers = (means + offset).astype(dtype)
    # Samples of weight 0 never move (they change nothing): they take their
    # nearest final centre, as every other sample has.
    idle = ~(np.asarray(w) > 0)
    if idle.any():
        labels[idle] = nearest(X, centers, offset.astype(dtype))[0][idle]
    return centers, labels.astype(np.int32), n_moves, converged


@validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "centers": ["array-like"],
        "sample_weight": ["array-like", None],
        "max_iter": [Interval(Integral, 1, None, closed="left")],
    },
    prefer_skip_nested_validation=True,
)
@one_blas_thread
def kmeans_hartigan(X, centers, *, sample_weight=None, max_iter=300):
    """Refine a K-Means solution by single-sample moves (Hartigan's method).

    The samples start at their nearest centre; a sample moves to another
    cluster whenever that lowers the weighted inertia (both clusters' means
    move with it), until no single move does. The result is a Lloyd fixed
    point that no one sample can improve.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The data.
    centers : array-like of shape (n_clusters, n_features)
        A K-Means solution (any centres: the samples start at the nearest).
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the samples.
    max_iter : int, default=300
        Most passes over the data.

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The means of the final clusters (dtype of ``X``); a cluster left
        with no weight keeps its centre.
    labels : ndarray of shape (n_samples,)
        Cluster of each sample (int32); each sample's nearest centre.
    inertia : float
        Weighted K-Means distortion of the result, never above that of the
        partition the input centres define.
    n_moves : int
        Number of single-sample moves made.

    See Also
    --------
    kmeans_polish : Split/merge moves, which change a whole cluster at once.
    AnnealedRBFKMeans : Runs both after annealing and certifies the result.
    RBFKMeans : ``algorithm="hartigan"`` runs this after Lloyd at ``sigma=0``.

    Notes
    -----
    Moving ``x`` (weight ``w``) from cluster ``a`` (weight ``N_a``, mean
    ``mu_a``) to ``b`` changes the distortion by
    ``w N_b / (N_b + w) ||x - mu_b||^2 - w N_a / (N_a - w) ||x - mu_a||^2``.
    Lloyd's algorithm compares the plain distances, so a Lloyd fixed point
    can hold samples whose move still gains; a solution where no move gains
    is a Lloyd fixed point too [1]_. Hartigan's method [2]_ moves one sample
    at a time; here a pass finds the candidates in blocks (one pass of
    distances, as a Lloyd iteration), then takes them in turn, best first,
    as the sequential method does: each candidate's best move at the current
    means, by explicit float64 differences, is made when it gains more than
    its rounding (a few ulps of the terms compared). Deterministic and
    independent of the thread count.

    References
    ----------
    .. [1] M. Telgarsky, A. Vattani, "Hartigan's method: k-means clustering
       without Voronoi", AISTATS 2010.
    .. [2] J. A. Hartigan, M. A. Wong, "Algorithm AS 136: A k-means
       clustering algorithm", Applied Statistics 28(1), 1979.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import kmeans_hartigan
    >>> X = np.array([[0.0], [2.0], [3.0], [4.0]])
    >>> centers = np.array([[1.0], [3.5]])  # a Lloyd fixed point
    >>> centers, labels, inertia, n_moves = kmeans_hartigan(X, centers)
    >>> centers.ravel(), labels, inertia, n_moves
    (array([0., 3.]), array([0, 1, 1, 1], dtype=int32), 2.0, 1)
    """
    X, centers, sample_weight = check_data_centers(X, centers, sample_weight)
    check_n_samples(X.shape[0], centers.shape[0])
    X, offset, centers, units = working_units(X, sample_weight, centers)
    rows = MemoryRows(X, sample_weight, offset, units=units)
    centers, labels, n_moves, _ = hartigan(rows, centers, max_iter=max_iter)
    inertia = explicit_inertia(X, sample_weight, centers, labels)
    inertia = float(units.to_user_energy(inertia))
    return units.to_user_points(centers), labels, inertia, n_moves
