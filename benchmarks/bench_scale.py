"""Time of one RBFKMeans EM iteration: NumPy in process vs dask on a cluster.

One iteration is one pass of the block kernel over all rows (the E-step and
the sufficient statistics) plus the M-step on the driver. Rows:

- ``numpy``: ``statistics`` + ``m_step`` on an in-memory array, in this process.
- ``dask, W worker(s)``: the same pass over a dask array persisted on a
  ``LocalCluster`` of W single-threaded worker processes (``fit``'s pass:
  ``DaskRows.stats``, one tree reduction and one ``compute`` per iteration).
- ``memmap, 2 workers``: the rows of a ``.npy`` file larger than each
  worker's memory limit, read block by block from a memory map inside the
  tasks (nothing persisted): the pass streams the file.
- ``numpy memmap``: ``statistics`` on the memory-mapped file in this process.

The data are ``k`` Gaussian blobs of unit spread in a box of side 20,
generated block by block from fixed seeds (the same rows everywhere);
softmax at ``sigma=1`` from fixed centres. ``peak RSS / worker`` is the
largest resident set of each worker process during the timed iterations
(sampled every 5 ms with psutil), ``ratio`` the median time relative to the
NumPy row of the same data. One BLAS thread everywhere; the runs compared
alternate in rounds (medians of ``--repeat`` rounds after one warm-up), so
other work on the machine falls on all of them: read the ratios, and the
load average printed with the table.

dask's workers start with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc
map (and zero) every temporary array above 128 KiB afresh: with that variable
set, the same pass in one process took about 25% longer than without.
``--malloc heap`` raises the trim threshold and fixes the mmap threshold at
32 MiB for the workers, to measure the difference.

Run: ``python benchmarks/bench_scale.py [--n 1e7] [--n-memmap 3e7] [--k 32]
[--repeat 3] [--chunk 250000] [--dir /tmp] [--malloc {dask,heap}]``.
"""

import argparse
import os
import statistics
import sys
import tempfile
import time
from contextlib import ExitStack, nullcontext

import numpy as np
from threadpoolctl import threadpool_limits

from skrbfkmeans import RBFKMeans
from skrbfkmeans._dask import DaskRows
from skrbfkmeans._engine.passes import data_offset, m_step, squared_norms
from skrbfkmeans._engine.passes import statistics as stats_pass


def distributed_wait(X):
    from distributed import wait

    wait(X)


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


class NumpyRun:
    """One EM iteration on an in-memory (or memory-mapped) array."""

    def __init__(self, X, init):
        self.X, self.w = X, np.ones(X.shape[0])
        self.offset = data_offset(X, self.w)
        self.x_sq = squared_norms(X, self.offset)
        self.centers = init

    def step(self):
        res = stats_pass(
            self.X, self.w, self.centers, SIGMA, "softmax", self.offset, self.x_sq
        )
        self.centers = m_step(res.N, res.S, self.centers, self.offset)


class DaskRun:
    """One EM iteration as ``fit`` runs it on dask input (``DaskRows.stats``)."""

    def __init__(self, X, init):
        k = init.shape[0]
        self.rows = DaskRows(RBFKMeans(n_clusters=k), X, None, k)
        self.centers = init

    def step(self):
        N, S, _ = self.rows.stats(self.centers, SIGMA, "softmax")
        self.centers = m_step(N, S, self.centers, self.rows.offset)


def _start_rss_monitor(dask_worker):
    # Sample the worker's resident set every 5 ms from a thread: getrusage's
    # peak is inherited from the parent process at fork, so it says nothing.
    import threading

    import psutil

    proc, state = psutil.Process(), {"peak": 0, "stop": False}

    def sample():
        while not state["stop"]:
            state["peak"] = max(state["peak"], proc.memory_info().rss)
            time.sleep(0.005)

    threading.Thread(target=sample, daemon=True).start()
    dask_worker._bench_rss = state


def _read_rss(dask_worker):
    dask_worker._bench_rss["stop"] = True
    return dask_worker._bench_rss["peak"]


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
    return lc, Client(lc, set_as_default=False)


