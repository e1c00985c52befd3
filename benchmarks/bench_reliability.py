"""Adversarial inputs: a correct result or a clear error, never a wrong one.

Runs the adversarial catalogue (``tests/_catalogue.py``: eleven families of
cases on the public API and the command line, which
``tests/test_catalogue.py`` runs as tests) through its classifier, and
prints how many cases of each family ended in a correct result, a clear
error, a wrong result or a crash (the outcomes are defined there); then
every wrong and crash case with what went wrong (a known failure with its
reason), and the notes (a message that does not name the problem, a NumPy
``RuntimeWarning`` on the way to a correct result). One BLAS/OpenMP
thread. Exit status 1 if a case is wrong or crashed, known failures aside.

With ``--raise-fp`` every API call runs under ``np.errstate(all="raise")``:
the package handles its floating-point events itself, so the outcomes must
be the same. ``--smoke`` runs the cases of the smoke tier, a few of each
family but the slow ones (``many-rows``, ``signals``), in a few seconds.

Run: ``python benchmarks/bench_reliability.py [--only FAMILY[,FAMILY]]
[--smoke] [--signal-rows 200000] [--raise-fp] [--verbose]``.
"""

import argparse
import os
import sys
import tempfile
import time

# The cases and their classifier live with the tests, which run them too.
TESTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests")
sys.path.insert(0, TESTS)

from _catalogue import (  # noqa: E402
    FAMILIES,
    KNOWN_FAILURES,
    OUTCOMES,
    TIERS,
    catalogue,
    judge,
)


def run(cases, errstate, signal_rows, verbose):
    """``[(case, verdict)]`` of every case, judged in a scratch directory."""
    results = []
    with tempfile.TemporaryDirectory(
        prefix="bench_reliability_", ignore_cleanup_errors=True
    ) as directory:
        for case in cases:
            start = time.perf_counter()
            verdict = judge(case, directory, errstate, signal_rows)
            results.append((case, verdict))
            if verbose:
                detail = f": {verdict.detail}" if verdict.detail else ""
                print(
                    f"  [{verdict.outcome:>7}] ({time.perf_counter() - start:5.1f} s) "
                    f"{case.id}{detail}",
                    flush=True,
                )
    return results


def print_counts(results):
    """The table of the outcomes per family, and a row of totals."""
    print(
        f"{'family':>13} {'tried':>6} {'correct':>8} {'error':>6} {'wrong':>6} "
        f"{'crash':>6}"
    )
    totals = dict.fromkeys(OUTCOMES, 0)
    for family in FAMILIES:
        outcomes = [v.outcome for case, v in results if case.family == family]
        if not outcomes:
            continue
        counts = {o: outcomes.count(o) for o in OUTCOMES}
        for o in OUTCOMES:
            totals[o] += counts[o]
        print(_row(family, counts))
    print(_row("all", totals))


def _row(label, counts):
    return (
        f"{label:>13} {sum(counts.values()):>6} {counts['correct']:>8} "
        f"{counts['error']:>6} {counts['wrong']:>6} {counts['crash']:>6}"
    )


def print_failures(results):
    """Every wrong or crash case, then the notes; the unexpected failures."""
    failed = [(case, v) for case, v in results if not v.right]
    print(f"\nwrong or crash: {len(failed)}")
    for case, verdict in failed:
        known = KNOWN_FAILURES.get(case.id)
        print(f"  {verdict.outcome:>5}  {case.id}\n         {verdict.detail}")
        if known:
            print(f"         (known: {known})")
    notes = [(case, v.note) for case, v in results if v.note]
    if notes:
        print(f"\nnotes (not failures): {len(notes)}")
        for case, note in notes:
            print(f"  {case.id}\n         {note}")
    return [case for case, _ in failed if case.id not in KNOWN_FAILURES]


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--only", default=None, help=f"comma-separated families of {list(FAMILIES)}"
    )
    parser.add_argument(
        "--smoke", action="store_true", help="the smoke tier only (a check)"
    )
    parser.add_argument(
        "--signal-rows",
        type=int,
        default=200_000,
        help="rows of the signals' inputs (default 200000)",
    )
    parser.add_argument(
        "--raise-fp",
        action="store_true",
        help="run every API call under np.errstate(all='raise')",
    )
    parser.add_argument("--verbose", "-v", action="store_true")
    args = parser.parse_args()
    only = list(FAMILIES) if args.only is None else args.only.split(",")
    unknown = set(only) - set(FAMILIES)
    if unknown:
        parser.error(
            f"unknown families {sorted(unknown)}; choose from {list(FAMILIES)}"
        )
    cases = catalogue(only, ["smoke"] if args.smoke else TIERS)
    errstate = {"all": "raise"} if args.raise_fp else None
    start = time.perf_counter()
    results = run(cases, errstate, args.signal_rows, args.verbose)
    elapsed = time.perf_counter() - start
    fp = "; API calls under np.errstate(all='raise')" if args.raise_fp else ""
    smoke = "; smoke tier" if args.smoke else ""
    print(f"adversarial inputs, 1 thread{fp}{smoke}; {elapsed:.1f} s in all")
    print_counts(results)
    return 1 if print_failures(results) else 0


if __name__ == "__main__":
    sys.exit(main())
