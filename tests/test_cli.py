"""Tests of the command line, run as a user runs it: ``python -m skrbfkmeans``.

Each subcommand's main path and each kind of bad input the command line
promises to handle (missing or unreadable file, non-numeric column, NaN, more
clusters than rows, OUT == INPUT, unknown extension) run as a subprocess.
Starting Python with scikit-learn costs seconds, so the module fixture
``runs`` starts them all at once, each in its own directory, and the tests
read the results. Variants of those paths (other options, other malformed
files, argument errors) call ``main`` in-process, with the same checks.
Ctrl-C and SIGTERM are sent by the process to itself from a patched
``csv.writer``, half-way through writing an output: in-process for the
cleanup, and as a subprocess for the exit status.
"""

import contextlib
import csv
import errno
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
from numpy.testing import assert_allclose, assert_array_equal
from sklearn.datasets import make_blobs
from threadpoolctl import threadpool_limits

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans
from skrbfkmeans._cli.main import main, write_atomic

X_BLOBS = make_blobs(n_samples=40, centers=3, cluster_std=0.5, random_state=0)[0]
# repr of a Python float reads back bit for bit.
HEADER_CSV = "x,y\n" + "".join(f"{a!r},{b!r}\n" for a, b in X_BLOBS.tolist())
PLAIN_CSV = "".join(f"{a!r},{b!r}\n" for a, b in X_BLOBS.tolist())


# A shuffled index under an index's name, as df.sample(frac=1).to_csv(f)
# writes it after df.index.name = "id".
SHUFFLED = np.random.default_rng(0).permutation(X_BLOBS.shape[0])
NAMED_INDEX_CSV = "id,x,y\n" + "".join(
    f"{i},{a!r},{b!r}\n" for i, (a, b) in zip(SHUFFLED, X_BLOBS[SHUFFLED].tolist())
)

