"""Sparse probability maps as PyTorch autograd functions.

The tensor versions of ``skrbfkmeans.entmax15``, ``sparsemax`` and
``entmax_bisect``. Every map shifts each slice by its maximum first and
scales it by ``alpha - 1`` (``u = (alpha - 1) (z - max z)``), so the largest
entry is 0 and the threshold ``tau`` lies in ``[-1, -(1 / n) ** (alpha -
1)]``. Entries with ``u_j <= -1`` can never be in the support, whatever the
rest of the slice: clamping them to -1 changes no output and keeps every
intermediate finite (masked ``-inf`` entries and scores near the dtype's
limits included).

Eager calls on plain tensors may read one count on the host (the largest
number of entries above -1 in a slice) and search the threshold among those
columns only. Under ``torch.compile``, ``torch.export``, ``torch.jit.trace``
and the ``torch.func`` transforms nothing is read on the host: the searches
see every column, in a graph whose shapes do not depend on the values, and
give the same results to rounding.

The backward passes are the closed form of the (symmetric) Jacobian: with
``s = p ** (2 - alpha)`` on the support and 0 elsewhere,
``dz = s * g - s * sum(s * g) / sum(s)``; the forward-mode derivative (jvp)
is the same product. Both are written with differentiable operations on the
saved output, so that they can be differentiated again.
"""

import math
import numbers

import torch

from ._functions import apply, attach_forms

__all__ = ["entmax15", "sparsemax", "entmax_bisect"]


def _check_input(x, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}.")
    if x.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar.")


def _work_dtype(dtype):
    """float16 and bfloat16 compute in float32 (the NumPy maps do the same)."""
    return dtype if dtype in (torch.float32, torch.float64) else torch.float32


def _to(x, dtype):
    """``x.to(dtype)``, without the call (~1 us) when it changes nothing."""
    return x if x.dtype == dtype else x.to(dtype)


def _traced(x):
    """Whether values of ``x`` cannot (or must not) be read on the host.

    True under ``torch.compile`` and ``torch.export`` (dynamo), under
    ``torch.jit.trace`` (a read would be frozen into the trace) and for the
    wrapped tensors of ``torch.func`` transforms (a ``vmap`` batch has no
    single count).
    """
    return (
        torch.compiler.is_compiling()
        or torch.jit.is_tracing()
        or torch._C._functorch.is_functorch_wrapped_tensor(x)
    )


# Eager calls search the candidate columns only (one count read on the host,
# then a top-k, or Newton's iteration for entmax-1.5) in slices longer than
# _NEWTON_CANDIDATES, from this many entries in the tensor; below either the
# read and its four operations cost about what they save. Measured on one
# thread, float32 entmax-1.5 forward and backward, search / full sort: 0.94-
# 1.03 at 64 x 64, 0.59-0.82 at 1024 x 64, 0.38-0.51 at 4096 x 64, 0.63 at
# 65536 x 64, 0.61 at 65536 x 24; at k = 10, 0.76 (few candidates) to 1.13
# (all of them).
_SEARCH_NUMEL = 1 << 15

# Above this many candidates in a slice, eager entmax-1.5 takes its threshold
# from Newton's iteration instead of a sort (measured on 4096 x 512 float32
# rows on one thread: a sort or top-k of about 300 candidates per row took
# most of the map's time).
_NEWTON_CANDIDATES = 16


def _shifted(x, dim, alpha):
    """``max((alpha - 1) (x - max x), -1)`` along ``dim``, in the working dtype.

    NaN, ``+inf`` and slices that are entirely ``-inf`` give NaN, as in
    ``torch.softmax``. Differences beyond the dtype's range overflow to
    ``-inf``, their exact limit, and are clamped with the other non-candidates.
    """
    x = _to(x, _work_dtype(x.dtype))
    if alpha > 2.0 and alpha - 1.0 > torch.finfo(x.dtype).max:
        # The scale itself would overflow (and 0 * inf make the maximum NaN).
        x = x.to(torch.float64)
    u = x - x.amax(dim=dim, keepdim=True)
    if alpha != 2.0:
        u = u * (alpha - 1.0)
    return u.clamp(min=-1.0)


