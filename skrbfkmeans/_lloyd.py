"""Lloyd's algorithm that recomputes only what a moved centre can change.

After the first iterations of a Lloyd run, and in every trial of the polish,
only a few centres move per iteration. A sample's label can change only if
its own centre moved (then it needs its distances to every centre) or if a
moved centre came at least as close as its own (then it needs the distances
to the moved centres only). ``IncrementalLloyd`` keeps each sample's label
and its partial distance ``e = ||mu||^2 - 2 x . mu`` to its own centre and
applies exactly that rule, so an iteration costs ``n m d + n_m k d`` for
``m`` moved centres holding ``n_m`` samples, instead of ``n k d``.

Most iterations of a Lloyd run (the polish's trials included) move many
centres a little. On dense data in at most 16 features with at most 64
centres (at least 16 on small data; ``_use_bounds``) Hamerly's bounds
(``Bounds``) decide which rows may change label, and only those get their
distances; the rest keep their label without any distance computed.

Labels follow the full pass's rule: the nearest centre, the lowest index
among exact ties (as ``numpy.argmin`` and scikit-learn's Lloyd). Partial
distances computed in different products can round differently, so ``run``
ends with one full pass and carries on from its labels in the rare case
they differ: a converged run is a fixed point of the full assignment. A
trial that ends above the state it was to beat, or on its partition, is
dropped without that pass (``run``): a row within rounding of a tie, which
the pass might have moved, cannot make it win by more than rounding, but
its Lloyd-iteration count can differ from that of plain Lloyd by the
iterations that move would have started. Where every step is a full pass
(small data), a trial whose inertia stays far above that state's for its
pace of descent is abandoned (``HOPELESS``) and dropped as well.

The engine's plain Lloyd (EM with entmax-1.5 at zero width) shares
a sample among exactly tied centres instead, and so moves coincident
centres together; runs that start with coincident centres (the annealing
with fewer distinct groups than clusters) are left to it.
"""

import numpy as np
import scipy.sparse as sp

from ._engine.assign import (
    SMALL_PASS,
    assignment_sums,
    is_small,
    small_distances,
)
from ._engine.blas import matmul
from ._engine.blocks import runner_up
from ._engine.passes import explicit_inertia, inertia_rounding, m_step
from ._iterations import em_fixed_sigma

# An incremental step that would compute more than this share of a full
# pass's distances runs the full pass (which also gives exact sums).
FULL_PASS_SHARE = 0.5

# A trial is abandoned once its inertia is above the ceiling it must beat by
# more than this many times its last iteration's decrease (``run``).
HOPELESS = 20


def _use_bounds(X, n_clusters):
    """Whether Lloyd's steps on dense ``X`` are bounded (``Bounds``).

    A bounded step costs a few passes over a vector of ``n`` and the
    distances of the rows it cannot clear; a full pass ``n k d``. Hamerly's
    one lower bound per row clears most rows where the centres are few
    against the rows and the dimension is low; one centre moving far lowers
    every row's bound, which many centres make likely, and distances
    concentrate in many dimensions. Measured on the polish of
    bench_quality's sets (2026-12-03): 0.6-0.8x the time with 16 to 25
    centres in 2 to 8 features, 1.0-1.06x with 30 to 100 centres or 64
    features, 1.2-1.6x with 3 to 10 centres. Beyond small data
    (``is_small``) bounds pay with fewer centres too: the finish on every
    row of 5e4 16-D blobs with 8 centres, whose Lloyd run creeps for 100
    iterations, took 0.41 s instead of 0.58 s (2026-12-05).
    """
    d = X.shape[1]
    if sp.issparse(X) or d > 16 or n_clusters > 64:
        return False
    return n_clusters >= 16 or not is_small(X, n_clusters)


def _same_partition(labels, other):
    """Whether two labelings split the rows alike, whatever the clusters' names."""
    if np.array_equal(labels, other):
        return True
    k = int(max(labels.max(), other.max())) + 1
    pairs = np.bincount(labels.astype(np.intp) * k + other, minlength=k * k) > 0
    pairs = pairs.reshape(k, k)  # a bijection of names: one pair per row and column
    return pairs.sum() == pairs.any(axis=1).sum() == pairs.any(axis=0).sum()


