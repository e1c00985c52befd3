"""Tests of the command line, run as a user runs it: ``python -m skrbfkmeans``.

Each subcommand's main path and each kind of bad input the command line
promises to handle (missing or unreadable file, non-numeric column, NaN, more
clusters than rows, OUT == INPUT, unknown extension) run as a subprocess.
Starting Python with scikit-learn costs seconds, so the module fixture
``runs`` starts them all at once, each in its own directory, and the tests
read the results. Variants of those paths (other options, other malformed
files, argument errors) call ``main`` in-process, with the same checks.
"""

import csv
import os
import subprocess
import sys

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans
from skrbfkmeans._cli import main, write_atomic

X_BLOBS = make_blobs(n_samples=40, centers=3, cluster_std=0.5, random_state=0)[0]
# repr of a Python float reads back bit for bit.
HEADER_CSV = "x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in X_BLOBS.tolist())
PLAIN_CSV = "".join(f"{a!r},{b!r}\n" for a, b in X_BLOBS.tolist())


# name -> (files to create, arguments). Text is written as is, bytes as
# bytes, arrays with np.save.
SUBPROCESS_HAPPY = {
    "cluster": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"],
    ),
    "demo": ({}, ["demo", "--output-dir", "figs"]),
    "reproduce": (
        {},
        ["reproduce", "--output-dir", "out", "--n-samples", "60", "--n-widths", "12"],
    ),
}

# name -> (files, arguments, a fragment of the one-line error message).
SUBPROCESS_BAD = {
    "missing_file": (
        {},
        ["cluster", "nope.csv", "-k", "2", "-o", "o.csv"],
        "nope.csv: no such file",
    ),
    "unreadable_not_utf8": (
        {"data.csv": b"1,2\n\xff\xfe,3\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "cannot read data.csv: not UTF-8 text",
    ),
    "non_numeric_column": (
        {"data.csv": "a,b\n1,2\n3,x\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 3: column 2 (b): 'x' is not a number",
    ),
    "nan": (
        {"data.csv": "1,2\n3,nan\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 2: NaN or infinite value",
    ),
    "more_clusters_than_rows": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "41", "-o", "o.csv"],
        "--n-clusters 41 is larger than the number of rows (40) in data.csv",
    ),
    "output_is_input": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "./data.csv"],
        "is the input file; pass --force to overwrite it",
    ),
    "unknown_extension": (
        {"data.txt": PLAIN_CSV},
        ["cluster", "data.txt", "-k", "3", "-o", "o.csv"],
        "data.txt: unknown extension '.txt'; INPUT must be .csv or .npy",
    ),
}

# More bad inputs, run in-process through main().
IN_PROCESS_BAD = {
    "input_is_directory": (
        {"d.csv/keep.txt": "x"},
        ["cluster", "d.csv", "-k", "2", "-o", "o.csv"],
        "d.csv: is a directory",
    ),
    "not_npy": (
        {"data.npy": b"not an npy file"},
        ["cluster", "data.npy", "-k", "1", "-o", "o.csv"],
        "data.npy: not a .npy file",
    ),
    "non_numeric_npy": (
        {"data.npy": np.array([["a", "b"], ["c", "d"]])},
        ["cluster", "data.npy", "-k", "1", "-o", "o.csv"],
        "non-numeric array",
    ),
    "nan_npy": (
        {"data.npy": np.array([[1.0, 2.0], [np.inf, 0.0]])},
        ["cluster", "data.npy", "-k", "1", "-o", "o.csv"],
        "NaN or infinite value in row 1",
    ),
    "empty_field": (
        {"data.csv": "1,2\n3,\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "line 2: column 2: empty field is not a number",
    ),
    "ragged_rows": (
        {"data.csv": "1,2\n3\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "line 2: 1 field, expected 2",
    ),
    "header_only": (
        {"data.csv": "a,b\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv: no data rows",
    ),
    "centers_is_input": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--centers", "data.csv"],
        "--centers data.csv is the input file",
    ),
    "centers_is_output": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--centers", "o.csv"],
        "--centers and --output are the same file",
    ),
    "unknown_output_extension": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.npy"],
        "--output o.npy: unknown extension",
    ),
    "output_directory_missing": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--centers", "no/c.csv"],
        "does not exist",
    ),
    "sigma_and_anneal": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--sigma", "1", "--anneal"],
        "argument --anneal: not allowed with argument --sigma",
    ),
    "negative_sigma": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--sigma", "-1"],
        "expected a positive finite number, got '-1'",
    ),
    "zero_clusters": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "0", "-o", "o.csv"],
        "expected a positive integer, got '0'",
    ),
    "missing_output_option": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3"],
        "the following arguments are required: --output",
    ),
    "auto_without_anneal": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--activation", "auto"],
        "--activation auto needs --anneal",
    ),
    "no_command": ({}, [], "the following arguments are required: COMMAND"),
    "unknown_command": ({}, ["bogus"], "invalid choice: 'bogus'"),
    "too_few_widths": ({}, ["reproduce", "--n-widths", "5"], "at least 12"),
}


