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
from ._scaling import Units


def prepare_rbf_kmeans(est, X, sample_weight):
    """Dask rows of an ``RBFKMeans`` fit, its ``init`` and sample; see Notes.

    Returns ``(rows, units, init, Xs, ws, tol, random_state)``: dask rows
    are not rescaled (the fit works in the user's units); the initialisation
    and ``sigma="auto"`` use the in-memory sample ``Xs, ws``; the tolerance
    is scaled by the weighted variance of all rows.
    """
    rows = DaskRows(est, X, sample_weight)
    est._init_is_array = _is_arraylike_not_scalar(est.init)
    init = est._check_init_array(rows.X) if est._init_is_array else est.init
    random_state = check_random_state(est.random_state)
    Xs, ws, mean_var = rows.sample(
        sample_size(rows.n_samples, est.n_clusters), random_state, variance=True
    )
    return rows, Units(), init, Xs, ws, mean_var * est.tol, random_state


def fit_annealed(est, X, sample_weight):
    """``AnnealedRBFKMeans.fit`` on dask input; see its Notes.

    The schedule (splits, merges, polish) runs in memory on a sample, then
    Lloyd's algorithm (or EM at ``sigma_end``) and the certificate on every
    row (``est._finish_sample_fit``, shared with the NumPy fit of many
    rows). With ``init="anneal"`` the sample is the NumPy fit's
    (``DaskRows.weight_sample``: the same rows, so the same fit to the
    rounding of the sums over chunks); with another ``init``, a uniform
    sample of rows drawn with ``random_state``. Returns ``(rows, result)``
    for the estimator to apply: the rows and an ``AnnealResult`` in the
    user's units (dask rows are not rescaled: ``Units()``) whose path is the
    sample's.
    """
    n_clusters, _ = est._requested_clusters()
    rows = DaskRows(est, X, sample_weight)
    random_state = check_random_state(est.random_state)
    n_sample = sample_size(rows.n_samples, n_clusters)
    sample = None
    if isinstance(est.init, str) and est.init == "anneal" and n_sample < rows.n_samples:
        sample = rows.weight_sample(n_sample)
        if sample[0].shape[0] < n_clusters:
            sample = None  # a few very heavy rows: too few distinct rows drawn
    if sample is None:
        sample = rows.sample(n_sample, random_state)[:2]
    sub = clone(est).set_params(random_state=random_state)
    sub.fit(sample[0], sample_weight=sample[1].astype(sample[0].dtype))
    return rows, est._finish_sample_fit(rows, _fitted_result(sub))


def _fitted_result(est):
    """Return the ``AnnealResult`` of a fitted ``AnnealedRBFKMeans`` (user units)."""
    return AnnealResult(
        centers=est.cluster_centers_,
        sigma=est.sigma_,
        n_iter=est.n_iter_total_,
        n_iter_final=est.n_iter_,
        converged=est.converged_,
        certified=est.certified_,
        activation=est._activation,
        sigma_path=est.sigma_path_,
        centers_path=est.centers_path_,
        objective_path=est.objective_path_,
        inertia_path=est.inertia_path_,
        n_distinct_path=est.n_distinct_centers_path_,
        activation_path=est.activation_path_,
        critical_sigmas=est.critical_sigmas_,
        n_polish_moves=est.n_polish_moves_,
        split_linkage=est.split_linkage_,
        count_lifetimes=est.cluster_count_lifetimes_,
    )
