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

from ._checks import work_dtype
from ._functions import apply, attach_forms
from ._thresholds import (
    _bisect,
    _default_n_iter,
    _entmax15_threshold,
    _shifted,
    _sparsemax_threshold,
    _to,
    _traced,
)

__all__ = ["entmax15", "sparsemax", "entmax_bisect"]


def _check_input(x, name="x"):
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{name} must be a torch.Tensor, got {type(x).__name__}.")
    if not x.is_floating_point():
        raise TypeError(f"{name} must be a floating-point tensor, got {x.dtype}.")
    if x.dim() == 0:
        raise ValueError(f"{name} must have at least one dimension, got a scalar.")


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
    p = _to(p, work_dtype(dtype))
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
