"""The end of a fit: Lloyd, single-sample moves, the polish, the certificate.

Lloyd's algorithm, single-sample moves and KMeans's run have a version for
rows in memory (incremental Lloyd, Hartigan's moves, KMeans's own Lloyd)
and one for dask rows (EM at width 0, one pass an iteration; no single
moves, which need the rows in memory), each chosen here by where the rows
live. ``finish`` is the one final phase: Lloyd to stable labels, then the
moves to a fixed point of all of them; the annealing's final phase runs it
on its rows (``_anneal``), ``finish_on_every_row`` on every row after the
annealing of a sample.
"""

from typing import NamedTuple

from ._hartigan import hartigan
from ._iterations import certify, em_fixed_sigma, stage_tolerance
from ._lloyd import IncrementalLloyd, kmeans_lloyd
from ._polish import Splits, boundary_moves, polish

# Without the polish (a fit's finish on every row after its sample's, or
# ``polish=False``), the single-sample moves make up to ``max_iter`` passes,
# and at least this many: on many rows a late pass moves a few samples near
# the boundaries and, with bounds, costs a small part of a Lloyd iteration,
# but two centres that share a blob can need a hundred of them
# (``AnnealedRBFKMeans(32)`` on 50000 blobs in 16-D from 16 centres: 103
# passes, 0.45 s of a 2.3 s fit, which the default ``max_iter=100`` left
# uncertified).
MIN_MOVE_PASSES = 300


def kmeans(rows, centers, activation, max_iter, tol, verbose=0):
    """KMeans's run from ``centers`` (``sigma=0``): centres, iterations, converged.

    In memory, Lloyd's algorithm exactly as KMeans runs it
    (``_lloyd.kmeans_lloyd``); as KMeans, a run that ``max_iter`` stopped is
    not reported as unconverged. On dask rows, Lloyd's algorithm by EM at
    width 0 with the shift rule (``activation`` chooses the pass's route,
    the same sums to rounding; KMeans's relocation of empty clusters needs
    the rows in memory).
    """
    if rows.in_memory:
        centers, n_iter, _ = kmeans_lloyd(rows, centers, max_iter, tol, verbose)
        return centers, n_iter, True
    return em_fixed_sigma(
        rows, centers, 0.0, activation, max_iter=max_iter, tol=tol, verbose=verbose
    )


def lloyd(rows, centers, max_iter):
    """Lloyd from ``centers`` until the labels are stable (or ``max_iter``).

    Returns the centres, the iterations and whether the labels became
    stable. In memory incremental (``_lloyd.IncrementalLloyd``); on dask
    rows EM at width 0 with ``tol=0`` (entmax-1.5 at a vanishing width is
    exactly one-hot: its EM is Lloyd's, and it stops when no centre moves).
    """
    if rows.in_memory:
        state = IncrementalLloyd(rows, centers)
        n_iter, converged = state.run(max_iter)
        return state.centers, n_iter, converged
    return em_fixed_sigma(rows, centers, 0.0, "entmax15", max_iter=max_iter, tol=0.0)


def single_moves(rows, centers, max_iter):
    """Single-sample moves until none gains (``_hartigan``, ``max_iter`` passes).

    Returns the centres, the moves made and whether the last pass found no
    move (None on dask rows). Dask rows keep their centres: the moves need
    the rows in memory. The fit then ends on Lloyd's fixed point, which the
    certificate's single-move condition may refuse.
    """
    if rows.in_memory:
        centers, _, n_moves, converged = hartigan(rows, centers, max_iter=max_iter)
        return centers, n_moves, converged
    return centers, 0, None


class Finished(NamedTuple):
    """What ``finish`` reached: the centres and how.

    ``n_iter`` counts every Lloyd iteration of the phase, ``n_iter_first``
    those of the first Lloyd run (from the centres given), ``n_iter_last``
    those of the run that produced the centres (the first Lloyd run, or
    the last kept move's); ``n_iter - n_iter_first`` is the cost of the
    moves' trials, kept or not. ``converged`` says that the moves run last
    ended on their fixed point, not stopped by ``max_iter``: Lloyd's stable
    labels, or, where single-sample moves ran (in memory), theirs, which is
    Lloyd's too (where Lloyd stopped at ``max_iter``, the single-sample
    moves can still end on a fixed point). ``moves`` are the polish's kept
    moves, ``n_single`` the single-sample moves made, ``n_boundary`` the
    boundary moves kept; ``budget_spent`` says that the trials used all of
    ``total`` (the search may then have stopped before a fixed point of the
    polish); ``first_converged`` that the first Lloyd run reached stable
    labels.
    """

    centers: object
    n_iter: int
    n_iter_first: int
    n_iter_last: int
    converged: bool
    moves: list
    n_single: int
    n_boundary: int
    budget_spent: bool = False
    first_converged: bool = True


