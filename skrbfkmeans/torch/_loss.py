"""The RBF K-Means free energy as a PyTorch function, with its Danskin backward.

Distances are computed in working units, as the NumPy engine does: rows and
centres centred on the mean of the rows and, when their magnitude is far from
1, scaled by a power of 2 (exact), so that squared distances neither overflow
nor underflow. ``T = 2 sigma^2`` is clamped to the dtype's normal range: its
limits are the hard assignment and uniform responsibilities, which a clamped
``T`` reproduces to working precision.
"""

import math
import numbers

import torch

from ._maps import entmax15_probs

ACTIVATIONS = ("softmax", "entmax15")
REDUCTIONS = ("sum", "mean")


def check_sigma(sigma):
    """Return ``sigma`` (a real number or a 0-d tensor) as a float ``>= 0``."""
    if isinstance(sigma, torch.Tensor):
        if sigma.numel() != 1:
            raise ValueError(
                f"sigma must be a number or a 0-d tensor, got shape "
                f"{tuple(sigma.shape)}."
            )
        sigma = float(sigma)
    if isinstance(sigma, bool) or not isinstance(sigma, numbers.Real):
        raise TypeError(f"sigma must be a real number, got {sigma!r}.")
    sigma = float(sigma)
    if not (math.isfinite(sigma) and sigma >= 0):
        raise ValueError(f"sigma must be a finite number >= 0, got {sigma!r}.")
    return sigma


def check_activation(activation):
    if activation not in ACTIVATIONS:
        raise ValueError(
            f"activation must be one of {ACTIVATIONS}, got {activation!r}."
        )
    return activation


def check_codes(z, centers):
    """Validate the rows ``z`` (n x d) against the centres (k x d)."""
    checks = [
        (z, "z", "(n_samples, n_features)"),
        (centers, "centers", "(n_clusters, n_features)"),
    ]
    for x, name, shape in checks:
        if not isinstance(x, torch.Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
        if not x.is_floating_point():
            raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}.")
        if x.dim() != 2:
            raise ValueError(f"{name} must have shape {shape}, got {tuple(x.shape)}.")
    if z.shape[1] != centers.shape[1]:
        raise ValueError(
            f"centers has {centers.shape[1]} features but z has {z.shape[1]}."
        )
    if centers.shape[0] == 0 or z.shape[0] == 0:
        raise ValueError("z and centers need at least one row each.")
    if z.dtype != centers.dtype or z.device != centers.device:
        raise ValueError(
            f"z ({z.dtype}, {z.device}) and centers ({centers.dtype}, "
            f"{centers.device}) must have the same dtype and device."
        )


def check_sample_weight(sample_weight, z):
    """Return the weights as a tensor of ``z``'s dtype and device (ones if None)."""
    if sample_weight is None:
        return torch.ones(z.shape[0], dtype=z.dtype, device=z.device)
    w = torch.as_tensor(sample_weight, dtype=z.dtype, device=z.device)
    if w.shape != (z.shape[0],):
        raise ValueError(
            f"sample_weight must have shape ({z.shape[0]},), got {tuple(w.shape)}."
        )
    if not bool(torch.isfinite(w).all()) or bool((w < 0).any()):
        raise ValueError("sample_weight must be finite and non-negative.")
    return w


def work_dtype(dtype):
    """float16 and bfloat16 compute in float32."""
    return torch.float32 if torch.finfo(dtype).bits < 32 else dtype


def working_units(z, centers):
    """Centred rows and centres, and the power of 2 that divides them.

    The centring point is the mean of the rows (any point gives the same
    distances; this one keeps them from cancelling far from the origin). A
    magnitude outside ``2 ** +-(maxexp / 4)`` is brought near 1 by an
    exact power of 2, as the NumPy engine does (``_scaling.safe_scale``).
    Works on whatever ``z`` and ``centers`` are: differentiable when they are.
    """
    offset = z.detach().mean(dim=0)
    zc, mc = z - offset, centers - offset
    with torch.no_grad():
        magnitude = float(torch.maximum(zc.abs().amax(), mc.abs().amax()))
    finfo = torch.finfo(z.dtype)
    limit = round(math.log2(finfo.max)) // 4
    scale = 1.0
    if math.isfinite(magnitude) and magnitude > 0:
        exponent = math.frexp(magnitude)[1]
        if not -limit <= exponent <= limit:
            min_exp = round(math.log2(finfo.tiny)) + 2
            scale = math.ldexp(1.0, max(exponent, min_exp))
    if scale != 1.0:
        zc, mc = zc / scale, mc / scale
    return zc, mc, scale


def temperature(sigma, scale, dtype):
    """``T = 2 (sigma / scale) ** 2``, clamped to the normal range of ``dtype``."""
    finfo = torch.finfo(dtype)
    try:
        T = 2.0 * (sigma / scale) ** 2
    except OverflowError:
        T = math.inf
    return min(max(T, finfo.tiny), finfo.max)


def scores(zc, mc, T):
    """``-||z_i - mu_j||^2 / T`` up to a constant per row: the maps' input.

    ``||z_i||^2`` is the same for every centre and cancels in the maps; so
    does the row maximum, subtracted before the division so that a small
    ``T`` sends the far entries to ``-inf`` (their limit) and never the
    nearest to ``+inf``. Differentiable in ``zc`` and ``mc`` (a constant per
    row has no gradient through the maps).
    """
    s = 2.0 * zc @ mc.T - (mc * mc).sum(dim=1)
    return (s - s.detach().amax(dim=1, keepdim=True)) / T


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