def rounds(runs, repeat):
    """Median seconds per iteration of each run, in interleaved rounds."""
    times = {name: [] for name in runs}
    for r in range(repeat + 1):
        for name, (run, client) in runs.items():
            # Each dask run computes on its own cluster.
            ctx = client.as_current() if client is not None else nullcontext()
            with ctx:
                t0 = time.perf_counter()
                run.step()
                if r:  # the first round warms up
                    times[name].append(time.perf_counter() - t0)
        done = ", ".join(f"{n} {t[-1]:.2f}s" for n, t in times.items() if t)
        print(f"round {r}: {done}", file=sys.stderr)
    return {name: statistics.median(t) for name, t in times.items()}


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
    parser.add_argument(
        "--malloc",
        choices=["dask", "heap"],
        default="dask",
        help="dask: the workers' default MALLOC_TRIM_THRESHOLD_=65536; heap: "
        "trim and mmap thresholds of 128 and 32 MiB, so that the kernel's "
        "temporary arrays are reused from the heap instead of mapped afresh",
    )
    args = parser.parse_args()
    if args.malloc == "heap":
        import dask

        env = "distributed.nanny.pre-spawn-environ."
        dask.config.set({
            env + "MALLOC_TRIM_THRESHOLD_": 2**27,
            env + "MALLOC_MMAP_THRESHOLD_": 2**25,
        })  # fmt: skip
    n, n_mm, k, chunk = int(args.n), int(args.n_memmap), args.k, args.chunk
    centers = blob_centers(k)
    init = centers + np.random.RandomState(1).standard_normal(centers.shape)
    table = []

    with threadpool_limits(1), ExitStack() as stack:
        # In memory: NumPy here, the same rows persisted on 1 and 2 workers.
        runs = {"numpy": (NumpyRun(numpy_data(n, chunk, centers), init), None)}
        clients = {}
        for n_workers in (1, 2):
            lc, client = cluster(n_workers, "16GiB")
            stack.enter_context(lc)
            stack.enter_context(client)
            with client.as_current():
                X = da.map_blocks(
                    _blob_task, centers, chunk, n, chunks=row_chunks(n, chunk),
                    dtype=np.float64,
                ).persist()  # fmt: skip
                distributed_wait(X)
                name = f"dask, {n_workers} worker(s)"
                runs[name] = (DaskRun(X, init), client)
            client.run(_start_rss_monitor)
            clients[name] = client
        medians = rounds(runs, args.repeat)
        for name, t in medians.items():
            rss = None
            if name in clients:
                rss = sorted(clients[name].run(_read_rss).values())
            table.append((name, f"{n:.0e} x {D}", t, rss, medians["numpy"]))
        del runs
        stack.close()

        # A file larger than each worker's memory limit, streamed block by
        # block on 2 workers, against NumPy on the memory map in this process.
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
            stack.enter_context(lc)
            stack.enter_context(client)
            with client.as_current():
                X = da.map_blocks(
                    _load_task, path, chunk, n_mm, chunks=row_chunks(n_mm, chunk),
                    dtype=np.float64,
                )  # fmt: skip
                dask_run = DaskRun(X, init)
            client.run(_start_rss_monitor)
            name = f"memmap, 2 workers ({args.memory_limit} each)"
            runs = {
                "numpy memmap": (NumpyRun(np.load(path, mmap_mode="r"), init), None),
                name: (dask_run, client),
            }
            medians = rounds(runs, args.repeat)
            rss = sorted(client.run(_read_rss).values())
            for key, t in medians.items():
                mem = rss if key == name else None
                ref = medians["numpy memmap"]
                table.append((key, f"{n_mm:.0e} x {D}", t, mem, ref))
            del runs
            stack.close()
        finally:
            os.remove(path)

    print(
        f"One EM iteration (softmax, k={k}, d={D}, float64, chunks of {chunk} "
        f"rows); memmap file {size / 2**30:.2f} GiB; medians of {args.repeat} "
        f"interleaved rounds; worker malloc: {args.malloc}."
    )
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs; load average at the end (1, 5, 15 min): {load}")
    print(f"{'run':<34} {'rows':>10} {'s/iter':>8} {'ratio':>6}  peak RSS / worker")
    for name, shape, t, rss, ref in table:
        mem = "" if rss is None else ", ".join(f"{r / 2**20:.0f} MiB" for r in rss)
        print(f"{name:<34} {shape:>10} {t:8.3f} {t / ref:6.2f}  {mem}")
    print("ratio: to the NumPy row of the same data.")


if __name__ == "__main__":
    main()
