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

The groups keep their history of splits (the split tree, whose heights are
the widths at which lineages separated); ``count_lifetimes`` measures how
long each count of distinct centres lived along the path, which
``_count`` reads for ``n_clusters="auto"``.
"""

from typing import NamedTuple

import numpy as np
from scipy.cluster.hierarchy import linkage
from scipy.spatial.distance import squareform

from . import _finish
from ._engine.passes import free_energy, moments
from ._iterations import certify
from ._lloyd import kmeans_lloyd
from ._schedule import Groups, Schedule, critical_factor, weighted_top_eigen

# Boundary moves (``_polish``) after the final phase's other moves: a search
# stops once it has spent this share of the annealing's iterations in Lloyd
# iterations without a move kept, and each move kept starts a new search
# (bench_quality's real and hard sets: a total budget of 0.15 gave the same
# inertias for a median +15% of the fit's time, against +12% here; 0.075
# per search left diabetes k=3 above KMeans(n_init=10)).
BOUNDARY_BUDGET = 0.1
# Every trial of the final phase together (the polish's passes, those after
# kept boundary moves included, and the boundary searches) stops once it has
# spent this many times the annealing's iterations in Lloyd iterations, and
# at least FINAL_BUDGET_MIN (a short annealing, k of 3 to 5, would leave its
# polish no room); the run that crosses it finishes. On bench_quality's hard
# and real sets (31 fits) this cut the final phase's Lloyd iterations on 6
# of them (uniform k=16: 2063 to 1041 in all, sheared blobs: 974 to 636,
# standardised breast cancer k=5: 840 to 510) and left every inertia the
# same bits; 1.5 without the floor left standardised digits k=3 0.005% higher,
# above the best of 100 restarts, and 1.0 or 1.2 0.02% higher.
FINAL_BUDGET = 1.5
FINAL_BUDGET_MIN = 300


def start_and_final_activations(activation):
    """Return the activations a fit anneals with and ends with.

    ``"auto"`` anneals with softmax (mass-constrained, with priors) and
    ends with entmax-1.5, which is exactly one-hot at the certified width;
    ``"softmax"`` or ``"entmax15"`` is both.
    """
    if activation == "auto":
        return "softmax", "entmax15"
    return activation, activation


class Settings(NamedTuple):
    """What every run of a fit shares (the estimator's parameters, in working units).

    ``start_activation`` and ``final_activation`` are the requested
    activation resolved (``start_and_final_activations``); ``tol`` the
    schedule's (a stage's move tolerance is ``30 tol sqrt(T)``);
    ``mass_unit`` the weight of one sample for the split and drop rules;
    ``rows_note`` what the ``verbose`` lines say of the rows they describe
    (``" (sample of 10000 rows)"`` when the runs use a sample, else empty)
    and ``units`` the runs' working units (``_scaling.Units``), in which
    the lines give widths and energies back in the user's.
    """

    cooling: float
    start_activation: str
    final_activation: str
    max_iter: int
    tol: float
    mass_unit: float
    polish: bool = True
    verbose: int = 0
    rows_note: str = ""
    units: object = None

    def user_width(self, sigma):
        """Return a working width in the user's units, for a verbose line."""
        return sigma if self.units is None else float(self.units.to_user_length(sigma))

    def user_energy(self, energy):
        """Return a working energy in the user's units, for a verbose line."""
        return (
            energy if self.units is None else float(self.units.to_user_energy(energy))
        )


def counted(n, noun):
    """Return ``n`` with ``noun``, plural unless ``n`` is 1: ``"1 iteration"``."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


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
    split_linkage: np.ndarray
    count_lifetimes: np.ndarray
    # n_clusters="auto": the count choice (``_count.CountChoice``).
    count_choice: object = None

    def to_user(self, units):
        """Return the result with its lengths, energies and centres in the user's units.

        ``units`` are the working units the result is in (``_scaling.Units``);
        counts, iterations and flags are unchanged.
        """
        split_linkage = self.split_linkage.copy()
        split_linkage[:, 2] = units.to_user_length(split_linkage[:, 2])
        return self._replace(
            centers=units.to_user_points(self.centers),
            sigma=float(units.to_user_length(self.sigma)),
            sigma_path=units.to_user_length(self.sigma_path),
            centers_path=units.to_user_points(self.centers_path),
            objective_path=units.to_user_energy(self.objective_path),
            inertia_path=units.to_user_energy(self.inertia_path),
            critical_sigmas=units.to_user_length(self.critical_sigmas),
            split_linkage=split_linkage,
        )


def _weighted_mean(X, w):
    """Return the weighted mean of the rows, a 1 x d array of ``X``'s dtype."""
    mean = np.asarray(X.T @ w, dtype=np.float64).reshape(1, -1) / float(w.sum())
    return mean.astype(X.dtype)


