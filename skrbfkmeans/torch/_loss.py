"""The RBF K-Means free energy as a PyTorch function, with its Danskin backward.

Distances come from :mod:`._geometry`: each row in its own units, centred on
the first centre (never on the batch), so a row's loss term and gradient
depend on that row and the centres only. The temperature enters as a per-row
factor clamped to the dtype's normal range: its limits are the
hard assignment and uniform responsibilities, which a clamped factor
reproduces to working precision.
"""

import contextlib

import torch

from ._checks import (
    REDUCTIONS,
    check_activation,
    check_codes,
    check_row_weights,
    compiling,
    width_tensor,
    work_dtype,
)
from ._functions import apply, attach_forms
from ._geometry import (
    gaps,
    geometry,
    score_factor,
    scores,
    squared_distances,
)
from ._maps import entmax15, entmax15_probs


def without_autocast(device):
    """Turn autocast off: the distances and the maps run in the working dtype."""
    available = getattr(torch.amp, "is_autocast_available", None)
    if available is not None and not available(device.type):
        return contextlib.nullcontext()
    if not torch.is_autocast_enabled(device.type):
        # Nothing to turn off (entering the context costs 4 us a call).
        return contextlib.nullcontext()
    return torch.autocast(device.type, enabled=False)


def _entropy_gap(R):
    """``H_max - H_1.5(r)`` per row, without cancellation near uniform rows.

    With ``a_j = sqrt(r_j)`` (so ``sum_j a_j^2 = 1``), ``c = k ** -0.5`` and
    ``delta_j = a_j - c``, expanding ``sum_j a_j^3 - c`` with ``sum_j
    delta_j = -sum_j delta_j^2 / (2 c)`` gives ``H_max - H_1.5(r) = 2 c
    sum_j delta_j^2 + (4 / 3) sum_j delta_j^3``: no difference of nearly
    equal terms when ``r`` is nearly uniform (large ``T``, where the direct
    form ``(4 / 3) (sum_j r_j^1.5 - c)`` loses all its digits once it is
    multiplied by ``T``). One-hot rows take the exact ``H_max = (4 / 3) (1 -
    c)``.
    """
    c = R.shape[1] ** -0.5
    delta = R.sqrt() - c
    delta2 = delta * delta
    gap = 2.0 * c * delta2.sum(dim=1) + (4.0 / 3.0) * (delta2 * delta).sum(dim=1)
    one_hot = R.amax(dim=1) == 1.0
    return torch.where(one_hot, (4.0 / 3.0) * (1.0 - c), gap)


def free_energy(geo, factor, activation):
    """Per-row free energy (measured from ``k`` coincident centres) and ``R``.

    In row units (``Delta = (d - d_min) / (r c)``, ``f = r c / T``), with
    ``phi`` the free energy above ``d_min`` divided by ``r c``: softmax,
    ``phi = -log1p(mean_j expm1(-f Delta_j)) / f`` (no exponent of a raw
    score, full precision when ``T`` is large); entmax-1.5, ``phi = <r,
    Delta> + (H_max - H_1.5(r)) / f``. ``phi`` is clipped to ``[0, mean_j
    Delta_j]``, where the exact value lies (rounding only).
    """
    n_clusters = geo.h.shape[1]
    delta = gaps(geo)
    f = factor[:, 0]
    if activation == "softmax":
        Q = torch.expm1(-factor * delta)
        phi = -torch.log1p(Q.mean(dim=1)) / f
        # expm1 already holds exp(-f Delta) - 1: the responsibilities follow
        # without a second exp.
        R = (Q + 1.0) / n_clusters
        R = R / R.sum(dim=1, keepdim=True)
    else:
        R = entmax15_probs(-factor * delta, 1)
        phi = (R * delta).sum(dim=1) + _entropy_gap(R) / f
    phi = torch.minimum(phi.clamp(min=0.0), delta.mean(dim=1))
    # r and c separately: their product may overflow where the term does not.
    F = squared_distances(geo, geo.h_max)[:, 0] + (geo.r[:, 0] * phi) * geo.c
    return F, R