def _coincident(centers):
    """Whether two centres are equal (neighbours once sorted row by row)."""
    ranked = centers[np.lexsort(centers.T[::-1])]
    return bool((ranked[1:] == ranked[:-1]).all(axis=1).any())


class IncrementalLloyd:
    """The state of a Lloyd run on ``rows`` (a ``_rows.MemoryRows``).

    ``labels`` are valid for ``centers``, and so are the partial distances
    ``e_own`` where ``exact`` (after bounded steps, only those of the rows
    they recomputed); ``N`` and ``S`` are the weight and centred weighted
    sum of every cluster's samples, exact after a full pass and updated by
    the samples that change cluster in between (a run ends on a full pass,
    but for a ``dropped`` trial, whose state is then only to be discarded).
    ``bounds`` (``Bounds``, or None where ``_use_bounds`` says no) are
    valid for ``centers`` too.
    """

    def __init__(self, rows, centers):
        self.rows = rows
        self.bounds = None
        if _use_bounds(rows.X, centers.shape[0]):
            self.bounds = Bounds(rows, np.asarray(centers).dtype)
        self.labels = None
        self._slack = None  # ``rounding_slack``, made once per run
        self._reset(np.array(centers, copy=True))

    def _reset(self, centers):
        """Take ``centers`` and one full pass's labels and exact sums.

        The pass is ``_engine.assign.assignment_sums`` (small data from the
        rows' centred copy, made once: ``MemoryRows.centred``). Returns
        whether a label changed.
        """
        rows, old = self.rows, self.labels
        self.centers = centers
        out = assignment_sums(
            rows.X, rows.w, centers, rows.offset, centred=rows.centred,
            second=self.bounds is not None,
        )  # fmt: skip
        self.labels, self.e_own, self.N, self.S = out[:4]
        if self.bounds is not None:
            self.bounds.update(slice(None), self.e_own, out[4])
        self.exact = True  # labels, partial distances and sums from a full pass
        self.dropped = False
        return old is None or not np.array_equal(self.labels, old)

    def copy(self):
        """Return an independent copy of the state (for a trial move)."""
        new = object.__new__(IncrementalLloyd)
        new.rows = self.rows
        for name in ("centers", "labels", "e_own", "N", "S"):
            setattr(new, name, getattr(self, name).copy())
        new.bounds = None if self.bounds is None else self.bounds.copy()
        new.exact, new.dropped = self.exact, self.dropped
        new._slack = self._slack
        return new

    def _move_samples(self, idx, old):
        """Move samples ``idx`` from clusters ``old`` to their new labels."""
        rows = self.rows
        Xi = rows.X[idx]
        Xi = Xi.toarray() if sp.issparse(Xi) else Xi
        wX = (Xi - rows.offset) * rows.w[idx, None].astype(np.float64)
        w = rows.w[idx].astype(np.float64)
        k = self.N.shape[0]
        new = self.labels[idx]
        self.N += np.bincount(new, weights=w, minlength=k)
        self.N -= np.bincount(old, weights=w, minlength=k)
        np.add.at(self.S, new, wX)
        np.subtract.at(self.S, old, wX)

    def assign(self, moved, shift=None):
        """Relabel after the centres ``moved`` changed; whether a label changed.

        ``shift`` (every centre's displacement since the labels were
        computed, when known) lets a state with bounds take the bounded step.
        """
        if self.bounds is not None:
            if shift is not None:
                return self._bounded_step(shift)
            # Centres moved from outside (a trial move): new bounds.
            return self._reset(self.centers)
        n, k = self.labels.shape[0], self.centers.shape[0]
        own_moved = None
        if not self._full_passes():
            is_moved = np.zeros(k, dtype=bool)
            is_moved[moved] = True
            own_moved = np.flatnonzero(is_moved[self.labels])
        if own_moved is None or (
            own_moved.size * k + n * moved.size > FULL_PASS_SHARE * n * k
        ):
            # Small data, or too much to recompute: one full pass is cheaper.
            return self._reset(self.centers)
        self.exact = False
        old = self.labels.copy()
        # Samples whose centre moved: distances to every centre.
        if own_moved.size:
            lab, e = self.rows.nearest(self.centers, own_moved)
            self.labels[own_moved], self.e_own[own_moved] = lab, e
        # The others: only a moved centre can have come as close, and none
        # can for a row within half its centre's distance to every moved one.
        others = self._near_moved(moved, own_moved)
        lab, e = self.rows.nearest(self.centers[moved], others)
        lab = moved[lab]
        e_own, labels = self.e_own[others], self.labels[others]
        closer = (e < e_own) | ((e == e_own) & (lab < labels))
        closer_rows = others[closer]
        self.labels[closer_rows], self.e_own[closer_rows] = lab[closer], e[closer]
        changed = np.flatnonzero(self.labels != old)
        if changed.size:
            self._move_samples(changed, old[changed])
        return changed.size > 0

    def _near_moved(self, moved, own_moved):
        """Rows not in ``own_moved`` that a ``moved`` centre may have taken.

        Elkan's rule: a row whose distance to its own centre ``a`` is below
        half the distance from ``a`` to every moved centre keeps ``a`` (the
        triangle inequality). Its distance comes from its partial one and
        the centres' by explicit differences; the rounding of both partial
        distances is kept as room (``rounding_slack``), so a row within
        rounding of a tie is always recomputed.
        """
        centers = self.centers.astype(np.float64)
        between = np.sqrt(
            ((centers[:, None, :] - centers[None, moved, :]) ** 2).sum(axis=2)
        )
        between[moved, np.arange(moved.size)] = np.inf  # a centre and itself
        half = 0.5 * between.min(axis=1)
        rows = self.rows
        if self._slack is None:
            self._slack = rounding_slack(rows.x_sq, rows.X.shape[1], self.e_own.dtype)
        own = np.sqrt(np.maximum(rows.x_sq + self.e_own.astype(np.float64), 0.0))
        near = own + 2.0 * self._slack >= half[self.labels]
        near[own_moved] = False
        return np.flatnonzero(near)

    def run(self, max_iter, moved=None, ceiling=None, incumbent=None):
        """Lloyd until no label changes or ``max_iter`` iterations.

        ``moved`` names centres already changed since the labels were
        computed (a trial move): their samples are relabelled first.
        Returns the number of iterations and whether the labels became
        stable (confirmed by one full pass, but for a dropped trial, stable
        by its incremental labels and sums). A trial that ends above
        ``ceiling`` (``above``), or on the partition of the labels
        ``incumbent`` (the one it was to beat, whatever the clusters'
        names: a boundary move can swap two), skips the confirming pass:
        it is ``dropped``, and ``below`` says False. Where every step is a
        full pass, a trial is also dropped, unconverged, at the first
        iteration whose inertia (``_sums_inertia``) is above ``ceiling`` by
        more than ``HOPELESS`` times its decrease since the last iteration.
        """
        if _coincident(self.centers):
            return self._plain(max_iter)
        if moved is not None:
            self.assign(np.asarray(moved, dtype=np.intp))
        n_iter, last = 0, None
        watch = ceiling is not None and self._full_passes()
        while n_iter < max_iter:
            n_iter += 1
            if watch:
                # A trial far above its ceiling that descends slowly is
                # abandoned (``HOPELESS``): dropped, as below.
                now = self._sums_inertia()
                if last is not None and now - ceiling > HOPELESS * (last - now):
                    self.dropped = True
                    return n_iter, False
                last = now
            new = m_step(self.N, self.S, self.centers, self.rows.offset)
            moved = np.flatnonzero((new != self.centers).any(axis=1))
            shift = None
            if self.bounds is not None:
                step = new - self.centers
                shift = np.sqrt(np.einsum("ij,ij->i", step, step, dtype=np.float64))
            self.centers = new
            if moved.size == 0:
                if self.exact:
                    return n_iter, True
                back = incumbent is not None and _same_partition(self.labels, incumbent)
                if back or self.above(ceiling):
                    # Stable by its sums, back where it started or above
                    # the ceiling: dropped unconfirmed (its partial
                    # distances may be stale).
                    self.dropped = True
                    return n_iter, True
                if self._confirmed():
                    return n_iter, True
            else:
                self.assign(moved, shift)
        if self.bounds is not None and not self.exact:
            # Bounded steps leave the partial distances of unchanged rows
            # stale: a full pass (the same labels) makes them exact.
            self._reset(self.centers)
        return n_iter, False

    def _full_passes(self):
        """Whether every step is a full pass (small data, no bounds: ``assign``)."""
        return self.bounds is None and self.labels.size * self.N.size < SMALL_PASS

    def _bounded_step(self, shift):
        """Relabel only the rows whose bounds allow a change.

        ``Bounds.candidates`` names the rows whose nearest centre may have
        changed; they get their distances to every centre (the full pass's
        partial distances of those rows), the others keep their label. The
        partial distances of the others are then stale: the state is not
        exact until the next full pass.
        """
        bounds, rows = self.bounds, self.rows
        cand = bounds.candidates(self.labels, shift)
        if cand.size > FULL_PASS_SHARE * self.labels.size:
            return self._reset(self.centers)
        self.exact = False
        if cand.size == 0:
            return False
        if is_small(rows.X, self.centers.shape[0]):
            E = small_distances(rows.centred()[cand], self.centers, rows.offset)
            lab = np.argmin(E, axis=1)
            e = E[np.arange(cand.size), lab]
            e_second = runner_up(E, lab)[1]
        else:
            lab, e, _, e_second = rows.nearest(self.centers, cand, second=True)
        bounds.update(cand, e, e_second)
        self.e_own[cand] = e
        change = lab != self.labels[cand]
        changed, old = cand[change], self.labels[cand[change]]
        self.labels[cand] = lab
        if changed.size:
            self._move_samples(changed, old)
        return changed.size > 0

    def _confirmed(self):
        """One full pass: whether it gives the same labels.

        The updated sums may differ from the exact ones by rounding, and so
        the centres from the means of the exact sums. When they do, the
        centres become those means, with a full pass of their own: a
        converged state is then the same bits (centres, partial distances,
        inertia) however the run reached its partition, so that a trial of
        the polish that ends on the current partition never seems to win by
        rounding. A pass that changes a label returns False, the state exact.
        """
        if self._reset(self.centers):
            return False
        new = m_step(self.N, self.S, self.centers, self.rows.offset)
        if np.array_equal(new, self.centers):
            return True
        self.centers = new
        return not self._reset(self.centers)

    def _plain(self, max_iter):
        """Run the engine's plain Lloyd (coincident centres move together)."""
        centers, n_iter, converged = em_fixed_sigma(
            self.rows, self.centers, 0.0, "entmax15", max_iter=max_iter, tol=0.0
        )
        self._reset(centers)
        return n_iter, converged

    def above(self, ceiling):
        """Whether the partition's inertia is above ``ceiling`` beyond rounding.

        For a state whose centres are its clusters' means (a run that has
        stopped moving): the inertia from the sums, ``sum w |x|^2 - sum_j
        |S_j|^2 / N_j`` (centred), which needs no distances, so that a
        trial that ends above the incumbent's ceiling is dropped without
        the full pass that would confirm it. The margin is four times the
        inertias' rounding bound (``inertia_rounding``), which covers the
        cancellation of the difference. False where ``ceiling`` is None.
        """
        if ceiling is None:
            return False
        return self._sums_inertia() - 4.0 * self.inertia_rounding() > ceiling

    def _sums_inertia(self):
        """Return the inertia of the labels at their means, from the sums.

        ``sum w |x|^2 - sum_j |S_j|^2 / N_j`` (centred): no distances.
        """
        alive = self.N > 0
        S = self.S[alive]
        mean_sq = float(np.sum(np.einsum("ij,ij->i", S, S) / self.N[alive]))
        return self.rows.weighted_norms()[1] - mean_sq

    def inertia(self):
        """Weighted inertia of the current labels (not of a dropped trial)."""
        assert not self.dropped, "a dropped trial's partial distances may be stale"
        d = np.maximum(self.rows.x_sq + self.e_own, 0.0)
        return float(matmul(self.rows.w, d))

    def inertia_rounding(self):
        """Return a bound on the rounding error of :meth:`inertia`.

        ``_engine.passes.inertia_rounding`` of the rows' distances to their
        labelled centres. A move whose gain is below it cannot be told from
        rounding.
        """
        rows = self.rows
        mo = self.centers.astype(np.float64) - rows.offset
        mu_sq = np.einsum("ij,ij->i", mo, mo)[self.labels]
        norms = float(rows.w @ (rows.x_sq + mu_sq))
        return inertia_rounding(norms, rows.X.shape[1], self.e_own.dtype)

    def ceiling(self):
        """Return the inertia a rival must beat: ours less its rounding bound."""
        return self.inertia() - self.inertia_rounding()

    def below(self, ceiling):
        """Whether the inertia, plus its rounding bound, is below ``ceiling``.

        With ``ceiling`` another state's (:meth:`ceiling`), whether this
        state is lower beyond the rounding of both inertias. A ``dropped``
        trial is not.
        """
        if self.dropped:
            return False
        return self.inertia() + self.inertia_rounding() < ceiling


