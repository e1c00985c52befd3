"""Dask collections: the engine's block passes as one tree reduction each.

The M-step needs only the sufficient statistics ``N`` (k) and ``S`` (k x d),
sums over the rows, so a pass over a dask array maps ``_engine.statistics``
over its row blocks (in the worker processes, when a ``dask.distributed``
client is active) and adds the per-block results in a tree of fan-in
``SPLIT_EVERY``. One ``dask.compute`` per EM iteration brings the
``k x (d + 1)`` statistics to the driver, which runs the M-step and sends the
new (small) centres with the next pass. ``X`` is never gathered.

Every ``compute`` reads each chunk in one task (the chunk has one consumer
in the graph), so a worker holds a few chunks at a time whatever the number
of rows; the setup of a fit reads the data twice: the summary (weights,
column sums and extremes, bad values) and the sample (with the variance).

dask is imported only when a dask collection arrives (``is_dask_collection``
decides from the type's module name): importing the package never imports it.
"""

from dataclasses import dataclass, field
from typing import ClassVar, NamedTuple

import numpy as np

from ._engine.passes import (
    PassResult,
    free_energy,
    labels_inertia,
    responsibilities,
    squared_norms,
    statistics,
)
from ._policy import one_blas_thread
from ._rows import draw_rows, fit_rows, sample_size, weight_points
from ._scaling import Units, centred_magnitude, check_representable, safe_scale
from ._validation import check_weight_counts

INSTALL_HINT = 'pip install "skrbfkmeans[dask]"'

# Fan-in of the tree that adds the per-block statistics: few enough levels
# for thousands of blocks, small enough to spread the additions.
SPLIT_EVERY = 8


def is_dask_collection(X):
    """Whether ``X`` is a dask collection, decided without importing dask."""
    module = type(X).__module__
    return module == "dask" or module.startswith(("dask.", "dask_expr"))


def import_dask():
    """Return ``(dask, dask.array)``, or raise an ImportError saying what to install."""
    try:
        import dask
        import dask.array as da
    except ImportError as exc:
        raise ImportError(
            "A dask collection was passed, but dask.array cannot be imported; "
            f"install the optional dependencies with: {INSTALL_HINT}"
        ) from exc
    return dask, da


# -- validation -------------------------------------------------------------


def as_dask_array(estimator, X, *, reset, check_finite=True):
    """Lazily validate a dask array or DataFrame; returns a dask array.

    Feature names and ``n_features_in_`` are checked (or set, with ``reset``)
    as ``validate_data`` does for NumPy and pandas input. float32 and float64
    are kept, anything else becomes float64 (pandas' missing values ``pd.NA``
    of nullable or object columns become NaN, as in scikit-learn's conversion
    of a pandas frame); the columns are gathered into one chunk so that each
    block holds whole rows. Only the row counts of chunks of unknown size are
    computed here. With ``check_finite`` each block raises scikit-learn's
    error for NaN or infinity when it is computed; a fit checks every block
    in one reduction instead (``DaskRows``).
    """
    from sklearn.utils.validation import _check_feature_names, _check_n_features

    _, da = import_dask()
    if hasattr(X, "to_dask_array"):
        # A dask DataFrame: its empty pandas frame ("meta") carries the column
        # names, and the row counts of its partitions become the chunks.
        _check_feature_names(estimator, X._meta, reset=reset)
        X = X.to_dask_array(lengths=True)
    else:
        _check_feature_names(estimator, X, reset=reset)
    if not isinstance(X, da.Array):
        raise TypeError(f"Expected a dask array or DataFrame, got {type(X).__name__}.")
    if X.ndim != 2:
        raise ValueError(
            f"Expected a 2D dask array, got an array of dimension {X.ndim}."
        )
    X = _as_float(_known_chunks(X))
    if X.numblocks[1] != 1:
        X = X.rechunk({1: -1})
    _check_n_features(estimator, X, reset=reset)
    if X.shape[0] < 1:
        raise ValueError(
            "Found array with 0 sample(s) while a minimum of 1 is required."
        )
    if check_finite:
        X = X.map_blocks(_finite_block, type(estimator).__name__, dtype=X.dtype)
    return X