# name -> (files to create, arguments). Text is written as is, bytes as
# bytes, arrays with np.save.
SUBPROCESS_HAPPY = {
    "cluster": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"],
    ),
    "named_index": (
        {"data.csv": NAMED_INDEX_CSV},
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

# name -> (files, Python code run with -c, exit status, the stderr line). The
# process signals itself half-way through writing the output.
SIGNAL_CODE = """
import csv, os, signal, sys, time
from skrbfkmeans._cli.main import main

# As a shell starts it, whatever the test runner ignores.
signal.signal(signal.SIGINT, signal.default_int_handler)
signal.signal(signal.SIGTERM, signal.SIG_DFL)

def writer(f, **kwargs):
    f.write("label\\n")
    os.kill(os.getpid(), signal.{name})
    time.sleep(60)  # The signal interrupts the sleep.

csv.writer = writer
sys.exit(main(["cluster", "data.csv", "-k", "3", "-o", "out.csv"]))
"""
SUBPROCESS_SIGNAL = {
    "sigint": (
        {"data.csv": HEADER_CSV, "out.csv": "old\n"},
        SIGNAL_CODE.format(name="SIGINT"),
        130,
        "skrbfkmeans: interrupted",
    ),
    "sigterm": (
        {"data.csv": HEADER_CSV, "out.csv": "old\n"},
        SIGNAL_CODE.format(name="SIGTERM"),
        143,
        "skrbfkmeans: terminated",
    ),
}

# More bad inputs, run in-process through main().
IN_PROCESS_BAD = {
    "n_clusters_auto_without_anneal": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "auto", "-o", "o.csv"],
        "--n-clusters auto needs --anneal",
    ),
    "max_clusters_without_auto": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "--max-clusters", "5", "-o", "o.csv"],
        "--max-clusters needs --n-clusters auto",
    ),
    "max_clusters_above_rows": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "auto", "--anneal", "--max-clusters", "41"]
        + ["-o", "o.csv"],
        "--max-clusters 41 is larger than the number of rows (40) in data.csv",
    ),
    "n_clusters_not_a_count": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "many", "-o", "o.csv"],
        "expected a positive integer or auto, got 'many'",
    ),
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
        "argument --sigma: expected a non-negative finite number, got '-1'",
    ),
    "columns_unknown_name": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "x,z"],
        "--columns z: no column 'z' in the header of data.csv ('x', 'y')",
    ),
    "columns_position_too_large": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "1,3"],
        "--columns 3: data.csv has 2 columns",
    ),
    "columns_position_zero": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "0,1"],
        "argument --columns: column positions start at 1, got '0'",
    ),
    "columns_empty_field": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "x,,y"],
        "argument --columns: expected column names or positions separated by "
        "commas, got 'x,,y'",
    ),
    "columns_twice": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "y,2"],
        "--columns: column 2 of data.csv is selected twice",
    ),
    "columns_name_without_header": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "x"]
        + ["--no-header"],
        "--columns x: a name needs a header, and --no-header says the first "
        "row is data",
    ),
    "columns_name_npy": (
        {"data.npy": X_BLOBS},
        ["cluster", "data.npy", "-k", "3", "-o", "o.csv", "--columns", "x"],
        "--columns x: data.npy has no header to name columns",
    ),
    "columns_ragged_row": (
        {"data.csv": "a,b,kind\n1,2,x\n3,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv", "--columns", "a,b"],
        "data.csv, line 3: 2 fields, expected 3",
    ),
    "columns_selected_text": (
        {"data.csv": "a,b,kind\n1,2,x\n3,4,y\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv", "--columns", "kind,a"],
        "data.csv, line 2: column 3 (kind): 'x' is not a number",
    ),
    "zero_clusters": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "0", "-o", "o.csv"],
        "expected a positive integer or auto, got '0'",
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
    # KMeans needs a row per cluster: this was a ValueError from deep inside.
    "one_sample": (
        {},
        ["reproduce", "--n-samples", "1", "--output-dir", "out"],
        "--n-samples 1 is too small: a data set has 3 clusters",
    ),
    "two_samples": (
        {},
        ["reproduce", "--n-samples", "2", "--output-dir", "out"],
        "--n-samples 2 is too small: a data set has 3 clusters",
    ),
    # A first row with a number in it is data, never a header to drop.
    "first_row_na": (
        {"data.csv": "NA,2\n1,2\n3,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 1: column 1: 'NA' is not a number",
    ),
    "first_row_empty_field": (
        {"data.csv": "1,\n1,2\n3,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 1: column 2: empty field is not a number",
    ),
    "first_row_two_dots": (
        {"data.csv": "1.2.3,2\n1,2\n3,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 1: column 1: '1.2.3' is not a number",
    ),
    "first_row_after_blank_lines": (
        {"data.csv": "\n\nNA,2\n1,2\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 3: column 1: 'NA' is not a number",
    ),
    # No later row has a number: the text first row is data, and no column
    # of numbers is left to cluster.
    "text_only": (
        {"data.csv": "a,b\nc,d\ne,f\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 1: column 1: 'a' is not a number",
    ),
    # A column of numbers with text further down stays an error, even in a
    # file with a column of text.
    "text_in_a_column_of_numbers": (
        {"data.csv": "name,a,b\ns0,1,2\ns1,x,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 3: column 2 (a): 'x' is not a number",
    ),
    "header_then_text_row": (
        {"data.csv": "a,b\nc,d\n1,2\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv"],
        "data.csv, line 2: column 1 (a): 'c' is not a number",
    ),
    # At width 0 the map to responsibilities has no effect: refused, not
    # ignored.
    "sigma_zero_entmax": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--sigma", "0"]
        + ["--activation", "entmax15"],
        "--activation entmax15 has no effect with --sigma 0 (KMeans's fit: the "
        "responsibilities are one-hot); leave it out, or pass a width above 0",
    ),
    "sigma_zero_softmax": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--sigma", "0"]
        + ["--activation", "softmax"],
        "--activation softmax has no effect with --sigma 0",
    ),
    "columns_bad_range": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--columns", "3-2"],
        "expected a range of positions from 1, low-high, got '3-2'",
    ),
    "no_header_option_text_row": (
        {"data.csv": "x,y\n1,2\n3,4\n"},
        ["cluster", "data.csv", "-k", "1", "-o", "o.csv", "--no-header"],
        "data.csv, line 1: column 1: 'x' is not a number",
    ),
    "header_and_no_header": (
        {"data.csv": HEADER_CSV},
        ["cluster", "data.csv", "-k", "3", "-o", "o.csv", "--header", "--no-header"],
        "argument --no-header: not allowed with argument --header",
    ),
    "header_option_npy": (
        {"data.npy": X_BLOBS},
        ["cluster", "data.npy", "-k", "3", "-o", "o.csv", "--header"],
        "data.npy: --header and --no-header apply to .csv input",
    ),
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
    cases.update({k: (v[0], ["-c", v[1]]) for k, v in SUBPROCESS_SIGNAL.items()})
    # The processes run side by side: one thread each, or OpenMP and BLAS
    # threads oversubscribe the cores and spin against each other.
    threads = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    env = {**os.environ, **dict.fromkeys(threads, "1")}
    started = {}
    for name, (files, args) in cases.items():
        directory = tmp_path_factory.mktemp(name)
        _prepare(directory, files)
        command = args if args[:1] == ["-c"] else ["-m", "skrbfkmeans", *args]
        proc = subprocess.Popen(
            [sys.executable, *command],
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


def test_cluster_n_clusters_auto(tmp_path, monkeypatch, capsys):
    # Check that --n-clusters auto --anneal chooses the count as
    # AnnealedRBFKMeans(n_clusters="auto") does (max_clusters: 20, or the
    # number of rows if fewer), writes that many responsibility columns and
    # says so.
    args = ["cluster", "data.csv", "-k", "auto", "--anneal", "-o", "out.csv"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.csv": PLAIN_CSV}, args
    )
    assert returncode == 0, err
    est = AnnealedRBFKMeans(n_clusters="auto", max_clusters=20).fit(X_BLOBS)
    assert est.n_clusters_ == 3
    rows = _read_rows(tmp_path / "out.csv")
    assert rows[0] == ["label", "resp_0", "resp_1", "resp_2"]
    assert_array_equal(np.array(rows[1:], dtype=float)[:, 0], est.labels_)
    assert "3 clusters (auto, longest-lived of 1..20)" in out
    small = {"data.csv": "".join(f"{a!r},{b!r}\n" for a, b in X_BLOBS[:12].tolist())}
    _, returncode, out, err = _run_main(
        tmp_path / "small", monkeypatch, capsys, small, args
    )
    assert returncode == 0, err
    assert "longest-lived of 1..12" in out


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
    # Both timed at one thread, and the ratio printed in the README's terms.
    assert "vs KMeans time" in lines[0]
    assert "both at one thread" in out and '"Which tool when" table' in out
    body = [line for line in lines if line.startswith(("blobs", "digits"))]
    assert len(body) == 4
    ratios = [float(line.split()[-2].rstrip("x")) for line in body]
    assert ratios[0] == ratios[2] == 1.0 and min(ratios[1], ratios[3]) > 0
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


@contextlib.contextmanager
def _shell_signal_handlers():
    """SIGINT and SIGTERM handled as a shell starts a command, then restored."""
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    signal.signal(signal.SIGINT, signal.default_int_handler)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    try:
        yield
    finally:
        for s, handler in handlers.items():
            signal.signal(s, handler)


@pytest.mark.parametrize("name", list(SUBPROCESS_SIGNAL), ids=list(SUBPROCESS_SIGNAL))
def test_signal_subprocess(runs, name):
    # Check that Ctrl-C (SIGINT) and SIGTERM while the output is being
    # written end the process with status 130 or 143 and one line on
    # stderr, no traceback, the old output and no temporary file left.
    directory, before, returncode, out, err = runs[name]
    _, _, status, line = SUBPROCESS_SIGNAL[name]
    assert returncode == status, err
    assert err.splitlines() == [line]
    assert _snapshot(directory) == before


@pytest.mark.parametrize(
    "signum, status, line",
    [
        (signal.SIGINT, 130, "skrbfkmeans: interrupted"),
        (signal.SIGTERM, 143, "skrbfkmeans: terminated"),
    ],
    ids=["sigint", "sigterm"],
)
def test_signal_removes_temporary_file(
    tmp_path, monkeypatch, capsys, signum, status, line
):
    # Check that a signal that arrives half-way through writing the output
    # removes its temporary file and keeps the old output, and that main
    # puts the SIGTERM handler it installed back.
    _prepare(tmp_path, {"data.csv": HEADER_CSV, "out.csv": "old\n"})
    monkeypatch.chdir(tmp_path)
    seen = []

    def writer(f, **kwargs):
        f.write("label\n")
        seen.append(sorted(os.listdir(tmp_path)))
        # Without main's handler, SIGTERM would end pytest itself.
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL
        os.kill(os.getpid(), signum)
        time.sleep(60)  # The signal interrupts the sleep.

    monkeypatch.setattr(csv, "writer", writer)
    with _shell_signal_handlers():
        returncode = main(["cluster", "data.csv", "-k", "3", "-o", "out.csv"])
        assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL
    captured = capsys.readouterr()
    assert returncode == status
    assert captured.err.splitlines() == [line]
    # The temporary file was there when the signal came, and is gone.
    assert len(seen) == 1 and len(seen[0]) == 3
    assert sorted(os.listdir(tmp_path)) == ["data.csv", "out.csv"]
    assert (tmp_path / "out.csv").read_text() == "old\n"


def test_signal_during_rename_keeps_outputs_together(tmp_path, monkeypatch, capsys):
    # Check that Ctrl-C between the renames of OUT and FILE waits until both
    # are in place: the outputs are replaced together or not at all.
    files = {"data.csv": HEADER_CSV, "out.csv": "old\n", "c.csv": "old\n"}
    _prepare(tmp_path, files)
    monkeypatch.chdir(tmp_path)
    real_replace = os.replace

    def replace(src, dst):
        real_replace(src, dst)
        if os.path.basename(dst) == "out.csv":
            os.kill(os.getpid(), signal.SIGINT)

    monkeypatch.setattr(os, "replace", replace)
    with _shell_signal_handlers():
        returncode = main(
            ["cluster", "data.csv", "-k", "3", "-o", "out.csv"] + ["--centers", "c.csv"]
        )
    captured = capsys.readouterr()
    assert returncode == 130
    assert captured.err.splitlines() == ["skrbfkmeans: interrupted"]
    assert _read_rows(tmp_path / "out.csv")[0][0] == "label"
    assert _read_rows(tmp_path / "c.csv")[0] == ["x", "y"]
    assert sorted(os.listdir(tmp_path)) == ["c.csv", "data.csv", "out.csv"]


def test_header_options(tmp_path, monkeypatch, capsys):
    # Check that --header takes a first row of numbers as the header (its
    # fields name the centres' columns) and --no-header a headerless file's
    # first row as data, where the default would have done otherwise or the
    # same.
    files = {"num.csv": "10,20\n" + PLAIN_CSV, "plain.csv": PLAIN_CSV}
    args = ["cluster", "num.csv", "-k", "3", "-o", "a.csv", "--centers", "c.csv"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, files, args + ["--header", "-v"]
    )
    assert returncode == 0, err
    assert "read num.csv: 40 rows x 2 columns (header)" in out
    assert len(_read_rows(tmp_path / "a.csv")) == 1 + 40
    assert _read_rows(tmp_path / "c.csv")[0] == ["10", "20"]

    _, returncode, _, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    assert returncode == 0, err
    assert len(_read_rows(tmp_path / "a.csv")) == 1 + 41

    args = ["cluster", "plain.csv", "-k", "3", "-o", "b.csv", "--centers", "d.csv"]
    _, returncode, _, err = _run_main(
        tmp_path, monkeypatch, capsys, {}, args + ["--no-header"]
    )
    assert returncode == 0, err
    assert len(_read_rows(tmp_path / "b.csv")) == 1 + 40
    assert _read_rows(tmp_path / "d.csv")[0] == ["feature_0", "feature_1"]


def _make_read_only(path):
    # Root writes to any file: a read-only file is one without write bits.
    os.chmod(path, 0o444)
    assert not os.stat(path).st_mode & 0o222


def test_read_only_output_needs_force(tmp_path, monkeypatch, capsys):
    # Check that an existing read-only OUT or FILE is not replaced (one-line
    # error naming it and --force), even by root, and is with --force.
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"]
    files = {"data.csv": HEADER_CSV, "out.csv": "old\n", "c.csv": "old\n"}
    _prepare(tmp_path, files)
    for name in ["out.csv", "c.csv"]:
        _make_read_only(tmp_path / name)
    for option, name in [("--output", "out.csv"), ("--centers", "c.csv")]:
        before, returncode, out, err = _run_main(
            tmp_path, monkeypatch, capsys, {}, args
        )
        fragment = f"{option} {name} is read-only; pass --force to replace it"
        _assert_clean_error(tmp_path, before, returncode, out, err, fragment)
        os.chmod(tmp_path / name, 0o644)
    for name in ["out.csv", "c.csv"]:
        _make_read_only(tmp_path / name)
    _, returncode, _, err = _run_main(
        tmp_path, monkeypatch, capsys, {}, args + ["--force"]
    )
    assert returncode == 0, err
    assert _read_rows(tmp_path / "out.csv")[0][0] == "label"
    assert _read_rows(tmp_path / "c.csv")[0] == ["x", "y"]


def test_reproduce_read_only_output(tmp_path, monkeypatch, capsys):
    # Check that reproduce refuses a read-only convergence.csv before it
    # runs the experiment, not after.
    from skrbfkmeans._cli import reproduce as _reproduce

    def run_experiment(*args):
        raise AssertionError("the experiment ran")

    monkeypatch.setattr(_reproduce, "run_experiment", run_experiment)
    _prepare(tmp_path, {"out/convergence.csv": "old\n"})
    _make_read_only(tmp_path / "out" / "convergence.csv")
    args = ["reproduce", "--output-dir", "out", "--n-samples", "60"]
    before, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    fragment = "convergence.csv is read-only; pass --force to replace it"
    _assert_clean_error(tmp_path, before, returncode, out, err, fragment)


@pytest.mark.parametrize(
    "exc, line",
    [
        (
            ValueError("A sample is equidistant\n  from two centres."),
            "A sample is equidistant from two centres.",
        ),
        (
            OSError(errno.ENOSPC, "No space left on device", "out/x.csv"),
            "out/x.csv: No space left on device",
        ),
    ],
    ids=["ValueError", "OSError"],
)
def test_library_errors_are_one_line(tmp_path, monkeypatch, capsys, exc, line):
    # Check that a ValueError or OSError from the libraries underneath, which
    # no check of the command foresaw, is one error line with exit status 2,
    # not a traceback.
    from skrbfkmeans._cli import reproduce as _reproduce

    def run_experiment(*args):
        raise exc

    monkeypatch.setattr(_reproduce, "run_experiment", run_experiment)
    args = ["reproduce", "--output-dir", "out", "--n-samples", "60"]
    before, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    _assert_clean_error(tmp_path, before, returncode, out, err, line)
    assert err == f"skrbfkmeans: error: {line}\n"


_INTERRUPT_DURING_IMPORT = """
import os, runpy, signal, sys

class Interrupt:
    # Sends Ctrl-C to this process when {module!r} is first imported.
    def find_spec(self, name, path=None, target=None):
        if name == {module!r}:
            sys.meta_path.remove(self)
            os.kill(os.getpid(), signal.SIGINT)
        return None

sys.meta_path.insert(0, Interrupt())
sys.argv = ["skrbfkmeans", "demo", "--help"]
runpy.run_module("skrbfkmeans", run_name="__main__", alter_sys=True)
"""


@pytest.mark.parametrize(
    "module",
    [
        "numpy",
        "datetime",
        "numpy.linalg",
        "skrbfkmeans._cli.parser",
    ],
)
def test_ctrl_c_while_loading_is_one_line(module):
    # Check that Ctrl-C while python -m skrbfkmeans loads its libraries
    # (before main runs) prints one line, no traceback, and exits 130. The
    # signal is sent at a chosen import rather than after a delay, so that the
    # test does not depend on the machine's speed. "datetime" is imported by
    # numpy's C extension while it initialises: a KeyboardInterrupt raised
    # there surfaced as an ImportError with a traceback (a CI failure).
    import subprocess
    import sys

    proc = subprocess.run(
        [sys.executable, "-c", _INTERRUPT_DURING_IMPORT.format(module=module)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == ["skrbfkmeans: interrupted"]
    assert proc.returncode == 130
    assert proc.stdout == ""


def _long_name(n_bytes, kind):
    """A ``.csv`` name of exactly ``n_bytes`` bytes (``kind``: the letters)."""
    stem = n_bytes - len(".csv")
    if kind == "ascii":
        return "a" * stem + ".csv"
    # Two bytes per letter in UTF-8, one ASCII letter if the count is odd.
    return "é" * (stem // 2) + "a" * (stem % 2) + ".csv"


@pytest.mark.parametrize("kind", ["ascii", "multibyte"])
def test_output_names_at_the_file_system_limit(tmp_path, monkeypatch, capsys, kind):
    # Check that outputs whose names are as long as the file system allows
    # (255 bytes on most) are written, with names of one-byte and of
    # two-byte characters: the temporary names next to them must fit too
    # (they failed after the fit with "File name too long").
    if kind == "multibyte" and sys.getfilesystemencoding().lower() != "utf-8":
        pytest.skip("file names are not UTF-8 here")
    limit = os.pathconf(tmp_path, "PC_NAME_MAX")
    output = _long_name(limit, kind)
    centers = "c" + _long_name(limit - 1, kind)
    args = ["cluster", "data.csv", "-k", "3", "-o", output, "--centers", centers]
    files = {"data.csv": HEADER_CSV}
    _, returncode, _, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
    assert returncode == 0, err
    assert sorted(os.listdir(tmp_path)) == sorted(["data.csv", output, centers])
    assert len(_read_rows(tmp_path / output)) == 1 + X_BLOBS.shape[0]
    assert len(_read_rows(tmp_path / centers)) == 1 + 3


@pytest.mark.parametrize("option", ["-o", "--centers"])
def test_output_name_too_long_fails_before_the_fit(
    tmp_path, monkeypatch, capsys, option
):
    # Check that an output name longer than the file system allows is one
    # line of error naming the option and the file, found before the fit
    # (it was found after it, when the temporary file was made).
    from skrbfkmeans._cli import commands as _cli_commands

    def no_fit(est, X):
        raise AssertionError("the fit ran before the output names were checked")

    monkeypatch.setattr(_cli_commands, "_fit", no_fit)
    too_long = _long_name(os.pathconf(tmp_path, "PC_NAME_MAX") + 1, "ascii")
    names = {"-o": "out.csv", "--centers": "c.csv", option: too_long}
    args = ["cluster", "data.csv", "-k", "3", "-o", names["-o"]]
    args += ["--centers", names["--centers"]]
    files = {"data.csv": HEADER_CSV}
    before, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
    option_name = "--output" if option == "-o" else option
    _assert_clean_error(
        tmp_path, before, returncode, out, err, f"{option_name} {too_long}: "
    )
    assert "file name too long" in err


def test_version(capsys):
    # Check that --version prints the program's name and the package's
    # version on one line and exits with status 0.
    import skrbfkmeans

    with pytest.raises(SystemExit) as exc:
        main(["--version"])
    assert exc.value.code == 0
    captured = capsys.readouterr()
    assert captured.out == f"skrbfkmeans {skrbfkmeans.__version__}\n"
    assert captured.err == ""


def test_cluster_sigma_zero_is_kmeans(tmp_path, monkeypatch, capsys):
    # Check that --sigma 0 is accepted, as RBFKMeans(sigma=0) is, and fits
    # as it does (KMeans's fit): the labels, one-hot responsibilities and
    # the summary's width.
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--sigma", "0"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.csv": HEADER_CSV}, args
    )
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, sigma=0, random_state=0).fit(X_BLOBS)
    table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
    assert_array_equal(table[:, 0], est.labels_)
    assert_array_equal(table[:, 1:], est.predict_proba(X_BLOBS))
    assert set(np.unique(table[:, 1:])) == {0.0, 1.0}
    assert f"inertia {est.inertia_:.6g}, sigma 0 " in out


# The file DataFrame(X_BLOBS, columns=["x", "y"]).to_csv writes: the index
# first, under an empty header cell.
PANDAS_CSV = ",x,y\n" + "".join(
    f"{i},{a!r},{b!r}\n" for i, (a, b) in enumerate(X_BLOBS.tolist())
)


def test_cluster_drops_the_pandas_index(tmp_path, monkeypatch, capsys):
    # Check that the index column of pandas' to_csv (no name, 0..n-1) is
    # not clustered as a feature: the fit is the one of the two features,
    # the centres are named by them, and one note on stderr says which
    # column was dropped and why.
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {"data.csv": PANDAS_CSV}, args
    )
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS)
    table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
    assert_array_equal(table[:, 0], est.labels_)
    centers = _read_rows(tmp_path / "c.csv")
    assert centers[0] == ["x", "y"]
    assert_array_equal(np.array(centers[1:], dtype=float), est.cluster_centers_)
    assert f"inertia {est.inertia_:.6g}" in out
    assert err.splitlines() == [
        "skrbfkmeans: note: left out column 1 of data.csv: distinct integers "
        "under no name, an index; --columns 1-3 keeps it"
    ]


def test_cluster_drops_the_index_pandas_writes(tmp_path, monkeypatch, capsys):
    # Check the same on a file written by pandas itself.
    pd = pytest.importorskip("pandas")
    pd.DataFrame(X_BLOBS, columns=["x", "y"]).to_csv(tmp_path / "data.csv")
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv"]
    _, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS)
    assert f"inertia {est.inertia_:.6g}" in out
    assert "left out column 1 of data.csv" in err


@pytest.mark.parametrize("name", ["", "id"])
def test_index_like_first_column_of_other_values_is_kept(
    tmp_path, monkeypatch, capsys, name
):
    # Check that a first column without a name or named like an index whose
    # values are not distinct integers (a feature: repeated or fractional)
    # is clustered, with a warning that says how to leave it out; and that
    # --columns leaves it out without a word.
    rows = [f"{i % 7},{a!r},{b!r}\n" for i, (a, b) in enumerate(X_BLOBS.tolist())]
    files = {"data.csv": f"{name},x,y\n" + "".join(rows)}
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "-v"]
    _, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
    assert returncode == 0, err
    assert "40 rows x 3 columns" in out
    what = "no name" if not name else f"the name {name!r}"
    assert err.splitlines() == [
        f"skrbfkmeans: warning: column 1 of data.csv has {what}: if it is an "
        "index, leave it out with --columns 2-3"
    ]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {}, args + ["--columns", "x,y"]
    )
    assert returncode == 0, err
    assert "40 rows x 2 columns" in out and err == ""


