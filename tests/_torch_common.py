"""Shared settings of the PyTorch tests: the devices and one thread.

Imported by ``test_torch_*.py`` after ``pytest.importorskip("torch")``.
"""

from functools import partial

import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

import skrbfkmeans  # noqa: E402
from skrbfkmeans.torch import entmax15, entmax_bisect, sparsemax  # noqa: E402

# The CPU, and CUDA where there is a device (its results must match the CPU's
# within float tolerance).
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=pytest.mark.skipif(
            not torch.cuda.is_available(), reason="no CUDA device"
        ),
    ),
]


def maps(bisect_alphas):
    """name -> (torch map, NumPy map, alpha) of the three maps, the bisection
    at each of ``bisect_alphas``."""
    return {
        "entmax15": (entmax15, skrbfkmeans.entmax15, 1.5),
        "sparsemax": (sparsemax, skrbfkmeans.sparsemax, 2.0),
        **{
            f"bisect-{a:g}": (
                partial(entmax_bisect, alpha=a),
                partial(skrbfkmeans.entmax_bisect, alpha=a),
                a,
            )
            for a in bisect_alphas
        },
    }


@pytest.fixture(autouse=True)
def one_torch_thread():
    """Run each test on one torch thread, then restore the count.

    Small tensors: a second thread only adds synchronisation (7x slower on a
    busy 2-core machine).
    """
    n_threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n_threads)