def _n_candidates(u, dim):
    """Eager only: the largest number of entries above -1 in a slice, or None.

    None when the tensor is traced or too small for the read to pay off: the
    caller then searches every column.
    """
    # _traced first: a traced size test would be a guard, recompiling there.
    if _traced(u) or u.shape[dim] <= _NEWTON_CANDIDATES or u.numel() < _SEARCH_NUMEL:
        return None
    # At least 1: a NaN slice counts none.
    return max(int((u > -1.0).sum(dim=dim).amax()), 1)


def _sorted_candidates(u, dim, m):
    """Return the ``m`` largest entries of each slice, in decreasing order.

    All of them when ``m`` is None; the clamped rest pad shorter slices.
    """
    if m is not None and m < u.shape[dim]:
        return torch.topk(u, m, dim=dim).values
    return torch.sort(u, dim=dim, descending=True).values


def _arange_along(n, dim, ndim, like):
    """``1, ..., n`` shaped to broadcast along ``dim`` of an ``ndim`` tensor."""
    rho = torch.arange(1, n + 1, dtype=like.dtype, device=like.device)
    if dim == ndim - 1:
        return rho
    shape = [1] * ndim
    shape[dim] = n
    return rho.view(shape)


def _entmax15_threshold(u, dim):
    """Exact threshold of entmax-1.5 for shifted, scaled scores ``u``.

    Sort-based (Peters et al. 2019, Algorithm 2): with the scores ``us``
    sorted in decreasing order, the closed form of ``tau`` for the ``rho``
    largest is ``tau_rho = mean - sqrt((1 - ss) / rho)`` (``ss`` their
    spread), and the threshold is ``tau_rho`` at the support's size. That is
    ``max_rho min(tau_rho, us_rho)``: inside the support ``tau_rho <= tau <=
    us_rho`` (the top ``rho`` entries' ``(us - tau) ** 2`` sum to at most 1),
    outside it ``us_rho <= tau``. Two reductions, where the algorithm's search for the
    support's size takes four; ``rho = 1`` gives ``tau >= -1`` exactly, so
    that the clamped entries are exact zeros.

    Eager calls with many entries sort the candidates only, or, with more
    than ``_NEWTON_CANDIDATES`` of them in a slice, take Newton's iteration
    (a few passes cost less than a sort there).
    """
    m = _n_candidates(u, dim)
    if m is not None and m > _NEWTON_CANDIDATES:
        return _entmax15_newton(u, dim)
    us = _sorted_candidates(u, dim, m)
    rho = _arange_along(us.shape[dim], dim, us.dim(), us)
    cs = us.cumsum(dim)
    mean = cs / rho
    # The spread sum (us - mean)^2 = cumsum(us^2) - cs * mean, fused.
    ss = torch.addcmul((us * us).cumsum(dim), cs, mean, value=-1.0)
    # 1 - ss < 0 happens past the support only, where us_rho wins the
    # minimum; clamped, so that no NaN reaches the reductions.
    tau = mean - ((1.0 - ss) / rho).clamp(min=0.0).sqrt()
    return torch.minimum(tau, us).amax(dim=dim, keepdim=True)


