"""Squared distances of codes to centres, each row in its own units.

A layer's output for a row must depend on that row and the layer's state
only. So nothing here is a statistic of the batch: the centring point is the
first centre, and every row is divided by its own power of 2 (the
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
h_i,max)`` with ``f_i = r_i c / T``, computed as ``r_i (c / sigma) (0.5 /
sigma)`` (no ``T``, ``1 / T`` or ``r_i c`` that may leave the range) and
clamped to the dtype's normal range: its limits are the hard assignment and uniform
responsibilities, which the clamped factor reproduces to working precision.
Every step is a tensor operation with no read on the host, so the layer
compiles once whatever the width.
"""

from typing import NamedTuple

import torch

# The exponent field of each working dtype, read through an integer view.
_EXPONENT_BITS = {
    torch.float32: (torch.int32, 0x7F800000),
    torch.float64: (torch.int64, 0x7FF0000000000000),
}


def _power_of_2_below(m):
    """Return the largest power of 2 at most ``m`` (``m`` normal or larger).

    The exponent field of ``m`` with a zero mantissa: exact and one
    operation (no ``log2``). NaN and infinity give infinity, which turns
    the rows that hold them into NaN and no other.
    """
    int_dtype, mask = _EXPONENT_BITS[m.dtype]
    return torch.bitwise_and(m.view(int_dtype), mask).view(m.dtype)


class Geometry(NamedTuple):
    """A batch of rows against the centres, each row in its own units."""

    a: torch.Tensor  # (n, d): (z_i - offset) / r_i
    r: torch.Tensor  # (n, 1): each row's power of 2
    c: torch.Tensor  # (): the centres' power of 2
    h: torch.Tensor  # (n, k): 2 a_i . b_j - (c / r_i) |b_j|^2, b = (mu - offset) / c
    h_max: torch.Tensor  # (n, 1): the row's largest h (its nearest centre)
    zo: torch.Tensor  # (n, d): z_i - offset
    mo: torch.Tensor  # (k, d): mu_j - offset


def geometry(z, centers):
    """Return the rows ``z`` (n x d) against ``centers`` (k x d) in row units.

    Differentiable in ``z`` and ``centers`` (the offset and the powers of 2
    are constants: piecewise constant functions of the data, with no
    gradient). Both must already have the working dtype.
    """
    tiny = torch.finfo(z.dtype).tiny
    # The first centre as the centring point: any point gives the same
    # distances; one among the centres keeps the rows near them from
    # cancelling in float32 (and it is a view: no operation).
    offset = centers.detach()[0]
    zo, mo = z - offset, centers - offset
    with torch.no_grad():
        c = _power_of_2_below(mo.abs().amax().clamp(min=tiny))
        r = _power_of_2_below(torch.maximum(zo.abs().amax(dim=1, keepdim=True), c))
        minus_rho = -c / r
    a, b = zo / r, mo / c
    h = torch.addmm(minus_rho * (b * b).sum(dim=1), a, b.T, alpha=2.0)
    return Geometry(a, r, c, h, h.detach().amax(dim=1, keepdim=True), zo, mo)


def score_factor(geo, sigma):
    """``f_i = r_i c / T = r_i (c / sigma) (0.5 / sigma)`` (n x 1), clamped.

    ``sigma`` is a 0-d tensor of any floating dtype (the layer's buffer).
    Written with ``c / sigma`` and ``0.5 / sigma`` so that neither ``T`` nor
    ``1 / T`` need be representable; clamped to the dtype's normal range, so
    a width of 0 gives the largest factor (the hard limit) and a width too
    large gives the smallest (uniform responsibilities). (Where ``c / T``
    itself leaves the range, ``f_i`` lies beyond the clamp for every row
    whose distances are finite.)
    """
    finfo = torch.finfo(geo.a.dtype)
    sigma = sigma.to(device=geo.a.device, dtype=geo.a.dtype)
    q = (geo.c / sigma) * (0.5 / sigma)
    return (geo.r * q).clamp(min=finfo.tiny, max=finfo.max)


def scores(geo, factor):
    """``-(d_ij - d_i,min) / T`` (n x k): the maps' input, largest entry 0."""
    return factor * (geo.h - geo.h_max)


def gaps(geo):
    """``(d_ij - d_i,min) / (r_i c) = h_i,max - h_ij >= 0`` (n x k)."""
    return (geo.h_max - geo.h).clamp(min=0.0)


def squared_distances(geo, h):
    """``d = r_i^2 |a_i|^2 - r_i c h``, clipped at 0, for ``h`` of the rows.

    ``h`` is ``geo.h`` (every centre, n x k) or ``geo.h_max`` (the nearest,
    n x 1). Multiplied by ``r_i`` twice, so that it overflows only where its
    value does.
    """
    r = geo.r
    inner = r * (geo.a * geo.a).sum(dim=1, keepdim=True) - geo.c * h
    return (inner * r).clamp(min=0.0)