def _known_chunks(X):
    """``X`` with the row counts of its chunks known (one pass if they are not).

    ``DataFrame.values`` and ``to_dask_array()`` leave them unknown; the
    weights, the sampled rows and the outputs of the predictions are chunked
    like ``X`` and need them.
    """
    if any(np.isnan(c) for c in X.chunks[0]):
        X = X.compute_chunk_sizes()
    return X


def _as_float(X):
    """``X`` as float32 or float64 (kept), anything else as float64."""
    if X.dtype == object:
        return X.map_blocks(_float_block, dtype=np.float64)
    if X.dtype not in (np.float32, np.float64):
        return X.astype(np.float64)
    return X


def _float_block(Xb):
    """Return an object block as float64, pandas' ``pd.NA`` as NaN.

    Nullable pandas columns (``Float64``, ``Int64``) reach dask arrays as
    objects; ``float(pd.NA)`` raises a ``TypeError``, where scikit-learn
    converts a pandas frame's ``pd.NA`` to NaN and names it in its error.
    """
    try:
        return Xb.astype(np.float64)
    except TypeError:
        import pandas as pd  # pd.NA and the objects holding it come from pandas

        return np.where(pd.isna(Xb), np.nan, Xb).astype(np.float64)


def _finite_block(Xb, estimator_name):
    """``Xb`` itself, after scikit-learn's check for NaN and infinity."""
    from sklearn.utils.validation import _assert_all_finite

    _assert_all_finite(Xb, estimator_name=estimator_name, input_name="X")
    return Xb


def raise_not_finite(dtype, has_nan, estimator_name):
    """Raise scikit-learn's ``ValueError`` for NaN (else infinity) in ``X``.

    The words are sklearn's own (``_assert_all_finite``, run on one such
    value): a dask fit reports what a NumPy or pandas fit would.
    """
    from sklearn.utils.validation import _assert_all_finite

    value = np.array([np.nan if has_nan else np.inf], dtype=dtype)
    _assert_all_finite(value, estimator_name=estimator_name, input_name="X")


def _as_dask_weights(sample_weight, X):
    """Weights as a dask array chunked like the rows of ``X``."""
    _, da = import_dask()
    n_samples = X.shape[0]
    if sample_weight is None:
        return da.ones(n_samples, dtype=X.dtype, chunks=(X.chunks[0],))
    if is_dask_collection(sample_weight):
        w = sample_weight
        if hasattr(w, "to_dask_array"):
            w = w.to_dask_array(lengths=True)
        elif w.ndim == 1:
            w = _known_chunks(w)
    elif np.ndim(sample_weight) == 0:
        return da.full(n_samples, sample_weight, dtype=X.dtype, chunks=(X.chunks[0],))
    else:
        w = np.asarray(sample_weight, dtype=X.dtype)
    if w.ndim != 1 or w.shape[0] != n_samples:
        raise ValueError(
            f"sample_weight.shape == {tuple(w.shape)}, expected ({n_samples},)!"
        )
    if isinstance(w, np.ndarray):
        return da.from_array(w, chunks=(X.chunks[0],))
    if w.dtype == object:
        w = w.map_blocks(_float_block, dtype=np.float64)
    return w.astype(X.dtype).rechunk((X.chunks[0],))


def nonempty_blocks(X, w):
    """Delayed ``(X_block, w_block)`` pairs of the row chunks that hold rows.

    A chunk of 0 rows (a filtered dask DataFrame has them) adds nothing to a
    sum over rows: it is left out rather than sent to the block kernels.
    """
    pairs = zip(X.to_delayed().ravel(), w.to_delayed().ravel())
    return [pair for pair, n in zip(pairs, X.chunks[0]) if n]


