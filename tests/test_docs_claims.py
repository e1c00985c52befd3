"""Tests that what the documentation states is true of the code.

The user guide's convergence table and the numbers quoted with it are
recomputed; RBFKMeans's docstring lists every attribute a fit sets; the
README's test command is the one CI runs; the partial_fit sentence states
the numbers its test runs with; ``kmeans_polish(random_state=...)`` is
deprecated.
"""

import inspect
import math
import re
import warnings
from pathlib import Path

import numpy as np
import pytest
from _data import (
    STREAM_BLOBS,
    STREAM_BLOCKS,
    STREAM_FEATURES,
    STREAM_PASSES,
    STREAM_RTOL,
    STREAM_SAMPLES,
)
from numpy.testing import assert_array_equal

from skrbfkmeans import RBFKMeans, kmeans_polish
from skrbfkmeans._cli.reproduce import ACTIVATIONS, run_experiment, summarize

ROOT = Path(__file__).resolve().parent.parent


def _read(relative):
    return (ROOT / relative).read_text(encoding="utf-8")


def _section(docstring, title):
    """The lines of a numpydoc section, up to the next underlined title."""
    lines = inspect.cleandoc(docstring).splitlines()
    start = next(i for i, line in enumerate(lines) if line.strip() == title) + 2
    stop = next(
        (
            i
            for i in range(start, len(lines) - 1)
            if lines[i + 1].strip() and set(lines[i + 1].strip()) == {"-"}
        ),
        len(lines),
    )
    return lines[start:stop]


def test_kmeans_polish_random_state_is_deprecated():
    # Check that passing random_state raises a FutureWarning at the caller's
    # line and changes nothing, and that omitting it raises no warning.
    X = np.array([[0.0], [0.1], [5.0], [5.1], [10.0], [10.1]])
    start = np.array([[0.05], [0.06], [7.55]])
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        ref = kmeans_polish(X, start)
    for random_state in (None, 0, np.random.RandomState(3)):
        with pytest.warns(FutureWarning, match="random_state") as record:
            out = kmeans_polish(X, start, random_state=random_state)
        assert record[0].filename == __file__
        assert_array_equal(out[0], ref[0])
        assert_array_equal(out[1], ref[1])
        assert out[2:] == ref[2:]


def test_rbf_kmeans_docstring_lists_every_fitted_attribute():
    # Check that the Attributes section of RBFKMeans names every public
    # fitted attribute that fit and partial_fit set, and nothing else.
    documented = {
        line.split(" : ")[0].strip()
        for line in _section(RBFKMeans.__doc__, "Attributes")
        if " : " in line and not line.startswith(" ")
    }
    X = np.random.RandomState(0).uniform(size=(60, 2))

    def public(est):
        return {k for k in vars(est) if k.endswith("_") and not k.startswith("_")}

    fitted = public(RBFKMeans(3, random_state=0).fit(X))
    streamed = public(RBFKMeans(3, random_state=0).partial_fit(X))
    assert fitted | streamed <= documented
    # feature_names_in_ is set only for input with string column names.
    assert documented <= fitted | streamed | {"feature_names_in_"}
    assert "n_steps_" in streamed


def test_rbf_kmeans_see_also_names_the_alternatives():
    # Check that the See Also section names the scikit-learn estimators a
    # user would otherwise reach for.
    see_also = "\n".join(_section(RBFKMeans.__doc__, "See Also"))
    for name in (
        "sklearn.cluster.KMeans",
        "sklearn.cluster.MiniBatchKMeans",
        "sklearn.mixture.GaussianMixture",
    ):
        assert re.search(rf"^\s*{re.escape(name)} :", see_also, re.MULTILINE), name


def test_readme_test_command_is_the_ci_command():
    # Check that .ci/run runs the README's test command verbatim.
    readme = _read("README.rst")
    commands = re.findall(r"^    (pip install .*)$", readme, re.MULTILINE)
    assert len(commands) == 2
    test_command = next(c for c in commands if "pytest" in c)
    ci_lines = [line.strip() for line in _read(".ci/run").splitlines()]
    assert test_command in ci_lines


def test_partial_fit_claim_is_what_its_test_asserts():
    # Check that the user guide's partial_fit sentence states the numbers
    # that test_partial_fit.py's stream test runs with.
    guide = " ".join(_read("doc/user_guide.rst").split())
    words = {5: "five", 10: "ten"}
    assert (
        f"{words[STREAM_PASSES]} passes over {STREAM_BLOCKS} blocks of "
        f"{STREAM_SAMPLES} samples ({words[STREAM_BLOBS]} blobs in "
        f"{STREAM_FEATURES}-D"
    ) in guide
    assert f"within {STREAM_RTOL:.0%} of the inertia" in guide


