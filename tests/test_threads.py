"""The engine's threads: results bit for bit the same for every thread count.

The row blocks of a pass run on a pool of threads (``_threads.map_blocks``)
sized as KMeans sizes its OpenMP threads. The block partition depends on the
data's shape only and the block sums are added in block order, so 1, 2 or 3
threads must give identical bytes. The test data are small, so the target
block size is lowered to give every pass several blocks.
"""

import threading

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from skrbfkmeans import (
    AnnealedRBFKMeans,
    RBFKMeans,
    _rows,
    kmeans_polish,
)
from skrbfkmeans._engine import blocks as _assign
from skrbfkmeans._engine import passes as _engine
from skrbfkmeans._engine import threads as _threads


@pytest.fixture(autouse=True)
def small_blocks(monkeypatch):
    monkeypatch.setattr(_assign, "_TARGET_BLOCK_BYTES", 1 << 15)
    monkeypatch.setattr(_engine, "SWEEP_BLOCK_BYTES", 1 << 14)


@pytest.fixture
def data():
    X, _ = make_blobs(3000, centers=6, n_features=3, random_state=0)
    w = np.random.default_rng(0).uniform(0.5, 2.0, X.shape[0])
    return X, w


@pytest.fixture
def block_threads(monkeypatch):
    """The names of the threads that run the engine's blocks."""
    names = set()
    original = _threads.map_blocks

    def spy(func, items, max_threads=None):
        def record(item):
            names.add(threading.current_thread().name)
            return func(item)

        return original(record, items, max_threads)

    monkeypatch.setattr(_assign, "map_blocks", spy)
    return names


def _fits(X, w):
    """Every fitted array and value a user reads, as bytes."""
    out = {}
    for name, est in {
        "softmax": RBFKMeans(6, random_state=0, max_iter=20),
        "entmax15": RBFKMeans(6, activation="entmax15", random_state=0, max_iter=20),
        "annealed": AnnealedRBFKMeans(6),
    }.items():
        est.fit(X, sample_weight=w)
        out[name] = est.cluster_centers_.tobytes()
        out[name + " inertia"] = np.float64(est.inertia_).tobytes()
        out[name + " proba"] = est.predict_proba(X[:500]).tobytes()
        out[name + " transform"] = est.transform(X[:500]).tobytes()
        out[name + " score"] = np.float64(est.score(X[:500])).tobytes()
        if name == "annealed":
            out["sigma path"] = est.sigma_path_.tobytes()
    init = X[:6].toarray() if sp.issparse(X) else X[:6]
    centers, labels, inertia, _ = kmeans_polish(X, init, sample_weight=w)
    out["polish"] = centers.tobytes() + labels.tobytes()
    return out


@pytest.mark.parametrize("sparse", [False, True], ids=["dense", "csr"])
def test_results_identical_for_every_thread_count(data, sparse):
    # Check that 1, 2 and 3 threads give the same bytes for both estimators,
    # kmeans_polish and the prediction methods.
    X, w = data
    X = sp.csr_matrix(X) if sparse else X
    results = {}
    for n_threads in (1, 2, 3):
        with threadpool_limits(n_threads):
            results[n_threads] = _fits(X, w)
    for key in results[1]:
        assert results[2][key] == results[1][key], key
        assert results[3][key] == results[1][key], key


def test_blocks_run_on_the_pool(data, block_threads):
    # Check that the threads are really used: with two threads the blocks of
    # a fit run on the pool's worker threads, with one on the caller's (in
    # BlockPlan.map's own loop, which hands no block to the pool).
    X, w = data
    names = block_threads
    with threadpool_limits(1):
        RBFKMeans(6, random_state=0, max_iter=5).fit(X)
    assert names <= {threading.current_thread().name}
    names.clear()
    with threadpool_limits(2):
        RBFKMeans(6, random_state=0, max_iter=5).fit(X)
    assert any(name.startswith("skrbfkmeans") for name in names)


def test_thread_count_follows_kmeans_controls():
    # Check that the engine's thread count follows the controls KMeans
    # follows: threadpoolctl's OpenMP limit, and OMP_NUM_THREADS in a fresh
    # process.
    import os
    import subprocess
    import sys

    with threadpool_limits(1):
        assert _threads.engine_threads() == 1
    code = (
        "from skrbfkmeans._engine.threads import engine_threads; "
        "print(engine_threads())"
    )
    env = dict(os.environ, OMP_NUM_THREADS="1")
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True
    )
    assert out.stdout.strip() == "1", out.stderr


def test_errstate_reaches_the_workers():
    # Check that NumPy's error state of the caller holds in the worker threads.
    def check(_):
        return np.geterr()["over"]

    with threadpool_limits(2), np.errstate(over="raise"):
        states = _threads.map_blocks(check, range(4))
    assert states == ["raise"] * 4


