"""K-Means as a differentiable RBF network, compatible with scikit-learn."""

from ._entmax import entmax15, entmax_backward, entmax_bisect, sparsemax
from ._version import __version__

__all__ = [
    "__version__",
    "entmax15",
    "entmax_backward",
    "entmax_bisect",
    "sparsemax",
]
