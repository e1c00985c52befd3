"""The estimators' ``fit`` on dask input: glue between them and ``_dask``.

Each function prepares or runs the dask side of a fit against
``_dask.DaskRows`` (the rows interface of ``_rows``) and returns what the
estimator applies; the iterations (``_rows``), the restarts, the fitted
attributes and the warnings are the estimators' own, shared with the NumPy
fit.
"""

from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import _is_arraylike_not_scalar

from ._anneal import AnnealResult
from ._dask import DaskRows, sample_size
from ._rows import certify, em_fixed_sigma, lloyd
from ._scaling import Units


def prepare_rbf_kmeans(est, X, sample_weight):
    """Dask rows of an ``RBFKMeans`` fit, its ``init`` and sample; see Notes.

    Returns ``(rows, init, Xs, ws, tol, random_state)``: the initialisation
    and ``sigma="auto"`` use the in-memory sample ``Xs, ws``; the tolerance
    is scaled by the weighted variance of all rows.
    """
    rows = DaskRows(est, X, sample_weight)
    # Dask rows are not rescaled: the fit works in the user's units.
    est._units = Units()
    est._init_is_array = _is_arraylike_not_scalar(est.init)
    init = est._check_init_array(rows.X) if est._init_is_array else est.init
    random_state = check_random_state(est.random_state)
    Xs, ws, mean_var = rows.sample(
        sample_size(rows.n_samples, est.n_clusters), random_state, variance=True
    )
    return rows, init, Xs, ws, mean_var * est.tol, random_state


def fit_annealed(est, X, sample_weight):
    """``AnnealedRBFKMeans.fit`` on dask input; see its Notes.

    The schedule (splits, merges, polish) runs in memory on a sample, then
    Lloyd's algorithm (or EM at ``sigma_end``) and the certificate on every
    row. Returns ``(rows, result, final)`` for the estimator to apply: the
    rows, an ``AnnealResult`` in the user's units (dask rows are not
    rescaled) whose path is the sample's, and the final pass's
    ``(label counts, inertia, objective)``.
    """
    n_clusters, _ = est._requested_clusters()
    rows = DaskRows(est, X, sample_weight)
    est._units = Units()
    random_state = check_random_state(est.random_state)
    Xs, ws, _ = rows.sample(sample_size(rows.n_samples, n_clusters), random_state)
    sub = clone(est).set_params(random_state=random_state).fit(Xs, sample_weight=ws)
    act = sub._activation
    if est.sigma_end == "auto":
        centers, n_iter, converged = lloyd(rows, sub.cluster_centers_, est.max_iter)
        sigma, certified = certify(rows, centers, sub.sigma_)
    else:
        sigma = float(est.sigma_end)
        T = 2.0 * sigma**2
        centers, n_iter, converged = em_fixed_sigma(
            rows,
            sub.cluster_centers_,
            sigma,
            act,
            max_iter=est.max_iter,
            tol=0.0 if est.tol == 0 else (30 * est.tol) ** 2 * T,
        )
        cert_sigma, certified = certify(rows, centers, sigma)
        certified &= cert_sigma >= sigma
    result = AnnealResult(
        centers=centers,
        sigma=float(sigma),
        n_iter=sub.n_iter_total_ + n_iter,
        n_iter_final=n_iter,
        converged=bool(sub.converged_ and converged),
        certified=bool(certified),
        activation=act,
        sigma_path=sub.sigma_path_,
        centers_path=sub.centers_path_,
        objective_path=sub.objective_path_,
        inertia_path=sub.inertia_path_,
        n_distinct_path=sub.n_distinct_centers_path_,
        activation_path=sub.activation_path_,
        critical_sigmas=sub.critical_sigmas_,
        n_polish_moves=sub.n_polish_moves_,
        split_linkage=sub.split_linkage_,
        count_lifetimes=sub.cluster_count_lifetimes_,
    )
    return rows, result, rows.final(centers, sigma, act)
