"""The data's working units: shifted to its mean where far, scaled by a power of 4.

Squared distances of data near 1e-155 are subnormal and those of data near
1e200 overflow float64 (float32: from about 1e-20 and 1e20). The engine
therefore works on ``(X - shift) / scale`` without changing any result at
ordinary data:

- the scale is 1 unless the centred data's largest magnitude leaves a
  window of ``2^(+-maxexp/4)`` (float64: about 1e-77 to 1e77; float32: 2e-10
  to 4e9); outside it the rows are divided by a power of 4 (one scaled
  copy), which is exact in floating point: the fit of ``4^m X`` is the fit of
  ``X`` with every length multiplied by ``2^m`` (``sqrt`` of a power of 4 is
  exact too), so the fitted model is equivariant under ``X -> a X``;
- the shift is 0 unless the data's mean lies more than ``2^10`` standard
  deviations from the origin; there the rows are centred in a copy (as
  KMeans centres its copy of ``X``), so that the centres, which every
  M-step stores as ``S / N + offset``, are not rounded to the spacing of
  numbers near the offset at every iteration.

Elsewhere the engine still removes the offset block by block, without a copy.
"""

from typing import NamedTuple

import numpy as np
import scipy.sparse as sp


class Units(NamedTuple):
    """The working units of a fit: ``working = (user - shift) / scale``.

    Each method is named for the direction it converts in: ``to_working_*``
    from the user's units to the working units, ``to_user_*`` back. Rows
    are brought into working units by ``_rows.working_rows``, which centres
    them as the engine does.
    """

    scale: float = 1.0
    shift: np.ndarray = None

    @property
    def identity(self):
        """Whether working units are the user's."""
        return self.scale == 1.0 and self.shift is None

    def to_working_points(self, centers):
        """Return centres in working units (always a new array)."""
        if self.shift is not None:
            centers = centers - self.shift.astype(centers.dtype, copy=False)
        return scaled(centers, self.scale) if self.scale != 1.0 else centers.copy()

    def to_user_points(self, centers):
        """Return working-unit centres (or paths of them) in the user's units."""
        out = scaled(centers, 1.0 / self.scale)
        if self.shift is not None:
            out = out + self.shift.astype(out.dtype, copy=False)
        return out

    def returned_points(self, centers):
        """Return working-unit centres as a fit returns them, back in working units.

        A fit returns ``to_user_points(centers)``, and ``predict``,
        ``predict_proba`` and ``score`` bring those back with
        ``to_working_points``. Far from the origin, or for data scaled by
        the units, the trip rounds them (to the spacing of the user's
        numbers near the offset: 0.125 at 1e15). Returns None when it
        leaves them exactly as they are (always in the user's own units).
        """
        if self.identity:
            return None
        returned = self.to_working_points(self.to_user_points(centers))
        returned = returned.astype(centers.dtype, copy=False)
        return None if np.array_equal(returned, centers) else returned

    def to_working_length(self, x):
        """Return a length in the user's units (a width) in working units."""
        return float(x) / self.scale

    def to_user_length(self, x):
        """Return lengths in working units (widths, distances) in the user's, float64.

        Times the scale, a power of 4: exact, except that the lengths of
        tiny data underflow to their values at working precision.
        """
        return scaled(np.asarray(x, dtype=np.float64), 1.0 / self.scale)

    def to_user_distances(self, x):
        """Return working-unit lengths (distances, gradients) in the user's, same dtype.

        ``x`` is an array (dense, CSR or dask); it is returned itself when
        the scale is 1.
        """
        return scaled(x, 1.0 / self.scale)

    def to_user_energy(self, x):
        """Return squared lengths (inertia, energies) in the user's units.

        Twice by the scale: its square may underflow where the product does
        not.
        """
        return self.to_user_length(self.to_user_length(x))


def safe_scale(magnitude, dtype):
    """Power of 4 that brings ``magnitude`` near 1, or 1.0 inside the window.

    ``magnitude`` is the largest absolute value of the centred data (and of
    any centres given with it). Zero or a non-finite value gives 1.0: the
    caller decides what such data mean.
    """
    if not (np.isfinite(magnitude) and magnitude > 0):
        return 1.0
    finfo = np.finfo(dtype)
    limit = finfo.maxexp // 4
    exponent = int(np.frexp(magnitude)[1])
    if -limit <= exponent <= limit:
        return 1.0
    # Subnormal data (float32 near 1e-40) must not ask for a factor 1 / scale
    # beyond the dtype's range: the data then come out below 1, still fine.
    exponent = max(exponent, finfo.minexp + 2)
    # An even exponent: the scale is a power of 4, whose square root is exact.
    return float(np.ldexp(1.0, exponent - exponent % 2))


def centred_magnitude(X, offset):
    """``max_ij |x_ij - offset_j|`` (stored entries and zeros for sparse)."""
    if sp.issparse(X):
        X = X.tocsr()
        stored = np.abs(X.data - offset[X.indices])
        # Implicit zeros are at |offset_j| from the offset, in the columns
        # that have some.
        count = np.bincount(X.indices, minlength=X.shape[1])
        zeros = np.abs(offset[count < X.shape[0]])
        return float(max(stored.max(initial=0.0), zeros.max(initial=0.0)))
    if X.size == 0:
        return 0.0
    # Column extremes avoid an n x d temporary.
    high = float(np.max(X.max(axis=0) - offset))
    low = float(np.max(offset - X.min(axis=0)))
    return max(high, low)


def check_representable(X, offset, magnitude, total_weight, what="X"):
    """Raise a ``ValueError`` when ``X``'s distortion cannot be represented.

    The centres and labels of any finite data can be computed in working
    units, but the inertia and the free energy are reported in the user's
    units, as float64: squared distances up to ``4 d magnitude^2`` summed
    with the total weight must not overflow. The message gives the factor
    to divide ``X`` by.
    """
    limit = float(np.finfo(np.float64).max)
    finite = np.all(np.isfinite(offset)) and np.isfinite(magnitude)
    if finite and magnitude == 0:
        return
    # In log2, since magnitude^2 itself may overflow.
    budget = np.log2(limit) - np.log2(4.0 * max(X.shape[1], 1) * total_weight)
    if finite and 2.0 * np.log2(magnitude) < budget:
        return
    if not finite:
        raise ValueError(
            f"{what} is too large to cluster in {X.dtype}: its weighted mean "
            f"overflows (the largest {X.dtype} is {np.finfo(X.dtype).max:.3g}). "
            f"Divide {what} by a constant, or use float64."
        )
    factor = 2.0 ** np.ceil(np.log2(magnitude) - budget / 2.0 + 1.0)
    raise ValueError(
        f"{what} is too large to cluster: its squared distances (up to "
        f"{magnitude:.3g}^2) summed over the samples overflow float64, so the "
        f"inertia cannot be represented. Divide {what} by at least "
        f"{factor:.3g}."
    )


def scaled(X, scale):
    """``X / scale`` (a copy) or ``X`` itself when ``scale`` is 1."""
    if scale == 1.0:
        return X
    inv = X.dtype.type(1.0 / scale)
    # A power of 2: exact, but subnormal entries still raise the underflow
    # flag on the way.
    with np.errstate(under="ignore"):
        if sp.issparse(X):
            return X * inv
        return np.multiply(X, inv)
