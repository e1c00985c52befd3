"""The runs that end a fit on every row, each chosen by where the rows live.

Lloyd's algorithm, single-sample moves and KMeans's run have a version for
rows in memory (incremental Lloyd, Hartigan's moves, KMeans's own Lloyd)
and one for dask rows (EM at width 0, one pass an iteration; no single
moves, which need the rows in memory). ``finish`` runs them, then the
certificate, on every row after the annealing of a sample.
"""

from ._hartigan import hartigan
from ._iterations import certify, em_fixed_sigma, stage_tolerance
from ._lloyd import IncrementalLloyd, kmeans_lloyd


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
    """Centres after single-sample moves until none gains (``_hartigan``).

    Dask rows keep their centres: the moves need the rows in memory. The
    fit then ends on Lloyd's fixed point, which the certificate's
    single-move condition may refuse.
    """
    if rows.in_memory:
        return hartigan(rows, centers, max_iter=max_iter)[0]
    return centers


def finish(rows, sample, result, *, hard, max_iter, tol):
    """Finish on every row the annealing ``result`` of a sample of them.

    Returns the result and the final pass's ``(label counts, inertia,
    objective)``; a run on every row (``sample is rows``) is returned as
    it is, with None. The result is first brought into the units of
    ``rows`` when the sample had its own (dask rows).

    ``hard`` (``sigma_end="auto"``): Lloyd's algorithm from the sample's
    centres until the labels are stable, single-sample moves, then the
    certificate; otherwise EM at the result's width with a stage's
    tolerance (``stage_tolerance``), certified at that width itself. The
    result's path stays the sample's (its energies are the sample's:
    weights that add up to its size).
    """
    if sample is rows:
        return result, None
    if sample.units is not rows.units:
        result = result.to_user(sample.units)
    centers = result.centers
    if hard:
        centers, n_iter, converged = lloyd(rows, centers, max_iter)
        centers = single_moves(rows, centers, max_iter)
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
        converged=bool(result.converged and converged),
        certified=bool(certified),
    )
    return result, rows.final(result.centers, result.sigma, result.activation)