def rounding_slack(x_sq, n_features, dtype):
    """Room for the rounding of a distance from partial distances (``Bounds``)."""
    eps = float(np.finfo(dtype).eps)
    scale_sq = 2.0 * float(np.max(x_sq)) if np.size(x_sq) else 0.0
    return 4.0 * np.sqrt(8.0 * (n_features + 2) * eps * scale_sq)


class Bounds:
    """Hamerly's bounds: which rows' nearest centre can have changed.

    ``upper`` bounds each row's distance to its own centre from above,
    ``lower`` its distance to every other centre from below. When the
    centres move by ``shift``, the triangle inequality gives ``upper +=
    shift[own]`` and ``lower -= max(shift)`` (Hamerly takes the largest
    shift among the other centres: tighter for one row in ``k``, a pass
    more); a row whose ``upper`` stays below ``lower`` keeps its nearest
    centre. The distances come from the engine's partial distances, whose
    rounding is at most ``eps (|x|^2 + |mu|^2)`` times a small factor in the
    squared distance, hence at most its square root in the distance:
    ``slack`` (with the centres inside the data's hull, ``|mu| <= max |x|``
    in the centred coordinates) covers it, and ``lower`` is stored less it,
    so a row within rounding of a tie is always recomputed. The constants
    are made once per run and shared by its copies; ``update`` sets the
    bounds from partial distances.
    """

    def __init__(self, rows, dtype):
        self.x_sq = np.asarray(rows.x_sq, dtype=np.float64)
        self.slack = rounding_slack(self.x_sq, rows.X.shape[1], dtype)
        n = self.x_sq.shape[0]
        self.upper, self.lower = np.empty(n), np.empty(n)

    def _distance(self, idx, e):
        return np.sqrt(np.maximum(self.x_sq[idx] + e, 0.0))

    def below(self, idx, e):
        """Return a lower bound of rows ``idx``'s distances from partial ones ``e``."""
        return self._distance(idx, e) - self.slack

    def copy(self):
        new = object.__new__(Bounds)
        new.x_sq, new.slack = self.x_sq, self.slack
        new.upper, new.lower = self.upper.copy(), self.lower.copy()
        return new

    def move(self, labels, shift):
        """Move the bounds by the centres' ``shift`` (rows in clusters ``labels``)."""
        self.upper += shift[labels]
        self.lower -= shift.max()

    def candidates(self, labels, shift):
        """Move the bounds by the centres' ``shift``; the rows to recompute."""
        self.move(labels, shift)
        return np.flatnonzero(self.upper >= self.lower)

    def set(self, idx, own, other):
        """Set the bounds of rows ``idx`` from distances to own and other centres."""
        self.upper[idx] = own
        self.lower[idx] = other - self.slack

    def update(self, idx, e_own, e_second):
        """Exact bounds of rows ``idx`` from their partial distances."""
        self.set(idx, self._distance(idx, e_own), self._distance(idx, e_second))


