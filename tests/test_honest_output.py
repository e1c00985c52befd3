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
from numpy.testing import assert_allclose
from sklearn.cluster import KMeans, kmeans_plusplus
from sklearn.datasets import load_breast_cancer, load_digits, load_iris, make_blobs
from sklearn.preprocessing import StandardScaler

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans


def _fit_recording(est, X):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        est.fit(X)
    return [w for w in caught if issubclass(w.category, UserWarning)]


@pytest.mark.parametrize(
    "load", [load_breast_cancer, load_digits], ids=["breast_cancer", "digits"]
)
def test_auto_tied_counts_below_the_references_fit_one_cluster(load):
    # Check that two counts that live one cooling step each, to rounding,
    # beat no structureless reference: one cluster, a margin of 0 (not the
    # -3.95e-15 or +3.95e-15 of the two lifetimes' last bits, which
    # test_count_margin_keeps_differences_above_rounding checks), a largest
    # cumulative gap within the threshold, and one warning that says so.
    X = StandardScaler().fit_transform(load().data)
    est = AnnealedRBFKMeans("auto", max_clusters=3)
    caught = _fit_recording(est, X)
    life = est.cluster_count_lifetimes_
    step = -0.5 * np.log(est.cooling)  # one cooling step, in log-width
    assert_allclose(life[1:], [step, step], rtol=1e-13)
    assert est.n_clusters_ == 1
    assert est.cluster_count_margin_ == 0.0
    assert est.cluster_count_gap_.max() <= est.cluster_count_gap_threshold_
    messages = [str(w.message) for w in caught if "n_clusters='auto'" in str(w.message)]
    assert len(messages) == 1 and "structureless" in messages[0]


def test_count_margin_keeps_differences_above_rounding():
    # Check the margin against lifetimes computed by hand on a path whose
    # counts 2 and 3 live one step each: the same step computed along two
    # ladders (equal to rounding) gives 0, a step longer by 1e-12 in
    # log-width (far above eps) gives that difference in cooling steps.
    from skrbfkmeans._anneal import count_lifetimes
    from skrbfkmeans._count import count_margin, lifetime_rounding

    step = -0.5 * np.log(0.9)
    for extra, expected in [(0.0, 0.0), (1e-12, 1e-12 / step)]:
        # Widths as the schedule makes them: sqrt(T / 2), T cooled by 0.9.
        T = 2.0 * 3.7**2 * np.array([1.0, 0.9, 0.81, 0.729])
        sigmas = np.sqrt(T / 2.0)
        sigmas[2:] *= np.exp(-extra)
        counts = [1, 2, 3, 4]
        life = count_lifetimes(sigmas, counts, 3)
        margin = count_margin(life, 2, step, lifetime_rounding(sigmas, counts, 3))
        if expected == 0.0:
            assert margin == 0.0
        else:
            assert margin == pytest.approx(expected, rel=1e-3)


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
    # The margin is how far the chosen count's cumulative gap over the
    # references rises above every smaller count's, in cooling steps.
    gap = est.cluster_count_gap_
    step = -0.5 * np.log(est.cooling)
    assert est.cluster_count_margin_ == pytest.approx((gap[4] - gap[:4].max()) / step)


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


def _iterations(n):
    return f"{n} iteration" if n == 1 else f"{n} iterations"