def _convergence_table():
    """Rows of the user guide's convergence list-table, as lists of cells."""
    guide = _read("doc/user_guide.rst")
    start = guide.index("the default settings it printed:")
    block = guide[start : guide.index("\n(", start)]
    rows, row = [], None
    for line in block.splitlines():
        if line.startswith("   * - "):
            row = [line[len("   * - ") :].strip()]
            rows.append(row)
        elif line.startswith("     - ") and row is not None:
            row.append(line[len("     - ") :].strip())
        elif line.strip() == "-" and row is not None:
            row.append("")
    return rows[1:]  # without the header


def _same(cell, value, fmt):
    if cell in ("", "none"):
        return math.isnan(value)
    return float(cell) == float(format(value, fmt))


@pytest.fixture(scope="module")
def experiment():
    return run_experiment()


def test_user_guide_convergence_table_matches_the_experiment(experiment):
    # Check that every cell of the user guide's table is what the
    # experiment (python -m skrbfkmeans reproduce) computes today.
    table = _convergence_table()
    summaries = [summarize(r, a) for r in experiment for a in ACTIVATIONS]
    assert len(table) == len(summaries) == 8
    for cells, s in zip(table, summaries):
        assert cells[:2] == [s.dataset, s.activation]
        assert _same(cells[2], s.slope, ".2f"), (cells, s)
        assert _same(cells[3], s.exp_rate, ".2f"), (cells, s)
        assert _same(cells[4], s.sigma_star, ".4g"), (cells, s)
        assert _same(cells[5], s.largest_zero, ".4g"), (cells, s)
        assert _same(cells[6], s.next_above, ".4g"), (cells, s)
        assert s.n_not_converged == 0
        assert s.agrees == (s.activation == "entmax15")


def test_user_guide_convergence_prose_matches_the_experiment(experiment):
    # Check the distances the prose quotes: entmax-1.5 just above sigma*
    # (1.6e-8 to 7.4e-8) and softmax at 0.3 sigma* (0.9e-12 to 4.2e-12).
    guide = " ".join(_read("doc/user_guide.rst").split())
    above, low = [], []
    for r in experiment:
        above.append(
            r.distances["entmax15"][np.argmin(abs(r.sigmas / r.sigma_star - 1.001))]
        )
        low.append(
            r.distances["softmax"][np.argmin(abs(r.sigmas / r.sigma_star - 0.3))]
        )
    assert f"{min(above) * 1e8:.1f} \\times 10^{{-8}}" in guide
    assert f"{max(above) * 1e8:.1f} \\times 10^{{-8}}" in guide
    assert f"{min(low) * 1e12:.1f} \\times 10^{{-12}}" in guide
    assert f"{max(low) * 1e12:.1f} \\times 10^{{-12}}" in guide


def _ratio(x):
    """A time ratio as the documents print it: 0.22, 7.2, 13."""
    if x < 1:
        return f"{x:.2f}"
    return f"{x:.1f}" if x < 10 else f"{x:.0f}"


def _time_range(entry):
    """``median (min-max)`` of a recorded time ratio: ``7.2 (4.2-13)``."""
    median, low, high = entry["time"]
    return f"{_ratio(median)} ({_ratio(low)}-{_ratio(high)})"


def test_cost_figures_quote_the_one_recorded_run():
    # Check that every cost figure of the README and of the user guide is
    # the recorded run of bench_tools (benchmarks/results/tools.json, one
    # source: they once gave three different ranges), and that no other
    # range of "times KMeans(n_init=10)" is left in either.
    import json

    record = json.loads(_read("benchmarks/results/tools.json"))["summary"]
    small, large = record["small"], record["large"]
    readme, guide = _read("README.rst"), _read("doc/user_guide.rst")
    annealed = _time_range(small["AnnealedRBFKMeans()"])
    polish = _time_range(small["KMeans(1)+kmeans_polish"])
    unpolished = _time_range(small["AnnealedRBFKMeans(polish=False)"])
    _, low, high = large["AnnealedRBFKMeans()"]["time"]
    annealed_large = f"{_ratio(low)}-{_ratio(high)}"
    for text in (readme, guide):
        assert annealed in text and polish in text and annealed_large in text
    for method in ("RBFKMeans(sigma=0)", "RBFKMeans()", "RBFKMeans(entmax15)"):
        assert _time_range(small[method]) in readme
    assert unpolished in guide
    added = small["final phase added"]
    assert f"+{100 * added[0]:.0f}% (+{100 * added[1]:.0f}% to " in guide
    quoted = {annealed, polish, annealed_large, unpolished}
    for text in (readme, guide):
        pattern = r"(\d[\d.]*) to (\d[\d.]*) times (?:as long as )?``KMeans\("
        for match in re.finditer(pattern, text):
            span = f"{match.group(1)}-{match.group(2)}"
            assert any(span in q for q in quoted), match.group(0)
