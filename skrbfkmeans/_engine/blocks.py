"""Squared distances and responsibilities, one block of rows at a time.

Conventions (doc/theory.rst, "The RBF free energy"): ``d_ij = ||x_i - mu_j||^2``, scores
``z_ij = -d_ij / T`` with the temperature ``T = 2 sigma^2``. The row constant
``||x_i||^2`` cancels in both maps, so a block works with the *partial*
distances ``e_ij = ||mu_j||^2 - 2 x_i . mu_j`` and the shifted scores
``u_ij = (min_l e_il - e_ij) / T <= 0``, whose maximum is exactly 0.
"""

import math
import threading

import numpy as np
import scipy.sparse as sp
from sklearn import get_config

from .blas import matmul
from .entmax_rows import _sparse_rows, _Workspace
from .partition import block_rows, row_blocks
from .threads import block_threads, map_blocks

ACTIVATIONS = ("softmax", "entmax15")

# Target size of one block's n x k scores: large enough that the per-block
# Python steps are a small share (with them the GIL, so that threads gain:
# 1.4-1.7x on two cores against 1.1-1.2x at 1 MiB), small enough that a
# block's buffers stay in a shared cache and a fit's peak memory far below
# working_memory (the threads are capped by it too: BlockPlan.map).
_TARGET_BLOCK_BYTES = 4 << 20
# Passes that make many element-wise sweeps over a block's scores (the free
# energy, the moments, responsibilities for the caller) are bound by the
# cache: 4 MiB blocks made them 2-3x slower at k = 100 than 1 MiB blocks.
SWEEP_BLOCK_BYTES = 1 << 20


def _row_bytes(n_clusters, n_features, dtype, activation):
    """Bytes a block holds per row: its scores' buffers and centred rows.

    Counts the scores, a copy for the objective, the centred rows (plain and
    with a column of ones: ``augmented_block``) and, for entmax, its
    five-buffer workspace.
    """
    itemsize = np.dtype(dtype).itemsize
    n_buffers = 3.2 + (5 if activation == "entmax15" else 0)
    return itemsize * (n_buffers * n_clusters + 2 * n_features + 1)


def temperature(sigma, dtype):
    """``T = 2 sigma^2`` and ``1 / T``, kept finite in ``dtype``.

    ``sigma`` from 1e-300 to 1e300 overflows or underflows ``sigma^2``; the
    limits are the hard assignment (``T -> 0``) and uniform responsibilities
    (``T -> inf``), which a clamped ``T`` reproduces to working precision.
    """
    finfo = np.finfo(dtype)
    with np.errstate(over="ignore", under="ignore"):
        T = 2.0 * np.float64(sigma) ** 2
    # The smallest normal number keeps 1 / T finite.
    T = float(np.clip(T, float(finfo.tiny), float(finfo.max)))
    return T, dtype.type(1.0 / T)


_POOL = threading.local()


def pooled_empty(name, shape, dtype):
    """Return an uninitialised array backed by a reused per-thread buffer.

    A fit makes thousands of passes; fresh score-sized temporaries would cost
    page faults on every one. Each thread keeps one growing buffer per name
    and dtype (a few MiB: blocks are sized to about 1 MiB of scores), so a
    view handed out here is valid until the next request for the same name.
    """
    arrays = getattr(_POOL, "arrays", None)
    if arrays is None:
        arrays = _POOL.arrays = {}
    dtype = np.dtype(dtype)
    size = math.prod(shape)
    key = (name, dtype.str)
    flat = arrays.get(key)
    if flat is None or flat.size < size:
        flat = arrays[key] = np.empty(max(size, 1), dtype=dtype)
    return flat[:size].reshape(shape)


class BlockBuffers:
    """Scratch space for one block, reused across blocks, passes and fits."""

    def __init__(self, n_rows, n_clusters, n_features, dtype, activation, sparse):
        shape = (n_rows, n_clusters)
        self.E = pooled_empty("E", shape, dtype)
        self.D = pooled_empty("D", shape, dtype)
        self.near = pooled_empty("near", shape, bool)
        self.scratch = pooled_empty("scratch", shape, dtype)
        self.X = None if sparse else pooled_empty("X", (n_rows, n_features), dtype)
        # Centred rows with a column of ones (augmented_block).
        self.Xa = (
            None if sparse else pooled_empty("Xa", (n_rows, n_features + 1), dtype)
        )
        self.ones = np.ones(n_clusters, dtype=dtype)
        self.workspace = (
            _Workspace(n_rows, n_clusters, dtype, empty=pooled_empty)
            if activation == "entmax15"
            else None
        )


