"""Shared settings of the PyTorch tests: the devices and one thread.

Imported by ``test_torch_*.py`` after ``pytest.importorskip("torch")``.
"""

import pytest

torch = pytest.importorskip(
    "torch", reason='PyTorch not installed (pip install "skrbfkmeans[torch]")'
)

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