@pytest.mark.parametrize("columns", ["y,x", "3,2", "y,2"])
def test_cluster_columns_by_name_or_position(tmp_path, monkeypatch, capsys, columns):
    # Check that --columns keeps the columns it names (from the header) or
    # numbers (from 1), in its order, so that a text column can be left
    # out: the fit is the one of those columns, and the centres are named by
    # them.
    rows = [f"{i},{a!r},{b!r},kind\n" for i, (a, b) in enumerate(X_BLOBS.tolist())]
    files = {"data.csv": "id,x,y,kind\n" + "".join(rows)}
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"]
    _, returncode, _, err = _run_main(
        tmp_path, monkeypatch, capsys, files, args + ["--columns", columns]
    )
    assert returncode == 0, err
    assert err == ""
    X = X_BLOBS[:, ::-1]
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X)
    table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
    assert_array_equal(table[:, 0], est.labels_)
    centers = _read_rows(tmp_path / "c.csv")
    assert centers[0] == ["y", "x"]
    assert_array_equal(np.array(centers[1:], dtype=float), est.cluster_centers_)


def test_cluster_columns_without_header(tmp_path, monkeypatch, capsys):
    # Check that --columns selects by position in a file without a header
    # (the text column left out, the header decided on the columns kept)
    # and in a .npy file.
    rows = [f"{a!r},label,{b!r}\n" for a, b in X_BLOBS.tolist()]
    files = {"data.csv": "".join(rows), "data.npy": X_BLOBS}
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS[:, 1:])
    for name, columns in [("data.csv", "3"), ("data.npy", "2")]:
        args = ["cluster", name, "-k", "3", "-o", "out.csv", "--columns", columns]
        _, returncode, _, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
        assert returncode == 0, err
        table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
        assert table.shape == (40, 4)
        assert_array_equal(table[:, 0], est.labels_)