def _free_energy(zc, mc, T, activation):
    """Per-row free energy (measured from ``k`` coincident centres) and ``R``.

    Softmax: ``-T log(mean_j exp(-d_ij / T))``, as ``d_min - T log1p(mean_j
    expm1(-D_ij / T))`` with ``D = d - d_min >= 0`` (no exponent of a raw
    score, full precision when ``T`` is large). Entmax-1.5: ``<r, d> + T
    (H_max - H_1.5(r))``. Both are clipped to ``[d_min, d_mean]``, where the
    exact values lie (rounding only).
    """
    n_clusters = mc.shape[0]
    e = (mc * mc).sum(dim=1) - 2.0 * zc @ mc.T
    e_min = e.amin(dim=1, keepdim=True)
    d_min = ((zc * zc).sum(dim=1) + e_min[:, 0]).clamp(min=0.0)
    D = (e - e_min).clamp(min=0.0)
    d_mean = d_min + D.mean(dim=1)
    if activation == "softmax":
        Q = torch.expm1(-D / T)
        F = d_min - T * torch.log1p(Q.mean(dim=1))
        # expm1 already holds exp(-D / T) - 1: the responsibilities follow
        # without a second exp.
        R = (Q + 1.0) / n_clusters
        R = R / R.sum(dim=1, keepdim=True)
    else:
        R = entmax15_probs(-D / T, 1)
        F = d_min + (R * D).sum(dim=1) + T * _entropy_gap(R)
    F = torch.minimum(torch.maximum(F, d_min), d_mean)
    return F, R


class _RBFKMeansLoss(torch.autograd.Function):
    """Free energy; backward from the optimal responsibilities (Danskin)."""

    @staticmethod
    def forward(ctx, z, centers, w, sigma, activation, mean):
        dtype = work_dtype(z.dtype)
        zc, mc, scale = working_units(z.to(dtype), centers.to(dtype))
        wd = w.to(dtype)
        T = temperature(sigma, scale, dtype)
        F, R = _free_energy(zc, mc, T, activation)
        # Twice by the scale: its square may overflow where the product
        # does not.
        loss = (wd @ F) * scale * scale
        factor = 1.0
        if mean:
            factor = 1.0 / wd.sum()
            loss = loss * factor
        ctx.save_for_backward(zc, mc, wd, R)
        ctx.scale, ctx.factor = scale, factor
        ctx.dtypes = (z.dtype, centers.dtype)
        return loss.to(z.dtype)

    @staticmethod
    @torch.autograd.function.once_differentiable
    def backward(ctx, g):
        zc, mc, w, R = ctx.saved_tensors
        g = g.to(zc.dtype) * ctx.factor * ctx.scale
        grad_z = grad_centers = None
        if ctx.needs_input_grad[0]:
            # dF/dz_i = 2 w_i (z_i - sum_j r_ij mu_j), in centred coordinates.
            grad_z = (2.0 * g) * w[:, None] * (zc - R @ mc)
            grad_z = grad_z.to(ctx.dtypes[0])
        if ctx.needs_input_grad[1]:
            # dF/dmu_j = 2 (N_j mu_j - S_j), N and S from the responsibilities.
            wR = R * w[:, None]
            N = wR.sum(dim=0)
            grad_centers = (2.0 * g) * (N[:, None] * mc - wR.T @ zc)
            grad_centers = grad_centers.to(ctx.dtypes[1])
        return grad_z, grad_centers, None, None, None, None


def rbf_kmeans_loss(
    z, centers, sigma, activation="softmax", sample_weight=None, reduction="sum"
):
    """Free energy of RBF K-Means at width ``sigma``, differentiable in both inputs.

    The loss of a K-Means layer on tensors: it equals
    :func:`skrbfkmeans.rbf_kmeans_loss` (value and gradients, the same
    constant), tends to the K-Means distortion as ``sigma -> 0`` and is
    differentiable in the rows ``z`` and in the ``centers``.

    Parameters
    ----------
    z : torch.Tensor of shape (n_samples, n_features)
        The rows (codes), of a floating dtype; float16 and bfloat16 compute in
        float32.
    centers : torch.Tensor of shape (n_clusters, n_features)
        The centres, with the dtype and device of ``z``.
    sigma : float or 0-d torch.Tensor
        The width, a finite number ``>= 0`` (temperature ``T = 2 sigma^2``).
        ``0`` is the hard limit: ``T`` is clamped to the dtype's smallest
        normal number, the responsibilities are one-hot (ties aside) and the
        loss is the K-Means distortion up to a term below rounding. No
        gradient flows to ``sigma``.
    activation : {"softmax", "entmax15"}, default="softmax"
        The responsibilities' map.
    sample_weight : torch.Tensor or array-like of shape (n_samples,), default=None
        Non-negative weights of the rows; not differentiated.
    reduction : {"sum", "mean"}, default="sum"
        ``"sum"`` as the NumPy function; ``"mean"`` divides by the total
        weight (the number of rows without weights).

    Returns
    -------
    loss : torch.Tensor of shape ()
        The free energy (see Notes), in the dtype of ``z``.

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
    update; with one-hot responsibilities, Lloyd's. Cost: two products of
    ``n x k x d`` and a few passes over the ``n x k`` scores (plus a sort of
    the candidates for entmax-1.5).

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
    sigma = check_sigma(sigma)
    check_activation(activation)
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}.")
    w = check_sample_weight(sample_weight, z)
    if reduction == "mean" and not bool(w.sum() > 0):
        raise ValueError('reduction="mean" needs a positive total weight.')
    return _RBFKMeansLoss.apply(z, centers, w, sigma, activation, reduction == "mean")