def first_critical_sigma(rows, activation):
    """Default starting width: just above the first critical width.

    With every centre at the weighted mean, the first split happens at
    ``T_c = c lambda_max(Cov_w X)`` (``c`` from ``critical_factor``); the
    schedule starts at ``1.1 T_c``, i.e. ``sigma = sqrt(0.55 T_c)``. Constant
    data (``lambda_max = 0``) gives 1. ``activation`` is the one the
    schedule starts with.
    """
    X, w = rows.X, rows.w
    res = moments(X, w, _weighted_mean(X, w), 1.0, "softmax", rows.offset, rows.x_sq)
    lam, _ = weighted_top_eigen(res.moments, res.N, res.S)
    T_c = critical_factor(activation) * float(lam[0])
    return float(np.sqrt(0.55 * T_c)) if T_c > 0 else 1.0


class _Path:
    """The state after every stage, recorded for the fit's path attributes."""

    def __init__(self):
        self.sigma, self.centers, self.obj = [], [], []
        self.inertia, self.n, self.act = [], [], []
        self.critical = []  # widths at which a group split

    def record(self, rows, sigma, centers, res, n_distinct, activation):
        """Record a stage; return its free energy and inertia as recorded.

        The pass's values, or where their rounding could show in six digits
        the explicit ones (``rows.reported``).
        """
        objective, inertia = rows.reported(centers, res)
        self.sigma.append(sigma)
        self.centers.append(centers)
        self.obj.append(objective)
        self.inertia.append(inertia)
        self.n.append(n_distinct)
        self.act.append(activation)
        return objective, inertia

    def result(
        self, centers, sigma, *, n_iter, n_iter_final, converged, certified,
        activation, moves, tree,
    ):  # fmt: skip
        """Return the ``AnnealResult`` of the run, path arrays included.

        ``n_iter`` counts every EM and Lloyd iteration of the run,
        ``n_iter_final`` those of the run that produced ``centers``; ``moves``
        the polish's; ``tree`` the copies' split widths (stored as a linkage
        matrix); the lifetimes are this path's.
        """
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
            split_linkage=_linkage(tree),
            count_lifetimes=count_lifetimes(self.sigma, self.n),
        )


def _linkage(tree):
    """SciPy linkage matrix of split widths ``tree`` (an ultrametric).

    Single linkage reproduces an ultrametric's heights exactly; leaf ``i``
    is row ``i``. One cluster gives an empty (0, 4) array.
    """
    if tree.shape[0] < 2:
        return np.zeros((0, 4))
    return linkage(squareform(tree, checks=False), method="single")


def _flat_tree(n_clusters, width):
    """Split widths of clusters all separated at ``width`` (no history)."""
    tree = np.full((n_clusters, n_clusters), float(width))
    np.fill_diagonal(tree, 0.0)
    return tree


def _initial_groups(rows, n_clusters, init_centers, sigma_start):
    """One group at the weighted mean, or one group per initial centre.

    Initial centres are distinct from the start: in the split tree they are
    separated at the starting width.
    """
    W = float(rows.w.sum())
    if init_centers is None:
        mean = _weighted_mean(rows.X, rows.w)
        return Groups(mean, np.array([W]), np.zeros(n_clusters, dtype=np.intp))
    return Groups(
        np.array(init_centers, dtype=rows.X.dtype),
        np.full(n_clusters, W / n_clusters),
        np.arange(n_clusters),
        _flat_tree(n_clusters, sigma_start),
    )


def count_lifetimes(sigmas, counts, n_max=None, open_end=False):
    """Lifetime of each count of distinct centres along a path of stages.

    The equilibrium of stage ``s`` (``counts[s]`` distinct centres at width
    ``sigmas[s]``) holds until the next stage, so count ``c`` lives
    ``sum_{s: counts[s] = c} log(sigmas[s] / sigmas[s + 1])``: the lifetimes
    add up to ``log(sigmas[0] / sigmas[-1])``, the log-range of widths
    annealed. ``open_end``: the last stage's count never splits further, it
    lives for ever (``inf``). Returns an array over the counts ``1 ..
    n_max`` (default: the largest count on the path).
    """
    counts = np.asarray(counts, dtype=np.intp)
    n_max = int(counts.max()) if n_max is None else n_max
    steps = np.log(np.asarray(sigmas[:-1]) / np.asarray(sigmas[1:]))
    lifetimes = np.bincount(counts[:-1] - 1, weights=steps, minlength=n_max)
    lifetimes = lifetimes[:n_max].astype(np.float64)  # float, even for one stage
    if open_end:
        lifetimes[counts[-1] - 1] = np.inf
    return lifetimes