def _entmax15_newton(u, dim):
    """Threshold of entmax-1.5 by Newton's iteration from below (eager only).

    ``f(tau) = sum_j [u_j - tau]_+^2 - 1`` is convex and decreasing, and
    ``f(-1) >= 0`` for shifted scores (maximum 0): Newton's steps from -1
    increase ``tau`` without passing the root and converge quadratically.
    Stops when no step exceeds a few ulps of 1 (``tau`` lies in ``[-1, 0)``),
    or after 64 steps; the result is the closed form on the support found,
    taken relative to that estimate (entries measured from near the threshold
    are about ``sqrt(p)``, and their spread no longer cancels).
    """
    tau = torch.full_like(u.narrow(dim, 0, 1), -1.0)
    tiny = 4.0 * torch.finfo(u.dtype).eps
    for _ in range(64):
        v = (u - tau).clamp(min=0.0)
        f = (v * v).sum(dim=dim, keepdim=True) - 1.0
        step = f / (2.0 * v.sum(dim=dim, keepdim=True))
        tau = tau + step.clamp(min=0.0)
        if not bool((step > tiny).any()):
            break
    v = (u - tau).clamp(min=0.0)
    s = (v > 0).sum(dim=dim, keepdim=True).clamp(min=1).to(u.dtype)
    a = v.sum(dim=dim, keepdim=True)
    b = (v * v).sum(dim=dim, keepdim=True)
    mean = a / s
    delta = (1.0 - (b - a * mean).clamp(min=0.0)) / s
    return tau + mean - delta.clamp(min=0.0).sqrt()


def _sparsemax_threshold(u, dim):
    """Exact threshold of sparsemax for shifted scores ``u``.

    Sort-based (Martins & Astudillo 2016, Algorithm 1): with the scores
    sorted in decreasing order, ``tau = max_rho (sum of the rho largest - 1)
    / rho`` (any set of entries gives a value at most ``tau``, the support
    gives ``tau``). Then one step of Michelot's algorithm from it (``tau +
    (sum_S (u - tau) - 1) / |S|``), the step the NumPy kernel ends on.
    """
    us = _sorted_candidates(u, dim, _n_candidates(u, dim))
    rho = _arange_along(us.shape[dim], dim, us.dim(), us)
    tau = ((us.cumsum(dim) - 1.0) / rho).amax(dim=dim, keepdim=True)
    v = (us - tau).clamp(min=0.0)
    s = (v > 0).sum(dim=dim, keepdim=True).clamp(min=1).to(u.dtype)
    return tau + (v.sum(dim=dim, keepdim=True) - 1.0) / s


def _default_n_iter(dtype, alpha, n):
    """Halvings that resolve ``tau`` to a relative ulp of its smallest value.

    As ``skrbfkmeans.entmax_bisect``: ``nmant + 2 + min(ceil((alpha - 1)
    log2 n), nmant)`` with ``nmant`` the mantissa bits of ``dtype``.
    """
    nmant = round(-math.log2(torch.finfo(dtype).eps))
    extra = min(math.ceil((alpha - 1.0) * math.log2(max(n, 1))), nmant)
    return nmant + 2 + extra


def _power(v, alpha):
    """``v ** (1 / (alpha - 1))``; a square for 1.5 and nothing for 2."""
    if alpha == 1.5:
        return v * v
    if alpha == 2.0:
        return v
    return v.pow(1.0 / (alpha - 1.0))


def _bisect(u, alpha, dim, n_iter):
    """Alpha-entmax of shifted, scaled scores ``u`` by bisection on ``tau``.

    ``f(tau) = sum_j [u_j - tau]_+ ** (1 / (alpha - 1)) - 1`` is decreasing,
    ``f(-1) >= 0`` and ``f(-(1 / c) ** (alpha - 1)) <= 0`` for ``c``
    candidates (``u_j > -1``). Each halving keeps the half where ``f``
    changes sign; the result uses the lower end (its support contains the
    true one) and is normalised. A slice with one candidate has an empty
    bracket at -1 and comes out exactly one-hot.
    """
    n_cand = (u > -1.0).sum(dim=dim, keepdim=True).to(u.dtype)
    lo = torch.full_like(n_cand, -1.0)
    hi = -n_cand.reciprocal().pow(alpha - 1.0)
    # The halvings need the candidates only (the other entries add 0), in
    # any order.
    m = _n_candidates(u, dim)
    uc = u if m is None or m >= u.shape[dim] else torch.topk(u, m, dim=dim).values
    for _ in range(n_iter):
        mid = 0.5 * (lo + hi)
        above = _power((uc - mid).clamp(min=0.0), alpha).sum(dim, keepdim=True) >= 1
        lo = torch.where(above, mid, lo)
        hi = torch.where(above, hi, mid)
    p = _power((u - lo).clamp(min=0.0), alpha)
    return p / p.sum(dim=dim, keepdim=True)