def _relocate_empty(rows, labels, centers, N, S):
    """Give each empty cluster the sample farthest from its centre, as KMeans.

    The farthest samples (by distance to their own centre, in decreasing
    order; explicit differences, as KMeans, so that duplicated points tie
    exactly) each move with their weight from their cluster's sums to an
    empty cluster's; labels are left as they are (KMeans's rule). Where every
    sample sits on its centre (more clusters than distinct samples) nothing
    moves.
    """
    empty = np.flatnonzero(N == 0)
    if empty.size == 0:
        return
    X = rows.X
    if sp.issparse(X):
        diff = np.asarray(X - centers[labels])
    else:
        # In coordinates centred on the unweighted mean, as KMeans works:
        # duplicated points leave many distances equal but for that rounding,
        # which decides which sample is farthest.
        mean = X.mean(axis=0)
        diff = (X - mean) - (centers[labels] - mean)
    d_own = np.einsum("ij,ij->i", diff, diff)
    if d_own.max() == 0:
        return  # more clusters than distinct samples: nothing to move
    far = np.argpartition(d_own, -empty.size)[: -empty.size - 1 : -1]
    w = rows.w.astype(np.float64)
    for j, i in zip(empty, far):
        x = X[i]
        x = (x.toarray().ravel() if sp.issparse(X) else x) - rows.offset
        old = labels[i]
        S[old] -= w[i] * x
        N[old] -= w[i]
        S[j] = w[i] * x
        N[j] = w[i]


