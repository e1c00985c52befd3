"""Checks of sample weights and sample counts, shared by every entry point.

The estimators, ``kmeans_polish``, ``kmeans_hartigan``, ``rbf_kmeans_loss``
and the dask rows raise the same errors, with scikit-learn's messages;
``warn_user`` issues their warnings at the caller's line.
"""

import os
import sys
import warnings

import joblib
import numpy as np
import sklearn
from sklearn.utils import check_array
from sklearn.utils.validation import _check_sample_weight

_PACKAGE_DIR = os.path.dirname(os.path.abspath(__file__)) + os.sep
# Code that calls the package's entry points for the user: scikit-learn's
# wrappers (_fit_context, validate_params, set_output), its meta-estimators
# (Pipeline, GridSearchCV, cross_validate) and joblib, which runs their fits.
_CALLER_DIRS = tuple(
    os.path.dirname(os.path.abspath(module.__file__)) + os.sep
    for module in (sklearn, joblib)
)


def warn_user(message, category):
    """``warnings.warn`` attributed to the user's line that called the package.

    Frames of this package are skipped, and so are scikit-learn's and
    joblib's: those of the wrappers of its entry points, and those of a
    Pipeline or a search that fits an estimator of the package. The warning
    names the first frame outside them, whatever the depth of the call; in
    a worker with no such frame (a search with ``n_jobs > 1``), the first
    frame outside the package.
    """
    frame, level, first_outside = sys._getframe(1), 2, None
    while frame is not None:
        filename = os.path.abspath(frame.f_code.co_filename)
        if not filename.startswith(_PACKAGE_DIR):
            first_outside = first_outside or level
            if not filename.startswith(_CALLER_DIRS):
                break
        frame, level = frame.f_back, level + 1
    if frame is None:
        level = first_outside or level
    warnings.warn(message, category, stacklevel=level)


def check_sample_weight(sample_weight, X, *, fit=True):
    """Return the weights in the dtype of ``X``: non-negative, not all zero.

    ``None`` gives every sample weight 1. The messages are those of
    ``sklearn.utils.validation._check_sample_weight`` (shape, NaN, infinity,
    negative values), plus, for a fit, one for weights that are all zero and
    one for weights whose total float64 cannot hold (``score`` takes any
    non-negative weights, as KMeans's does). The weights of dask rows are
    checked in the rows' first pass (``check_weight_counts``).
    """
    sample_weight = _check_sample_weight(
        sample_weight, X, dtype=X.dtype, ensure_non_negative=True
    )
    if fit:
        check_some_weight(sample_weight.any())
        with np.errstate(over="ignore"):
            check_weight_total(sample_weight.sum(dtype=np.float64))
    return sample_weight


def check_weight_counts(n_nan, n_inf, n_negative, total, dtype):
    """Raise ``check_sample_weight``'s errors from counts of bad weights.

    The counts of NaN, infinite and negative weights and the total weight,
    summed over the blocks of dask rows: the messages and their order are
    those of ``check_sample_weight``.
    """
    if n_nan:
        raise ValueError("Input sample_weight contains NaN.")
    if n_inf:
        raise ValueError(
            f"Input sample_weight contains infinity or a value too large for {dtype!r}."
        )
    if n_negative:
        raise ValueError("Negative values in data passed to `sample_weight`.")
    check_some_weight(total > 0)
    check_weight_total(total)


def check_weight_total(total):
    """Raise a clear error when the weights add up to more than float64 holds."""
    if not np.isfinite(total):
        raise ValueError(
            "sample_weight adds up to more than the largest float64 "
            f"({np.finfo(np.float64).max:.3g}): divide the weights by a constant."
        )


def check_some_weight(any_positive):
    """Raise the error for weights that are all zero, unless ``any_positive``."""
    if not any_positive:
        raise ValueError("Sample weights must contain at least one non-zero number.")


def check_n_samples(n_samples, n_clusters, where="", name="n_clusters"):
    """Raise KMeans's error when there are fewer samples than clusters.

    ``name`` names the parameter that asks for ``n_clusters`` clusters.
    """
    if n_samples < n_clusters:
        raise ValueError(
            f"n_samples={n_samples} should be >= {name}={n_clusters}{where}."
        )


def check_data_centers(X, centers, sample_weight):
    """Validate the data, centres and weights of the functional API.

    Returns ``X`` (float32 or float64, dense or CSR), a private copy of the
    centres in the dtype of ``X`` and the weights (non-negative, not all 0).
    """
    X = check_array(X, accept_sparse="csr", dtype=[np.float64, np.float32], order="C")
    centers = check_array(centers, dtype=X.dtype, order="C", copy=True)
    if centers.shape[1] != X.shape[1]:
        raise ValueError(
            f"centers has {centers.shape[1]} features but X has {X.shape[1]}."
        )
    return X, centers, check_sample_weight(sample_weight, X)