def _snapshot(directory):
    """Every file under ``directory`` with its bytes."""
    files = {}
    for root, _, names in os.walk(directory):
        for name in names:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                files[os.path.relpath(path, directory)] = f.read()
    return files


def _prepare(directory, files):
    for name, content in files.items():
        path = directory / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, np.ndarray):
            with open(path, "wb") as f:
                np.save(f, content)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """Start every subprocess case at once; name -> (dir, before, rc, out, err)."""
    cases = {**SUBPROCESS_HAPPY, **{k: v[:2] for k, v in SUBPROCESS_BAD.items()}}
    # The processes run side by side: one thread each, or OpenMP and BLAS
    # threads oversubscribe the cores and spin against each other.
    threads = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    env = {**os.environ, **dict.fromkeys(threads, "1")}
    started = {}
    for name, (files, args) in cases.items():
        directory = tmp_path_factory.mktemp(name)
        _prepare(directory, files)
        proc = subprocess.Popen(
            [sys.executable, "-m", "skrbfkmeans", *args],
            cwd=directory,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        started[name] = (directory, _snapshot(directory), proc)
    results = {}
    for name, (directory, before, proc) in started.items():
        out, err = proc.communicate(timeout=300)
        results[name] = (directory, before, proc.returncode, out, err)
    return results


def _run_main(directory, monkeypatch, capsys, files, args):
    """``main(args)`` in ``directory``: (before, rc, out, err)."""
    _prepare(directory, files)
    before = _snapshot(directory)
    monkeypatch.chdir(directory)
    returncode = main(args)
    captured = capsys.readouterr()
    return before, returncode, captured.out, captured.err


def _assert_clean_error(directory, before, returncode, out, err, fragment):
    assert returncode == 2, err
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("skrbfkmeans: error: ")
    assert fragment in lines[0]
    assert "Traceback" not in err and out == ""
    # Input untouched, no output, no temporary file left behind.
    assert _snapshot(directory) == before


def _read_rows(path):
    with open(path, newline="") as f:
        return list(csv.reader(f))


@pytest.mark.parametrize("name", list(SUBPROCESS_BAD), ids=list(SUBPROCESS_BAD))
def test_bad_input_subprocess(runs, name):
    # Check that each kind of bad input gives exit status 2 and exactly one
    # line "skrbfkmeans: error: ..." naming the problem on stderr, with no
    # traceback, and leaves the directory as it was.
    directory, before, returncode, out, err = runs[name]
    _assert_clean_error(
        directory, before, returncode, out, err, SUBPROCESS_BAD[name][2]
    )


@pytest.mark.parametrize("name", list(IN_PROCESS_BAD), ids=list(IN_PROCESS_BAD))
def test_bad_input_in_process(tmp_path, monkeypatch, capsys, name):
    # Check the same promise for the other malformed files and arguments.
    files, args, fragment = IN_PROCESS_BAD[name]
    before, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
    _assert_clean_error(tmp_path, before, returncode, out, err, fragment)


def test_cluster_csv_with_header(runs):
    # Check that a CSV with a header (detected) gives one row per sample with the label
    # and the responsibilities, equal to RBFKMeans's, and the centres with
    # the input's column names.
    directory, _, returncode, out, err = runs["cluster"]
    assert returncode == 0, err
    assert err == ""
    rows = _read_rows(directory / "out.csv")
    assert rows[0] == ["label", "resp_0", "resp_1", "resp_2"]
    table = np.array(rows[1:], dtype=float)
    assert table.shape == (X_BLOBS.shape[0], 4)
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS)
    assert_array_equal(table[:, 0], est.labels_)
    assert_allclose(table[:, 1:], est.predict_proba(X_BLOBS), rtol=1e-10, atol=1e-12)
    centers = _read_rows(directory / "c.csv")
    assert centers[0] == ["x", "y"]
    # Centres are written with repr: they read back bit for bit.
    assert_array_equal(np.array(centers[1:], dtype=float), est.cluster_centers_)
    assert "RBFKMeans: 40 samples, 3 clusters" in out and "wrote out.csv" in out
    assert sorted(os.listdir(directory)) == ["c.csv", "data.csv", "out.csv"]


def test_cluster_npy_sigma_entmax(tmp_path, monkeypatch, capsys):
    # Check that .npy input with --sigma and --activation entmax15 runs
    # RBFKMeans at that width: sparse rows that sum to one.
    args = ["cluster", "data.npy", "--n-clusters", "3", "--sigma", "0.5"]
    args += ["--activation", "entmax15", "--output", "out.csv"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.npy": X_BLOBS}, args
    )
    assert returncode == 0, err
    rows = _read_rows(tmp_path / "out.csv")
    assert rows[0] == ["label", "resp_0", "resp_1", "resp_2"]
    resp = np.array(rows[1:], dtype=float)[:, 1:]
    est = RBFKMeans(n_clusters=3, sigma=0.5, activation="entmax15", random_state=0).fit(
        X_BLOBS
    )
    assert_allclose(resp, est.predict_proba(X_BLOBS), rtol=1e-10, atol=1e-12)
    assert_allclose(resp.sum(axis=1), 1.0, rtol=1e-10)
    assert (resp == 0).any()
    assert "sigma 0.5" in out


