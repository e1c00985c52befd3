"""The estimators' ``fit`` on dask input: glue between them and ``_dask``.

Each function mirrors the NumPy ``fit`` step for step, with the passes of
``_dask.DaskRows`` in place of the in-memory engine, and sets the same fitted
attributes (``labels_`` stays a lazy dask array). The restarts and the
convergence warning are the estimators' own (``_best_of_inits``,
``_warn_not_converged``).
"""

import numpy as np
from sklearn.base import clone
from sklearn.utils import check_random_state
from sklearn.utils.validation import _is_arraylike_not_scalar

from ._dask import DaskRows, certify, em_fixed_sigma, predict, sample_size


def fit_rbf_kmeans(est, X, sample_weight):
    """``RBFKMeans.fit`` on dask input; see ``RBFKMeans`` Notes."""
    rows = DaskRows(est, X, sample_weight, est.n_clusters)
    # Dask rows are not rescaled: the fit works in the user's units.
    est._scale = 1.0
    est._init_is_array = _is_arraylike_not_scalar(est.init)
    init = est._check_init_array(rows.X) if est._init_is_array else est.init
    n_init = est._resolve_n_init()
    random_state = check_random_state(est.random_state)
    Xs, ws, mean_var = rows.sample(
        sample_size(rows.n_samples, est.n_clusters), random_state, variance=True
    )
    tol = mean_var * est.tol

    def run(centers, sigma):
        centers, n_iter, converged = em_fixed_sigma(
            rows,
            centers,
            sigma,
            est.activation,
            max_iter=est.max_iter,
            tol=tol,
            verbose=est.verbose,
        )
        final = rows.final(centers, sigma, est.activation)
        return final[2], centers, n_iter, converged, final

    sigma, best = est._best_of_inits(Xs, ws, init, n_init, random_state, run)
    _, centers, est.n_iter_, est.converged_, final = best
    counts, est.inertia_, est.objective_ = final
    est.sigma_ = sigma
    est._warn_not_converged(stacklevel=4)
    _set_fitted(est, rows, centers, counts, sigma)
    return est


def fit_annealed(est, X, sample_weight):
    """``AnnealedRBFKMeans.fit`` on dask input; see its Notes."""
    rows = DaskRows(est, X, sample_weight, est.n_clusters)
    est._scale = 1.0
    random_state = check_random_state(est.random_state)
    Xs, ws, _ = rows.sample(sample_size(rows.n_samples, est.n_clusters), random_state)
    # The schedule (splits, merges, polish) runs in memory on the sample...
    sub = clone(est).set_params(random_state=random_state).fit(Xs, sample_weight=ws)
    act = sub._activation
    # ... and the final phase on every row.
    if est.sigma_end == "auto":
        centers, n_iter, converged = em_fixed_sigma(
            rows, sub.cluster_centers_, 0.0, "entmax15", max_iter=est.max_iter, tol=0.0
        )
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
    counts, est.inertia_, est.objective_ = rows.final(centers, sigma, act)
    est._activation = act
    est.sigma_ = float(sigma)
    est.n_iter_ = sub.n_iter_ + n_iter
    est.converged_ = bool(sub.converged_ and converged)
    est.certified_ = bool(certified)
    for name in (
        "sigma_path_",
        "centers_path_",
        "objective_path_",
        "inertia_path_",
        "n_distinct_centers_path_",
        "activation_path_",
        "critical_sigmas_",
        "n_polish_moves_",
    ):
        setattr(est, name, getattr(sub, name))
    est._warn_not_converged(": the final phase", stacklevel=4)
    _set_fitted(est, rows, centers, counts, sigma)
    return est


def _set_fitted(est, rows, centers, counts, sigma):
    """``_BaseRBFKMeans._set_fitted`` for dask rows: ``labels_`` stays lazy."""
    est.cluster_centers_ = centers
    est._n_features_out = centers.shape[0]
    est._offset = rows.offset
    est.labels_ = predict(rows.X, centers, rows.offset)
    est._warn_distinct(int(np.count_nonzero(counts)), sigma)
