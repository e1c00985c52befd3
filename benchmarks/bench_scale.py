"""Dask fits at scale: time, passes over the data and worker memory.

Two tables, each on a ``LocalCluster`` of single-threaded worker processes
that the script starts and closes (nothing external).

**Fits** (``--table fit``): ``RBFKMeans(sigma=0)`` (Lloyd),
``RBFKMeans()`` (softmax, ``sigma="auto"``) and ``AnnealedRBFKMeans()``
fitted on ``--fit-k`` Gaussian blobs in 16-D, float32, generated lazily
chunk by chunk inside the tasks (nothing persisted, nothing gathered), on 2
workers, at each size of ``--fit-n``. Columns:

- ``time``: the wall time of ``fit``; ``cpu``: the CPU time (user and
  system) of the workers during the fit, which other work on the machine
  changes less than it changes the wall time;
- ``passes``: chunks generated during the fit / chunks of ``X`` (every chunk
  task counts its calls on its worker), then the same per phase:
  ``setup`` (``DaskRows``'s construction and the in-memory sample),
  ``iter`` (the iterations on every row), ``cert`` (the certificate:
  ``margin_checks``, one pass, two when its weight bounds leave a row
  undecided, and the Lloyd step at the centres, which a converged Lloyd
  run has just made and the rows keep) and ``final`` (the final pass);
- ``cert %``: the certificate's share of the fit's time;
- ``peak RSS / worker``: the largest resident set of each worker process
  during the fit (sampled every 5 ms with psutil; the processes are the
  same for every fit, collected and trimmed before each).

Targets: the peak within 20% across sizes (workers whose memory does not
grow with n) and a setup of at most 2 passes.

**One EM iteration** (``--table iteration``): one pass of the block kernel
over all rows (the E-step and the sufficient statistics) plus the M-step on
the driver. Rows:

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
largest resident set of each worker process during the timed iterations,
``ratio`` the median time relative to the NumPy row of the same data. One
BLAS thread everywhere; the runs compared alternate in rounds (medians of
``--repeat`` rounds after one warm-up), so other work on the machine falls
on all of them: read the ratios, and the load average printed with the
table.

dask's workers start with ``MALLOC_TRIM_THRESHOLD_=65536``, which makes glibc
map (and zero) every temporary array above 128 KiB afresh: with that variable
set, the same pass in one process took about 25% longer than without.
``--malloc heap`` raises the trim threshold and fixes the mmap threshold at
32 MiB for the workers, to measure the difference.

Run: ``python benchmarks/bench_scale.py [--table {fit,iteration,both}]
[--fit-n 2e6,1e7,2e7] [--fit-k 16] [--fit-memory-limit 4GiB] [--n 1e7]
[--n-memmap 3e7] [--k 32] [--repeat 3] [--chunk 250000] [--dir /tmp]
[--malloc {dask,heap}] [--smoke]``; ``--smoke`` runs both tables on tiny
sizes with workers that are threads of this process (a check that the script
runs, in seconds; its memory and times mean nothing).
"""

import argparse
import ctypes
import gc
import os
import statistics
import sys
import tempfile
import time
import warnings
from contextlib import ExitStack, contextmanager, nullcontext

import numpy as np
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans, _dask, _iterations
from skrbfkmeans._dask import DaskRows, as_dask_array, dask_rows
from skrbfkmeans._engine.passes import data_offset, m_step, squared_norms
from skrbfkmeans._engine.passes import statistics as stats_pass


def distributed_wait(X):
    from distributed import wait

    wait(X)


D = 16
SIGMA = 1.0
SMOKE = {
    "n": 2e4, "n_memmap": 4e4, "chunk": 5000, "repeat": 1, "k": 4,
    "fit_n": "2e4", "fit_k": 4,
}  # fmt: skip


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


