"""Deterministic annealing from the data mean to a certified K-Means solution.

The k centres are tracked as *groups* of coincident copies (doc/theory.rst,
"Annealing: mass constraint, splits and merges"): each group has a centre, a mass
``N_j = sum_i w_i r_ij`` and the copies of the k centres it holds. With
softmax the responsibilities are mass-constrained, ``r_ij ~ p_j exp(-d_ij /
T)`` with ``p_j = N_j / W``, so a group of coincident copies acts as one
centre and costs one column, whatever its number of copies.

One *stage* runs EM at a fixed temperature ``T = 2 sigma^2`` until no centre
moves more than ``30 tol sqrt(T)`` (``3e-3 sqrt(T)`` at the default ``tol``)
or ``max_iter`` iterations. Between stages:

1. groups closer than ``0.05 sqrt(T)`` merge and groups lighter than half a
   unit of weight are dropped (their copies join the nearest group);
2. while fewer than k groups exist, the one group that has crossed its
   critical temperature (``_schedule.choose_split``) with the largest
   ``N_j lambda_max(C_j)`` splits along its principal axis, one split per
   stage, and ``T <- cooling T``; when no group has crossed its critical
   temperature, ``T`` jumps to just below the largest one (nothing changes
   structurally in between);
3. once k groups exist, ``T`` halves per stage until the responsibilities are
   hard (softmax: one-hot to working precision for 99% of the weight; then
   entmax-1.5 stages until every sample is exactly one-hot);
4. Lloyd iterations run until the labels stop changing, and the margin test
   certifies the result: if every sample's margin ``d_(2) - d_(1)`` is at least
   ``4 sigma^2``, entmax-1.5 at ``sigma`` is exactly one-hot and the Lloyd
   fixed point is exactly its fixed point.
"""

from typing import NamedTuple

import numpy as np

from ._engine import free_energy, labels_margins, m_step, moments, statistics
from ._lloyd import kmeans_lloyd, lloyd
from ._polish import polish as polish_search
from ._rows import certify, em_fixed_sigma
from ._schedule import (
    choose_split,
    critical_factor,
    next_critical_temperature,
    softmax_hard_fraction,
    split_children,
    weighted_top_eigen,
)

# Fraction of the weight that must be one-hot (softmax, to working precision)
# before the schedule hands over to entmax-1.5.
HARD_FRACTION = 0.99


class AnnealResult(NamedTuple):
    """The final state and the path of one annealing run."""

    centers: np.ndarray
    sigma: float
    n_iter: int
    n_iter_final: int
    converged: bool
    certified: bool
    activation: str
    sigma_path: np.ndarray
    centers_path: np.ndarray
    objective_path: np.ndarray
    inertia_path: np.ndarray
    n_distinct_path: np.ndarray
    activation_path: np.ndarray
    critical_sigmas: np.ndarray
    n_polish_moves: int


