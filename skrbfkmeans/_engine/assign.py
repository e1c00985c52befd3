"""Hard assignment passes: the nearest centre and the runner-up, and Lloyd's sums.

Every search of a nearest centre and its runner-up goes through the block
kernels here and in ``blocks``: ``partial_distances`` gives each row's
nearest centre (the lowest index among exact ties, as ``numpy.argmin`` and
scikit-learn's Lloyd) and ``runner_up`` the second. ``nearest`` is the pass
of both; ``assignment_sums`` the pass of a Lloyd step (labels, partial
distances, and the weight and centred weighted sum of every cluster);
``single_move_gains`` the pass of every row's best single-sample move.
"""

import numpy as np
import scipy.sparse as sp

from .blas import matmul
from .blocks import BlockPlan, PreparedCenters, pooled_empty, runner_up

# Below this many distances a pass is mostly fixed costs: one block, with few
# NumPy calls (``is_small``).
SMALL_PASS = 1 << 17

# A small pass sums its clusters by a dense one-hot product (``k n (d + 8)``
# below this, where its fixed costs are lower) or else by a sparse one, whose
# cost is ``n d`` and some 40 microseconds (both measured on 150 to 5000 rows
# of 2 to 64 features with 3 to 100 centres).
DENSE_SUMS = 1_000_000


def is_small(X, n_clusters):
    """Whether a pass over ``X`` is mostly fixed costs (dense and small)."""
    n, d = X.shape
    return not sp.issparse(X) and n * n_clusters < SMALL_PASS and n * d < SMALL_PASS


def nearest(X, centers, offset, *, second=False, centred=False):
    """Nearest centre of every row (lowest index among ties), its partial distance.

    Partial distances are ``||mu||^2 - 2 x . mu`` (``blocks.partial_distances``).
    Returns ``(labels, e_own)`` (``intp``, dtype of ``centers``); with
    ``second`` also the runner-up's index and partial distance. With
    ``centred``, ``X`` is dense and already ``X - offset`` (``BlockPlan``).
    Cost: one pass of partial distances.
    """
    n = X.shape[0]
    labels = np.empty(n, dtype=np.intp)
    e_own = np.empty(n, dtype=centers.dtype)
    if second:
        labels_2 = np.empty(n, dtype=np.intp)
        e_second = np.empty(n, dtype=centers.dtype)

    def block(sl, Xb, E, closest, e_closest, buf):
        labels[sl] = closest
        e_own[sl] = e_closest
        if second:
            labels_2[sl], e_second[sl] = runner_up(E, closest)

    BlockPlan(X, centers, offset, centred=centred).map(block)
    return (labels, e_own, labels_2, e_second) if second else (labels, e_own)


def small_distances(Xc, centers, offset, out=None):
    """Partial distances of small dense centred rows ``Xc`` (``n x k``, one product).

    ``out`` is a buffer for the result.
    """
    prepared = PreparedCenters(centers, offset, centers.dtype)
    E = matmul(Xc, prepared.minus_2t, out=out)
    E += prepared.sq
    return E


def assignment_sums(X, sample_weight, centers, offset, *, centred, second=False):
    """Labels, partial distances and the exact sums ``N``, ``S`` in one pass.

    The sums are taken on centred rows (``S`` centred on ``offset``), in
    float64. Small dense data (``is_small``) run as one block from
    ``centred()`` (``X - offset``, dense, made by the caller once), the sums
    a dense one-hot product or, from ``DENSE_SUMS`` (``k n (d + 8)``), a
    sparse one; other data block by block, one sparse product per block.
    With ``second``, also the runner-up's partial distance of every row.
    Returns ``(labels, e_own, N, S)`` and ``e_second``.
    """
    w = sample_weight.astype(np.float64)
    n, k = X.shape[0], centers.shape[0]
    if is_small(X, k):
        # The polish runs hundreds of Lloyd iterations on data of a few
        # thousand rows, where a pass costs its fixed steps: one block of
        # distances, in buffers reused from pass to pass (fresh ones cost
        # page faults every call); the sums a dense one-hot product where
        # it is cheaper than a sparse one (``DENSE_SUMS``).
        Xc = centred()
        prepared = PreparedCenters(centers, offset, centers.dtype)
        E = matmul(Xc, prepared.minus_2t, out=pooled_empty("lloyd_E", (n, k), Xc.dtype))
        E += prepared.sq
        labels = np.argmin(E, axis=1)
        rows_n = np.arange(n)
        e_own = E[rows_n, labels]
        if k * n * (X.shape[1] + 8) < DENSE_SUMS:
            onehot = pooled_empty("lloyd_onehot", (k, n), np.float64)
            onehot.fill(0.0)
            onehot[labels, rows_n] = w
            N, S = onehot.sum(axis=1), matmul(onehot, Xc)
        else:
            N = np.bincount(labels, weights=w, minlength=k)
            P = sp.csr_array((w, labels, np.arange(n + 1)), shape=(n, k))
            S = P.T @ Xc
        if not second:
            return labels, e_own, N, S
        # The runner-up's partial distance, for Hamerly's bounds.
        return labels, e_own, N, S, runner_up(E, labels)[1]
    labels = np.empty(n, dtype=np.intp)
    e_own = np.empty(n, dtype=centers.dtype)
    e_second = np.empty(n, dtype=centers.dtype) if second else None

    def block(sl, Xb, E, closest, e_closest, buf):
        labels[sl] = closest
        e_own[sl] = e_closest
        b = closest.shape[0]
        P = sp.csr_array((w[sl], closest, np.arange(b + 1)), shape=(b, k))
        Sb = P.T @ Xb
        if second:
            e_second[sl] = runner_up(E, closest)[1]
        return Sb.toarray() if sp.issparse(Sb) else Sb

    S = np.zeros((k, X.shape[1]))
    for Sb in BlockPlan(X, centers, offset).map(block):
        S += Sb
    N = np.bincount(labels, weights=w, minlength=k)
    return (labels, e_own, N, S, e_second) if second else (labels, e_own, N, S)