def computed_blocks(X, sample_weight):
    """Yield ``(X_block, w_block)`` computed, one non-empty row block at a time."""
    dask, _ = import_dask()
    w = _as_dask_weights(sample_weight, X)
    for Xb, wb in nonempty_blocks(X, w):
        yield dask.compute(Xb, wb)


# -- per-block kernels (run on the workers) ----------------------------------


def _add(*parts):
    """Element-wise sum of tuples of arrays and floats."""
    return tuple(sum(items[1:], start=items[0]) for items in zip(*parts))


# The sums of the summary (``_add``), then the extremes and the blocks' weights.
_N_SUMS = 7


def _summary_block(Xb, wb):
    """Return the sums, column extremes and weight of a block (the summary).

    The sums are the total weight, the weighted column sums (float64) and
    the counts of NaN and infinite values of ``X`` and of NaN, infinite and
    negative weights, each kind apart (the error names the kind, as the
    NumPy path's does). Then the column maxima and minima, from which
    ``max |x - offset|`` follows once the offset is known, and the block's
    weight as ``weight_sample`` cumulates it.
    """
    Xb = np.asarray(Xb)
    w64 = wb.astype(np.float64)
    return (
        float(w64.sum()),
        w64 @ Xb,
        int(np.isnan(Xb).sum()),
        int(np.isinf(Xb).sum()),
        int(np.isnan(wb).sum()),
        int(np.isinf(wb).sum()),
        int((wb < 0).sum()),
        Xb.max(axis=0),
        Xb.min(axis=0),
        (_weight_total(wb),),
    )


def _combine_summary(*parts):
    """Join the summaries of consecutive blocks: sums, extremes, block weights."""
    sums = _add(*(p[:_N_SUMS] for p in parts))
    high = np.max([p[_N_SUMS] for p in parts], axis=0)
    low = np.min([p[_N_SUMS + 1] for p in parts], axis=0)
    weights = sum((p[_N_SUMS + 2] for p in parts), start=())
    return (*sums, high, low, weights)


def _sample_block(Xb, wb, rows, offset=None):
    """Return a block's sampled rows, their weights and its weighted variance.

    ``rows`` are the block's row indices to keep (``None``: all of them).
    With an ``offset``, first ``sum_i w_i (x_i - offset)^2`` per feature, in
    float64, over every row of the block: the sample and the variance read
    the block in one task.
    """
    Xb = np.asarray(Xb)
    Xs, ws = (Xb, wb) if rows is None else (Xb[rows], wb[rows])
    if offset is None:
        return Xs, ws
    D = np.asarray(Xb, dtype=np.float64) - offset
    return wb.astype(np.float64) @ (D * D), Xs, ws


def _combine_sample(*parts):
    """Join the samples of consecutive blocks: rows in order, variances added."""
    rows = tuple(np.concatenate(items) for items in zip(*(p[-2:] for p in parts)))
    if len(parts[0]) == 2:
        return rows
    return (_add(*((p[0],) for p in parts))[0], *rows)


@one_blas_thread
def _pass_block(Xb, wb, centers, sigma, activation, offset):
    """Sufficient statistics and hard inertia of one block at width ``sigma``."""
    Xb = np.ascontiguousarray(Xb)
    res = statistics(
        Xb, wb, centers, sigma, activation, offset, squared_norms(Xb, offset)
    )
    return res.N, res.S, res.inertia


@one_blas_thread
def _final_block(Xb, wb, centers, sigma, activation, offset):
    """Label counts, hard inertia and free energy of one block."""
    Xb = np.ascontiguousarray(Xb)
    x_sq = squared_norms(Xb, offset)
    labels, inertia = labels_inertia(Xb, wb, centers, offset, explicit=True)
    counts = np.bincount(labels, minlength=centers.shape[0])
    objective = free_energy(Xb, wb, centers, sigma, activation, offset, x_sq).objective
    return counts, inertia, objective


