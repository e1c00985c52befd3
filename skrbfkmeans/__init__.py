"""K-Means as a differentiable RBF network, compatible with scikit-learn.

The public names are imported on first use (PEP 562), so that
``python -m skrbfkmeans`` handles Ctrl-C from its first moment instead of
while scikit-learn is being imported.
"""

import importlib

from ._version import __version__

# Public name -> the private module that defines it.
_EXPORTS = {
    "AnnealedRBFKMeans": "._annealed_rbf_kmeans",
    "RBFKMeans": "._rbf_kmeans",
    "entmax15": "._entmax",
    "entmax_backward": "._entmax",
    "entmax_bisect": "._entmax",
    "kmeans_hartigan": "._hartigan",
    "kmeans_polish": "._polish",
    "rbf_kmeans_loss": "._loss",
    "sparsemax": "._entmax",
}

__all__ = [
    "AnnealedRBFKMeans",
    "RBFKMeans",
    "__version__",
    "entmax15",
    "entmax_backward",
    "entmax_bisect",
    "kmeans_hartigan",
    "kmeans_polish",
    "rbf_kmeans_loss",
    "sparsemax",
]


def __getattr__(name):
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(_EXPORTS[name], __name__), name)
    globals()[name] = value
    return value


def __dir__():
    return __all__