def test_cluster_leaves_out_a_named_shuffled_index(runs):
    # Check, as a user runs the command, that a first column named "id"
    # holding a shuffled index is left out (it was clustered as a feature,
    # with no message): exit status 0, the fit of the two features, the
    # centres named by them, and one note on stderr that names the column
    # and the --columns that would keep it.
    directory, _, returncode, out, err = runs["named_index"]
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS[SHUFFLED])
    table = np.array(_read_rows(directory / "out.csv")[1:], dtype=float)
    assert_array_equal(table[:, 0], est.labels_)
    assert _read_rows(directory / "c.csv")[0] == ["x", "y"]
    assert f"inertia {est.inertia_:.6g}" in out
    assert err.splitlines() == [
        "skrbfkmeans: note: left out column 1 of data.csv: distinct integers "
        "under the name 'id', an index; --columns 1-3 keeps it"
    ]


@pytest.mark.parametrize("name", ["index", "idx", "ID", "sample_id", "Unnamed: 0"])
def test_cluster_leaves_out_index_names(tmp_path, monkeypatch, capsys, name):
    # Check that the other names of an index are recognised, and that the
    # --columns the note gives keeps the column: the fit is then the one
    # of the three columns, without a note.
    files = {"data.csv": NAMED_INDEX_CSV.replace("id", name, 1)}
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv"]
    _, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, files, args)
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS[SHUFFLED])
    assert f"inertia {est.inertia_:.6g}" in out
    assert f"under the name {name!r}, an index; --columns 1-3 keeps it" in err
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, {}, args + ["--columns", "1-3"]
    )
    assert returncode == 0, err
    kept = np.column_stack([SHUFFLED, X_BLOBS[SHUFFLED]])
    est = RBFKMeans(n_clusters=3, random_state=0).fit(kept)
    assert f"inertia {est.inertia_:.6g}" in out and err == ""