# The prediction kernels get blocks checked by ``as_dask_array``: a bad value
# is reported when its block runs (prediction is lazy).


def _labels_block(Xb, centers, offset):
    Xb = np.ascontiguousarray(Xb)
    return labels_inertia(Xb, np.ones(Xb.shape[0], Xb.dtype), centers, offset)[0]


def _score_block(Xb, wb, centers, offset):
    Xb = np.ascontiguousarray(Xb)
    return (labels_inertia(Xb, wb, centers, offset, explicit=True)[1],)


def _distances_block(Xb, centers, offset):
    from sklearn.metrics.pairwise import euclidean_distances

    if Xb.shape[0] == 0:
        # An empty chunk (euclidean_distances refuses 0 rows).
        return np.empty((0, centers.shape[0]), dtype=Xb.dtype)
    # Centred, as the NumPy transform: far from the origin distances cancel.
    return euclidean_distances(Xb - offset, centers - offset)


@one_blas_thread
def _proba_block(Xb, centers, sigma, activation, offset):
    Xb = np.ascontiguousarray(Xb)
    resp = np.empty((Xb.shape[0], centers.shape[0]), dtype=Xb.dtype)
    x_sq = squared_norms(Xb, offset)
    return responsibilities(Xb, centers, sigma, activation, offset, x_sq, resp)


def _tree(dask, parts, combine):
    """Combine delayed parts in a tree of fan-in ``SPLIT_EVERY``."""
    merge = dask.delayed(combine, pure=True)
    while len(parts) > 1:
        parts = [
            merge(*parts[i : i + SPLIT_EVERY])
            for i in range(0, len(parts), SPLIT_EVERY)
        ]
    return parts[0]


# -- the rows of a fit ------------------------------------------------------


def dask_rows(X, sample_weight, estimator_name):
    """Return the ``DaskRows`` of a fit: validated rows and weights, one pass.

    ``X`` is a dask array validated by the estimator (``as_dask_array``
    with ``check_finite=False``). One ``compute``, one pass over the data,
    gives the total weight, the weighted column sums (the centring offset,
    float64 then cast to the dtype of ``X``), the counts of non-finite
    values and of NaN, infinite and negative weights, which raise the
    ``ValueError`` the NumPy path raises (``estimator_name`` in sklearn's
    words), the column extremes (the largest value about the offset, which
    must leave the squared distances representable) and the weight of each
    block (for ``weight_sample``).
    """
    dask, _ = import_dask()
    w = _as_dask_weights(sample_weight, X)
    dtype = X.dtype
    # The delayed blocks are built once and reused by every pass, with the
    # index of each one's first row.
    blocks = nonempty_blocks(X, w)
    starts = np.cumsum((0,) + X.chunks[0][:-1])
    starts = starts[np.array(X.chunks[0]) > 0]
    parts = [dask.delayed(_summary_block, pure=True)(Xb, wb) for Xb, wb in blocks]
    summary = dask.compute(_tree(dask, parts, _combine_summary))[0]
    total, colsum, n_nan_X, n_inf_X, n_nan, n_inf, n_neg = summary[:_N_SUMS]
    high, low, block_weights = summary[_N_SUMS:]
    if n_nan_X or n_inf_X:
        raise_not_finite(dtype, n_nan_X > 0, estimator_name)
    check_weight_counts(n_nan, n_inf, n_neg, total, dtype)
    offset = (colsum / total).astype(dtype)
    # Dask rows are not rescaled (a scaled copy of every chunk would be a
    # second graph): outside the working range, a clear error. The column
    # extremes give max |x - offset| exactly: x - offset rounds
    # monotonically in x.
    magnitude = centred_magnitude(np.stack([low, high]), offset)
    check_representable(X, offset, magnitude, total)
    if safe_scale(magnitude, dtype) != 1.0:
        raise ValueError(
            f"The largest value of X about its mean is {magnitude:.3g}: "
            "its squared distances leave the range of "
            f"{np.dtype(dtype).name}. Multiply the dask array X by a "
            f"constant near {1.0 / magnitude:.3g} (or fit it in memory, "
            "which rescales it)."
        )
    return DaskRows(X, w, offset, total, np.array(block_weights), blocks, starts, dask)


