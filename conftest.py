"""Collection settings for the whole repository.

``skrbfkmeans.torch`` needs the optional PyTorch extra: without it, its
modules (and their doctests) are not collected, and the test files skip
with a reason (``tests/test_torch_*.py``). Looking the package up does not
import it, so the rest of the suite runs without PyTorch loaded.
"""

import importlib.util

import pytest

try:
    _HAS_TORCH = importlib.util.find_spec("torch") is not None
except (ImportError, ValueError):
    _HAS_TORCH = False

collect_ignore = [] if _HAS_TORCH else ["skrbfkmeans/torch"]


def pytest_addoption(parser):
    """Add ``--extended``: also run the tests marked ``extended``."""
    parser.addoption(
        "--extended",
        action="store_true",
        help="also run the tests marked 'extended' (the adversarial catalogue, "
        "the benchmarks' smoke runs); .ci/run runs them in a step of their own",
    )


def pytest_collection_modifyitems(config, items):
    """Skip the ``extended`` tests unless ``--extended`` was given."""
    if config.getoption("--extended"):
        return
    skip = pytest.mark.skip(reason="extended: run with pytest --extended")
    for item in items:
        if "extended" in item.keywords:
            item.add_marker(skip)