def finish(rows, centers, *, max_iter, polish_moves=False, budget=0, total=None):
    """Lloyd to stable labels, then the moves, to a fixed point of all of them.

    Without ``polish_moves``, single-sample moves (``_hartigan``, up to
    ``max(max_iter, MIN_MOVE_PASSES)`` passes). With it,
    the polish (split/merge moves, each ending on a Lloyd fixed point),
    which runs single-sample moves before its first pass and after every
    move it keeps, so that each pass starts where no single sample gains
    and its last pass, which keeps nothing, proves a fixed point of both;
    then boundary moves (``_polish.boundary_moves``): a search ends at the
    first move kept, or once ``budget`` Lloyd iterations found none; after
    a move kept, the polish again and a new search. ``total`` (None: no
    bound) bounds the Lloyd iterations of all of it together, the polish
    passes after kept boundary moves included: no trial starts once they
    are spent (the one that crosses finishes), and the phase ends where it
    is. Every move kept strictly lowers the distortion, so the searches
    end. The result is a fixed point of the single-sample moves (and of
    Lloyd's) and, unless ``total`` cut it, of the polish, never above the
    one they reached first. Returns a ``Finished``.
    """
    centers, n_iter, first_converged = lloyd(rows, centers, max_iter)
    converged = first_converged
    # Then ``converged``: whether the moves run last ended on a fixed point
    # (the single-sample moves' is Lloyd's too, where Lloyd was stopped).
    n_iter_first = n_iter_last = n_iter
    moves, n_single, n_boundary = [], 0, 0
    # The 2-means of the clusters (polish) and of the unions (boundary
    # moves), kept from search to search.
    clusters, unions = Splits(rows), Splits(rows)

    def left():  # of ``total``, None for no bound
        return None if total is None else max(total - (n_iter - n_iter_first), 0)

    while True:
        if polish_moves:
            centers, _, kept, it_polish, it_move, n_moved, converged = polish(
                rows, centers, max_iter=max_iter, single_moves=True,
                budget=left(), splits=clusters,
            )  # fmt: skip
            n_iter += it_polish
            n_iter_last = it_move if kept else n_iter_last
            moves += kept
        else:
            passes = max(max_iter, MIN_MOVE_PASSES)
            centers, n_moved, settled = single_moves(rows, centers, passes)
            converged = converged if settled is None else settled
        n_single += n_moved
        # Boundary moves start from the fixed point of the moves above, so
        # that one kept can only lower the distortion it reached; after one,
        # the moves above run again.
        search = budget if total is None else min(budget, left())
        if not polish_moves or search <= 0:
            break
        centers, _, shifted, it_move, spent = boundary_moves(
            rows, centers, budget=search, max_iter=max_iter, splits=unions
        )
        n_iter += spent
        if not shifted:
            break
        n_boundary, n_iter_last = n_boundary + 1, it_move
    spent = left() == 0
    return Finished(
        centers, n_iter, n_iter_first, n_iter_last, converged, moves, n_single,
        n_boundary, spent, first_converged,
    )  # fmt: skip


def finish_on_every_row(rows, sample, result, *, hard, max_iter, tol):
    """Finish on every row the annealing ``result`` of a sample of them.

    Returns the result and the final pass's ``(label counts, inertia,
    objective)``; a run on every row (``sample is rows``) is returned as
    it is, with None. The result is first brought into the units of
    ``rows`` when the sample had its own (dask rows).

    ``hard`` (``sigma_end="auto"``): ``finish`` from the sample's centres
    (Lloyd's algorithm until the labels are stable, single-sample moves),
    then the certificate; otherwise EM at the result's width with a stage's
    tolerance (``stage_tolerance``), certified at that width itself. The
    result's path stays the sample's (its energies are the sample's:
    weights that add up to its size); whether it converged is the run's on
    every row, which made its centres.
    """
    if sample is rows:
        return result, None
    if sample.units is not rows.units:
        result = result.to_user(sample.units)
    centers = result.centers
    if hard:
        done = finish(rows, centers, max_iter=max_iter)
        centers, n_iter, converged = done.centers, done.n_iter, done.converged
        sigma, certified = certify(rows, centers, result.sigma)
    else:
        sigma = result.sigma
        centers, n_iter, converged = em_fixed_sigma(
            rows, centers, sigma, result.activation, max_iter=max_iter,
            tol=stage_tolerance(tol, sigma),
        )  # fmt: skip
        certified_sigma, certified = certify(rows, centers, sigma)
        certified = certified and certified_sigma >= sigma
    result = result._replace(
        centers=centers,
        sigma=float(sigma),
        n_iter=result.n_iter + n_iter,
        n_iter_final=n_iter,
        converged=bool(converged),
        certified=bool(certified),
    )
    return result, rows.final(result.centers, result.sigma, result.activation)