@dataclass(frozen=True, eq=False)
class DaskRows:
    """Dask rows of a fit, a frozen record (``dask_rows``), with their passes.

    ``X`` and the weights ``w`` as dask arrays chunked alike, the centring
    ``offset``, the total weight, each non-empty block's weight, the
    delayed ``(X, w)`` blocks with the index of each one's first row, and
    the ``dask`` module. Every pass is one tree reduction over the blocks
    (``reduce``), one ``compute``.
    """

    X: object
    w: object
    offset: np.ndarray
    total_weight: float
    block_weights: np.ndarray
    blocks: list
    starts: np.ndarray
    dask: object
    # The last ``stats`` pass: asked again at the same centres, it costs no
    # pass (the certificate's Lloyd step after Lloyd converged there).
    _cache: dict = field(default_factory=dict, repr=False)

    # Dask rows are not rescaled: the fit works in the user's units.
    units: ClassVar[Units] = Units()
    in_memory: ClassVar[bool] = False
    x_sq: ClassVar[None] = None

    @property
    def dtype(self):
        return self.X.dtype

    @property
    def n_samples(self):
        return self.X.shape[0]

    def reduce(self, block_func, *args, combine=_add, compute=True):
        """``combine`` of ``block_func(X_block, w_block, *args)`` over blocks.

        The arguments (centres, offset) enter the graph once and are shared by
        every block. With ``compute=False`` the delayed result is returned.
        Each block is read by its own task only: a worker holds a few blocks
        at a time.
        """
        dask = self.dask
        args = [dask.delayed(a) if isinstance(a, np.ndarray) else a for a in args]
        func = dask.delayed(block_func, pure=True)
        parts = [func(Xb, wb, *args) for Xb, wb in self.blocks]
        total = _tree(dask, parts, combine)
        return dask.compute(total)[0] if compute else total

    def _local_indices(self, idx):
        """Split sorted row indices ``idx`` into each block's own (local) indices."""
        ends = np.append(self.starts[1:], self.n_samples)
        cuts = np.searchsorted(idx, ends)
        return [
            part - start for part, start in zip(np.split(idx, cuts[:-1]), self.starts)
        ]

    def sample(self, n_sample, random_state, *, variance=False):
        """Draw a uniform sample of rows (all rows, in order, if ``n_sample >= n``).

        Returns the rows and their weights in memory, and with ``variance``
        the mean over features of the weighted variance (for the tolerance),
        all from one ``compute`` in which one task per block takes its rows
        and adds its variance: each block is read once, by one task (the
        blocks without sampled rows are not read without ``variance``).
        Sorted row indices keep each block's rows together.
        """
        if n_sample >= self.n_samples:
            picks = [None] * len(self.blocks)
        else:
            idx = _sample_indices(self.n_samples, n_sample, random_state)
            picks = self._local_indices(idx)
        take = self.dask.delayed(_sample_block, pure=True)
        if variance:
            offset = self.dask.delayed(self.offset)
            parts = [take(*b, p, offset) for b, p in zip(self.blocks, picks)]
        else:
            parts = [
                take(*b, p) for b, p in zip(self.blocks, picks) if p is None or p.size
            ]
        result = self.dask.compute(_tree(self.dask, parts, _combine_sample))[0]
        if variance:
            var, Xs, ws = result
            mean_var = max(float(np.mean(var / self.total_weight)), 0.0)
        else:
            (Xs, ws), mean_var = result, None
        if not ws.any():
            raise ValueError(
                f"The {ws.size} sampled rows all have weight zero; sample more "
                "rows or drop the zero-weight rows."
            )
        return np.ascontiguousarray(Xs), np.ascontiguousarray(ws), mean_var

    def weight_sample(self, n_units):
        """``_rows.weight_sample`` of the rows: ``(rows, counts)`` in memory.

        The chunks' weights (from the summary) are cumulated, each point goes
        to the chunk whose weight holds it, and each chunk draws its rows as
        the NumPy sample does (one ``compute`` for all chunks). Integer
        weights give the NumPy sample exactly; other weights to the rounding
        of the cumulated sums.
        """
        dask = self.dask
        totals = self.block_weights
        ends = np.cumsum(totals)
        points = weight_points(ends[-1], n_units)
        # The chunks are drawn as rows are, by their weights; the points are
        # increasing, so each drawn chunk holds the next ``held`` of them.
        chunks, held = draw_rows(ends, points, totals)
        draw = dask.delayed(_draw_block, pure=True, nout=2)
        parts = [
            draw(*self.blocks[c], ends[c] - totals[c], p)
            for c, p in zip(chunks, np.split(points, np.cumsum(held)[:-1]))
        ]
        parts = dask.compute(*parts)
        Xs = np.concatenate([p[0] for p in parts])
        counts = np.concatenate([p[1] for p in parts])
        return np.ascontiguousarray(Xs), counts

    def stats(self, centers, sigma, activation):
        """Return the ``PassResult`` (``N``, ``S``, inertia) of one reduction.

        The last pass is kept: asked again at the same centres, width and
        activation (the certificate's Lloyd step after Lloyd converged
        there) it costs no pass, and its weights bound the certificate's.
        """
        last = self.last_pass(centers, sigma, activation)
        if last is not None:
            return last
        N, S, inertia = self.reduce(
            _pass_block, centers, sigma, activation, self.offset
        )
        result = PassResult(N, S, inertia, 0.0, None, None)
        self._cache["stats"] = (np.array(centers), (sigma, activation), result)
        return result

    def final(self, centers, sigma, activation):
        """``(label counts, inertia, objective)`` of the final centres."""
        return self.reduce(_final_block, centers, sigma, activation, self.offset)

    def last_pass(self, centers, sigma, activation):
        """Return the last ``stats`` pass if it was at these centres and width.

        Its ``PassResult`` when the last pass was at ``centers``, ``sigma``
        and ``activation``, else None.
        """
        last = self._cache.get("stats")
        if (
            last is not None
            and last[1] == (sigma, activation)
            and np.array_equal(last[0], centers)
        ):
            return last[2]
        return None

    def labels(self, centers):
        """Nearest centre of every row, a lazy int32 dask array."""
        return NewDaskRows(self.X, self.offset).labels(centers)

    def labels_inertia(self, centers):
        """``(label counts, inertia)`` of the centres: one pass."""
        return self.reduce(_final_block, centers, 0.0, "entmax15", self.offset)[:2]

    def reported(self, centers, res):
        """Return a pass's free energy and hard inertia, as the pass gave them.

        ``MemoryRows.reported`` may make a second pass for them; on chunks
        none is made (their offset is the mean: see the user guide).
        """
        return res.objective, res.inertia

    def init_sample(self, n_clusters, random_state, tol, kmeans_rule=False):
        """Rows for the initialisation and the scaled tolerance; one ``compute``.

        A uniform sample of ``sample_size`` rows in memory, and ``tol`` times
        the mean feature variance of all rows, weighted (``kmeans_rule``,
        KMeans's unweighted variance, is not applied on chunks).
        """
        Xs, ws, mean_var = self.sample(
            sample_size(self.n_samples, n_clusters), random_state, variance=True
        )
        return Xs, ws, mean_var * tol

    def annealing_sample(self, n_clusters, init, random_state):
        """Return the rows in memory to anneal on, and ``init`` in their units.

        With ``init="anneal"`` the NumPy fit's sample of ``sample_size``
        units of weight (``weight_sample``: the same rows, so the same fit
        to the rounding of the sums over chunks) unless a few very heavy
        rows leave fewer distinct rows drawn than ``n_clusters``; otherwise a
        uniform sample of ``sample_size`` rows drawn with ``random_state``.
        The sample is brought into its own working units
        (``_rows.fit_rows``), as a NumPy fit of it would be.
        """
        n_sample = sample_size(self.n_samples, n_clusters)
        sample = None
        anneal = isinstance(init, str) and init == "anneal"
        if anneal and n_sample < self.n_samples:
            sample = self.weight_sample(n_sample)
            if sample[0].shape[0] < n_clusters:
                sample = None  # a few very heavy rows: too few distinct rows
        if sample is None:
            sample = self.sample(n_sample, random_state)[:2]
        Xs, ws = sample
        return fit_rows(Xs, ws.astype(Xs.dtype), init)