def responsibilities(geo, factor, activation):
    """Return the map of the scores, differentiable (autograd through the map)."""
    s = scores(geo, factor)
    return torch.softmax(s, dim=1) if activation == "softmax" else entmax15(s, 1)


def _danskin(zo, mo, w, R, weighted):
    """``dF/dz`` (n x d) and ``dF/dmu`` (k x d) for ``F = sum_i w_i F_i``.

    ``dF/dz_i = 2 w_i (z_i - sum_j r_ij mu_j)`` and ``dF/dmu_j = 2 (N_j mu_j
    - S_j)`` with ``N`` and ``S`` the responsibilities' weighted sums; the
    offset cancels in both. Differentiable in whatever ``R`` is.
    """
    if weighted:
        # Rows of weight 0 (a NaN row among them) add nothing to either
        # gradient.
        used = w[:, None] > 0
        R, zo = torch.where(used, R, 0.0), torch.where(used, zo, 0.0)
    wR = R * w[:, None]
    grad_z = 2.0 * w[:, None] * (zo - R @ mo)
    grad_centers = 2.0 * (wR.sum(dim=0)[:, None] * mo - wR.T @ zo)
    return grad_z, grad_centers


def _loss_gradients(zo, mo, w, R, weighted, mean):
    """:func:`_danskin`, divided by the total weight for the mean reduction."""
    grad_z, grad_centers = _danskin(zo, mo, w, R, weighted)
    if mean:
        total = w.sum()
        grad_z, grad_centers = grad_z / total, grad_centers / total
    return grad_z, grad_centers


class _RBFKMeansLoss(torch.autograd.Function):
    """Free energy; backward from the optimal responsibilities (Danskin).

    The forward also returns ``R``, ``z - offset`` and ``mu - offset``
    (not differentiable) so that ``setup_context`` can save them: the
    Function then works under ``torch.func`` (``grad``, ``vmap``, ``jvp``).
    When the backward itself is differentiated (``create_graph=True``,
    Hessians, ``torch.func.hessian``), it recomputes ``R`` from the inputs
    with autograd through the map, so the second derivatives are exact
    instead of treating ``R`` as a constant.
    """

    @staticmethod
    def forward(z, centers, w, sigma, activation, mean, weighted):
        dtype = work_dtype(z.dtype, centers.dtype)
        with without_autocast(z.device):
            geo = geometry(z.to(dtype), centers.to(dtype))
            F, R = free_energy(geo, score_factor(geo, sigma), activation)
            wd = w.to(dtype)
            if weighted:
                # A row of weight 0 adds nothing, even a NaN row (0 * NaN is
                # NaN).
                F = torch.where(wd > 0, F, 0.0)
            loss = wd @ F
            if mean:
                loss = loss / wd.sum()
        return loss, R, geo.zo, geo.mo

    @staticmethod
    def setup_context(ctx, inputs, output):
        z, centers, w, sigma, activation, mean, weighted = inputs
        _, R, zo, mo = output
        ctx.mark_non_differentiable(R, zo, mo)
        ctx.save_for_backward(z, centers, w, sigma, R, zo, mo)
        # For the jvp (_loss_jvp): dF depends on these alone.
        ctx.save_for_forward(w, R, zo, mo)
        ctx.activation, ctx.mean, ctx.weighted = activation, mean, weighted

    @staticmethod
    def _unit_gradients(ctx, z, centers, w, sigma, R, zo, mo):
        dtype = zo.dtype
        wd = w.to(dtype)
        if torch.is_grad_enabled():
            # Differentiated again: R as a function of the inputs.
            geo = geometry(z.to(dtype), centers.to(dtype))
            R = responsibilities(geo, score_factor(geo, sigma), ctx.activation)
            zo, mo = geo.zo, geo.mo
        return _loss_gradients(zo, mo, wd, R, ctx.weighted, ctx.mean)

    @staticmethod
    def backward(ctx, g, *_):
        z, centers, w, sigma, R, zo, mo = ctx.saved_tensors
        with without_autocast(zo.device):
            grad_z, grad_centers = _RBFKMeansLoss._unit_gradients(
                ctx, z, centers, w, sigma, R, zo, mo
            )
            g = g.to(zo.dtype)
            grad_z = (g * grad_z).to(z.dtype) if ctx.needs_input_grad[0] else None
            grad_centers = (
                (g * grad_centers).to(centers.dtype)
                if ctx.needs_input_grad[1]
                else None
            )
        return grad_z, grad_centers, None, None, None, None, None


