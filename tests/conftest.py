"""Shared fixtures.

``global_random_seed`` follows scikit-learn's convention: by default every
test that takes it runs once with seed 42. Set ``SKRBFKMEANS_SEED`` to an
integer (``7``), a range (``0-9``) or ``all`` (``0-99``) to run more seeds.
``synchronous_dask`` runs dask in the test's thread (skipped without dask).

The parameter lists and data sets that several modules share (``DTYPES``,
``ACTIVATIONS``, ``blobs``, ...) are in ``_data.py``, a plain module: they
parametrise tests when a module is imported, which a fixture cannot do.
"""

import os

import pytest

_DEFAULT_SEED = 42


def _parse_seeds(spec):
    if not spec:
        return [_DEFAULT_SEED]
    if spec == "all":
        return list(range(100))
    if "-" in spec:
        start, stop = (int(part) for part in spec.split("-"))
        return list(range(start, stop + 1))
    return [int(part) for part in spec.split(",")]


def pytest_generate_tests(metafunc):
    if "global_random_seed" in metafunc.fixturenames:
        seeds = _parse_seeds(os.environ.get("SKRBFKMEANS_SEED", ""))
        metafunc.parametrize("global_random_seed", seeds, ids=lambda s: f"seed{s}")


@pytest.fixture
def synchronous_dask():
    dask = pytest.importorskip("dask")
    with dask.config.set(scheduler="synchronous"):
        yield
