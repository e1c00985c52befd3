"""Squared distances of codes to centres, each row in its own units.

A layer's output for a row must depend on that row and the layer's state
only. So nothing here is a statistic of the batch: the centring point is the
midrange of the centres, and every row is divided by its own power of 2 (the
largest at most its magnitude, and never below the centres'), so that a
squared distance neither overflows nor underflows unless its true value does,
and a row at 1e17 or a NaN row changes no other row's result.

With ``zo = z - offset = r a`` (row ``i``: ``r_i`` a power of 2, ``|a_i|``
below 2) and ``mo = mu - offset = c b`` (``c`` a power of 2 from the
centres, ``|b|`` below 2), and ``rho_i = c / r_i <= 1``::

    ||z_i - mu_j||^2 = r_i^2 |a_i|^2 - r_i c h_ij,
    h_ij = 2 a_i . b_j - rho_i |b_j|^2.

The row's distances differ from its nearest one by ``r_i c (h_i,max -
h_ij)``, and its scores at temperature ``T = 2 sigma^2`` are ``f_i (h_ij -
h_i,max)`` with ``f_i = r_i c / T``. ``f_i`` is a power of 2 read from
the exponents (no ``r_i c`` or ``1 / T`` that may overflow), clamped to the
dtype's normal range: its limits are the hard assignment and uniform
responsibilities, which the clamped factor reproduces to working precision.
Every step is a tensor operation with no read on the host, so the layer
compiles once whatever the width.
"""

from typing import NamedTuple

import torch


def work_dtype(*dtypes):
    """The dtype the distances are computed in: float32 at least.

    float16 and bfloat16 compute in float32 (mixed precision keeps the
    sensitive part in float32); a mixture (bfloat16 codes against float32
    centres under autocast) computes in the wider of the two.
    """
    dtype = torch.float32
    for other in dtypes:
        dtype = torch.promote_types(dtype, other)
    return dtype


def _power_of_2_below(m):
    """The largest power of 2 at most ``m``; 1 where ``m`` is 0 (or NaN).

    Taken from the exponent (``floor(log2 m)``): exact, and a NaN or an
    infinite magnitude passes through to the rows that hold it.
    """
    return torch.exp2(torch.floor(torch.log2(torch.where(m > 0, m, 1.0))))


class Geometry(NamedTuple):
    """A batch of rows against the centres, each row in its own units."""

    a: torch.Tensor  # (n, d): (z_i - offset) / r_i
    b: torch.Tensor  # (k, d): (mu_j - offset) / c
    r: torch.Tensor  # (n, 1): each row's power of 2
    c: torch.Tensor  # (): the centres' power of 2
    h: torch.Tensor  # (n, k): 2 a_i . b_j - (c / r_i) |b_j|^2
    h_max: torch.Tensor  # (n, 1): the row's largest h (its nearest centre)


def geometry(z, centers):
    """The rows ``z`` (n x d) against ``centers`` (k x d) in row units.

    Differentiable in ``z`` and ``centers`` (the offset and the powers of 2
    are constants: piecewise constant functions of the data, with no
    gradient). Both must already have the working dtype.
    """
    with torch.no_grad():
        # The midrange of the centres: any point gives the same distances;
        # one among the centres keeps the rows near them from cancelling in
        # float32 (and, as half the largest plus half the smallest, it
        # cannot overflow).
        offset = 0.5 * centers.amax(dim=0) + 0.5 * centers.amin(dim=0)
    zo, mo = z - offset, centers - offset
    with torch.no_grad():
        c = _power_of_2_below(mo.abs().amax())
        r = _power_of_2_below(torch.maximum(zo.abs().amax(dim=1, keepdim=True), c))
    a, b = zo / r, mo / c
    h = 2.0 * (a @ b.T) - (c / r) * (b * b).sum(dim=1)
    return Geometry(a, b, r, c, h, h.detach().amax(dim=1, keepdim=True))


def score_factor(geo, sigma):
    """``f_i = r_i c / T`` (n x 1), from the exponents, clamped to normal numbers.

    ``sigma`` is a tensor of any floating dtype (the layer's buffer); a
    width of 0 gives the largest factor (the hard limit) and a width too
    large for ``T`` gives the smallest (uniform responsibilities).
    """
    dtype = geo.a.dtype
    sigma = sigma.to(device=geo.a.device, dtype=torch.float64).abs()
    # log2(T) = 1 + 2 log2(sigma), in float64 so that a width near the
    # limits of float32 keeps its exponent.
    log2_T = 1.0 + 2.0 * torch.log2(sigma)
    exponent = torch.log2(geo.r).double() + torch.log2(geo.c).double() - log2_T
    exponent = exponent.clamp(min=_MIN_EXP[dtype], max=_MAX_EXP[dtype])
    return torch.exp2(exponent).to(dtype)


# Exponents of the smallest normal and of the largest power of 2 of each
# working dtype (a factor clamped there is 2^e exactly).
_MIN_EXP = {torch.float32: -126, torch.float64: -1022}
_MAX_EXP = {torch.float32: 127, torch.float64: 1023}


def scores(geo, factor):
    """``-(d_ij - d_i,min) / T`` (n x k): the maps' input, largest entry 0."""
    return factor * (geo.h - geo.h_max)


def gaps(geo):
    """``(d_ij - d_i,min) / (r_i c) = h_i,max - h_ij >= 0`` (n x k)."""
    return (geo.h_max - geo.h).clamp(min=0.0)


def nearest_distance(geo):
    """``d_i,min = r_i^2 |a_i|^2 - r_i c h_i,max``, clipped at 0 (n,).

    Multiplied by ``r_i`` twice, so that it overflows only where its value
    does.
    """
    inner = geo.r[:, 0] * (geo.a * geo.a).sum(dim=1) - geo.c * geo.h_max[:, 0]
    return (inner * geo.r[:, 0]).clamp(min=0.0)


def centred(geo):
    """``z - offset`` and ``mu - offset``, back from the row units."""
    return geo.a * geo.r, geo.b * geo.c