def _jacobian_product(p, g, alpha, dim):
    """``J g = s * g - s * sum(s * g) / sum(s)`` for the map's output ``p``.

    ``s = p ** (2 - alpha)`` on the support, up to a positive factor per
    slice: for ``alpha`` other than 1.5 and 2 it is computed as ``s / max
    s`` in the log domain (``p ** (2 - alpha)`` overflows for ``alpha > 2``
    and a small ``p``) and the factor is applied at the end. ``J`` is
    symmetric: the same product is the backward (``g`` the output's
    gradient) and the forward-mode derivative (``g`` the input's tangent).

    Computed in the working dtype and returned in ``p``'s. When the product
    is itself differentiated, ``s`` is taken from ``where(p > 0, p, 1)``:
    outside the support ``s`` is 0 near ``p``, so its derivative is 0 there,
    where that of ``sqrt(p)`` at 0 would be infinite and give NaN.
    """
    dtype = p.dtype
    p = _to(p, _work_dtype(dtype))
    g = _to(g, p.dtype)
    scale = None
    # Grad mode in a backward means create_graph (the product is to be
    # differentiated), as may a transform's or a compiled graph's; otherwise
    # sqrt(0) = 0 needs no guard, and costs three operations less.
    if alpha == 1.5 and not (torch.is_grad_enabled() or _traced(p)):
        s = p.sqrt()
    elif alpha == 2.0:
        s = (p > 0).to(p.dtype)
    else:
        support = p > 0
        p_safe = torch.where(support, p, 1.0)
        if alpha == 1.5:
            s = torch.where(support, p_safe.sqrt(), 0.0)
        else:
            log_s = torch.where(support, (2.0 - alpha) * p_safe.log(), -math.inf)
            log_scale = log_s.amax(dim=dim, keepdim=True)
            s = (log_s - log_scale).exp()
            scale = log_scale.exp()
    sg = s * g
    dz = sg - s * (sg.sum(dim=dim, keepdim=True) / s.sum(dim=dim, keepdim=True))
    if scale is not None:
        # Exact zeros stay zero (no 0 * inf) when the factor overflows.
        dz = torch.where(dz != 0, dz * scale, dz)
    return _to(dz, dtype)


def entmax15_probs(x, dim):
    """Entmax-1.5 along ``dim``, without autograd, in the working dtype."""
    u = _shifted(x, dim, 1.5)
    p = (u - _entmax15_threshold(u, dim)).clamp(min=0.0)
    p = p * p
    return p / p.sum(dim=dim, keepdim=True)


def _sparsemax_probs(x, dim):
    u = _shifted(x, dim, 2.0)
    p = (u - _sparsemax_threshold(u, dim)).clamp(min=0.0)
    return p / p.sum(dim=dim, keepdim=True)


def _bisect_probs(x, alpha, dim, n_iter):
    u = _shifted(x, dim, alpha)
    if n_iter is None:
        n_iter = _default_n_iter(u.dtype, alpha, u.shape[dim])
    return _bisect(u, alpha, dim, n_iter)


def _save(ctx, output, dim, alpha):
    """Save what the Jacobian products need: the output, the dim and alpha."""
    ctx.dim, ctx.alpha = dim, alpha
    ctx.save_for_backward(output)
    ctx.save_for_forward(output)


