"""K-Means as a differentiable RBF network, compatible with scikit-learn."""

from ._annealed_rbf_kmeans import AnnealedRBFKMeans
from ._entmax import entmax15, entmax_backward, entmax_bisect, sparsemax
from ._loss import rbf_kmeans_loss
from ._polish import kmeans_polish
from ._rbf_kmeans import RBFKMeans
from ._version import __version__

__all__ = [
    "AnnealedRBFKMeans",
    "RBFKMeans",
    "__version__",
    "entmax15",
    "entmax_backward",
    "entmax_bisect",
    "kmeans_polish",
    "rbf_kmeans_loss",
    "sparsemax",
]
