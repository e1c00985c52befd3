"""Time of one RBFKMeans EM iteration: NumPy in process vs dask on a cluster.

One iteration is one pass of the block kernel over all rows (the E-step and
the sufficient statistics) plus the M-step on the driver. Rows:

- ``numpy``: ``rbf_pass`` + ``m_step`` on an in-memory array, in this process.
- ``dask, W worker(s)``: the same pass over a dask array persisted on a
  ``LocalCluster`` of W single-threaded worker processes (``fit``'s pass:
  ``DaskRows.stats``, one tree reduction and one ``compute`` per iteration).
- ``memmap, 2 workers``: the rows of a ``.npy`` file larger than each
  worker's memory limit, read block by block from a memory map inside the
  tasks (nothing persisted): the pass streams the file.
- ``numpy memmap``: ``rbf_pass`` on the memory-mapped file in this process.

The data are ``k`` Gaussian blobs of unit spread in a box of side 20,
generated block by block from fixed seeds (the same rows everywhere);
softmax at ``sigma=1`` from fixed centres. ``peak RSS / worker`` is the
largest resident set of each worker process over its life (``getrusage``),
``ratio`` the median time relative to the NumPy row. One BLAS thread
everywhere; medians of ``--repeat`` iterations after one warm-up. The machine
may be shared: read the ratios.

Run: ``python benchmarks/bench_scale.py [--n 1e7] [--n-memmap 3e7] [--k 32]
[--repeat 3] [--chunk 250000] [--dir /tmp]``.
"""

import argparse
import os
import resource
import statistics
import tempfile
import time

import numpy as np
from threadpoolctl import threadpool_limits

from skrbfkmeans import RBFKMeans
from skrbfkmeans._dask import DaskRows
from skrbfkmeans._engine import data_offset, m_step, rbf_pass, squared_norms

D = 16
SIGMA = 1.0


def blob_centers(k, seed=0):
    return np.random.RandomState(seed).uniform(-10, 10, size=(k, D))


def blob_block(index, rows, centers):
    """Rows of block ``index``: the same values whoever generates them."""
    rng = np.random.RandomState(1000 + index)
    labels = rng.randint(centers.shape[0], size=rows)
    return centers[labels] + rng.standard_normal((rows, D))


def _blob_task(centers, chunk, n, block_id=None):
    start = block_id[0] * chunk
    return blob_block(block_id[0], min(chunk, n - start), centers)


def _load_task(path, chunk, n, block_id=None):
    # Open the map inside the task and copy the block out: only one block of
    # the file is resident in the worker at a time.
    start = block_id[0] * chunk
    mm = np.load(path, mmap_mode="r")
    block = np.array(mm[start : min(start + chunk, n)])
    del mm
    return block


def row_chunks(n, chunk):
    sizes = [chunk] * (n // chunk)
    if n % chunk:
        sizes.append(n % chunk)
    return (tuple(sizes), (D,))


def numpy_data(n, chunk, centers):
    X = np.empty((n, D))
    for i, start in enumerate(range(0, n, chunk)):
        rows = min(chunk, n - start)
        X[start : start + rows] = blob_block(i, rows, centers)
    return X


def time_numpy(X, init, repeat):
    w = np.ones(X.shape[0])
    offset = data_offset(X, w)
    x_sq = squared_norms(X, offset)
    centers, times = init, []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        res = rbf_pass(X, w, centers, SIGMA, "softmax", offset, x_sq)
        centers = m_step(res.N, res.S, centers, offset)
        times.append(time.perf_counter() - t0)
    return times[1:]


def time_dask(X, init, repeat):
    rows = DaskRows(RBFKMeans(n_clusters=init.shape[0]), X, None, init.shape[0])
    centers, times = init, []
    for _ in range(repeat + 1):
        t0 = time.perf_counter()
        N, S, _ = rows.stats(centers, SIGMA, "softmax")
        centers = m_step(N, S, centers, rows.offset)
        times.append(time.perf_counter() - t0)
    return times[1:]


def peak_rss(client):
    def rss():
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024

    return sorted(client.run(rss).values())


def cluster(n_workers, memory_limit):
    from distributed import Client, LocalCluster

    lc = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=True,
        dashboard_address=None,
        host="127.0.0.1",
        memory_limit=memory_limit,
    )
    return lc, Client(lc)


