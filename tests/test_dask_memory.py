"""Dask fits read each chunk once per compute, so workers need O(1) memory.

A chunk that two tasks of one graph consume stays in a worker's memory until
the second has run: a graph where every chunk has two consumers that the
scheduler runs apart holds all the chunks at once, and the worker's memory
grows with the number of rows. These tests look at every graph a fit
computes (through a scheduler that records them), count the passes over the
data (calls of a lazily generated array's chunk function) and, with
``--extended``, measure a worker's peak memory at two sizes.
"""

import threading
import time

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans, _iterations
from skrbfkmeans._dask import DaskRows, _sample_indices, as_dask_array, dask_rows

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

N_CHUNKS, CHUNK, D = 12, 1000, 3


def _dask_rows(X, w):
    # The rows of a fit of RBFKMeans(3), as its fit makes them.
    X = as_dask_array(RBFKMeans(3), X, reset=True, check_finite=False)
    return dask_rows(X, w, "RBFKMeans")


class Recorder:
    """A synchronous scheduler that keeps every graph and counts chunk calls."""

    def __init__(self):
        self.graphs = []
        self.calls = 0

    def rows(self, block_id=None):
        """The chunk ``block_id`` of the rows: blobs, the same on every call."""
        self.calls += 1
        rng = np.random.RandomState(block_id[0])
        centers = np.array([[0.0, 0.0, 0.0], [8.0, 0.0, 0.0], [0.0, 8.0, 0.0]])
        return centers[rng.randint(3, size=CHUNK)] + rng.standard_normal((CHUNK, D))

    @staticmethod
    def weights(block_id=None):
        return np.random.RandomState(100 + block_id[0]).uniform(0.5, 2.0, CHUNK)

    def get(self, dsk, keys, **kwargs):
        from dask._task_spec import convert_legacy_graph
        from dask.local import get_sync

        graph = dsk.__dask_graph__() if hasattr(dsk, "__dask_graph__") else dsk
        self.graphs.append(convert_legacy_graph(dict(graph)))
        return get_sync(dsk, keys, **kwargs)

    def data(self):
        """Lazily generated rows ("rows") and weights ("weights")."""
        X = da.map_blocks(
            self.rows,
            chunks=((CHUNK,) * N_CHUNKS, (D,)),
            name="rows",
            meta=np.empty((0, D)),
        )
        w = da.map_blocks(
            self.weights,
            chunks=((CHUNK,) * N_CHUNKS,),
            name="weights",
            meta=np.empty(0),
        )
        return X, w


def input_consumers(graph):
    """Largest number of tasks consuming one chunk of the input (0 if none read)."""
    from dask.core import get_deps

    _, dependents = get_deps(graph)
    chunks = [k for k in graph if isinstance(k, tuple) and k[0] in ("rows", "weights")]
    return max((len(dependents[k]) for k in chunks), default=0)


# Estimator, and whether the rows come with (lazily generated) weights.
CASES = {
    "lloyd": (lambda: RBFKMeans(3, sigma=0, n_init=1, random_state=0), False),
    "soft": (lambda: RBFKMeans(3, n_init=1, max_iter=5, random_state=0), True),
    "annealed": (lambda: AnnealedRBFKMeans(3), True),
    "annealed-kpp": (
        lambda: AnnealedRBFKMeans(3, init="k-means++", random_state=0),
        False,
    ),
}


def passes_before_iterations(monkeypatch, rec):
    """Record the passes made before the first iteration's ``stats`` pass."""
    seen = []
    stats = DaskRows.stats

    def counted(rows, *args, **kwargs):
        if not seen:
            seen.append(rec.calls / N_CHUNKS)
        return stats(rows, *args, **kwargs)

    monkeypatch.setattr(DaskRows, "stats", counted)
    return seen


@pytest.mark.parametrize("name", CASES)
def test_fit_reads_each_chunk_in_one_task(monkeypatch, name):
    # More rows than the in-memory sample (10000), so that a sample is drawn.
    make, weighted = CASES[name]
    rec = Recorder()
    X, w = rec.data()
    setup = passes_before_iterations(monkeypatch, rec)
    with dask.config.set(scheduler=rec.get):
        est = make().fit(X, sample_weight=w if weighted else None)
    consumers = [input_consumers(g) for g in rec.graphs]
    # No chunk waits in memory for a second consumer ...
    assert max(consumers) == 1, consumers
    # ... and the setup reads the data at most twice.
    assert setup and setup[0] <= 2
    if name == "lloyd":
        # Then one pass per iteration and the final pass.
        assert rec.calls / N_CHUNKS == setup[0] + est.n_iter_ + 1


