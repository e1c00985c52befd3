"""Every benchmark script runs in its smoke setting and prints its table.

Each ``benchmarks/bench_*.py`` runs with ``--smoke`` (tiny sizes, one round:
the code paths of the full run in a few seconds) in a fresh interpreter. The
timings are not checked: speed is measured by the scripts, never asserted.
"""

import importlib.util
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).resolve().parents[1] / "benchmarks"
SCRIPTS = sorted(BENCHMARKS.glob("bench_*.py"))

# A column heading of each script's (first) table, on no line above its
# header. A new script adds its own here; the test then checks that a row
# follows that header.
HEADINGS = {
    "bench_deep_clustering.py": "NMI mean",
    "bench_entmax.py": "x softmax",
    "bench_fit.py": "entmax15",
    "bench_many_rows.py": "every row s",
    "bench_memory.py": "tracemalloc",
    "bench_n_clusters.py": "lifetimes",
    "bench_quality.py": "x km10",
    "bench_reliability.py": "correct",
    "bench_scale.py": "s/iter",
    "bench_threads.py": "speed-up",
    "bench_tools.py": "inertia vs km10",
    "bench_torch.py": "x entmax pkg",
}
TIMEOUT = 300


def run_script(args):
    """Run ``python *args`` from the benchmarks folder; the completed process."""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, *args],
        cwd=BENCHMARKS,
        env=env,
        capture_output=True,
        text=True,
        timeout=TIMEOUT,
    )


def first_row(stdout, heading):
    """The first line after the header line holding ``heading`` (rules skipped)."""
    lines = stdout.splitlines()
    starts = [i for i, line in enumerate(lines) if heading in line]
    assert starts, f"no table header with {heading!r} in:\n{stdout}"
    rows = (line for line in lines[starts[0] + 1 :] if set(line.strip()) != {"-"})
    return next(rows, "")


def test_every_script_has_a_heading():
    # A script added to benchmarks/ is run below; it needs its heading here.
    assert SCRIPTS
    assert {script.name for script in SCRIPTS} <= set(HEADINGS)


@pytest.mark.extended
@pytest.mark.parametrize("script", SCRIPTS, ids=lambda script: script.stem)
def test_benchmark_smoke(script):
    if script.name == "bench_torch.py" and importlib.util.find_spec("torch") is None:
        pytest.skip("PyTorch is not installed (test_bench_torch_without_torch)")
    result = run_script([script.name, "--smoke"])
    assert result.returncode == 0, result.stdout + result.stderr
    row = first_row(result.stdout, HEADINGS[script.name])
    # A row: a label and numbers, not the end of the output or a blank line.
    assert row.strip() and re.search(r"\d", row), result.stdout


@pytest.mark.extended
def test_bench_torch_without_torch():
    # The script is run with 'import torch' failing, as where it is absent.
    code = (
        "import runpy, sys; sys.modules['torch'] = None; "
        "sys.argv = ['bench_torch.py', '--smoke']; "
        "runpy.run_path('bench_torch.py', run_name='__main__')"
    )
    result = run_script(["-c", code])
    assert result.returncode == 0, result.stdout + result.stderr
    assert "PyTorch is not installed" in result.stdout
    assert HEADINGS["bench_torch.py"] not in result.stdout