def _weight_total(w):
    return float(np.sum(w, dtype=np.float64))


def _draw_block(X, w, start, points):
    """Rows of one chunk drawn by ``points`` (its weight starts at ``start``)."""
    cum = start + np.cumsum(w, dtype=np.float64)
    idx, counts = draw_rows(cum, points, w)
    return X[idx], counts


def _sample_indices(n_samples, n_sample, random_state):
    """``n_sample`` distinct row indices, uniform, sorted, in ``O(n_sample)`` memory.

    Duplicates of uniform draws are redrawn: the set is uniform over the
    subsets of its size by symmetry, and nothing of size ``n_samples`` is
    allocated (``choice(replace=False)`` permutes all rows).
    """
    idx = np.unique(random_state.randint(n_samples, size=n_sample))
    while idx.size < n_sample:
        more = random_state.randint(n_samples, size=n_sample - idx.size)
        idx = np.unique(np.concatenate([idx, more]))
    return idx


# -- prediction -------------------------------------------------------------


class NewDaskRows(NamedTuple):
    """Dask rows a fitted model predicts on: lazy passes, as ``_rows.NewRows``.

    ``X`` is a dask array in the model's working units, checked block by
    block (``as_dask_array``); ``offset`` is the fit's.
    """

    X: object
    offset: np.ndarray

    def labels(self, centers):
        """Nearest centre of each row, as a lazy int32 dask array."""
        return self.X.map_blocks(
            _labels_block,
            centers,
            self.offset,
            dtype=np.int32,
            drop_axis=1,
            meta=np.empty(0, dtype=np.int32),
        )

    def distances(self, centers):
        """Distances to the centres, as a lazy dask array (one chunk of columns)."""
        return self.X.map_blocks(
            _distances_block,
            centers,
            self.offset,
            dtype=self.X.dtype,
            chunks=(self.X.chunks[0], (centers.shape[0],)),
        )

    def responsibilities(self, centers, sigma, activation):
        """Responsibilities, as a lazy dask array (one chunk of columns)."""
        return self.X.map_blocks(
            _proba_block,
            centers,
            sigma,
            activation,
            self.offset,
            dtype=self.X.dtype,
            chunks=(self.X.chunks[0], (centers.shape[0],)),
        )

    def inertia(self, centers, sample_weight):
        """Weighted hard inertia of the rows: one compute."""
        dask, _ = import_dask()
        w = _as_dask_weights(sample_weight, self.X)
        func = dask.delayed(_score_block, pure=True)
        c, o = dask.delayed(centers), dask.delayed(self.offset)
        blocks = nonempty_blocks(self.X, w)
        total = _tree(dask, [func(Xb, wb, c, o) for Xb, wb in blocks], _add)
        return float(dask.compute(total)[0][0])