def test_cluster_iris_with_a_named_index(tmp_path, monkeypatch, capsys):
    # Check the report's case, written by pandas: iris with
    # df.index.name = "id" was clustered on the index (inertia 31345
    # instead of 79.85); now the fit is that of the four measurements.
    pd = pytest.importorskip("pandas")
    from sklearn.datasets import load_iris

    df = load_iris(as_frame=True).data
    df.index.name = "id"
    df.to_csv(tmp_path / "iris.csv")
    args = ["cluster", "iris.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"]
    _, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    assert returncode == 0, err
    X = pd.read_csv(tmp_path / "iris.csv", index_col="id").to_numpy()
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X)
    assert f"inertia {est.inertia_:.6g}" in out and est.inertia_ < 100
    assert _read_rows(tmp_path / "c.csv")[0] == list(df.columns)
    assert "left out column 1 of iris.csv" in err


def test_cluster_shuffled_unnamed_index(tmp_path, monkeypatch, capsys):
    # Check the report's other case: df.sample(frac=1).to_csv(f) on four
    # blobs warned and then clustered on the shuffled index (adjusted Rand
    # index 0.0); now the index is left out and the blobs are found.
    pd = pytest.importorskip("pandas")
    from sklearn.metrics import adjusted_rand_score

    X, y = make_blobs(n_samples=400, centers=4, cluster_std=0.6, random_state=0)
    df = pd.DataFrame(X, columns=["x", "y"]).assign(blob=y)
    df.sample(frac=1, random_state=0).drop(columns="blob").to_csv(tmp_path / "d.csv")
    shuffled = df.sample(frac=1, random_state=0)
    args = ["cluster", "d.csv", "-k", "4", "-o", "out.csv"]
    _, returncode, _, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    assert returncode == 0, err
    labels = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)[:, 0]
    est = RBFKMeans(n_clusters=4, random_state=0).fit(shuffled[["x", "y"]].to_numpy())
    assert_array_equal(labels, est.labels_)
    assert adjusted_rand_score(shuffled["blob"], labels) > 0.95
    assert err.splitlines() == [
        "skrbfkmeans: note: left out column 1 of d.csv: distinct integers "
        "under no name, an index; --columns 1-3 keeps it"
    ]


