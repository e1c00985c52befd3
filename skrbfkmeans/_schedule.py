"""The annealing schedule: its state and steps, critical widths and splits.

``Schedule`` holds the state of a run (the ``Groups`` of coincident centres,
the temperature, the map) and its steps (stage, measure, split, cool; see
``_anneal``); the functions below decide critical temperatures and splits,
with no data passes.

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
import scipy.sparse as sp

from ._engine.blocks import far_cut
from ._engine.passes import (
    PassResult,
    free_energy,
    free_energy_moments,
    labels_margins,
    m_step,
    statistics,
)
from ._hartigan import cluster_sums
from ._iterations import em_fixed_sigma, em_step, stage_tolerance
from ._lloyd import Bounds

# Fraction of the weight that must be one-hot (softmax, to working precision)
# before the schedule hands over to entmax-1.5.
HARD_FRACTION = 0.99


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


class Groups:
    """Distinct centres, their masses, and which group holds each of k copies.

    ``tree`` holds the groups' split widths: ``tree[a, b]`` is the width of
    the split that separated groups ``a`` and ``b`` (0 on the diagonal). A
    merge keeps the larger width of the two rows, so ``tree`` stays an
    ultrametric.
    """

    def __init__(self, centers, mass, owner, tree=None):
        self.centers = centers
        self.mass = mass
        self.owner = owner
        self.tree = np.zeros((self.n, self.n)) if tree is None else tree
        # Removals and splits since the last stage read them (``_OneHotRows``).
        self.changes = []

    @property
    def n(self):
        return self.centers.shape[0]

    def expanded(self):
        return self.centers[self.owner]

    def copy_tree(self):
        """Return the copies' split widths (k x k), from the groups'."""
        return self.tree[np.ix_(self.owner, self.owner)]

    def _remove(self, j, heir, merge=False):
        """Delete group ``j``; its copies go to group ``heir`` (index before)."""
        self.changes.append(("remove", j, heir))
        self.owner[self.owner == j] = heir
        self.owner[self.owner > j] -= 1
        if merge:
            row = np.maximum(self.tree[heir], self.tree[j])
            self.tree[heir], self.tree[:, heir] = row, row
            self.tree[heir, heir] = 0.0
        keep = np.arange(self.n) != j
        self.centers, self.mass = self.centers[keep], self.mass[keep]
        self.tree = self.tree[np.ix_(keep, keep)]

    def merge_close(self, radius):
        """Merge pairs closer than ``radius`` into their mass-weighted mean."""
        while self.n > 1:
            diff = self.centers[:, None, :] - self.centers[None, :, :]
            dist = np.sqrt(np.einsum("ijk,ijk->ij", diff, diff))
            np.fill_diagonal(dist, np.inf)
            i, j = np.unravel_index(np.argmin(dist), dist.shape)
            if dist[i, j] >= radius:
                return
            i, j = min(i, j), max(i, j)
            total = self.mass[i] + self.mass[j]
            if total > 0:
                self.centers[i] = (
                    self.mass[i] * self.centers[i] + self.mass[j] * self.centers[j]
                ) / total
            self.mass[i] = total
            self._remove(j, i, merge=True)

    def drop_light(self, min_mass):
        """Drop groups lighter than ``min_mass``; copies join the nearest group."""
        while self.n > 1 and self.mass.min() < min_mass:
            j = int(np.argmin(self.mass))
            d = ((self.centers - self.centers[j]) ** 2).sum(axis=1)
            d[j] = np.inf
            heir = int(np.argmin(d))
            self._remove(j, heir)

    def split(self, j, left, right, sigma):
        """Replace group ``j`` by two children at width ``sigma``, half mass each.

        The new child takes half of ``j``'s copies, or, if ``j`` holds one
        copy, one copy of the group holding the most (any spare copy is
        coincident with its group, so which one moves is bookkeeping).
        """
        new = self.n
        self.changes.append(("split", j))
        mine = np.flatnonzero(self.owner == j)
        if mine.size >= 2:
            self.owner[mine[mine.size // 2 :]] = new
        else:
            counts = np.bincount(self.owner, minlength=new)
            donor = int(np.argmax(counts))
            self.owner[np.flatnonzero(self.owner == donor)[-1]] = new
        self.centers = np.vstack([self.centers, right[None, :]])
        self.centers[j] = left
        self.mass = np.append(self.mass, 0.5 * self.mass[j])
        self.mass[j] *= 0.5
        tree = np.zeros((new + 1, new + 1))
        tree[:new, :new] = self.tree
        tree[new, :new] = tree[:new, new] = self.tree[j]
        tree[j, new] = tree[new, j] = sigma
        self.tree = tree


# The rows that the groups' shifts leave in doubt get their distances to
# this many groups that moved most (``_OneHotRows._move``).
_MOVERS = 8
# Fewer groups than this take plain EM steps (``_OneHotRows.usable``).
_MIN_GROUPS = 64


class _OneHotRows:
    """Rows whose softmax stays one-hot, from stage to stage.

    At low temperature most rows give all their weight to one group: every
    other group's score is more than ``far_cut`` below, so that their
    weights are below half an ulp of the row's. Such a row adds ``w`` and
    ``w x`` to its group whatever the exact scores. Hamerly's bounds
    (``_lloyd.Bounds``) on each row's distance to its group (``upper``) and
    to every other (``lower``) tell, without distances, that it still does:
    ``(lower^2 - upper^2) / T > cut + log(p_max / p_own)`` puts every other
    score more than ``cut`` below its own. Only the other rows get scores
    (the statistics pass on them), and exact bounds again. The bounds
    follow the groups through the stages (``Groups`` records its removals
    and splits): the groups' moves shift them, a group new since the last
    step (a split's second child) gets its distance to every row, the rows
    the shifts leave in doubt get their distances to the ``_MOVERS`` groups
    that moved most (a split's first child, a merge's mean), and a removed
    group's rows are computed again. A stage whose steps leave more than
    half the rows active turns the bounds off for the next stages (twice
    as many after each such stage). The sums are those of the plain step to
    rounding (the far scores it skips are the ones the frozen rows drop).
    """

    @staticmethod
    def usable(rows, n_groups):
        """Whether to try bounds: dense rows, and enough groups for one-hot rows.

        With fewer than ``_MIN_GROUPS`` groups the temperature is still high
        against the groups' spacing: on 5e4 16-D blobs with k = 128 and 256
        hardly any row was one-hot below 32 groups, 93-100% from 32 on; from
        32 groups the bounds did not pay on bench_quality's grid (k=100) and
        50 blobs in 8-D (2-4% slower fits), from 64 they cost nothing there.
        """
        return n_groups >= _MIN_GROUPS and not sp.issparse(rows.X)

    def __init__(self, rows, centers):
        self.rows = rows
        self.bounds = Bounds(rows, centers.dtype)
        self.own = np.zeros(rows.X.shape[0], dtype=np.intp)
        self.bounds.upper[:] = np.inf
        self.bounds.lower[:] = 0.0
        self.centers = None
        self.active_share, self.fresh = 1.0, True

    def follow(self, changes):
        """Carry the bounds' groups through removals and splits, in order.

        Returns the positions the bounds hold for the groups as they are now
        (NaN rows: groups new since then).
        """
        positions = np.asarray(self.centers, dtype=np.float64)
        upper = self.bounds.upper
        for change in changes:
            if change[0] == "remove":
                _, j, heir = change
                upper[self.own == j] = np.inf  # computed again
                self.own[self.own == j] = heir
                self.own[self.own > j] -= 1
                positions = np.delete(positions, j, axis=0)
            else:  # a split: group j becomes the left child, the right is new
                positions = np.vstack([positions, np.full(positions.shape[1], np.nan)])
        changes.clear()
        return positions

    def em_step(self, centers, sigma, prior, changes):
        """One EM step (``_iterations.em_step`` with ``prior``): centres, sums."""
        rows, bounds = self.rows, self.bounds
        X, w, offset = rows.X, rows.w, rows.offset
        k = centers.shape[0]
        T = 2.0 * sigma**2
        with np.errstate(divide="ignore"):
            log_p = np.log(np.asarray(prior, dtype=np.float64))
        cut = far_cut(k, centers.dtype)
        self.fresh = self.centers is None
        if self.fresh:
            changes.clear()
            one_hot = np.zeros(X.shape[0], dtype=bool)
        else:
            one_hot = self._move(centers, changes, cut + log_p.max() - log_p, T)
        self.centers = centers.copy()
        active = np.flatnonzero(~one_hot)
        self.active_share = active.size / max(one_hot.size, 1)
        # The one-hot rows add w and w x to their own group.
        N, S = cluster_sums(X, w, self.own, offset, k, rows=np.flatnonzero(one_hot))
        if active.size:
            # Every row active (a first step): the rows in place, with the
            # augmented copy the statistics pass keeps.
            every = active.size == one_hot.size
            sub = slice(None) if every else active
            res = statistics(
                X[sub], w[sub], centers, sigma, "softmax", offset, rows.x_sq[sub],
                prior=prior, inertia=False,
                augmented=rows.augmented if every else None,
            )  # fmt: skip
            N, S = N + res.N, S + res.S
            own, e_own, _, e_second = rows.nearest(
                centers, None if every else active, second=True
            )
            self.own[sub] = own
            bounds.update(sub, e_own, e_second)
        return m_step(N, S, centers, offset), PassResult(N, S, 0.0, 0.0, None, None)

    def _move(self, centers, changes, room, T):
        """Move the bounds to ``centers``; which rows are surely one-hot.

        ``room[j]`` is ``cut + log(p_max / p_j)``. The bounds move by the
        groups' shifts (Hamerly: ``lower`` by the largest); a group new
        since the last step gets its distances to every row. The rows that
        this leaves in doubt get their distances to the groups that moved
        most, whose shifts then leave ``lower`` alone.
        """
        bounds, rows = self.bounds, self.rows
        positions = self.follow(changes)
        step = np.asarray(centers, dtype=np.float64) - positions
        shift = np.sqrt(np.einsum("ij,ij->i", step, step))
        new = np.flatnonzero(np.isnan(shift))
        shift[new] = 0.0
        before = bounds.lower.copy()
        bounds.move(self.own, shift)
        d_new = np.inf
        if new.size:
            _, e_new = rows.nearest(centers[new])
            d_new = bounds.below(slice(None), e_new)
            np.minimum(bounds.lower, d_new, out=bounds.lower)
        one_hot = self._one_hot(slice(None), room, T)
        doubt = np.flatnonzero(~one_hot)
        movers = np.argsort(shift)[-_MOVERS:]
        if doubt.size and movers.size < shift.size:
            rest = shift.copy()
            rest[movers] = 0.0
            lower = before[doubt] - rest.max()
            if new.size:
                lower = np.minimum(lower, d_new[doubt])
            lab, e_1, _, e_2 = rows.nearest(centers[movers], doubt, second=True)
            # The nearest mover other than the row's own group.
            e_m = np.where(movers[lab] != self.own[doubt], e_1, e_2)
            bounds.lower[doubt] = np.minimum(lower, bounds.below(doubt, e_m))
            one_hot[doubt] = self._one_hot(doubt, room, T)
        return one_hot

    def _one_hot(self, idx, room, T):
        """Whether rows ``idx`` are surely one-hot (``room``: per group)."""
        lower = np.maximum(self.bounds.lower[idx], 0.0)
        upper = self.bounds.upper[idx]
        with np.errstate(invalid="ignore", over="ignore"):
            return (lower**2 - upper**2) > room[self.own[idx]] * T


class Schedule:
    """The annealing state (groups, temperature, map) and its steps.

    ``stage`` runs EM at the current temperature and merges and drops groups;
    ``measure`` takes the free energy (and, before a split, the moments);
    ``split`` splits the chosen group, or says none has crossed its critical
    temperature; ``cool`` lowers the temperature (or switches softmax to
    entmax-1.5 once hard), or says there is nothing left to do.
    """

    def __init__(
        self, rows, n_clusters, groups, T, activation, final_activation, cooling,
        mass_unit,
    ):  # fmt: skip
        self.rows, self.n_clusters, self.groups = rows, n_clusters, groups
        self.T = T
        # The activation of the stages, and the one the schedule ends with.
        self.act, self.final_act = activation, final_activation
        self.cooling, self.mass_unit = cooling, mass_unit
        self.n_stages, self.bounded_from, self.backoff = 0, 0, 1
        self.one_hot = None

    @property
    def sigma(self):
        return float(np.sqrt(self.T / 2.0))

    def stage(self, max_iter, tol):
        """EM at ``T`` over the groups, then merges and drops; the iterations.

        A stage near a critical width may end at ``max_iter``: the next stage
        continues from where it stopped, so only the final phase decides
        convergence.
        """
        rows, groups = self.rows, self.groups
        move_tol = 30 * tol * np.sqrt(self.T)
        W = float(rows.w.sum())
        it = max_iter
        last_step = None
        self.n_stages += 1
        if (
            self.one_hot is None and self.act == "softmax"
            and self.n_stages >= self.bounded_from
            and _OneHotRows.usable(rows, groups.n)
        ):  # fmt: skip
            self.one_hot = _OneHotRows(rows, groups.centers)
        for i in range(1, max_iter + 1):
            prior = groups.mass / W if self.act == "softmax" else None
            one_hot = self.one_hot if self.act == "softmax" else None
            if one_hot is not None:
                new, res = one_hot.em_step(
                    groups.centers, self.sigma, prior, groups.changes
                )
                if one_hot.active_share > 0.5 and not one_hot.fresh:
                    # Too few rows one-hot yet: plain steps, and no bounds
                    # for a while (twice as long after each such stage).
                    self.one_hot = None
                    self.backoff *= 2
                    self.bounded_from = self.n_stages + self.backoff
            else:
                groups.changes.clear()
                new, res = em_step(
                    rows, groups.centers, self.sigma, self.act, prior=prior,
                    inertia=False,
                )  # fmt: skip
            step = new - groups.centers
            move = float(np.sqrt((step**2).sum(axis=1).max()))
            groups.centers, groups.mass = new, res.N
            if move <= move_tol:
                it = i
                break
            if i % 3 == 0:
                groups.centers = _extrapolate(new, step, last_step)
            last_step = step
        groups.merge_close(0.05 * np.sqrt(self.T))
        groups.drop_light(0.5 * self.mass_unit)
        return it

    def settle(self, max_iter, tol):
        """Plain EM on the k centres at ``T`` (no prior): the model at sigma_end."""
        sigma = self.sigma
        centers, it, conv = em_fixed_sigma(
            self.rows, self.groups.expanded(), sigma, self.act, max_iter=max_iter,
            tol=stage_tolerance(tol, sigma),
        )  # fmt: skip
        k = self.n_clusters
        # Each copy its own group from here; the split widths stay those the
        # annealing recorded (a fresh tree read every split as width 0).
        tree = self.groups.copy_tree()
        self.groups = Groups(centers, np.zeros(k), np.arange(k), tree)
        return it, conv

    def measure(self, last):
        """Return the free energy at ``T``; before a split, the moments too."""
        groups, rows = self.groups, self.rows
        need_split = groups.n < self.n_clusters and not last
        softmax = self.act == "softmax" and not last
        prior = groups.mass / groups.mass.sum() if softmax else None
        # The statistics and moments only feed the split decision.
        energy = free_energy_moments if need_split else free_energy
        return energy(
            rows.X, rows.w, groups.centers, self.sigma, self.act, rows.offset,
            rows.x_sq, prior=prior,
        )  # fmt: skip

    def split(self, res):
        """Split the chosen group and cool; ``None`` if none has crossed.

        Returns True after a split, False when the temperature jumped to
        just below the next critical one, None when no group can split.
        """
        groups, offset = self.groups, self.rows.offset
        lam, vec = weighted_top_eigen(res.moments, res.N, res.S)
        j = choose_split(res.N / self.mass_unit, lam, self.T, self.act)
        if j is not None:
            mu = groups.centers[j] - offset
            left, right = split_children(mu, lam[j], vec[j])
            dtype = groups.centers.dtype
            groups.split(
                j,
                (left + offset).astype(dtype),
                (right + offset).astype(dtype),
                self.sigma,
            )
            self.T *= self.cooling
            return True
        T_c = next_critical_temperature(res.N / self.mass_unit, lam, self.act)
        if T_c <= 0:
            return None  # no group can split: fewer distinct structures than k
        self.T = min(self.cooling * self.T, T_c * (1.0 - 1e-3))
        return False

    def cool(self):
        """With all k centres: halve ``T`` until hard; False when hard."""
        rows = self.rows
        _, margins, _ = labels_margins(rows.X, self.groups.centers, rows.offset)
        if self.act == "softmax":
            hard = softmax_hard_fraction(margins, self.T, rows.w, rows.X.dtype)
            if hard >= HARD_FRACTION:
                if self.final_act == "softmax":
                    return False
                self.act = self.final_act
        elif margins[rows.w > 0].min() >= 2.0 * self.T:
            return False
        self.T *= 0.5
        return True


def _extrapolate(centers, step, last_step):
    """Jump along a slow, straight EM path towards its fixed point.

    Near a critical width EM creeps: successive steps point the same way
    and shrink by a ratio ``rho`` close to 1, so the fixed point lies about
    ``rho / (1 - rho)`` steps ahead. Where the last two steps are nearly
    parallel (cosine above 0.95) and shrinking, jump there, at most 10 steps;
    the stage's next EM steps correct any overshoot. Returns the centres.
    """
    a2, b2 = float((last_step * last_step).sum()), float((step * step).sum())
    if not (a2 > 0 and 0 < b2 < a2):
        return centers
    cosine = float((step * last_step).sum()) / np.sqrt(a2 * b2)
    rho = np.sqrt(b2 / a2)
    if cosine <= 0.95 or rho >= 0.995:
        return centers
    return centers + float(min(rho / (1.0 - rho), 10.0)) * step
