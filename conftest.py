"""Collection settings for the whole repository.

``skrbfkmeans.torch`` needs the optional PyTorch extra: without it, its
modules (and their doctests) are not collected, and the test files skip
with a reason (``tests/test_torch_*.py``). Looking the package up does not
import it, so the rest of the suite runs without PyTorch loaded.
"""

import importlib.util

try:
    _HAS_TORCH = importlib.util.find_spec("torch") is not None
except (ImportError, ValueError):
    _HAS_TORCH = False

collect_ignore = [] if _HAS_TORCH else ["skrbfkmeans/torch"]
