"""The thresholds of the sparse maps: shift, candidates, closed forms, searches.

Every map shifts each slice by its maximum first and scales it by ``alpha -
1`` (``u = (alpha - 1) (z - max z)``), so the largest entry is 0 and the
threshold ``tau`` lies in ``[-1, -(1 / n) ** (alpha - 1)]``. Entries with
``u_j <= -1`` can never be in the support: eager calls on plain tensors may
read on the host how many columns can (the largest count over the slices)
and search the threshold among those only; traced code (compile, export,
``jit.trace``, ``torch.func``) sees every column, in a graph whose shapes do
not depend on the values. The maps and their derivatives are in
:mod:`._maps`.
"""

import math

import torch

from ._checks import work_dtype


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
    x = _to(x, work_dtype(x.dtype))
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
