"""rbf_kmeans_loss: the RBF free energy and its gradients, as a function."""

from numbers import Real

import numpy as np
import scipy.sparse as sp
from sklearn.utils._param_validation import Interval, StrOptions, validate_params

from ._engine.blocks import ACTIVATIONS
from ._engine.passes import free_energy, gradients, squared_norms
from ._policy import one_blas_thread
from ._rows import _FAR, working_rows, working_units
from ._scaling import Units, centred_magnitude, check_representable, safe_scale, scaled
from ._validation import check_data_centers


def centre_units(X, sample_weight, centers):
    """Rows, offset and centres in working units taken from the centres alone.

    Returns ``(rows, offset, centers, units)`` as ``_rows.working_units``
    does, but for dense rows the centring point (the centres' mean, a shift
    of the rows when it lies far from them, as ``working_units`` decides for
    the data) and the power-of-4 scale come from the centres only, never
    from the rows: a row's loss term and gradient then depend on that row
    and the centres, not on the other rows of the batch. Sparse rows keep
    the engine's offset (``working_units``), which centres only the columns
    the data fill, and so does depend on the batch. Raises a
    ``ValueError`` when the distortion cannot be represented.
    """
    if sp.issparse(X):
        return working_units(X, sample_weight, centers)
    # Centres near the dtype's limits give an infinite mean, which the
    # representability check reports; tiny centres a mean at working
    # precision.
    with np.errstate(over="ignore", under="ignore", invalid="ignore"):
        offset = centers.mean(axis=0)
        far = float(offset @ offset) > _FAR * float(centers.var(axis=0).sum())
    magnitude = centred_magnitude(centers, offset)
    if not magnitude > 0:
        # Coincident centres: their own magnitude sets the scale.
        magnitude = float(np.abs(centers).max())
    check_representable(
        X,
        offset,
        max(magnitude, centred_magnitude(X, offset)),
        float(sample_weight.sum()),
    )
    units = Units(safe_scale(magnitude, X.dtype), offset if far else None)
    if far:
        offset = np.zeros_like(offset)
    rows = working_rows(units, X)
    centers = units.to_working_points(centers)
    return rows, scaled(offset, units.scale), centers, units


@validate_params(
    {
        "X": ["array-like", "sparse matrix"],
        "centers": ["array-like"],
        "sigma": [Interval(Real, 0, None, closed="neither")],
        "activation": [StrOptions(set(ACTIVATIONS))],
        "sample_weight": ["array-like", None],
        "return_gradient": ["boolean"],
    },
    prefer_skip_nested_validation=True,
)
@one_blas_thread
def rbf_kmeans_loss(
    X,
    centers,
    *,
    sigma,
    activation="softmax",
    sample_weight=None,
    return_gradient=False,
):
    """Free energy of RBF K-Means at width ``sigma``, and its gradients.

    The loss of a K-Means layer: differentiable in the centres and in the
    data, it tends to the K-Means distortion as ``sigma -> 0``.

    Parameters
    ----------
    X : {array-like, sparse matrix} of shape (n_samples, n_features)
        The data.
    centers : array-like of shape (n_clusters, n_features)
        The centres.
    sigma : float
        The width, a finite number > 0 (temperature ``T = 2 sigma^2``).
    activation : {"softmax", "entmax15"}, default="softmax"
        The responsibilities' map.
    sample_weight : array-like of shape (n_samples,), default=None
        Non-negative weights of the samples.
    return_gradient : bool, default=False
        Whether to return the gradients too.

    Returns
    -------
    loss : float
        The free energy (see Notes).
    grad_centers : ndarray of shape (n_clusters, n_features)
        ``dloss/dcenters``; only with ``return_gradient=True``.
    grad_X : ndarray of shape (n_samples, n_features)
        ``dloss/dX`` (dense even for sparse ``X``); only with
        ``return_gradient=True``.

    See Also
    --------
    RBFKMeans : Minimises this loss by EM.

    Notes
    -----
    With ``d_ij = ||x_i - mu_j||^2`` and ``T = 2 sigma^2`` the softmax loss is

    ``F(mu, X) = -T sum_i w_i log(mean_j exp(-d_ij / T))``,

    the free energy ``-T sum_i w_i logsumexp_j(-d_ij / T)`` plus the constant
    ``T W log k`` (``W`` the total weight), which changes no gradient and
    keeps the value finite at every width:
    ``J(mu) <= F <= J(mu) + T W log k`` with ``J`` the K-Means distortion.
    The entmax-1.5 loss is
    ``sum_i w_i min_r (<r, d_i> + T (H_max - H_1.5(r)))`` (Tsallis entropy
    ``H_1.5``, maximal value ``H_max``), with the same bounds.

    Both are minima over the responsibilities ``r``, so their gradients
    follow from Danskin's theorem with ``r`` at its optimum:
    ``dF/dmu_j = 2 (N_j mu_j - S_j)`` with ``N_j = sum_i w_i r_ij`` and
    ``S_j = sum_i w_i r_ij x_i``, and ``dF/dx_i = 2 w_i sum_j r_ij (x_i -
    mu_j)``. A gradient step on ``mu_j`` with the learning rate
    ``1 / (2 N_j)`` lands exactly on the EM (M-step) update ``S_j / N_j``;
    with hard responsibilities this is Lloyd's update.

    For dense ``X`` the distances are computed about a point and in units
    taken from the centres alone, so a row's term and gradient depend on
    that row and the centres, not on the other rows passed with it (a row
    far from the others changes no other row's gradient). Sparse ``X`` is
    centred on the columns the data fill, a choice made from the batch.

    Examples
    --------
    >>> import numpy as np
    >>> from skrbfkmeans import rbf_kmeans_loss
    >>> X = np.array([[0.0, 0.0], [0.0, 2.0], [10.0, 0.0], [10.0, 2.0]])
    >>> centers = np.array([[0.0, 1.0], [10.0, 1.0]])
    >>> loss, grad_centers, grad_X = rbf_kmeans_loss(
    ...     X, centers, sigma=0.1, activation="entmax15", return_gradient=True)
    >>> J = 4.0  # the K-Means distortion: every sample is exactly one-hot
    >>> T, W, h_max = 2 * 0.1**2, 4.0, (4 / 3) * (1 - 2**-0.5)
    >>> bool(np.isclose(loss, J + T * W * h_max, rtol=1e-15))  # plus the constant
    True
    >>> grad_centers
    array([[0., 0.],
           [0., 0.]])
    >>> grad_X
    array([[ 0., -2.],
           [ 0.,  2.],
           [ 0., -2.],
           [ 0.,  2.]])
    """
    X, centers, sample_weight = check_data_centers(X, centers, sample_weight)
    # In working units: the loss scales with the square of lengths, the
    # gradients with lengths (the scale is a power of 4: exact).
    X, offset, centers, units = centre_units(X, sample_weight, centers)
    sigma = units.to_working_length(sigma)
    args = (X, sample_weight, centers, sigma, activation, offset)
    x_sq = squared_norms(X, offset)
    res = gradients(*args, x_sq) if return_gradient else free_energy(*args, x_sq)
    loss = float(units.to_user_energy(res.objective))
    if not return_gradient:
        return loss
    # S is accumulated in coordinates centred on the offset.
    grad_centers = 2.0 * (res.N[:, None] * (centers - offset) - res.S)
    grad_centers = units.to_user_distances(grad_centers.astype(X.dtype))
    return loss, grad_centers, units.to_user_distances(res.grad_X)
