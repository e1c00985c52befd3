"""K-Means inside neural networks: the package's maps, loss and a layer in PyTorch.

Needs PyTorch (``pip install "skrbfkmeans[torch]"``); ``import skrbfkmeans``
alone never imports it. Every function works on tensors of any floating
dtype, on any device, and equals the NumPy function of the same name in
``skrbfkmeans`` to rounding in float64.
"""

try:
    import torch  # noqa: F401
except ImportError as err:  # pragma: no cover - exercised without torch
    raise ImportError(
        "skrbfkmeans.torch needs PyTorch, which is not installed. Install the "
        'extra with: pip install "skrbfkmeans[torch]"'
    ) from err

from ._layer import RBFKMeansLayer
from ._loss import rbf_kmeans_loss
from ._maps import entmax15, entmax_bisect, sparsemax
from ._schedule import AnnealingSchedule

__all__ = [
    "AnnealingSchedule",
    "RBFKMeansLayer",
    "entmax15",
    "entmax_bisect",
    "rbf_kmeans_loss",
    "sparsemax",
]