class _Groups:
    """Distinct centres, their masses, and which group holds each of k copies."""

    def __init__(self, centers, mass, owner):
        self.centers = centers
        self.mass = mass
        self.owner = owner

    @property
    def n(self):
        return self.centers.shape[0]

    def expanded(self):
        return self.centers[self.owner]

    def _remove(self, j, heir):
        """Delete group ``j``; its copies go to group ``heir`` (index before)."""
        self.owner[self.owner == j] = heir
        self.owner[self.owner > j] -= 1
        keep = np.arange(self.n) != j
        self.centers, self.mass = self.centers[keep], self.mass[keep]

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
            self._remove(j, i)

    def drop_light(self, min_mass):
        """Drop groups lighter than ``min_mass``; copies join the nearest group."""
        while self.n > 1 and self.mass.min() < min_mass:
            j = int(np.argmin(self.mass))
            d = ((self.centers - self.centers[j]) ** 2).sum(axis=1)
            d[j] = np.inf
            heir = int(np.argmin(d))
            self._remove(j, heir)

    def split(self, j, left, right):
        """Replace group ``j`` by two children, each with half its mass.

        The new child takes half of ``j``'s copies, or, if ``j`` holds one
        copy, one copy of the group holding the most (any spare copy is
        coincident with its group, so which one moves is bookkeeping).
        """
        new = self.n
        self.centers = np.vstack([self.centers, right[None, :]])
        self.centers[j] = left
        self.mass = np.append(self.mass, 0.5 * self.mass[j])
        self.mass[j] *= 0.5
        mine = np.flatnonzero(self.owner == j)
        if mine.size >= 2:
            self.owner[mine[mine.size // 2 :]] = new
        else:
            counts = np.bincount(self.owner, minlength=new)
            donor = int(np.argmax(counts))
            self.owner[np.flatnonzero(self.owner == donor)[-1]] = new


def _weighted_mean(X, w):
    """Return the weighted mean of the rows, a 1 x d array of ``X``'s dtype."""
    mean = np.asarray(X.T @ w, dtype=np.float64).reshape(1, -1) / float(w.sum())
    return mean.astype(X.dtype)


def first_critical_sigma(X, w, offset, x_sq, activation):
    """Default starting width: just above the first critical width.

    With every centre at the weighted mean, the first split happens at
    ``T_c = c lambda_max(Cov_w X)`` (``c`` from ``critical_factor``); the
    schedule starts at ``1.1 T_c``, i.e. ``sigma = sqrt(0.55 T_c)``. Constant
    data (``lambda_max = 0``) gives 1.
    """
    res = moments(X, w, _weighted_mean(X, w), 1.0, "softmax", offset, x_sq)
    lam, _ = weighted_top_eigen(res.moments, res.N, res.S)
    act = "entmax15" if activation == "entmax15" else "softmax"
    T_c = critical_factor(act) * float(lam[0])
    return float(np.sqrt(0.55 * T_c)) if T_c > 0 else 1.0


class _Path:
    """The state after every stage, recorded for the fit's path attributes."""

    def __init__(self):
        self.sigma, self.centers, self.obj = [], [], []
        self.inertia, self.n, self.act = [], [], []
        self.critical = []  # widths at which a group split

    def record(self, sigma, centers, res, n_distinct, activation):
        self.sigma.append(sigma)
        self.centers.append(centers)
        self.obj.append(res.objective)
        self.inertia.append(res.inertia)
        self.n.append(n_distinct)
        self.act.append(activation)

    def result(self, centers, sigma, n_iter, n_iter_final, *args):
        """Return the ``AnnealResult`` of the run, path arrays included.

        ``n_iter`` counts every EM and Lloyd iteration of the run,
        ``n_iter_final`` those of the run that produced ``centers``; ``args``
        are ``converged, certified, activation, moves``.
        """
        converged, certified, activation, moves = args
        return AnnealResult(
            centers=centers,
            sigma=float(sigma),
            n_iter=n_iter,
            n_iter_final=n_iter_final,
            converged=bool(converged),
            certified=bool(certified),
            activation=activation,
            sigma_path=np.array(self.sigma),
            centers_path=np.array(self.centers),
            objective_path=np.array(self.obj),
            inertia_path=np.array(self.inertia),
            n_distinct_path=np.array(self.n, dtype=np.intp),
            activation_path=np.array(self.act, dtype=object),
            critical_sigmas=np.array(self.critical),
            n_polish_moves=moves,
        )


class _Schedule:
    """The annealing state (groups, temperature, map) and its steps.

    ``stage`` runs EM at the current temperature and merges and drops groups;
    ``measure`` takes the free energy (and, before a split, the moments);
    ``split`` splits the chosen group, or says none has crossed its critical
    temperature; ``cool`` lowers the temperature (or switches softmax to
    entmax-1.5 once hard), or says there is nothing left to do.
    """

    def __init__(self, rows, n_clusters, groups, T, activation, cooling, mass_unit):
        self.rows, self.n_clusters, self.groups = rows, n_clusters, groups
        self.T = T
        self.requested = activation  # "auto", "softmax" or "entmax15"
        self.act = "entmax15" if activation == "entmax15" else "softmax"
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
            res = statistics(
                rows.X, rows.w, groups.centers, self.sigma, self.act,
                rows.offset, rows.x_sq, prior=prior, inertia=False,
            )  # fmt: skip
            new = m_step(res.N, res.S, groups.centers, rows.offset)
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
        centers, it, conv = em_fixed_sigma(
            self.rows,
            self.groups.expanded(),
            self.sigma,
            self.act,
            max_iter=max_iter,
            tol=0.0 if tol == 0 else (30 * tol) ** 2 * self.T,
        )
        k = self.n_clusters
        self.groups = _Groups(centers, np.zeros(k), np.arange(k))
        return it, conv

    def measure(self, last):
        """Return the free energy at ``T``; before a split, the moments too."""
        groups, rows = self.groups, self.rows
        need_split = groups.n < self.n_clusters and not last
        softmax = self.act == "softmax" and not last
        prior = groups.mass / groups.mass.sum() if softmax else None
        return free_energy(
            rows.X, rows.w, groups.centers, self.sigma, self.act, rows.offset,
            rows.x_sq, prior=prior,
            # The statistics and moments only feed the split decision.
            with_statistics=need_split,
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
                j, (left + offset).astype(dtype), (right + offset).astype(dtype)
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
                if self.requested == "softmax":
                    return False
                self.act = "entmax15"
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


def _initial_groups(rows, n_clusters, init_centers):
    """One group at the weighted mean, or one group per initial centre."""
    W = float(rows.w.sum())
    if init_centers is None:
        mean = _weighted_mean(rows.X, rows.w)
        return _Groups(mean, np.array([W]), np.zeros(n_clusters, dtype=np.intp))
    return _Groups(
        np.array(init_centers, dtype=rows.X.dtype),
        np.full(n_clusters, W / n_clusters),
        np.arange(n_clusters),
    )


def anneal(
    rows,
    n_clusters,
    *,
    init_centers,
    sigma_start,
    sigma_end,
    cooling,
    activation,
    max_iter,
    tol,
    mass_unit,
    polish=False,
    verbose=0,
):
    """Run the schedule of the module docstring; returns an ``AnnealResult``.

    ``rows`` is a ``_rows.MemoryRows``. ``init_centers=None`` starts from one
    group at the weighted mean (the caller picks ``sigma_start``, e.g. with
    ``first_critical_sigma``). ``sigma_end=None`` cools until certified; a
    float stops there with a plain (no prior) EM on the k centres.
    ``activation`` is "auto", "softmax" or "entmax15"; ``mass_unit`` is the
    weight of one sample for the split and drop thresholds.
    """
    groups = _initial_groups(rows, n_clusters, init_centers)
    sched = _Schedule(
        rows, n_clusters, groups, 2.0 * sigma_start**2, activation, cooling, mass_unit
    )
    T_end = None if sigma_end is None else 2.0 * sigma_end**2
    path = _Path()
    n_iter, converged = 0, True
    max_stages = 20 * n_clusters + 200
    for _ in range(max_stages):
        last = T_end is not None and sched.T <= T_end * (1 + 1e-12)
        if last:
            sched.T = T_end
            it, conv = sched.settle(max_iter, tol)
            converged &= conv
        else:
            it = sched.stage(max_iter, tol)
        n_iter += it
        sigma = sched.sigma
        res = sched.measure(last)
        groups = sched.groups
        path.record(sigma, groups.expanded(), res, groups.n, sched.act)
        if verbose:
            print(
                f"Stage {len(path.sigma) - 1}: sigma {sigma:.4g}, "
                f"{groups.n} distinct centres, {it} iterations, "
                f"objective {res.objective:.6g}, inertia {res.inertia:.6g}."
            )
        if last:
            break
        if groups.n < n_clusters:
            outcome = sched.split(res)  # True: split, False: jumped, None
            if outcome:
                path.critical.append(sigma)
            done = outcome is None
        else:
            done = not sched.cool()
        if done:
            if T_end is None:
                break
            sched.T = T_end  # nothing left to do above the requested width
    else:
        # The stage cap only guards against a schedule that cycles; the final
        # phase below still decides convergence and certification.
        if verbose:
            print(f"Stopped the schedule after {max_stages} stages.")
    if T_end is not None:
        centers = sched.groups.expanded()
        sigma = path.sigma[-1]
        cert_sigma, certified = certify(rows, centers, sigma)
        certified &= cert_sigma >= sigma
        # The last stage is the EM at sigma_end: its iterations are the final run's.
        return path.result(
            centers, sigma, n_iter, it, converged, certified, sched.act, 0
        )
    sigma_cap = path.sigma[-1] / np.sqrt(2.0)
    return _final_phase(
        rows, sched.groups.expanded(), sched.act, sigma_cap, path, n_iter,
        max_iter, polish, verbose,
    )  # fmt: skip


def kmeans_from_init(
    rows, init_centers, *, max_iter, tol, activation, sigma_cap, polish, verbose
):
    """KMeans's run from ``init_centers``, then the final phase; no annealing.

    The fit of an explicit ``init`` (``sigma_start="auto"``): Lloyd's
    algorithm exactly as KMeans runs it (``_lloyd.kmeans_lloyd``: its
    stopping rules with ``tol`` already scaled, its relocation of empty
    clusters), then, when one of its rules stopped it, Lloyd to stable labels,
    the polish and the certificate (at most ``sigma_cap``). When ``max_iter``
    stopped it, KMeans's result is kept as it is (not converged). The path
    has one entry, the final state.
    """
    centers, it, conv = kmeans_lloyd(rows, init_centers, max_iter, tol, verbose)
    act = "softmax" if activation == "softmax" else "entmax15"
    path = _Path()
    if conv:
        return _final_phase(
            rows, centers, act, sigma_cap, path, it, max_iter, polish, verbose
        )
    sigma, certified = certify(rows, centers, sigma_cap)
    res = free_energy(rows.X, rows.w, centers, sigma, act, rows.offset, rows.x_sq)
    path.record(sigma, centers, res, np.unique(centers, axis=0).shape[0], act)
    return path.result(centers, sigma, it, it, False, certified, act, 0)


def _final_phase(
    rows, centers, act, sigma_cap, path, n_iter, max_iter, polish, verbose
):
    """Lloyd to label stability, the polish, the certificate; the result.

    ``n_iter`` counts the iterations before this phase (the annealing's, or
    KMeans's run from an explicit init: that run is then the one ``n_iter_``
    reports, the Lloyd run here only confirming or finishing it).
    """
    from_init = len(path.sigma) == 0
    centers, it, conv = lloyd(rows, centers, max_iter)
    n_moves, it_final = 0, (n_iter if from_init else it)
    if polish:
        # Split/merge moves from the hard solution; each ends on a Lloyd
        # fixed point, and the certificate below is computed afresh.
        centers, _, n_moves, it_polish, it_move = polish_search(
            rows.X, rows.w, centers, rows.offset, rows.x_sq, max_iter=max_iter
        )
        it += it_polish
        it_final = it_move if n_moves else it_final
    sigma, certified = certify(rows, centers, sigma_cap)
    res = free_energy(rows.X, rows.w, centers, sigma, act, rows.offset, rows.x_sq)
    n_distinct = np.unique(centers, axis=0).shape[0]
    path.record(sigma, centers, res, n_distinct, act)
    if verbose:
        print(
            f"Stage {len(path.sigma) - 1}: sigma {sigma:.4g}, Lloyd "
            f"{'converged' if conv else 'stopped'} after {it} iterations, "
            f"{n_moves} polish moves, inertia {res.inertia:.6g}, "
            f"certified {certified}."
        )
    return path.result(
        centers, sigma, n_iter + it, it_final, conv, certified, act, n_moves
    )  # fmt: skip