def kmeans_lloyd(rows, centers, max_iter, tol, verbose=0, rows_note=""):
    """Lloyd's algorithm exactly as scikit-learn's KMeans runs it.

    The zero-width limit of ``RBFKMeans``: each iteration assigns every
    sample to its nearest centre (lowest index on ties), relocates empty
    clusters to the samples farthest from their centres, and moves every
    centre to its cluster's weighted mean (a cluster still empty to the
    heaviest cluster's). It stops at *strict convergence*
    (the labels did not change) or when the summed squared centre shift is
    at most ``tol`` (already scaled as KMeans scales it), or after
    ``max_iter`` iterations. Prints KMeans's lines with ``verbose``
    (``rows_note`` after the iteration, e.g. ``" (sample of 10000 rows)"``).

    Returns the centres, the number of iterations and whether one of the two
    convergence rules stopped the run (False: ``max_iter`` did).
    """
    labels_old = np.full(rows.X.shape[0], -1, dtype=np.intp)
    n_iter, converged = 0, False
    for n_iter in range(1, max_iter + 1):
        labels, e_own, N, S = assignment_sums(
            rows.X, rows.w, centers, rows.offset, centred=rows.centred
        )
        if verbose:
            # As KMeans prints it: the labels' explicit inertia, user units.
            inertia = explicit_inertia(rows.X, rows.w, centers, labels)
            inertia = float(rows.units.to_user_energy(inertia))
            print(f"Iteration {n_iter - 1}{rows_note}, inertia {inertia}.")
        _relocate_empty(rows, labels, centers, N, S)
        new = m_step(N, S, centers, rows.offset)
        # A cluster still empty joins the heaviest one, as in KMeans.
        new[N <= 0] = new[np.argmax(N)]
        shift = float(((new - centers) ** 2).sum())
        centers = new
        if np.array_equal(labels, labels_old):
            if verbose:
                print(f"Converged at iteration {n_iter - 1}: strict convergence.")
            converged = True
            break
        if shift <= tol:
            if verbose:
                user = rows.units.to_user_energy
                print(
                    f"Converged at iteration {n_iter - 1}: center shift "
                    f"{float(user(shift))} within tolerance {float(user(tol))}."
                )
            converged = True
            break
        labels_old = labels
    return centers, n_iter, converged
