"""Output that says what happened: "auto"'s fallback, verbose on a sample.

Digits: every count from 2 to 20 lives one cooling step, so no count stands
out; five well-separated blobs: five outlives every other count by far.
"""

import contextlib
import io
import re
import warnings

import numpy as np
import pytest
from sklearn.datasets import load_digits, make_blobs

from skrbfkmeans import AnnealedRBFKMeans


def _fit_recording(est, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    return [w for w in caught if issubclass(w.category, UserWarning)]


def test_auto_fallback_warns_and_says_by_how_much():
    X = load_digits().data
    est = AnnealedRBFKMeans("auto")
    caught = _fit_recording(est, X)
    assert est.cluster_count_margin_ <= 1.0
    messages = [str(w.message) for w in caught]
    messages = [m for m in messages if "n_clusters='auto'" in m]
    assert len(messages) == 1
    assert "pass n_clusters" in messages[0]
    # The warning points at the caller's line, not inside the package.
    warning = next(w for w in caught if "n_clusters='auto'" in str(w.message))
    assert warning.filename == __file__


def test_auto_on_separated_blobs_is_silent():
    X, _ = make_blobs(500, centers=5, cluster_std=0.3, random_state=0)
    est = AnnealedRBFKMeans("auto")
    caught = _fit_recording(est, X)
    assert est.n_clusters_ == 5
    assert est.cluster_count_margin_ > 1.0
    assert not [w for w in caught if "n_clusters='auto'" in str(w.message)]
    # The margin is the chosen lifetime over the runner-up's, in cooling steps.
    life = est.cluster_count_lifetimes_
    runner_up = np.delete(life[1:], est.n_clusters_ - 2).max()
    step = -0.5 * np.log(est.cooling)
    assert est.cluster_count_margin_ == pytest.approx((life[4] - runner_up) / step)


def test_integer_n_clusters_has_no_margin():
    X, _ = make_blobs(200, centers=3, random_state=0)
    assert not hasattr(AnnealedRBFKMeans(3).fit(X), "cluster_count_margin_")


def test_lifetimes_plot_title_names_the_fallback():
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from skrbfkmeans.plotting import plot_cluster_lifetimes

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        fallback = AnnealedRBFKMeans("auto").fit(load_digits().data)
    X, _ = make_blobs(500, centers=5, cluster_std=0.3, random_state=0)
    chosen = AnnealedRBFKMeans("auto").fit(X)
    try:
        assert "fallback" in plot_cluster_lifetimes(fallback).get_title()
        title = plot_cluster_lifetimes(chosen).get_title()
        assert "fallback" not in title and "chosen: 5" in title
    finally:
        plt.close("all")


def test_verbose_on_a_sample_names_it_and_ends_with_the_fit():
    X, _ = make_blobs(30_000, centers=6, random_state=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        est = AnnealedRBFKMeans(6, verbose=1).fit(X)
    lines = out.getvalue().splitlines()
    assert re.match(r"Annealing on a sample of \d+ rows in memory \(of 30000", lines[0])
    last = lines[-1]
    assert last.startswith("Every row:")
    assert f"after {est.n_iter_} iterations" in last
    assert f"inertia {est.inertia_:.6g}" in last
    assert f"certified {est.certified_}" in last


def test_verbose_without_a_sample_does_not_mention_one():
    X, _ = make_blobs(300, centers=3, random_state=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        AnnealedRBFKMeans(3, verbose=1).fit(X)
    text = out.getvalue()
    assert "sample of" not in text and "Every row" not in text
