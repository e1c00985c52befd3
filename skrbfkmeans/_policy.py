"""The thread policy of the public entry points: BLAS on one thread.

Every public method and function that runs the engine runs with BLAS limited
to one thread, as KMeans does: the engine's products are per block (1 to 4
MiB of scores), too small to gain from BLAS threads, and on a busy machine
spinning BLAS threads slowed a fit down twentyfold. The engine runs its row
blocks on a pool of threads of its own instead (``_engine.threads``).
"""

import functools

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
