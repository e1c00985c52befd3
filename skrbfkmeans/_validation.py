"""Checks of sample weights and sample counts, shared by every entry point.

The estimators, ``kmeans_polish``, ``rbf_kmeans_loss`` and the dask rows
raise the same errors, with scikit-learn's messages.
"""

from sklearn.utils.validation import _check_sample_weight


def check_sample_weight(sample_weight, X):
    """Return the weights in the dtype of ``X``: non-negative, not all zero.

    ``None`` gives every sample weight 1. The messages are those of
    ``sklearn.utils.validation._check_sample_weight`` (shape, NaN, infinity,
    negative values), plus one for weights that are all zero.
    """
    sample_weight = _check_sample_weight(
        sample_weight, X, dtype=X.dtype, ensure_non_negative=True
    )
    check_some_weight(sample_weight.any())
    return sample_weight


def check_some_weight(any_positive):
    """Raise the error for weights that are all zero, unless ``any_positive``."""
    if not any_positive:
        raise ValueError("Sample weights must contain at least one non-zero number.")


def check_n_samples(n_samples, n_clusters, where=""):
    """Raise KMeans's error when there are fewer samples than clusters."""
    if n_samples < n_clusters:
        raise ValueError(
            f"n_samples={n_samples} should be >= n_clusters={n_clusters}{where}."
        )
