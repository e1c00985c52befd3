"""``python -m skrbfkmeans``: the command line (see ``skrbfkmeans._cli``)."""

import sys


def _run():
    # Ctrl-C while the libraries load (a second or two) ends like Ctrl-C
    # later: one line and status 130; main() handles it from then on.
    try:
        from ._cli import main
    except KeyboardInterrupt:
        sys.stderr.write("skrbfkmeans: interrupted\n")
        return 130
    return main()


# pytest --doctest-modules imports this module: run only as a program.
if __name__ == "__main__":
    sys.exit(_run())