def _product(ctx, g):
    (p,) = ctx.saved_tensors
    return _jacobian_product(p, g, ctx.alpha, ctx.dim)


# Each map is applied in the form its caller needs (see ._functions).


class _Entmax15(torch.autograd.Function):
    @staticmethod
    def forward(x, dim):
        return _to(entmax15_probs(x, dim), x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save(ctx, output, inputs[1], 1.5)

    @staticmethod
    def backward(ctx, g):
        return _product(ctx, g), None


class _Sparsemax(torch.autograd.Function):
    @staticmethod
    def forward(x, dim):
        return _to(_sparsemax_probs(x, dim), x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save(ctx, output, inputs[1], 2.0)

    @staticmethod
    def backward(ctx, g):
        return _product(ctx, g), None


class _EntmaxBisect(torch.autograd.Function):
    @staticmethod
    def forward(x, dim, alpha, n_iter):
        return _to(_bisect_probs(x, alpha, dim, n_iter), x.dtype)

    @staticmethod
    def setup_context(ctx, inputs, output):
        _save(ctx, output, inputs[1], inputs[2])

    @staticmethod
    def backward(ctx, g):
        return _product(ctx, g), None, None, None


def _jvp(ctx, x_t, *_):
    # J is symmetric: the forward-mode derivative is the backward's product.
    return _product(ctx, x_t)


for _function in (_Entmax15, _Sparsemax, _EntmaxBisect):
    attach_forms(_function, _jvp)


def _check_dim(x, dim):
    if not isinstance(dim, numbers.Integral) or isinstance(dim, bool):
        raise TypeError(f"dim must be an integer, got {dim!r}.")
    if not -x.dim() <= dim < x.dim():
        raise IndexError(f"dim {dim} is out of range for a tensor of {x.dim()} dims.")
    dim = int(dim) % x.dim()
    if x.shape[dim] == 0 and math.prod(x.shape[:dim] + x.shape[dim + 1 :]) > 0:
        raise ValueError(f"x has empty slices along dim {dim}.")
    return dim


def entmax15(x, dim=-1):
    """Entmax-1.5 of a tensor: a sparse, exact alternative to softmax.

    Maps each slice ``z`` of ``x`` along ``dim`` to ``p_j = [z_j / 2 -
    tau]_+ ** 2`` whose threshold ``tau`` makes it sum to one; equal to
    :func:`skrbfkmeans.entmax15` to rounding. Differentiable (closed-form
    backward).

    Parameters
    ----------
    x : torch.Tensor of shape (..., n, ...)
        Scores, of any floating dtype, on any device. Entries may be ``-inf``
        (masked out) as long as every slice has a finite maximum; NaN,
        ``+inf`` or an all ``-inf`` slice give NaN, as in ``torch.softmax``.
        float16 and bfloat16 are computed in float32.
    dim : int, default=-1
        The dimension along which the map is applied.

    Returns
    -------
    p : torch.Tensor of the same shape, dtype and device as ``x``
        Non-negative, each slice sums to one; exact zeros outside the support.

    See Also
    --------
    sparsemax : The alpha = 2 member of the family.
    entmax_bisect : Alpha-entmax for any alpha > 1.
    skrbfkmeans.entmax15 : The NumPy map.

    Notes
    -----
    Each slice is shifted by its maximum and halved first, so ``tau`` lies
    in ``[-1, -1 / sqrt(n)]`` at any scale of the scores; the threshold comes
    from the sort-based closed form (Peters et al., Algorithm 2). A slice
    whose two largest scores differ by at least 2 is exactly one-hot. Cost:
    one sort and a few passes over ``x``; eager calls on large tensors sort
    only the entries that can be in a support (or, when a slice has many,
    take Newton's iteration on ``tau``).

    The backward pass is ``dz = s * g - s * sum(s * g) / sum(s)`` with ``s =
    sqrt(p)``, and so is the forward-mode derivative (the Jacobian is
    symmetric). Both are differentiable again (Hessians, double backward),
    exactly zero outside the support. ``torch.compile(fullgraph=True)``,
    ``torch.export`` and the ``torch.func`` transforms (``grad``, ``vmap``,
    ``jvp``, ``hessian``) apply; under them the map reads nothing on the
    host and sorts every column.

    References
    ----------
    .. [1] B. Peters, V. Niculae, A. F. T. Martins, "Sparse Sequence-to-Sequence
       Models", ACL 2019, arXiv:1905.05702.

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import entmax15
    >>> entmax15(torch.tensor([[0.0, 0.4, -3.0], [0.0, 1.0, 3.0]]))
    tensor([[0.3600, 0.6400, 0.0000],
            [0.0000, 0.0000, 1.0000]])
    >>> z = torch.tensor([0.0, 0.4, -float("inf")], requires_grad=True)
    >>> entmax15(z)[0].backward()
    >>> z.grad
    tensor([ 0.3429, -0.3429,  0.0000])
    """
    _check_input(x)
    return apply(_Entmax15, x, _check_dim(x, dim))


def sparsemax(x, dim=-1):
    """Sparsemax of a tensor: the Euclidean projection onto the simplex.

    Maps each slice ``z`` of ``x`` along ``dim`` to ``p_j = [z_j - tau]_+``
    whose threshold ``tau`` makes it sum to one; equal to
    :func:`skrbfkmeans.sparsemax` to rounding. Differentiable (closed-form
    backward).

    Parameters
    ----------
    x : torch.Tensor of shape (..., n, ...)
        Scores, of any floating dtype, on any device. Entries may be ``-inf``
        (masked out) as long as every slice has a finite maximum; NaN,
        ``+inf`` or an all ``-inf`` slice give NaN, as in ``torch.softmax``.
        float16 and bfloat16 are computed in float32.
    dim : int, default=-1
        The dimension along which the map is applied.

    Returns
    -------
    p : torch.Tensor of the same shape, dtype and device as ``x``
        Non-negative, each slice sums to one; exact zeros outside the support.

    See Also
    --------
    entmax15 : The alpha = 1.5 member of the family.
    entmax_bisect : Alpha-entmax for any alpha > 1.
    skrbfkmeans.sparsemax : The NumPy map.

    Notes
    -----
    Each slice is shifted by its maximum first; the threshold comes from the
    sort-based closed form ``tau = (sum_S z - 1) / |S|`` (Martins and
    Astudillo, Algorithm 1), refined by one step of Michelot's algorithm. A
    slice whose two largest scores differ by at least 1 is exactly one-hot.
    The backward pass projects ``g`` on the support: ``dz = s * (g -
    mean_S g)`` with ``s = 1[p > 0]``, as does the forward-mode derivative;
    both are differentiable again. Works under ``torch.compile``,
    ``torch.export`` and the ``torch.func`` transforms, as :func:`entmax15`.

    References
    ----------
    .. [1] A. F. T. Martins, R. F. Astudillo, "From Softmax to Sparsemax",
       ICML 2016, arXiv:1602.02068.

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import sparsemax
    >>> sparsemax(torch.tensor([[0.0, 0.5, 1.0], [0.0, 0.5, 2.0]]))
    tensor([[0.0000, 0.2500, 0.7500],
            [0.0000, 0.0000, 1.0000]])
    """
    _check_input(x)
    return apply(_Sparsemax, x, _check_dim(x, dim))


def entmax_bisect(x, alpha=1.5, dim=-1, n_iter=None):
    """Alpha-entmax of a tensor for any ``alpha > 1``, by bisection.

    Maps each slice ``z`` of ``x`` along ``dim`` to ``p_j = [(alpha - 1) z_j
    - tau]_+ ** (1 / (alpha - 1))`` whose threshold ``tau`` makes it sum to
    one; equal to :func:`skrbfkmeans.entmax_bisect` to rounding.
    Differentiable in ``x`` (closed-form backward).

    Parameters
    ----------
    x : torch.Tensor of shape (..., n, ...)
        Scores, of any floating dtype, on any device. Entries may be ``-inf``
        (masked out) as long as every slice has a finite maximum; NaN,
        ``+inf`` or an all ``-inf`` slice give NaN, as in ``torch.softmax``.
        float16 and bfloat16 are computed in float32.
    alpha : float, default=1.5
        The entmax parameter, a finite real number > 1. ``alpha = 2`` is
        sparsemax; ``alpha -> 1`` tends to softmax.
    dim : int, default=-1
        The dimension along which the map is applied.
    n_iter : int, default=None
        Number of halvings of the threshold's bracket. ``None`` derives it
        from the dtype as :func:`skrbfkmeans.entmax_bisect` does (56 to 59
        for float64 at ``alpha = 1.5``), which resolves ``tau`` to a relative
        ulp.

    Returns
    -------
    p : torch.Tensor of the same shape, dtype and device as ``x``
        Non-negative, each slice sums to one; exact zeros outside the support.

    Raises
    ------
    ValueError
        If ``alpha`` is not a finite number > 1 or ``n_iter`` is not a
        non-negative integer.

    See Also
    --------
    entmax15 : Exact and faster for alpha = 1.5.
    sparsemax : Exact and faster for alpha = 2.
    skrbfkmeans.entmax_bisect : The NumPy map.

    Notes
    -----
    Each slice is shifted by its maximum *before* anything else (a large
    common offset costs no precision) and scaled by ``alpha - 1``; ``tau``
    then lies in ``[-1, -(1 / c) ** (alpha - 1)]`` with ``c`` the number of
    entries above -1, and each halving keeps the half where ``sum_j p_j - 1``
    changes sign. Cost: ``n_iter`` passes over ``x``, each with a power (a
    square for alpha = 1.5, none for alpha = 2).

    The backward pass is ``dz = s * g - s * sum(s * g) / sum(s)`` with ``s =
    p ** (2 - alpha)`` on the support, computed up to a positive factor per
    slice in the log domain so that it does not overflow for ``alpha > 2``;
    the forward-mode derivative is the same product, and both are
    differentiable again. Works under ``torch.compile``, ``torch.export`` and
    the ``torch.func`` transforms, as :func:`entmax15` (``alpha`` is a
    constant of the compiled graph).

    References
    ----------
    .. [1] B. Peters, V. Niculae, A. F. T. Martins, "Sparse Sequence-to-Sequence
       Models", ACL 2019, arXiv:1905.05702.

    Examples
    --------
    >>> import torch
    >>> from skrbfkmeans.torch import entmax_bisect
    >>> entmax_bisect(torch.tensor([0.0, 0.4, -3.0]), alpha=1.5)
    tensor([0.3600, 0.6400, 0.0000])
    >>> entmax_bisect(torch.tensor([0.0, 0.5, 1.0]), alpha=2.0)
    tensor([0.0000, 0.2500, 0.7500])
    """
    _check_input(x)
    if not isinstance(alpha, numbers.Real) or isinstance(alpha, bool):
        raise ValueError(f"alpha must be a finite real number > 1, got {alpha!r}.")
    # A Python float from here (torch.compile specialises on it), and NaN
    # fails both comparisons.
    alpha = float(alpha)
    if not 1.0 < alpha < math.inf:
        raise ValueError(f"alpha must be a finite real number > 1, got {alpha!r}.")
    if n_iter is not None and (
        not isinstance(n_iter, numbers.Integral)
        or isinstance(n_iter, bool)
        or n_iter < 0
    ):
        raise ValueError(f"n_iter must be a non-negative integer, got {n_iter!r}.")
    return apply(_EntmaxBisect, x, _check_dim(x, dim), alpha, n_iter)