def main():
    import dask.array as da

    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=float, default=1e7)
    parser.add_argument("--n-memmap", type=float, default=3e7)
    parser.add_argument("--k", type=int, default=32)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--chunk", type=int, default=250_000)
    parser.add_argument("--memory-limit", default="1GiB")
    parser.add_argument("--dir", default=tempfile.gettempdir())
    args = parser.parse_args()
    n, n_mm, k, chunk = int(args.n), int(args.n_memmap), args.k, args.chunk
    centers = blob_centers(k)
    init = centers + np.random.RandomState(1).standard_normal(centers.shape)
    table = []

    with threadpool_limits(1):
        X = numpy_data(n, chunk, centers)
        ref = statistics.median(time_numpy(X, init, args.repeat))
        table.append(("numpy", f"{n:.0e} x {D}", ref, None, "mem"))
        del X

        for n_workers in (1, 2):
            # Room for the persisted rows: this run measures speed, not memory.
            lc, client = cluster(n_workers, "16GiB")
            with lc, client:
                X = da.map_blocks(
                    _blob_task, centers, chunk, n, chunks=row_chunks(n, chunk),
                    dtype=np.float64,
                ).persist()  # fmt: skip
                t = statistics.median(time_dask(X, init, args.repeat))
                table.append(
                    (f"dask, {n_workers} worker(s)", f"{n:.0e} x {D}", t,
                     peak_rss(client), "mem")
                )  # fmt: skip

        path = os.path.join(args.dir, "bench_scale_rows.npy")
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                       shape=(n_mm, D))  # fmt: skip
        for i, start in enumerate(range(0, n_mm, chunk)):
            rows = min(chunk, n_mm - start)
            mm[start : start + rows] = blob_block(i, rows, centers)
        mm.flush()
        del mm
        size = os.path.getsize(path)
        try:
            lc, client = cluster(2, args.memory_limit)
            with lc, client:
                X = da.map_blocks(
                    _load_task, path, chunk, n_mm, chunks=row_chunks(n_mm, chunk),
                    dtype=np.float64,
                )  # fmt: skip
                t = statistics.median(time_dask(X, init, args.repeat))
                table.append(
                    (f"memmap, 2 workers ({args.memory_limit} each)",
                     f"{n_mm:.0e} x {D}", t, peak_rss(client), "file")
                )  # fmt: skip
            X = np.load(path, mmap_mode="r")
            t_np = statistics.median(time_numpy(X, init, args.repeat))
            table.append(("numpy memmap", f"{n_mm:.0e} x {D}", t_np, None, "file"))
            del X
        finally:
            os.remove(path)

    print(
        f"One EM iteration (softmax, k={k}, d={D}, float64, chunks of {chunk} "
        f"rows); memmap file {size / 2**30:.2f} GiB; medians of {args.repeat}."
    )
    print(f"{'run':<34} {'rows':>10} {'s/iter':>8} {'ratio':>6}  peak RSS / worker")
    refs = {"mem": ref, "file": table[-1][2]}
    for name, shape, t, rss, group in table:
        ratio = t / refs[group]
        mem = "" if rss is None else ", ".join(f"{r / 2**20:.0f} MiB" for r in rss)
        print(f"{name:<34} {shape:>10} {t:8.3f} {ratio:6.2f}  {mem}")
    print("ratio: to 'numpy' for the in-memory rows, to 'numpy memmap' for the file.")


if __name__ == "__main__":
    main()