def single_move_gains(
    X, w, labels, centers, N, offset, x_sq, *, distances=False, room=None,
    centred=False,
):  # fmt: skip
    """Every row's best single-sample (Hartigan) move, from partial distances.

    Moving row ``i`` (weight ``w_i``) from its cluster ``a = labels[i]``
    (weight ``N_a``) to ``b`` changes the distortion by ``w_i N_b / (N_b +
    w_i) d_ib - w_i N_a / (N_a - w_i) d_ia`` (squared distances ``d``, both
    means moving with the row). Returns ``(delta, size, target)``: that
    change for the best other cluster ``target[i]`` (``inf`` where no move
    exists: one cluster or weight 0), and the sum of the two terms it
    compares (the scale of its rounding), float64. The distances are the
    pass's (``|x|^2`` is ``x_sq``), to be confirmed by explicit
    differences. With ``distances``, also each row's squared distance to
    its own centre and to the nearest other one (float64: the bounds of
    ``_hartigan``). Cost: one pass of partial distances.

    With ``room``, only the rows that may be candidates (``delta < room *
    size``) are evaluated: a row whose nearest other cluster, joined at the
    smallest factor ``N_b / (N_b + w_i)``, is farther than that allows
    (with room to spare for rounding) gets ``delta = inf``, ``size = 0``,
    ``target = 0``, which leaves the candidates and their values as they
    are, at a few vectors' cost instead of a block of scores' arithmetic.
    With ``centred``, ``X`` is dense and already ``X - offset``.
    """
    n_samples, n_clusters = X.shape[0], centers.shape[0]
    delta = np.full(n_samples, np.inf)
    size = np.zeros(n_samples)
    target = np.zeros(n_samples, dtype=np.intp)
    out = (delta, size, target)
    if distances:
        d_own, d_other = np.zeros(n_samples), np.full(n_samples, np.inf)
        out += (d_own, d_other)
    if n_clusters < 2:
        return out
    N = np.asarray(N, dtype=np.float64)
    n_min = N.min()

    def block(sl, Xb, E, closest, e_closest, buf):
        wb = np.asarray(w[sl], dtype=np.float64)
        lab = labels[sl]
        rows = np.arange(lab.size)
        x_sq_b = x_sq[sl]
        # Squared distances to the own and the nearest other centre, as
        # the block's ``max(E + |x|^2, 0)`` would give them (a rounding of
        # the sum is monotone: the nearest other's value is the same).
        to_own = _squared_distances(E[rows, lab], x_sq_b, E.dtype)
        nearest_other = _squared_distances(runner_up(E, lab)[1], x_sq_b, E.dtype)
        if distances:
            d_own[sl], d_other[sl] = to_own, nearest_other
        own = N[lab]
        rest = own - wb
        # Leaving a cluster that the sample alone weighs leaves it empty:
        # its distortion drops by 0 (the sample sits on its mean).
        with np.errstate(divide="ignore", invalid="ignore"):
            leave = np.where(rest > 0, own / rest, 0.0) * to_own
            live = wb > 0
            if room is not None:
                # No join is below the nearest other's at the smallest
                # factor: ``delta < room * size`` needs ``join (1 - room)
                # < leave (1 + room)`` (twice the room for rounding).
                lowest = n_min / (n_min + wb) * nearest_other
                live &= ~(lowest * (1.0 - 2.0 * room) > leave * (1.0 + 2.0 * room))
        idx = np.flatnonzero(live) if room is not None else rows
        # In place on the block's partial distances (the candidates only
        # need the engine's precision: explicit differences confirm them).
        J = E if room is None else E[idx]
        J += x_sq_b[idx, None]
        np.maximum(J, 0, out=J)
        wi = wb[idx]
        with np.errstate(divide="ignore", invalid="ignore"):
            if wi.size and wi.min() == wi.max():
                # Equal weights (the usual case): one factor per cluster.
                J *= (N / (N + wi[0])).astype(J.dtype)
            else:
                J *= (N[None, :] / (N[None, :] + wi[:, None])).astype(J.dtype)
        sub = np.arange(idx.size)
        J[sub, lab[idx]] = np.inf  # not a move (a cluster of no weight: 0 / 0)
        b = np.argmin(J, axis=1)
        join = J[sub, b].astype(np.float64)
        gain = wi * (join - leave[idx])
        gain[~(wi > 0)] = np.inf
        delta[sl][idx], target[sl][idx] = gain, b
        size[sl][idx] = wi * (join + leave[idx])

    BlockPlan(X, centers, offset, centred=centred).map(block)
    return out


def _squared_distances(e, x_sq, dtype):
    """Squared distances ``max(e + |x|^2, 0)`` from partial ones ``e``.

    Rounded in ``dtype`` (as a block of the pass's scores), returned as float64.
    """
    return np.maximum((e + x_sq).astype(dtype, copy=False), 0).astype(np.float64)