def _loss_jvp(ctx, z_t, centers_t, *_):
    """``dF = <dF/dz, z_t> + <dF/dmu, mu_t>``, from the saved responsibilities."""
    w, R, zo, mo = ctx.saved_tensors
    grad_z, grad_centers = _loss_gradients(
        zo, mo, w.to(zo.dtype), R, ctx.weighted, ctx.mean
    )
    tangent = torch.zeros((), dtype=zo.dtype, device=zo.device)
    if z_t is not None:
        tangent = tangent + (grad_z * z_t.to(zo.dtype)).sum()
    if centers_t is not None:
        tangent = tangent + (grad_centers * centers_t.to(zo.dtype)).sum()
    return tangent, None, None, None


attach_forms(_RBFKMeansLoss, _loss_jvp)


def rbf_kmeans_loss(
    z, centers, sigma, activation="softmax", sample_weight=None, reduction="sum"
):
    """Free energy of RBF K-Means at width ``sigma``, differentiable in both inputs.

    The loss of a K-Means layer on tensors: it equals
    :func:`skrbfkmeans.rbf_kmeans_loss` (value and gradients, the same
    constant), tends to the K-Means distortion as ``sigma -> 0`` and is
    differentiable in the rows ``z`` and in the ``centers``. A row's term
    and gradient depend on that row and the centres only.

    Parameters
    ----------
    z : torch.Tensor of shape (..., n_features)
        The rows (codes), of a floating dtype; the leading dimensions are
        rows. float16 and bfloat16 compute in float32.
    centers : torch.Tensor of shape (n_clusters, n_features)
        The centres, on the device of ``z``, with its dtype (or any floating
        dtype when one of the two is float16 or bfloat16: mixed precision).
    sigma : float or 0-d torch.Tensor
        The width, a finite number ``>= 0`` (temperature ``T = 2 sigma^2``).
        ``0`` is the hard limit: the responsibilities are one-hot (ties
        aside) and the loss is the K-Means distortion up to a term below
        rounding. No gradient flows to ``sigma``. Under ``torch.compile``
        pass a tensor: a new value then reuses the graph (a float is a
        constant of the graph), and its value is not checked.
    activation : {"softmax", "entmax15"}, default="softmax"
        The responsibilities' map.
    sample_weight : torch.Tensor or array-like of shape z.shape[:-1], default=None
        Non-negative weights of the rows; not differentiated.
    reduction : {"sum", "mean"}, default="sum"
        ``"sum"`` as the NumPy function; ``"mean"`` divides by the total
        weight (the number of rows without weights).

    Returns
    -------
    loss : torch.Tensor of shape ()
        The free energy (see Notes), in the working dtype: that of ``z`` and
        ``centers``, float32 for float16 and bfloat16 (a sum of squared
        distances overflows float16 at magnitudes near 100).

    Raises
    ------
    ValueError
        If the shapes, dtypes or devices do not match, ``sigma`` is negative
        or not finite, a weight is negative, or an option is unknown.

    See Also
    --------
    RBFKMeansLayer : A module holding the centres and the width.
    skrbfkmeans.rbf_kmeans_loss : The NumPy function.

    Notes
    -----
    With ``d_ij = ||z_i - mu_j||^2``, ``T = 2 sigma^2`` and ``W`` the total
    weight, the softmax loss is ``-T sum_i w_i log(mean_j exp(-d_ij / T))``,
    the free energy ``-T sum_i w_i logsumexp_j(-d_ij / T)`` plus ``T W log
    k``; it is computed in the log domain, finite where every ``exp(-d_ij /
    T)`` underflows. The entmax-1.5 loss is ``sum_i w_i min_r (<r, d_i> + T
    (H_max - H_1.5(r)))`` with the Tsallis entropy ``H_1.5(r) = (4 / 3)
    sum_j (r_j - r_j ** 1.5)`` and its maximum ``H_max = (4 / 3) (1 - k **
    -0.5)``. Both lie between the K-Means distortion ``J`` and ``J + T W
    log k``. When every row's margin ``d_(2) - d_(1)`` is at least ``4
    sigma^2`` the entmax-1.5 responsibilities are exactly one-hot and the
    loss is exactly ``J + T W H_max``: the distortion plus a constant.

    Both losses are minima over the responsibilities ``r``, so the backward
    pass uses Danskin's theorem with ``r`` at its optimum (computed in the
    forward pass; no backward through the map): ``dF/dmu_j = 2 (N_j mu_j -
    S_j)`` with ``N_j = sum_i w_i r_ij`` and ``S_j = sum_i w_i r_ij z_i``,
    and ``dF/dz_i = 2 w_i sum_j r_ij (z_i - mu_j)``. A gradient step on
    ``mu_j`` with the learning rate ``1 / (2 N_j)`` is the EM (M-step)
    update; with one-hot responsibilities, Lloyd's. Second derivatives
    (``create_graph=True``, ``torch.func.hessian``) differentiate that
    gradient with ``r`` as a function of the inputs, and are exact;
    ``torch.func.grad``, ``vmap`` and ``jvp`` work. Cost: two products of
    ``n x k x d`` and a few passes over the ``n x k`` scores (plus a sort of
    the candidates for entmax-1.5).

    The distances are computed with each row in its own units (centred on
    the first centre, divided by a power of 2 of the row's
    magnitude), so a row's term and gradient depend on that row and the
    centres only: a NaN row gives a NaN loss (it is a sum) but leaves every
    other row's gradient ``dF/dz_i`` as it was.

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import rbf_kmeans_loss
    >>> z = torch.tensor([[0.0, 0.0], [0.0, 2.0], [10.0, 0.0], [10.0, 2.0]],
    ...                  requires_grad=True)
    >>> centers = torch.tensor([[0.0, 0.5], [10.0, 1.0]], requires_grad=True)
    >>> loss = rbf_kmeans_loss(z, centers, sigma=0.1, activation="entmax15")
    >>> loss.item()  # the distortion, 4.5, plus T W H_max = 0.02 * 4 * 0.39
    4.5312
    >>> loss.backward()
    >>> centers.grad  # Lloyd's: 2 (N_j mu_j - S_j)
    tensor([[ 0., -2.],
            [ 0.,  0.]])
    """
    check_codes(z, centers)
    dtype = work_dtype(z.dtype, centers.dtype)
    sigma = width_tensor(sigma, z.device, dtype)
    check_activation(activation)
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}.")
    w = check_row_weights(sample_weight, z, dtype)
    if reduction == "mean" and not compiling() and not bool(w.sum() > 0):
        raise ValueError('reduction="mean" needs a positive total weight.')
    loss, *_ = apply(
        _RBFKMeansLoss,
        z.reshape(-1, z.shape[-1]),
        centers,
        w,
        sigma,
        activation,
        reduction == "mean",
        sample_weight is not None,
    )
    return loss