def _run_stages(sched, path, settings, *, T_end, max_count=None):
    """Run the stage loop of the module docstring; ``(n_iter, converged, it)``.

    ``max_count`` stops the loop at the first stage with more distinct
    centres. ``it`` is the last stage's iterations.
    """
    n_iter, converged, it = 0, True, 0
    max_stages = 20 * sched.n_clusters + 200
    for _ in range(max_stages):
        last = T_end is not None and sched.T <= T_end * (1 + 1e-12)
        if last:
            sched.T = T_end
            it, conv = sched.settle(settings.max_iter, settings.tol)
            converged &= conv
        else:
            it = sched.stage(settings.max_iter, settings.tol)
        n_iter += it
        sigma = sched.sigma
        res = sched.measure(last)
        groups = sched.groups
        objective, inertia = path.record(
            sched.rows, sigma, groups.expanded(), res, groups.n, sched.act
        )
        if settings.verbose:
            print(
                f"Stage {len(path.sigma) - 1}{settings.rows_note}: sigma "
                f"{settings.user_width(sigma):.4g}, "
                f"{counted(groups.n, 'distinct centre')}, "
                f"{counted(it, 'EM iteration')}, "
                f"objective {settings.user_energy(objective):.6g}, "
                f"inertia {settings.user_energy(inertia):.6g}."
            )
        if last or (max_count is not None and groups.n > max_count):
            break
        if groups.n < sched.n_clusters:
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
        # phase still decides convergence and certification.
        if settings.verbose:
            print(
                f"Stopped the schedule{settings.rows_note} after {max_stages} stages."
            )
    return n_iter, converged, it


def _schedule(rows, n_clusters, settings, init_centers, sigma_start):
    """Return the ``Schedule`` of a run from ``init_centers`` at ``sigma_start``."""
    groups = _initial_groups(rows, n_clusters, init_centers, sigma_start)
    return Schedule(
        rows, n_clusters, groups, 2.0 * sigma_start**2, settings.start_activation,
        settings.final_activation, settings.cooling, settings.mass_unit,
    )  # fmt: skip


def anneal(rows, n_clusters, settings, *, init_centers, sigma_start, sigma_end):
    """Run the schedule of the module docstring; returns an ``AnnealResult``.

    ``rows`` is a ``_rows.MemoryRows``, ``settings`` the fit's ``Settings``.
    ``init_centers=None`` starts from one group at the weighted mean (the
    caller picks ``sigma_start``, e.g. with ``first_critical_sigma``).
    ``sigma_end=None`` cools until certified; a float stops there with a
    plain (no prior) EM on the k centres.
    """
    sched = _schedule(rows, n_clusters, settings, init_centers, sigma_start)
    T_end = None if sigma_end is None else 2.0 * sigma_end**2
    path = _Path()
    n_iter, converged, it = _run_stages(sched, path, settings, T_end=T_end)
    if T_end is not None:
        centers = sched.groups.expanded()
        sigma = path.sigma[-1]
        # Certified at sigma_end itself, or not at all.
        certified_sigma, certified = certify(rows, centers, sigma)
        certified = bool(certified and certified_sigma >= sigma)
        # The last stage is the EM at sigma_end: its iterations are the final run's.
        return path.result(
            centers, sigma, n_iter=n_iter, n_iter_final=it, converged=converged,
            certified=certified, activation=sched.act,
            moves=0, tree=sched.groups.copy_tree(),
        )  # fmt: skip
    return _final_phase(
        rows, sched.groups.expanded(), path, settings, act=sched.act,
        sigma_cap=path.sigma[-1] / np.sqrt(2.0), tree=sched.groups.copy_tree(),
        n_iter=n_iter,
    )  # fmt: skip


def kmeans_from_init(rows, init_centers, settings, *, tol, sigma_cap):
    """KMeans's run from ``init_centers``, then the final phase; no annealing.

    The fit of an explicit ``init`` (``sigma_start="auto"``): Lloyd's
    algorithm exactly as KMeans runs it (``_lloyd.kmeans_lloyd``: its
    stopping rules with ``tol``, KMeans's own already scaled, not the
    schedule's; its relocation of empty clusters), then, when one of its
    rules stopped it, Lloyd to stable labels, the polish and the
    certificate (at most ``sigma_cap``). When ``max_iter``
    stopped it, KMeans's result is kept as it is (not converged). The path
    has one entry, the final state; without splits, every pair of clusters
    is separated at ``sigma_cap`` in the split tree.
    """
    centers, it, conv = kmeans_lloyd(
        rows, init_centers, settings.max_iter, tol, settings.verbose,
        settings.rows_note,
    )  # fmt: skip
    return _final_phase(
        rows, centers, _Path(), settings,
        act=settings.final_activation,
        sigma_cap=sigma_cap, tree=_flat_tree(centers.shape[0], sigma_cap),
        n_iter=it, from_init=True, finish=conv,
    )  # fmt: skip


