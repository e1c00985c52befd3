"""Widths at the ends of float64: a clear error, or a fit with finite attributes.

The schedule computes with the temperature ``T = 2 sigma^2`` in float64.
A width at which it overflows (``sigma_start=1e300`` raised OverflowError)
or leaves the normal numbers (``sigma_start=1e-300`` rounded every width of
the path to 0 and made ``cluster_count_lifetimes_`` NaN) is refused by name;
every width inside gives a finite fit.
"""

import re

import numpy as np
import pytest
from numpy.testing import assert_array_equal
from sklearn.datasets import load_iris

from skrbfkmeans import AnnealedRBFKMeans

X_IRIS = load_iris().data


@pytest.mark.parametrize(
    "params, name, side",
    [
        ({"sigma_start": 1e300}, "sigma_start", "large"),
        ({"sigma_start": 1e200}, "sigma_start", "large"),
        ({"sigma_end": 1e200}, "sigma_end", "large"),
        ({"sigma_end": 1e200, "init": "k-means++"}, "sigma_end", "large"),
        ({"sigma_start": 1e-300}, "sigma_start", "small"),
        ({"sigma_start": 1e-300, "init": "k-means++"}, "sigma_start", "small"),
        ({"sigma_end": 1e-300}, "sigma_end", "small"),
    ],
    ids=["start-1e300", "start-1e200", "end-1e200", "end-1e200-kmpp",
         "start-1e-300", "start-1e-300-kmpp", "end-1e-300"],
)  # fmt: skip
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_width_out_of_float64_range_is_refused_by_name(params, name, side, dtype):
    # Check that the error names the parameter and its value, and gives a
    # bound in X's units at which 2 sigma^2 indeed leaves float64's normal
    # range (the reference: np.finfo, computed here in float64 arithmetic).
    est = AnnealedRBFKMeans(3, random_state=0, **params)
    expected = re.escape(f"{name}={params[name]:.6g} is too {side}")
    with pytest.raises(ValueError, match=expected) as info:
        est.fit(X_IRIS.astype(dtype))
    where = "above" if side == "large" else "below"
    pattern = rf"{where} {name}=(\S+) in the units of X"
    bound = float(re.search(pattern, str(info.value)).group(1))
    finfo = np.finfo(np.float64)
    inside, outside = (0.9999, 1.0001) if side == "large" else (1.0001, 0.9999)
    with np.errstate(over="ignore", under="ignore"):
        temperature_inside = 2.0 * np.float64(bound * inside) ** 2
        temperature_outside = 2.0 * np.float64(bound * outside) ** 2
    if side == "large":
        assert np.isfinite(temperature_inside) and np.isinf(temperature_outside)
    else:
        assert temperature_inside >= finfo.tiny > temperature_outside
    assert not hasattr(est, "cluster_centers_")


@pytest.mark.parametrize("sigma_start", [9e153, 1e150, 2e-154], ids=str)
def test_widths_just_inside_the_range_fit_finite(sigma_start):
    # Check that widths inside the range fit with finite attributes: above
    # the first critical width (about 2.15 on iris) the fit is the one from
    # sigma_start="auto" after its first stage, below it the schedule splits
    # at once; both end on iris's K-Means solution (inertia 78.85, the
    # KMeans(n_init=10) value).
    est = AnnealedRBFKMeans(3, sigma_start=sigma_start).fit(X_IRIS)
    assert np.all(np.isfinite(est.cluster_count_lifetimes_))
    assert np.all(np.isfinite(est.sigma_path_)) and np.all(est.sigma_path_ > 0)
    assert est.sigma_path_[0] == sigma_start
    assert np.all(np.diff(est.sigma_path_) < 0)
    assert est.certified_
    assert est.inertia_ == pytest.approx(78.851, abs=1e-3)


def test_width_range_is_in_the_units_of_x():
    # Check that the range follows the data: on iris times 2^400 (about
    # 2.6e120, fitted in scaled working units) sigma_start = 2^400 1e100,
    # far above 9.5e153, fits, and is the iris fit at 1e100 scaled by 2^400
    # exactly (a power of 2: the fit is equivariant to the bit).
    scale = 2.0**400
    big = AnnealedRBFKMeans(3, sigma_start=1e100 * scale).fit(X_IRIS * scale)
    ref = AnnealedRBFKMeans(3, sigma_start=1e100).fit(X_IRIS)
    assert_array_equal(big.cluster_centers_, ref.cluster_centers_ * scale)
    assert_array_equal(big.sigma_path_, ref.sigma_path_ * scale)
    assert_array_equal(big.cluster_count_lifetimes_, ref.cluster_count_lifetimes_)