def test_setup_passes_by_method():
    # The summary is one pass; the sample and its variance one more; the
    # weight sample takes the chunks' weights from the summary.
    rec = Recorder()
    X, w = rec.data()
    with dask.config.set(scheduler=rec.get):
        rows = _dask_rows(X, w)
        assert rec.calls == N_CHUNKS
        rows.sample(5000, np.random.RandomState(0), variance=True)
        assert rec.calls == 2 * N_CHUNKS
        n_graphs = len(rec.graphs)
        rows.weight_sample(5000)
        assert rec.calls == 3 * N_CHUNKS
        assert len(rec.graphs) == n_graphs + 1


def test_sample_matches_indexing():
    # The rows each block takes are those of X[idx], and the variance is the
    # weighted variance of all rows about the offset.
    rec = Recorder()
    X, w = rec.data()
    with dask.config.set(scheduler="synchronous"):
        rows = _dask_rows(X, w)
        Xs, ws, mean_var = rows.sample(700, np.random.RandomState(5), variance=True)
        X_all, w_all = dask.compute(X, w)
    idx = _sample_indices(X.shape[0], 700, np.random.RandomState(5))
    assert_array_equal(Xs, X_all[idx])
    assert_array_equal(ws, w_all[idx])
    centred = X_all - rows.offset
    var = (w_all @ (centred * centred)) / w_all.sum()
    assert_allclose(mean_var, var.mean(), rtol=1e-12)


# -- worker memory (a LocalCluster; --extended) -------------------------------


def peak_rss(pids, stop, peaks):
    import psutil

    procs = {pid: psutil.Process(pid) for pid in pids}
    while not stop.is_set():
        for pid, proc in procs.items():
            peaks[pid] = max(peaks.get(pid, 0), proc.memory_info().rss)
        time.sleep(0.005)


def worker_peak(client, fit):
    """Peak resident set of the (one) worker process while ``fit()`` runs."""
    import gc
    import os

    client.run(gc.collect)
    pids = list(client.run(os.getpid).values())
    stop, peaks = threading.Event(), {}
    thread = threading.Thread(target=peak_rss, args=(pids, stop, peaks))
    thread.start()
    try:
        fit()
    finally:
        stop.set()
        thread.join()
    return max(peaks.values())


@pytest.mark.extended
def test_worker_memory_does_not_grow_with_rows():
    # float32 rows generated chunk by chunk in the worker (8 MiB chunks): at
    # 8 and 48 chunks, a fit whose computes held every chunk would peak
    # about 320 MiB higher on the larger data.
    distributed = pytest.importorskip("distributed")
    chunk, d = 2**17, 16
    with (
        distributed.LocalCluster(
            n_workers=1,
            threads_per_worker=1,
            processes=True,
            memory_limit="4GiB",
            dashboard_address=None,
        ) as cluster,
        distributed.Client(cluster, set_as_default=False) as client,
        client.as_current(),
    ):
        peaks = {}
        for n_chunks in (8, 48):
            rng = da.random.default_rng(0)
            X = rng.standard_normal((n_chunks * chunk, d), chunks=(chunk, d))
            X = X.astype(np.float32)
            est = RBFKMeans(4, sigma=0, n_init=1, max_iter=2, random_state=0)
            peaks[n_chunks] = worker_peak(client, lambda: est.fit(X))
    assert peaks[48] <= 1.2 * peaks[8], peaks


def test_annealed_certificate_reads_the_data_once(monkeypatch):
    # The certificate after Lloyd on every row: the engine's margins and the
    # explicit check (with single moves) share one pass, and the Lloyd step
    # is the pass Lloyd ended on. Before, four passes.
    rec = Recorder()
    X, w = rec.data()
    reads = []
    margin_checks = _iterations.margin_checks

    def counted(rows, *args):
        before = rec.calls
        result = margin_checks(rows, *args)
        if not rows.in_memory:  # not the annealed sample's certificate
            reads.append((rec.calls - before) / N_CHUNKS)
        return result

    monkeypatch.setattr(_iterations, "margin_checks", counted)
    setup = passes_before_iterations(monkeypatch, rec)
    with dask.config.set(scheduler=rec.get):
        est = AnnealedRBFKMeans(3).fit(X, sample_weight=w)
    assert est.certified_
    assert reads == [1.0]
    # Setup, Lloyd's iterations, the certificate and the final pass.
    assert rec.calls / N_CHUNKS == setup[0] + est.n_iter_ + 1 + 1