def _counted_blob_task(centers, chunk, n, block_id=None):
    # Each call is one chunk generated: the worker keeps the count.
    from distributed import get_worker

    worker = get_worker()
    worker._bench_chunks = getattr(worker, "_bench_chunks", 0) + 1
    return _blob_task(centers, chunk, n, block_id).astype(np.float32)


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
        X = as_dask_array(RBFKMeans(n_clusters=k), X, reset=True, check_finite=False)
        self.rows = dask_rows(X, None, "RBFKMeans")
        self.centers = init

    def step(self):
        res = self.rows.stats(self.centers, SIGMA, "softmax")
        N, S = res.N, res.S
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


def _fresh_worker(dask_worker):
    """Collect, give freed memory back to the system, zero the chunk count."""
    gc.collect()
    try:
        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass
    dask_worker._bench_chunks = 0


def _chunks_generated(dask_worker):
    return getattr(dask_worker, "_bench_chunks", 0)


def _cpu_seconds(dask_worker):
    import psutil

    times = psutil.Process().cpu_times()
    return times.user + times.system


def cluster(n_workers, memory_limit, processes=True):
    """A ``LocalCluster`` of single-threaded workers and its client.

    ``processes=False`` (``--smoke``) makes the workers threads of this
    process: they start in a fraction of the time, but their memory is this
    process's.
    """
    from distributed import Client, LocalCluster

    # Processes listen on the loopback; threads talk in process ("inproc").
    host = {"host": "127.0.0.1"} if processes else {}
    lc = LocalCluster(
        n_workers=n_workers,
        threads_per_worker=1,
        processes=processes,
        dashboard_address=None,
        memory_limit=memory_limit,
        **host,
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


# -- fits ---------------------------------------------------------------------

PHASES = ("setup", "iter", "cert", "final")
# The phase of each DaskRows method, of the rows' construction
# (``_dask.dask_rows``) and of the certificate's margin checks
# (``_iterations.margin_checks``); ``stats`` after ``margin_checks`` is the
# certificate's step at the certified width.
METHOD_PHASES = {
    "dask_rows": "setup",
    "sample": "setup",
    "weight_sample": "setup",
    "stats": "iter",
    "margin_checks": "cert",
    "final": "final",
}
CERTIFICATE_PASSES = ("margin_checks",)
SETUP_PASSES = ("dask_rows",)


def fit_estimators(k):
    return {
        "RBFKMeans(sigma=0)": RBFKMeans(k, sigma=0, random_state=0),
        "RBFKMeans() softmax": RBFKMeans(k, random_state=0),
        "AnnealedRBFKMeans()": AnnealedRBFKMeans(k),
    }


class PhaseClock:
    """Seconds and chunks generated in each phase of a dask fit.

    Wraps ``DaskRows``'s methods and the certificate's margin checks (the
    driver's side of every pass) while active; the chunk counts are read
    from the workers after each call.
    """

    def __init__(self, client):
        self.client = client
        self.seconds = dict.fromkeys(PHASES, 0.0)
        self.chunks = dict.fromkeys(PHASES, 0)
        self._certifying = False

    def _generated(self):
        return sum(self.client.run(_chunks_generated).values())

    def _wrap(self, name, method):
        def timed(rows, *args, **kwargs):
            phase = METHOD_PHASES[name]
            if name == "margin_checks" and rows.in_memory:
                # The annealed sample's certificate reads no chunk.
                return method(rows, *args, **kwargs)
            if name == "margin_checks":
                self._certifying = True
            elif name == "final":
                self._certifying = False
            if phase == "iter" and self._certifying:
                phase = "cert"
            before = self._generated()
            t0 = time.perf_counter()
            try:
                return method(rows, *args, **kwargs)
            finally:
                self.seconds[phase] += time.perf_counter() - t0
                self.chunks[phase] += self._generated() - before

        return timed

    @contextmanager
    def active(self):
        def owner(name):
            if name in SETUP_PASSES:
                return _dask
            return _iterations if name in CERTIFICATE_PASSES else DaskRows

        saved = {name: getattr(owner(name), name) for name in METHOD_PHASES}
        try:
            for name, method in saved.items():
                setattr(owner(name), name, self._wrap(name, method))
            yield self
        finally:
            for name, method in saved.items():
                setattr(owner(name), name, method)


def lazy_blobs(n, chunk, centers):
    """float32 blobs generated chunk by chunk in the tasks (nothing persisted)."""
    import dask.array as da

    return da.map_blocks(
        _counted_blob_task, centers, chunk, n, chunks=row_chunks(n, chunk),
        dtype=np.float32,
    )  # fmt: skip


def measure_fit(client, est, X):
    """One fit on the cluster: time, chunks generated (total, per phase), peak RSS."""
    client.run(_fresh_worker)
    client.run(_start_rss_monitor)
    cpu = sum(client.run(_cpu_seconds).values())
    clock = PhaseClock(client)
    with clock.active(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # ConvergenceWarning at max_iter
        t0 = time.perf_counter()
        est.fit(X)
        seconds = time.perf_counter() - t0
    rss = sorted(client.run(_read_rss).values())
    generated = sum(client.run(_chunks_generated).values())
    return {
        "time": seconds,
        "cpu": sum(client.run(_cpu_seconds).values()) - cpu,
        "passes": generated / X.numblocks[0],
        "phases": {p: c / X.numblocks[0] for p, c in clock.chunks.items()},
        "cert_share": clock.seconds["cert"] / seconds,
        "rss": rss,
        "n_iter": int(est.n_iter_),
    }


def fit_table(sizes, k, chunk, memory_limit, processes=True):
    """Rows of the fit table: every estimator at every size, on one cluster."""
    centers = blob_centers(k)
    table = []
    lc, client = cluster(2, memory_limit, processes)
    with lc, client, client.as_current(), threadpool_limits(1):
        for n in sizes:
            X = lazy_blobs(n, chunk, centers)
            for name, est in fit_estimators(k).items():
                row = measure_fit(client, est, X)
                table.append((name, n, row))
                print(f"{name} {n:.0e}: {row['time']:.1f}s", file=sys.stderr)
    return table


def print_fit_table(table, k, chunk, memory_limit):
    print(
        f"Dask fits (k={k} blobs, d={D}, float32 generated lazily in chunks of "
        f"{chunk} rows; 2 single-threaded workers, {memory_limit} each)."
    )
    phases = " ".join(f"{p:>5}" for p in PHASES)
    print(
        f"{'estimator':<21} {'rows':>6} {'time s':>7} {'cpu s':>7} {'n_iter':>6} "
        f"{'passes':>6} {phases} {'cert %':>6}  peak RSS / worker"
    )
    for name, n, row in table:
        per_phase = " ".join(f"{row['phases'][p]:5.1f}" for p in PHASES)
        mem = ", ".join(f"{r / 2**20:.0f}" for r in row["rss"])
        print(
            f"{name:<21} {n:6.0e} {row['time']:7.1f} {row['cpu']:7.1f} "
            f"{row['n_iter']:6d} "
            f"{row['passes']:6.1f} {per_phase} {100 * row['cert_share']:6.1f}  "
            f"{mem} MiB"
        )
    print(
        "cpu s: the workers' CPU time (user + system) during the fit, less "
        "sensitive than the time to other work on the machine; passes: chunks "
        "generated / chunks; cert %: the certificate's share of the fit's time."
    )


# -- one EM iteration ------------------------------------------------------------


def iteration_table(n, n_mm, k, chunk, repeat, memory_limit, directory, processes=True):
    """Rows of the iteration table: in memory, persisted, streamed from a file."""
    import dask.array as da

    centers = blob_centers(k)
    init = centers + np.random.RandomState(1).standard_normal(centers.shape)
    table = []

    with threadpool_limits(1), ExitStack() as stack:
        # In memory: NumPy here, the same rows persisted on 1 and 2 workers.
        runs = {"numpy": (NumpyRun(numpy_data(n, chunk, centers), init), None)}
        clients = {}
        for n_workers in (1, 2):
            lc, client = cluster(n_workers, "16GiB", processes)
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
        medians = rounds(runs, repeat)
        for name, t in medians.items():
            rss = None
            if name in clients:
                rss = sorted(clients[name].run(_read_rss).values())
            table.append((name, f"{n:.0e} x {D}", t, rss, medians["numpy"]))
        del runs
        stack.close()

        # A file larger than each worker's memory limit, streamed block by
        # block on 2 workers, against NumPy on the memory map in this process.
        path = os.path.join(directory, "bench_scale_rows.npy")
        mm = np.lib.format.open_memmap(path, mode="w+", dtype=np.float64,
                                       shape=(n_mm, D))  # fmt: skip
        for i, start in enumerate(range(0, n_mm, chunk)):
            rows = min(chunk, n_mm - start)
            mm[start : start + rows] = blob_block(i, rows, centers)
        mm.flush()
        del mm
        size = os.path.getsize(path)
        try:
            lc, client = cluster(2, memory_limit, processes)
            stack.enter_context(lc)
            stack.enter_context(client)
            with client.as_current():
                X = da.map_blocks(
                    _load_task, path, chunk, n_mm, chunks=row_chunks(n_mm, chunk),
                    dtype=np.float64,
                )  # fmt: skip
                dask_run = DaskRun(X, init)
            client.run(_start_rss_monitor)
            name = f"memmap, 2 workers ({memory_limit} each)"
            runs = {
                "numpy memmap": (NumpyRun(np.load(path, mmap_mode="r"), init), None),
                name: (dask_run, client),
            }
            medians = rounds(runs, repeat)
            rss = sorted(client.run(_read_rss).values())
            for key, t in medians.items():
                mem = rss if key == name else None
                ref = medians["numpy memmap"]
                table.append((key, f"{n_mm:.0e} x {D}", t, mem, ref))
            del runs
            stack.close()
        finally:
            os.remove(path)
    return table, size


def print_iteration_table(table, size, k, chunk, repeat, malloc):
    print(
        f"One EM iteration (softmax, k={k}, d={D}, float64, chunks of {chunk} "
        f"rows); memmap file {size / 2**30:.2f} GiB; medians of {repeat} "
        f"interleaved rounds; worker malloc: {malloc}."
    )
    print(f"{'run':<34} {'rows':>10} {'s/iter':>8} {'ratio':>6}  peak RSS / worker")
    for name, shape, t, rss, ref in table:
        mem = "" if rss is None else ", ".join(f"{r / 2**20:.0f} MiB" for r in rss)
        print(f"{name:<34} {shape:>10} {t:8.3f} {t / ref:6.2f}  {mem}")
    print("ratio: to the NumPy row of the same data.")


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--table", choices=["fit", "iteration", "both"], default="both")
    parser.add_argument("--fit-n", default="2e6,1e7,2e7", help="comma-separated")
    parser.add_argument("--fit-k", type=int, default=16)
    parser.add_argument("--fit-memory-limit", default="4GiB")
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
    parser.add_argument(
        "--smoke", action="store_true", help="tiny sizes, one round (a check)"
    )
    args = parser.parse_args()
    if args.smoke:
        for key, value in SMOKE.items():
            setattr(args, key, value)

    return args


def main():
    args = parse_args()
    if args.malloc == "heap":
        import dask

        env = "distributed.nanny.pre-spawn-environ."
        dask.config.set({
            env + "MALLOC_TRIM_THRESHOLD_": 2**27,
            env + "MALLOC_MMAP_THRESHOLD_": 2**25,
        })  # fmt: skip
    if args.table in ("fit", "both"):
        sizes = [int(float(n)) for n in args.fit_n.split(",")]
        fits = fit_table(
            sizes, args.fit_k, args.chunk, args.fit_memory_limit, not args.smoke
        )
    if args.table in ("iteration", "both"):
        iterations, size = iteration_table(
            int(args.n), int(args.n_memmap), args.k, args.chunk, args.repeat,
            args.memory_limit, args.dir, not args.smoke,
        )  # fmt: skip
    load = ", ".join(f"{x:.1f}" for x in os.getloadavg())
    print(f"{os.cpu_count()} CPUs; load average at the end (1, 5, 15 min): {load}")
    if args.table in ("fit", "both"):
        print_fit_table(fits, args.fit_k, args.chunk, args.fit_memory_limit)
    if args.table in ("iteration", "both"):
        print_iteration_table(
            iterations, size, args.k, args.chunk, args.repeat, args.malloc
        )


if __name__ == "__main__":
    main()