def test_many_rows_and_bounds_identical_for_every_thread_count(
    monkeypatch, block_threads
):
    # Check the fit of more rows than the annealing's sample (the schedule on
    # the sample, then Lloyd with Hamerly's bounds on every row: 16 centres
    # in 3 features) and kmeans_polish with bounds: the same bytes on one,
    # two and three threads, the blocks on the pool's threads.
    X, _ = make_blobs(6000, centers=16, n_features=3, random_state=1)
    # A sample of 2000 rows (10000 by default): the same route, less time.
    monkeypatch.setattr(_rows, "sample_size", lambda n, k: min(n, 2000))
    names = block_threads
    results = {}
    for n_threads in (1, 2, 3):
        with threadpool_limits(n_threads):
            km = AnnealedRBFKMeans(16).fit(X)
            polished = kmeans_polish(X, X[:16])
        results[n_threads] = (
            km.cluster_centers_.tobytes(),
            np.float64(km.inertia_).tobytes(),
            km.labels_.tobytes(),
            km.sigma_path_.tobytes(),
            polished[0].tobytes() + polished[1].tobytes(),
        )
    assert results[2] == results[1]
    assert results[3] == results[1]
    assert any(name.startswith("skrbfkmeans") for name in names)


@pytest.mark.parametrize(
    "n_rows, row_size, target, options, step",
    [
        (10, 4, 16, {}, 4),  # target // row_size
        (10, 4, 16, {"even": True}, 4),  # 3 blocks: 4, 4, 2
        (100, 1, 30, {"even": True}, 25),  # 4 blocks of 30 at most: 25 each
        (5, 1, 30, {}, 5),  # at most n_rows
        (0, 1, 30, {"even": True}, 1),  # at least 1
        (1000, 100, 1000, {"min_rows": 64}, 64),
        (1000, 0, 16, {}, 16),  # an empty row counts as 1
        # 1 KiB of working_memory holds 10 rows of 100 bytes.
        (1000, 1, 1 << 20, {"held": 100, "min_rows": 64}, 10),
    ],
)
def test_block_rows_rule(n_rows, row_size, target, options, step):
    # Check the one rule for the rows per block, and that the iterator covers
    # the rows once, in order, in blocks of that many rows (the last shorter).
    from sklearn import config_context

    from skrbfkmeans._engine.partition import block_rows, row_blocks

    with config_context(working_memory=1 / 1024):
        assert block_rows(n_rows, row_size, target, **options) == step
    slices = list(row_blocks(n_rows, step))
    assert np.array_equal(
        np.concatenate([np.arange(n_rows)[sl] for sl in slices] + [[]]),
        np.arange(n_rows),
    )
    assert all(sl.stop - sl.start == step for sl in slices[:-1])


@pytest.fixture
def cuts(monkeypatch):
    """``(loop, n_rows, step)`` of every ``row_blocks`` call of the loops."""
    from skrbfkmeans import _certificate
    from skrbfkmeans._engine import block_stats, entmax_rows, partition

    # The real targets, not the small blocks of this module's fixture.
    monkeypatch.undo()
    calls = []

    def recorder(loop):
        def row_blocks(n_rows, step):
            calls.append((loop, n_rows, step))
            return partition.row_blocks(n_rows, step)

        return row_blocks

    for loop, module in {
        "pass": _assign,
        "norms": _engine,
        "moments": block_stats,
        "entmax": entmax_rows,
        "certificate": _certificate,
    }.items():
        monkeypatch.setattr(module, "row_blocks", recorder(loop))
    return calls


def test_loops_keep_their_block_sizes(cuts):
    # Check the blocks of every loop over rows on fixed shapes: each loop adds
    # its sums block by block, so these sizes are part of its results.
    from skrbfkmeans import _certificate, entmax15

    X = np.random.default_rng(0).standard_normal((100_000, 16))
    w, offset = np.ones(X.shape[0]), np.zeros(16)
    x_sq = np.einsum("ij,ij->i", X, X)
    _engine.squared_norms(X, offset)
    _engine.statistics(X, w, X[:64], 1.0, "softmax", offset, x_sq)
    _engine.free_energy(X, w, X[:64], 1.0, "softmax", offset, x_sq)
    _engine.moments(X[:20_000, :15], w, X[:5, :15], 1.0, "softmax", offset[:15], x_sq)
    entmax15(X[:10_000, :4].repeat(16, axis=1))
    _certificate.explicit_fixed_point(X[:20_000], w, X[:64])
    assert cuts == [
        # 1 MiB of rows (128 bytes each).
        ("norms", 100_000, 8192),
        # 4 MiB of scores and rows (6553 rows of 64 + 16 numbers), in equal
        # blocks: 16 of 6250; 1 MiB for a sweeping pass: 62 of 1613.
        ("pass", 100_000, 6250),
        ("pass", 100_000, 1613),
        # 1 MiB of 5 scores and 15 features (6553 rows): 4 blocks of 5000,
        # each in sub-blocks of 2**17 / 15**2 = 582 rows of outer products.
        ("pass", 20_000, 5000),
        *[("moments", 5000, 582)] * 4,
        # 2**17 scores of 64 centres.
        ("entmax", 10_000, 2048),
        # 32 MiB of float64 differences to 64 centres in 16 features.
        ("certificate", 20_000, 4096),
    ]
