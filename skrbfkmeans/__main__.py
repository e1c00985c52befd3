"""``python -m skrbfkmeans``: the command line (see ``skrbfkmeans._cli``)."""

import signal
import sys


def _run():
    # Ctrl-C while the libraries load (a second or two) ends like Ctrl-C
    # later: one line and status 130; main() handles it from then on. The
    # signal is only recorded during the imports: a KeyboardInterrupt raised
    # inside a C extension's initialisation surfaces as an ImportError with a
    # traceback, so it must not be raised there at all.
    received = []
    previous = signal.signal(
        signal.SIGINT, lambda signum, frame: received.append(signum)
    )
    try:
        from ._cli.main import main
    finally:
        signal.signal(signal.SIGINT, previous)
    if received:
        sys.stderr.write("skrbfkmeans: interrupted\n")
        return 130
    return main()


# pytest --doctest-modules imports this module: run only as a program.
if __name__ == "__main__":
    sys.exit(_run())
