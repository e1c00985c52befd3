"""The engine's threads.

The public entry points run BLAS on one thread (``_policy``); the engine's
passes run their row blocks on a pool of threads instead (NumPy
and BLAS release the GIL), as many as KMeans would use: all cores by
default, fewer under ``OMP_NUM_THREADS`` or
``threadpoolctl.threadpool_limits``. The blocks are fixed by the data's
shape alone and each block's sums are added in block order, so the results
are bit for bit the same for every number of threads.
"""

import contextvars
from concurrent.futures import ThreadPoolExecutor

from sklearn.utils._openmp_helpers import _openmp_effective_n_threads


def engine_threads():
    """Return the number of threads for the block passes (as KMeans counts)."""
    return _openmp_effective_n_threads()


_POOLS = {}


def _pool(n_threads):
    pool = _POOLS.get(n_threads)
    if pool is None:
        pool = ThreadPoolExecutor(n_threads, thread_name_prefix="skrbfkmeans")
        _POOLS[n_threads] = pool
    return pool


def block_threads(n_items, max_threads=None):
    """Return the threads a map over ``n_items`` blocks runs on (1: the caller's).

    At most ``max_threads``, and two blocks or more per thread: with fewer,
    handing blocks over and the GIL-held steps between them cost more than
    the threads gain (an annealing fit on 20000 rows in two blocks ran 10%
    slower on two).
    """
    return min(engine_threads(), n_items // 2, max_threads or n_items)


def map_blocks(func, items, max_threads=None):
    """``[func(item) for item in items]``, on the engine's threads.

    The results come in the order of ``items`` whatever the number of
    threads (at most ``max_threads``, and half the number of items). Each
    call runs in a copy of the caller's context, so NumPy's ``errstate`` (a
    context variable) holds in the workers too.
    """
    items = list(items)
    n_threads = block_threads(len(items), max_threads)
    if n_threads <= 1:
        return list(map(func, items))
    context = contextvars.copy_context()
    return list(
        _pool(n_threads).map(lambda item: context.copy().run(func, item), items)
    )