def centred_rows(X, offset):
    """``X - offset`` as a new array; CSR stays CSR (see ``centred_block``)."""
    if not sp.issparse(X):
        return X - offset
    columns = np.flatnonzero(offset)
    if columns.size == 0:
        return X
    # The offset's columns become stored entries of every row (the sparse
    # offset is non-zero only where a column is mostly stored anyway).
    n, m = X.shape[0], columns.size
    shift = sp.csr_matrix(
        (np.tile(-offset[columns], n), np.tile(columns, n), np.arange(0, n * m + 1, m)),
        shape=X.shape,
    )
    return (X + shift).tocsr()


def centred_block(X, sl, offset, buf):
    """Rows ``sl`` of ``X`` minus ``offset``, without touching ``X``.

    Dense data is centred on the fly so that float32 distances do not cancel
    catastrophically, without copying or modifying the caller's array. CSR
    rows stay CSR: their offset (``_engine.data_offset``) is zero except on
    the columns whose mean dominates their spread, which become stored.
    """
    if sp.issparse(X):
        return centred_rows(X[sl], offset)
    Xb = buf.X[: sl.stop - sl.start]
    np.subtract(X[sl], offset, out=Xb)
    return Xb


class BlockPlan:
    """The block loop of every pass: block size, buffers, prepared centres.

    Blocks follow the rule of ``partition``: about ``target`` bytes of
    scores and rows (``_TARGET_BLOCK_BYTES`` by default), at least 64 rows,
    within ``working_memory``, all of equal size. ``map`` runs a function on
    every block. With ``centred``, ``X`` is dense and already ``X - offset``
    (a caller's copy, made once): its blocks are views, not centred again
    (the same values; the offset still centres the centres).
    """

    def __init__(
        self, X, centers, offset, activation="softmax", target=None, centred=False
    ):
        dtype = centers.dtype
        n_samples, n_features = X.shape
        n_clusters = centers.shape[0]
        self.X, self.offset, self.activation = X, offset, activation
        self.centred = centred
        self.prepared = PreparedCenters(centers, offset, dtype)
        self.held = _row_bytes(n_clusters, n_features, dtype, activation)
        self.step = block_rows(
            n_samples,
            dtype.itemsize * (n_clusters + n_features),
            target or _TARGET_BLOCK_BYTES,
            min_rows=64,
            held=self.held,
            even=True,
        )
        self.buf = self.buffers()

    def buffers(self):
        """Return block buffers for the calling thread (pooled per thread)."""
        return BlockBuffers(
            self.step, self.prepared.C.shape[0], self.X.shape[1], self.prepared.C.dtype,
            self.activation, sp.issparse(self.X),
        )  # fmt: skip

    def map(self, func, distances=True):
        """Run ``func`` on every block, on the engine's threads; its results.

        ``func(sl, Xb, E, argmin, min, buf)`` gets the block's centred rows
        and partial distances (``func(sl, buf)`` with ``distances=False``)
        and the calling thread's buffers. The results come in block order;
        a caller that adds them in that order gets the same sums for every
        number of threads. ``func`` may write rows ``sl`` of shared arrays.
        """
        blocks = list(row_blocks(self.X.shape[0], self.step))
        max_threads = int(
            get_config()["working_memory"] * 2**20 // (self.step * self.held)
        )
        if block_threads(len(blocks), max_threads) <= 1:
            # On the caller's thread, the blocks in a plain loop.
            results, buf = [], self.buf
            for sl in blocks:
                if distances:
                    Xb = self._block(sl, buf)
                    E, closest, e_closest = partial_distances(Xb, self.prepared, buf)
                    results.append(func(sl, Xb, E, closest, e_closest, buf))
                else:
                    results.append(func(sl, buf))
            return results
        owner = threading.get_ident()

        def run(sl):
            buf = self.buf if threading.get_ident() == owner else self.buffers()
            if not distances:
                return func(sl, buf)
            Xb = self._block(sl, buf)
            return func(sl, Xb, *partial_distances(Xb, self.prepared, buf), buf)

        return map_blocks(run, blocks, max_threads)

    def _block(self, sl, buf):
        """Rows ``sl``, centred (``centred_block``, or a view of centred rows)."""
        if self.centred:
            return self.X[sl]
        return centred_block(self.X, sl, self.offset, buf)