def _polish_tree(tree, moves, height):
    """Return the copies' split widths after the polish's moves (at ``height``).

    A move ``(j, c)`` takes centre ``j`` out of the tree and makes it the
    sibling of ``c``, split at ``height`` (the final width, below every
    width of the annealing). Returns a new array.
    """
    tree = tree.copy()
    for j, c in moves:
        tree[j], tree[:, j] = tree[c], tree[c]
        tree[j, c] = tree[c, j] = height
        tree[j, j] = 0.0
    return tree


def _final_phase(
    rows, centers, path, settings, *, act, sigma_cap, tree, n_iter,
    from_init=False, finish=True,
):  # fmt: skip
    """Run the final phase: ``_finish.finish``, the certificate, the path.

    ``n_iter`` counts the iterations before this phase (the annealing's, or
    KMeans's run from an explicit init, ``from_init``: that run is then the
    one ``n_iter_`` reports, the Lloyd run here only confirming or finishing
    it). ``finish=False`` (KMeans's run stopped by ``max_iter``) keeps the
    centres as they are: no Lloyd, no polish, not converged. ``tree`` holds
    the copies' split widths before the polish.

    ``_finish.finish`` runs Lloyd to stable labels, then single-sample
    moves, or with ``polish`` the polish and boundary moves within
    ``BOUNDARY_BUDGET`` times ``n_iter`` Lloyd iterations per search and
    ``FINAL_BUDGET`` times ``n_iter`` (at least ``FINAL_BUDGET_MIN``) for
    all their trials together, to a
    fixed point of all of them (or where the budget ends), which the
    certificate then checks afresh.
    """
    done, it, conv, moves = None, 0, False, []
    it_final = n_iter if from_init else 0
    if finish:
        done = _finish.finish(
            rows, centers, max_iter=settings.max_iter, polish_moves=settings.polish,
            budget=int(BOUNDARY_BUDGET * n_iter),  # per search
            total=max(int(FINAL_BUDGET * n_iter), FINAL_BUDGET_MIN),
        )  # fmt: skip
        centers, it, conv, moves = done.centers, done.n_iter, done.converged, done.moves
        # The run that produced the centres (KMeans's from an explicit init,
        # unless a move was kept after it).
        moved = bool(moves) or done.n_boundary > 0
        it_final = n_iter if from_init and not moved else done.n_iter_last
    sigma, certified = certify(rows, centers, sigma_cap)
    res = free_energy(rows.X, rows.w, centers, sigma, act, rows.offset, rows.x_sq)
    n_distinct = np.unique(centers, axis=0).shape[0]
    _, inertia = path.record(rows, sigma, centers, res, n_distinct, act)
    if settings.verbose:
        _print_final_phase(
            len(path.sigma) - 1, settings, sigma, inertia, certified, done
        )
    return path.result(
        centers, sigma, n_iter=n_iter + it, n_iter_final=it_final, converged=conv,
        certified=certified, activation=act, moves=len(moves),
        tree=_polish_tree(tree, moves, sigma),
    )  # fmt: skip


def _print_final_phase(stage, settings, sigma, inertia, certified, done):
    """Print the final phase's line of ``verbose``, each count named for what it counts.

    ``done`` is ``_finish.finish``'s ``Finished`` (None: KMeans's run
    stopped at ``max_iter``, nothing ran). The first Lloyd run (from the
    annealed centres or KMeans's); the Lloyd iterations that the trials of
    the polish and boundary moves cost, kept or not (``n_iter_total_``
    counts them, ``n_iter_`` does not); when a move was kept, the
    iterations of the Lloyd run after the last one (``n_iter_``, unless the
    fit ends on every row).
    """
    if done is None:
        lloyd = "KMeans's run stopped at max_iter: no Lloyd run, no moves"
    else:
        lloyd = (
            f"Lloyd {'converged' if done.first_converged else 'stopped'} after "
            f"{counted(done.n_iter_first, 'iteration')}"
        )
        if settings.polish:
            trials = counted(done.n_iter - done.n_iter_first, "Lloyd iteration")
            trials = f"trials: {trials}"
            if done.moves or done.n_boundary:
                last = counted(done.n_iter_last, "iteration")
                trials += f"; Lloyd after the last kept: {last}"
            if done.budget_spent:
                trials += "; their budget spent"
            lloyd += (
                f"; {counted(len(done.moves), 'polish move')} and "
                f"{counted(done.n_boundary, 'boundary move')} kept ({trials})"
            )
        lloyd += f"; {counted(done.n_single, 'single-sample move')}"
        if not done.converged:
            lloyd += ", not converged within max_iter"
    print(
        f"Stage {stage}{settings.rows_note}, final phase: {lloyd}; sigma "
        f"{settings.user_width(sigma):.4g}, inertia "
        f"{settings.user_energy(inertia):.6g}, certified {certified}."
    )
