"""The thread policy of the public entry points, and the engine's threads.

Every public method and function that runs the engine runs with BLAS limited
to one thread, as KMeans does: the engine's products are per block (1 to 4
MiB of scores), too small to gain from BLAS threads, and on a busy machine
spinning BLAS threads slowed a fit down twentyfold.

The engine's passes run their row blocks on a pool of threads instead (NumPy
and BLAS release the GIL), as many as KMeans would use: all cores by
default, fewer under ``OMP_NUM_THREADS`` or
``threadpoolctl.threadpool_limits``. The blocks are fixed by the data's
shape alone and each block's sums are added in block order, so the results
are bit for bit the same for every number of threads.
"""

import contextvars
import functools
from concurrent.futures import ThreadPoolExecutor

from sklearn.utils._openmp_helpers import _openmp_effective_n_threads
from threadpoolctl import ThreadpoolController


@functools.cache
def _controller():
    return ThreadpoolController()


def one_blas_thread(func):
    """Run ``func`` with BLAS limited to one thread."""

    @functools.wraps(func)
    def wrapper(*args, **kwargs):
        with _controller().limit(limits=1, user_api="blas"):
            return func(*args, **kwargs)

    return wrapper


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


def map_blocks(func, items, max_threads=None):
    """``[func(item) for item in items]``, on the engine's threads.

    The results come in the order of ``items`` whatever the number of
    threads (at most ``max_threads``, and half the number of items). Each
    call runs in a copy of the caller's context, so NumPy's ``errstate`` (a
    context variable) holds in the workers too.
    """
    items = list(items)
    # Two blocks or more per thread: with fewer, handing blocks over and the
    # GIL-held steps between them cost more than the threads gain (an
    # annealing fit on 20000 rows in two blocks ran 10% slower on two).
    n_threads = min(engine_threads(), len(items) // 2, max_threads or len(items))
    if n_threads <= 1:
        return list(map(func, items))
    context = contextvars.copy_context()
    return list(
        _pool(n_threads).map(lambda item: context.copy().run(func, item), items)
    )