def test_cluster_anneal_verbose(tmp_path, monkeypatch, capsys):
    # Check that --anneal runs AnnealedRBFKMeans (certified, exactly one-hot
    # rows) on a CSV without header, and that --verbose prints progress.
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--anneal", "-v"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.csv": PLAIN_CSV}, args
    )
    assert returncode == 0, err
    table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
    assert table.shape == (X_BLOBS.shape[0], 4)
    est = AnnealedRBFKMeans(n_clusters=3).fit(X_BLOBS)
    assert_array_equal(table[:, 0], est.labels_)
    assert set(np.unique(table[:, 1:])) <= {0.0, 1.0}
    assert "read data.csv: 40 rows x 2 columns" in out
    assert "(header detected)" not in out
    assert "certified=True" in out
    assert len(out.splitlines()) > 3


def test_cluster_force_overwrites_input(tmp_path, monkeypatch, capsys):
    # Check that --force allows OUT to be INPUT: it is read whole first,
    # then replaced.
    args = ["cluster", "data.csv", "-k", "3", "-o", "data.csv", "--force"]
    _, returncode, _, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.csv": HEADER_CSV}, args
    )
    assert returncode == 0, err
    rows = _read_rows(tmp_path / "data.csv")
    assert rows[0][0] == "label" and len(rows) == X_BLOBS.shape[0] + 1
    assert os.listdir(tmp_path) == ["data.csv"]


def test_demo(runs):
    # Check that demo prints the comparison table (both data sets, both
    # methods, certified) and writes the figure where it says.
    directory, _, returncode, out, err = runs["demo"]
    assert returncode == 0, err
    lines = out.splitlines()
    header = lines[0].split()
    for column in ["inertia", "ARI", "time", "certified"]:
        assert column in header
    body = [line for line in lines if line.startswith(("blobs", "digits"))]
    assert len(body) == 4
    assert sum("AnnealedRBFKMeans" in line and "True" in line for line in body) == 2
    # Aligned: the method column starts at the same place on every row.
    starts = {line.index("KMeans(n_init=10)") for line in body if "KMeans(" in line}
    starts |= {line.index("AnnealedRBFKMeans") for line in body if "Annealed" in line}
    assert starts == {lines[0].index("method")}
    figure = directory / "figs" / "annealing_path.png"
    assert figure.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert f"wrote {figure}" in out


def test_reproduce(runs):
    # Check that reproduce writes convergence.csv with exactly the columns
    # dataset,activation,sigma,distance (four data sets, two maps, 12 + 2
    # widths), both figures, and a table in which entmax's largest exact-zero
    # width agrees with sigma*.
    directory, _, returncode, out, err = runs["reproduce"]
    assert returncode == 0, err
    rows = _read_rows(directory / "out" / "convergence.csv")
    assert rows[0] == ["dataset", "activation", "sigma", "distance"]
    assert len(rows) == 1 + 4 * 2 * 14
    assert {r[0] for r in rows[1:]} == {"blobs", "moons", "spiral", "circles"}
    assert {r[1] for r in rows[1:]} == {"softmax", "entmax15"}
    for name in ["convergence.png", "trajectories.png"]:
        assert (directory / "out" / name).read_bytes()[:4] == b"\x89PNG"
    entmax_rows = [line for line in out.splitlines() if " entmax15 " in line]
    assert len(entmax_rows) == 4
    assert all(" yes " in line for line in entmax_rows)


def test_write_atomic_failure_leaves_nothing(tmp_path):
    # Check that a write that fails half-way leaves the destination as it
    # was and no temporary file behind, for every output of the set.
    target = tmp_path / "out.csv"
    target.write_text("old\n")
    other = tmp_path / "centers.csv"

    def fail(f):
        f.write("partial\n")
        raise RuntimeError("disk full")

    with pytest.raises(RuntimeError, match="disk full"):
        write_atomic([(str(other), lambda f: f.write("new\n")), (str(target), fail)])
    assert target.read_text() == "old\n"
    assert sorted(os.listdir(tmp_path)) == ["out.csv"]


def test_demo_without_matplotlib(tmp_path, monkeypatch, capsys):
    # Check that demo still prints its table without matplotlib, says how to
    # get the figure, and exits 0.
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    # One BLAS/OpenMP thread: this checks the output, and threads spinning
    # against other processes on a busy machine can make it 20 times slower.
    with threadpool_limits(1):
        assert main(["demo", "--output-dir", str(tmp_path)]) == 0
    captured = capsys.readouterr()
    assert "AnnealedRBFKMeans" in captured.out
    assert 'pip install "skrbfkmeans[plot]"' in captured.err
    assert os.listdir(tmp_path) == []