def test_verbose_on_a_sample_names_it_and_ends_with_the_fit():
    # Check that every line that describes the sample says so, and that the
    # last line, the fit on every row, does not and gives n_iter_ and
    # whether its single-sample moves ended (converged_).
    X, _ = make_blobs(30_000, centers=6, random_state=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        est = AnnealedRBFKMeans(6, verbose=1).fit(X)
    lines = out.getvalue().splitlines()
    first = re.match(
        r"Annealing on a sample of (\d+) rows in memory \(of 30000", lines[0]
    )
    assert first
    note = f"Stage {{}} (sample of {first.group(1)} rows)"
    stages = [line for line in lines if line.startswith("Stage")]
    # One line per entry of the path (the sample's), each naming the sample.
    assert len(stages) == len(est.sigma_path_)
    for i, line in enumerate(stages):
        assert line.startswith(note.format(i))
    last = lines[-1]
    assert last.startswith("Every row:") and "sample of" not in last
    end = "ended" if est.converged_ else "stopped at max_iter"
    moves = f"Lloyd ({_iterations(est.n_iter_)}) and single-sample moves {end},"
    assert moves in last
    assert f"inertia {est.inertia_:.6g}" in last
    assert f"certified {est.certified_}" in last


def test_verbose_on_a_sample_with_a_float_sigma_end_says_em():
    # Check that the every-row line of a float sigma_end names the EM at
    # that width (it said Lloyd) and its iterations, n_iter_.
    X, _ = make_blobs(12_000, centers=4, random_state=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        est = AnnealedRBFKMeans(4, sigma_end=0.5, verbose=1).fit(X)
    last = out.getvalue().splitlines()[-1]
    assert last.startswith(
        f"Every row: EM at sigma 0.5 converged after {_iterations(est.n_iter_)},"
    )


def test_verbose_final_phase_counts_what_n_iter_counts(capsys):
    # Check that the final phase's line gives the Lloyd run that n_iter_
    # counts (five blobs: it said "Lloyd converged after 327 iterations"
    # with n_iter_ == 2) and the polish's trials apart, that the counts
    # printed add up to n_iter_total_, and that no count of 1 is plural.
    X, _ = make_blobs(1000, centers=5, cluster_std=1.5, random_state=0)
    est = AnnealedRBFKMeans(5, verbose=1).fit(X)
    out = capsys.readouterr().out
    lines = out.splitlines()
    final = lines[-1]
    assert final.startswith(f"Stage {len(est.sigma_path_) - 1}, final phase: ")
    assert est.n_polish_moves_ == 0  # then n_iter_ is the first Lloyd run's
    assert f"Lloyd converged after {_iterations(est.n_iter_)};" in final
    trials = int(re.search(r"\(trials: (\d+) Lloyd iterations?[;)]", final).group(1))
    stage_em = [int(n) for n in re.findall(r", (\d+) EM iterations?,", out)]
    assert len(stage_em) == len(est.sigma_path_) - 1
    assert sum(stage_em) + est.n_iter_ + trials == est.n_iter_total_
    # The first stages keep one centre and settle in one EM iteration.
    assert lines[0].startswith("Stage 0: ")
    assert "1 distinct centre, 1 EM iteration," in lines[0]
    assert not re.search(r"\b1 [\w -]*?(iterations|centres|moves)\b", out)
    # No sample here: no line mentions one.
    assert "sample of" not in out


def test_verbose_without_a_sample_does_not_mention_one():
    X, _ = make_blobs(300, centers=3, random_state=0)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        AnnealedRBFKMeans(3, verbose=1).fit(X)
    text = out.getvalue()
    assert "sample of" not in text and "Every row" not in text


def test_verbose_gives_widths_and_energies_in_the_units_of_x(capsys):
    # Check that the stage lines give the widths and inertias of
    # sigma_path_ and inertia_path_ on data fitted in scaled working units
    # (iris times 2^400: the lines said "sigma 0.5374" for 5.55e120).
    X = load_iris().data * 2.0**400
    est = AnnealedRBFKMeans(3, verbose=1).fit(X)
    stages = [s for s in capsys.readouterr().out.splitlines() if s.startswith("Stage")]
    assert len(stages) == len(est.sigma_path_)
    for line, sigma, inertia in zip(stages, est.sigma_path_, est.inertia_path_):
        assert f"sigma {sigma:.4g}," in line
        assert f"inertia {inertia:.6g}" in line


def _far_row(n=200, far=1e11, seed=0):
    # Rows uniform in the unit square and one row at -far: the passes'
    # distances round at about eps * far^2 = 2e6, far above the bulk's.
    X = np.random.default_rng(seed).uniform(size=(n, 2))
    X[0] = -far
    return X


def _explicit_distances(X, centers):
    # Oracle: squared distances by differences, float64, no expansion.
    diff = X[:, None, :] - np.asarray(centers, np.float64)[None, :, :]
    return np.einsum("ijk,ijk->ij", diff, diff)


def _printed(text, word="inertia"):
    return [float(v) for v in re.findall(rf"{word} ([-+0-9.e]+)[,.;]", text)]


def test_far_row_objective_is_the_free_energy_of_the_fit():
    # Check that objective_ is the softmax free energy of the fitted centres
    # (-T log of the mean of exp(-d / T) over the centres, per row), computed
    # here from explicit distances with logsumexp; the passes' value was the
    # far row's rounding, 8.4e6 against an inertia of 22.
    from scipy.special import logsumexp

    X = _far_row()
    est = RBFKMeans(4, sigma=0.1, activation="softmax", n_init=1, random_state=0)
    est.fit(X)
    T = 2 * est.sigma_**2
    D = _explicit_distances(X, est.cluster_centers_)
    F = -T * (logsumexp(-D / T, axis=1) - np.log(D.shape[1]))
    assert_allclose(est.objective_, F.sum(), rtol=1e-9)
    assert_allclose(est.inertia_, D.min(axis=1).sum(), rtol=1e-12)


def test_far_row_path_and_verbose_end_on_the_reported_inertia(capsys):
    # Check that the annealing's path and its verbose lines end on the
    # inertia the fit reports (the explicit one), and that objective_ lies
    # within its free energy's bounds above it: they said 8.38862e+06 while
    # inertia_ was 12.66.
    X = _far_row()
    est = AnnealedRBFKMeans(4, random_state=0, verbose=1).fit(X)
    labels = _explicit_distances(X, est.cluster_centers_).argmin(axis=1)
    inertia = float(((X - est.cluster_centers_[labels]) ** 2).sum())
    assert_allclose(est.inertia_, inertia, rtol=1e-12)
    assert_allclose(est.inertia_path_[-1], inertia, rtol=1e-12)
    # Entmax-1.5's energy per row: its nearest distance plus at most
    # T (4/3) (1 - k^-1/2) (the entropy gap of a one-hot row).
    T = 2 * est.sigma_**2
    gap = T * 4 / 3 * (1 - 4**-0.5) * X.shape[0]
    assert inertia * (1 - 1e-12) <= est.objective_ <= inertia + gap + 1e-9 * inertia
    final = capsys.readouterr().out.splitlines()[-1]
    assert "final phase" in final
    assert _printed(final)[-1] == float(f"{inertia:.6g}")
    # Every stage's inertia is that of its centres' labelling.
    for centers, recorded in zip(est.centers_path_, est.inertia_path_):
        D = _explicit_distances(X, centers)
        assert_allclose(recorded, D.min(axis=1).sum(), rtol=1e-9)


@pytest.mark.parametrize("scale", [1.0, 2.0**400], ids=["1", "2^400"])
def test_zero_width_verbose_prints_kmeans_lines(scale, capsys):
    # Check that RBFKMeans(sigma=0) prints the inertias and shifts KMeans
    # prints from the same start, in the units of X (they came in working
    # units: 57.26 for data whose inertia is 1.3e281).
    X = load_iris().data * scale
    init = X[[0, 50, 100]]
    KMeans(3, init=init, n_init=1, verbose=1).fit(X)
    expected = capsys.readouterr().out
    RBFKMeans(3, sigma=0, init=init, n_init=1, verbose=1).fit(X)
    got = capsys.readouterr().out
    assert len(_printed(got)) == len(_printed(expected)) > 0
    assert_allclose(_printed(got), _printed(expected), rtol=1e-12)


@pytest.mark.parametrize(
    "X", [_far_row(), load_iris().data * 2.0**400], ids=["far", "2^400"]
)
def test_fixed_width_verbose_inertias_are_the_fits(X, capsys):
    # Check that the EM's first line gives the inertia of the initial
    # centres (scikit-learn's k-means++ from the same random_state) by
    # explicit differences, in the units of X, to its six printed digits:
    # it was the passes' rounding next to a far row (8.4e6 for about 33) and
    # the working units' value at 2^400 (a factor 4^-400 off).
    est = RBFKMeans(3, sigma=1e-3 * X.std(), n_init=1, random_state=0, verbose=1)
    est.fit(X)
    printed = _printed(capsys.readouterr().out)
    seeds = kmeans_plusplus(X, 3, random_state=np.random.RandomState(0))[0]
    # Scaled by a power of 2 (exact) so that the squares stay finite.
    scale = 2.0**400 if np.abs(X).max() > 1e100 else 1.0
    D = _explicit_distances(X / scale, seeds / scale)
    assert printed[0] == pytest.approx(D.min(axis=1).sum() * scale**2, rel=5e-6)