TEXT_ROWS = [
    f"s{i:03d},{a!r},{b!r},kind{i % 3}\n" for i, (a, b) in enumerate(X_BLOBS.tolist())
]


@pytest.mark.parametrize(
    "content, options, note",
    [
        (
            "name,x,y,kind\n" + "".join(TEXT_ROWS),
            [],
            "columns 1 (name), 4 (kind) of data.csv: text ('s000', 'kind0'); "
            "--columns 2-3 chooses the columns",
        ),
        (
            "name,x,y,kind\n" + "".join(TEXT_ROWS),
            ["--header"],
            "columns 1 (name), 4 (kind) of data.csv: text ('s000', 'kind0'); "
            "--columns 2-3 chooses the columns",
        ),
        (
            "".join(TEXT_ROWS),
            [],
            "columns 1, 4 of data.csv: text ('s000', 'kind0'); --columns 2-3 "
            "chooses the columns",
        ),
    ],
    ids=["header-detected", "header-option", "no-header"],
)
def test_cluster_leaves_out_text_columns(
    tmp_path, monkeypatch, capsys, content, options, note
):
    # Check that columns of text are left out with one note naming them and
    # pointing at --columns, with the header detected, given or absent (it
    # was "line 1: column 1: 'name' is not a number; ... (pass --header
    # ...)" and, with --header, "'s000' is not a number"), and that the
    # numbers are clustered as without them.
    files = {"data.csv": content}
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv", "--centers", "c.csv"]
    _, returncode, out, err = _run_main(
        tmp_path, monkeypatch, capsys, files, args + options
    )
    assert returncode == 0, err
    assert err.splitlines() == [f"skrbfkmeans: note: left out {note}"]
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS)
    table = np.array(_read_rows(tmp_path / "out.csv")[1:], dtype=float)
    assert_array_equal(table[:, 0], est.labels_)
    header = ["x", "y"] if content.startswith("name") else ["feature_0", "feature_1"]
    assert _read_rows(tmp_path / "c.csv")[0] == header


def test_cluster_text_column_and_index_from_pandas(tmp_path, monkeypatch, capsys):
    # Check a frame with a column of names written with its index: both are
    # left out, each with its note, and the --columns of the index's note
    # leaves the text out.
    pd = pytest.importorskip("pandas")
    df = pd.DataFrame(X_BLOBS, columns=["x", "y"])
    df.insert(0, "name", [f"s{i:03d}" for i in range(len(df))])
    df.to_csv(tmp_path / "data.csv")
    args = ["cluster", "data.csv", "-k", "3", "-o", "out.csv"]
    _, returncode, out, err = _run_main(tmp_path, monkeypatch, capsys, {}, args)
    assert returncode == 0, err
    est = RBFKMeans(n_clusters=3, random_state=0).fit(X_BLOBS)
    assert f"inertia {est.inertia_:.6g}" in out
    assert err.splitlines() == [
        "skrbfkmeans: note: left out column 2 (name) of data.csv: text ('s000'); "
        "--columns 1,3-4 chooses the columns",
        "skrbfkmeans: note: left out column 1 of data.csv: distinct integers "
        "under no name, an index; --columns 1,3-4 keeps it",
    ]
