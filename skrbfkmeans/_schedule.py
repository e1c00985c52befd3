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

from ._engine.passes import (
    free_energy,
    free_energy_moments,
    labels_margins,
)
from ._iterations import em_fixed_sigma, em_step, stage_tolerance

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
        for i in range(1, max_iter + 1):
            prior = groups.mass / W if self.act == "softmax" else None
            new, res = em_step(
                rows, groups.centers, self.sigma, self.act, prior=prior, inertia=False
            )
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