def augmented_block(X, sl, offset, buf):
    """Dense rows ``sl`` of ``X`` minus ``offset``, then a column of ones.

    Against ``[A; bias]`` one GEMM gives the scores with their bias, and
    against weighted rows one product gives ``S`` and ``N`` together.
    """
    b = sl.stop - sl.start
    return augmented_rows(X[sl], offset, buf.Xa[:b])


def augmented_rows(X, offset, out):
    """``X - offset`` with a column of ones, into ``out`` (``augmented_block``)."""
    np.subtract(X, offset, out=out[:, :-1])
    out[:, -1] = 1.0
    return out


class PreparedCenters:
    """Centres in the coordinates of the centred blocks, ready for the GEMM.

    ``minus_2t`` is ``-2 C^T`` (so one matrix product gives ``-2 x . mu``)
    and ``sq`` the squared norms ``||mu_j||^2``.
    """

    def __init__(self, centers, offset, dtype):
        self.C = np.ascontiguousarray(centers - offset, dtype=dtype)
        self.minus_2t = np.ascontiguousarray(-2.0 * self.C.T)
        self.sq = np.einsum("ij,ij->i", self.C, self.C)


def partial_distances(Xb, prepared, buf):
    """``e = ||mu||^2 - 2 X mu^T`` into ``buf.E``; returns ``e``, argmin, min."""
    b = Xb.shape[0]
    E = buf.E[:b]
    if sp.issparse(Xb):
        E[...] = Xb @ prepared.minus_2t
    else:
        matmul(Xb, prepared.minus_2t, out=E)
    E += prepared.sq
    closest = np.argmin(E, axis=1)
    e_closest = E[np.arange(b), closest]
    return E, closest, e_closest


def runner_up(E, labels):
    """Each row's runner-up centre and its partial distance (spoils ``E``).

    ``labels`` are the rows' nearest centres (``partial_distances``); the
    runner-up is the nearest of the others, the lowest index among ties.
    """
    rows = np.arange(E.shape[0])
    E[rows, labels] = np.inf
    second = np.argmin(E, axis=1)
    return second, E[rows, second]


def block_responsibilities(E, closest, e_closest, activation, inv_T, buf, bias=None):
    """Return a block's responsibilities from its partial distances ``E``, in place.

    ``bias`` (a prior's ``-T log p``) is added to ``E`` first. The scores
    ``(e_closest - E) / T`` are shifted so that each row's maximum is 0 (at its
    nearest centre): softmax needs no further shift, ``exp`` never
    overflows and each row sum is at least 1; entmax-1.5 takes them as they
    are (``entmax_rows._sparse_rows``). Statistics-only softmax passes do not
    come here: ``_block_stats`` skips their far scores.
    """
    if bias is not None:
        E += bias
        closest = np.argmin(E, axis=1)
        e_closest = E[np.arange(E.shape[0]), closest]
    U = E
    np.subtract(e_closest[:, None], E, out=U)
    # Far centres at a tiny T overflow to -inf (their exact limit) and at a
    # huge T the products underflow to 0 (uniform responsibilities).
    with np.errstate(over="ignore", under="ignore"):
        U *= inv_T
    if activation == "entmax15":
        return _sparse_rows(U, closest, 1.5, buf.workspace)
    # Scores far below the maximum underflow to 0, and tiny weights divided
    # by the row sum to subnormals or 0: their values at working precision.
    with np.errstate(under="ignore"):
        np.exp(U, out=U)
        U /= matmul(U, buf.ones)[:, None]
    return U


