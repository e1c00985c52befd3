"""Tests of dask as an optional dependency; they run without dask installed."""

import subprocess
import sys

import numpy as np
import pytest

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans


def test_import_does_not_import_dask():
    # Check that importing the package (and fitting on NumPy input) never
    # imports dask, in a fresh interpreter.
    code = (
        "import sys, numpy as np, skrbfkmeans\n"
        "skrbfkmeans.RBFKMeans(n_clusters=2).fit(np.arange(8.0).reshape(4, 2))\n"
        "assert not any(m == 'dask' or m.startswith('dask.') for m in sys.modules)\n"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


class _FakeDaskArray:
    # A stand-in whose type lives in a dask module: detection is by module
    # name, so this is dispatched to the dask path without dask installed.
    __module__ = "dask.array.core"
    shape = (10, 2)
    ndim = 2


@pytest.mark.parametrize("method", ["fit", "predict"])
@pytest.mark.parametrize("Estimator", [RBFKMeans, AnnealedRBFKMeans])
def test_clear_error_without_dask(monkeypatch, Estimator, method):
    # Check that a dask collection without dask installed raises an
    # ImportError naming the extra to install.
    monkeypatch.setitem(sys.modules, "dask", None)
    monkeypatch.setitem(sys.modules, "dask.array", None)
    est = Estimator(n_clusters=2)
    if method == "predict":
        est.fit(np.arange(8.0).reshape(4, 2))
    with pytest.raises(ImportError, match=r'pip install "skrbfkmeans\[dask\]"'):
        getattr(est, method)(_FakeDaskArray())
