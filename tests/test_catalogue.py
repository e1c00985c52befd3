"""The adversarial catalogue as tests: every case a correct result or a clear error.

Each case of ``tests/_catalogue.py`` (eleven families: scales, offsets,
dtypes, sparse formats, ties, degenerate k, bad input, many rows, faults,
command line, signals) is one test, judged against its oracle by
:func:`_catalogue.judge`. The cases of the ``extended`` tier run only with
``pytest --extended``; the known failures of ``KNOWN_FAILURES`` are
expected to fail (strictly: one that passes fails the run).
``benchmarks/bench_reliability.py`` runs the same cases and prints the
counts per family.
"""

import collections

import numpy as np
import pytest
from _catalogue import (
    FAMILIES,
    KNOWN_FAILURES,
    TIERS,
    Call,
    Case,
    Command,
    Fault,
    catalogue,
    classify_exit,
    judge,
)

from skrbfkmeans import RBFKMeans

CASES = catalogue()


def _param(case):
    marks = []
    if case.tier == "extended":
        marks.append(pytest.mark.extended)
    if case.id in KNOWN_FAILURES:
        marks.append(pytest.mark.xfail(reason=KNOWN_FAILURES[case.id], strict=True))
    return pytest.param(case, id=case.id, marks=marks)


@pytest.fixture(scope="module")
def scratch(tmp_path_factory):
    """A directory shared by the cases of this module (the signals' inputs)."""
    return str(tmp_path_factory.mktemp("catalogue"))


@pytest.mark.parametrize("case", [_param(case) for case in CASES])
def test_case_is_right(case, scratch):
    # Check that the case ends in a correct result or a clear error (where
    # an error is allowed), judged against its oracle.
    verdict = judge(case, scratch)
    assert verdict.right, f"{verdict.outcome}: {verdict.detail}"


def test_case_ids_are_unique():
    counts = collections.Counter(case.id for case in CASES)
    assert [name for name, n in counts.items() if n > 1] == []


def test_every_family_has_cases_in_every_run():
    # Check that the default run and the smoke run reach every family but the
    # slow ones, and that every case has a known tier.
    assert {case.tier for case in CASES} <= set(TIERS)
    by_tier = collections.defaultdict(set)
    for case in CASES:
        by_tier[case.tier].add(case.family)
    slow = {"many-rows", "signals"}
    assert by_tier["smoke"] == set(FAMILIES) - slow
    assert by_tier["smoke"] | by_tier["default"] == set(FAMILIES) - slow
    assert {case.family for case in CASES} == set(FAMILIES)


def test_known_failures_are_cases():
    ids = {case.id for case in CASES}
    assert sorted(set(KNOWN_FAILURES) - ids) == []


def _raise(exc):
    raise exc


def _modifies_its_input():
    X = np.zeros(3)
    return Call(lambda: X.fill(1.0), inputs=(X,))


def _fitted():
    return RBFKMeans(2, random_state=0).fit(np.array([[0.0], [1.0], [5.0], [6.0]]))


def _moves_a_centre_then_raises(est):
    est.cluster_centers_ = est.cluster_centers_ + 1.0
    raise KeyboardInterrupt


# A trial of each kind of answer, and the outcome it must get.
JUDGED = {
    "a correct result": (
        lambda: Call(lambda: 2.0, lambda r, caught: None if r == 2 else "off"),
        "correct",
    ),
    "a wrong result": (
        lambda: Call(lambda: 1.0, lambda r, caught: None if r == 2 else "off"),
        "wrong",
    ),
    "a clear error": (lambda: Call(lambda: float("x"), expect="error"), "error"),
    "bad input accepted": (lambda: Call(lambda: 1.0, expect="error"), "wrong"),
    "valid input refused": (lambda: Call(lambda: float("x")), "wrong"),
    "another exception": (lambda: Call(lambda: 1 / 0), "crash"),
    "finite input reported as NaN": (
        lambda: Call(lambda: _raise(ValueError("Input contains NaN"))),
        "crash",
    ),
    "the caller's array modified": (_modifies_its_input, "wrong"),
    "a fault that leaves the model": (
        lambda: Fault(_fitted(), lambda est: _raise(KeyboardInterrupt)),
        "correct",
    ),
    "a fault that changes the model": (
        lambda: Fault(_fitted(), _moves_a_centre_then_raises),
        "wrong",
    ),
    "a fault swallowed": (lambda: Fault(_fitted(), lambda est: None), "wrong"),
    "a fault that surfaces as another exception": (
        lambda: Fault(_fitted(), lambda est: _raise(RuntimeError("lost"))),
        "crash",
    ),
    "a command line's clear error": (
        lambda: Command(
            ["cluster", "missing.csv", "-o", "out.csv", "-k", "2"], "error"
        ),
        "error",
    ),
    "a command line accepting bad input": (
        lambda: Command(["--help"], "error"),
        "wrong",
    ),
}


@pytest.mark.parametrize("answer", JUDGED)
def test_judge_tells_the_outcomes_apart(answer, scratch):
    # Check that the classifier gives each kind of answer its outcome, so
    # that a case passes only on a right one.
    trial, outcome = JUDGED[answer]
    verdict = judge(Case("test", answer, trial), scratch)
    assert verdict.outcome == outcome, verdict


@pytest.mark.parametrize(
    "status, stderr, expect, outcome",
    [
        (2, "skrbfkmeans: error: no data rows\n", "error", "error"),
        (2, "usage: skrbfkmeans\nskrbfkmeans: error: no data rows\n", "error", "crash"),
        (
            1,
            "Traceback (most recent call last):\n  ...\nKeyError: 'x'\n",
            "result",
            "crash",
        ),
        (0, "", "error", "wrong"),
        (0, "", "result", "correct"),
        (2, "skrbfkmeans: error: no data rows\n", "result", "wrong"),
        (130, "skrbfkmeans: interrupted\n", "result", "crash"),
    ],
)
def test_classify_exit(status, stderr, expect, outcome):
    # Check the verdicts of finished command lines: one clear error line and
    # status 2, or status 0 where a result is allowed; anything else fails.
    assert classify_exit(status, stderr, expect).outcome == outcome


def test_classify_exit_checks_the_output():
    verdict = classify_exit(0, "", "result", lambda: "3 output rows for 4 input rows")
    assert verdict.outcome == "wrong"
    assert verdict.detail == "3 output rows for 4 input rows"