class ScaledCenters:
    """Centres prepared so that one GEMM gives softmax scores directly.

    ``z_ij = x_i . A_j + bias_j`` with ``A = 2 C^T / T`` and ``bias_j =
    -||mu_j||^2 / T + log p_j`` equals ``(-d_ij + ||x_i||^2) / T + log p_j``:
    the scores up to a per-row constant, which the softmax ignores. Compared
    with ``partial_distances`` followed by ``block_responsibilities`` this saves two
    passes over the block (the bias is one pass, the shift by the row maximum
    another). ``usable`` says whether the scaled products stay far from
    overflow; at extreme widths the caller keeps the unscaled path.
    """

    def __init__(self, prepared, T, log_prior, x_sq_max):
        dtype = prepared.C.dtype
        finfo = np.finfo(dtype)
        c_max = math.sqrt(float(prepared.sq.max())) if prepared.sq.size else 0.0
        # |z| T <= 2 |x| |mu| + |mu|^2 (+ T |log p|) bounds every score and
        # every partial sum of the GEMM; compared without dividing by T.
        numer = 2.0 * math.sqrt(x_sq_max) * c_max + c_max**2
        self.usable = bool(math.isfinite(numer) and numer < float(finfo.max) / 1024 * T)
        if not self.usable:
            return
        inv_T = 1.0 / T
        # At a huge width the scaled centres underflow towards 0 (uniform
        # scores): their values at working precision.
        with np.errstate(under="ignore"):
            self.A = np.ascontiguousarray(prepared.C.T * (2.0 * inv_T), dtype=dtype)
            bias = -prepared.sq.astype(np.float64) * inv_T
        # Centres of zero prior mass (bias -inf) must receive exactly nothing,
        # also where the far scores are clamped rather than dropped.
        self.dead = None
        if log_prior is not None:
            bias = bias + log_prior
            dead = np.flatnonzero(np.isneginf(log_prior))
            if dead.size:
                self.dead = dead
                # Finite inside the GEMM (no inf * 0); never near a maximum.
                bias[dead] = -float(finfo.max) / 16
        self.bias = bias.astype(dtype)
        self.A_bias = np.vstack([self.A, self.bias[None, :]])


def scaled_scores(Xb, scaled, buf):
    """Scores ``z = Xb A + bias`` into ``buf.E``; returns them and row maxima.

    ``Xb`` is CSR rows (the bias is added) or an ``augmented_block`` (the
    bias comes with the product).
    """
    b, k = Xb.shape[0], scaled.A.shape[1]
    Z = buf.E[:b]
    if sp.issparse(Xb):
        Z[...] = Xb @ scaled.A
        Z += scaled.bias
    else:
        matmul(Xb, scaled.A_bias, out=Z)
    if k > _COLUMN_MAX_K:
        return Z, Z[np.arange(b), np.argmax(Z, axis=1)]
    # Few columns: one maximum per column beats a row-wise reduction (whose
    # per-row overhead dominates short rows) by a factor of three.
    z_max = np.array(Z[:, 0])
    for j in range(1, k):
        np.maximum(z_max, Z[:, j], out=z_max)
    return Z, z_max


# Up to this many centres, row maxima are taken column by column.
_COLUMN_MAX_K = 24


def far_cut(n_clusters, dtype):
    """``log(2 k / eps)``: scores this far below the maximum weigh nothing.

    Together the ``k - 1`` others weigh less than half an ulp of a row sum
    that is at least 1.
    """
    return float(np.log(2.0 * n_clusters / np.finfo(dtype).eps))


def softmax_weights(Z, z_max, buf, clamp, dead=None, near=None):
    """Unnormalised softmax weights of scaled scores ``Z``; returns ``P``, sums.

    ``P_ij = exp(z_ij - z_max_i)``, written over ``Z``, and its row sums
    (each at least 1). With ``clamp`` the scores more than ``log(2 k / eps)``
    below their row's maximum get exactly 0 (libm's ``exp`` is several times
    slower on arguments that underflow, so they are clamped first and zeroed
    after): together they weigh less than half an ulp of the row sum, and
    the gathered route drops them too. Their value must be 0, not the
    clamp's ``exp(-cut)``: a centre far from every row of a block would
    otherwise collect ``exp(-cut)`` per row and its mean move to the block's.
    ``near`` is the caller's mask of the scores within the cut, when it has
    one (else it is computed here). ``clamp=None`` clamps when the block's
    minimum is below the cut. Columns ``dead`` (zero prior mass) are set to
    exactly 0.
    """
    k = Z.shape[1]
    np.subtract(Z, z_max[:, None], out=Z)
    with np.errstate(under="ignore"):
        cut = far_cut(k, Z.dtype)
        clamp = clamp or (clamp is None and Z.min() < -cut)
        if clamp:
            if near is None:
                near = np.greater_equal(Z, -cut, out=buf.near[: Z.shape[0]])
            np.maximum(Z, -cut, out=Z)
        np.exp(Z, out=Z)
    if clamp:
        # A product with the mask: several times faster than a masked copy.
        np.multiply(Z, near, out=Z)
    if dead is not None:
        Z[:, dead] = 0.0
    return Z, matmul(Z, buf.ones)
