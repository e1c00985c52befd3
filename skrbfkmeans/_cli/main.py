"""The command line: ``python -m skrbfkmeans {demo,cluster,reproduce}``.

Errors a user can fix (a missing or malformed file, a bad option) print one
line ``skrbfkmeans: error: ...`` on stderr and exit with status 2, and so do
the ``ValueError`` and ``OSError`` of the libraries underneath; warnings
print one line ``skrbfkmeans: warning: ...``. Ctrl-C prints
``skrbfkmeans: interrupted`` and exits with status 130, SIGTERM
``skrbfkmeans: terminated`` and 143. Outputs are written to a temporary file
in the destination directory and renamed into place, so an output is either
complete or untouched, whenever the command stops; an existing read-only
output is replaced only with ``--force``.

This module is the boundary where errors and signals become a line and an
exit status (:func:`main`, the entry point). The rest lives in:

- ``parser``: the arguments of each subcommand;
- ``commands``: the subcommands, each read, build and fit, write, print;
- ``input``: reading INPUT, and the checks of the outputs before work;
- ``output``: atomic writing, the CSV and figure writers, text tables;
- ``errors``: :class:`CLIError` and the one-line warnings.
"""

import contextlib
import os
import signal
import sys
import threading

from .errors import PROG, CLIError
from .input import read_input
from .output import FIGURE_NOTE, write_atomic
from .parser import build_parser, parse_args

__all__ = [
    "FIGURE_NOTE",
    "PROG",
    "CLIError",
    "build_parser",
    "main",
    "read_input",
    "write_atomic",
]


class _Terminated(BaseException):
    """Raised by the SIGTERM handler of :func:`main`.

    A ``BaseException``, as ``KeyboardInterrupt`` is: ``except Exception`` in
    the libraries underneath does not swallow it, and the cleanups it unwinds
    through (``write_atomic``'s) run.
    """


def _raise_terminated(signum, frame):
    raise _Terminated


@contextlib.contextmanager
def _sigterm_raises():
    """Turn SIGTERM into :class:`_Terminated` while the command runs.

    The default action of SIGTERM ends the process at once, leaving the
    temporary files of :func:`write_atomic` behind. Only the main thread can
    set a handler; a SIGTERM ignored by whoever started the process stays
    ignored. The previous handler is restored on the way out.
    """
    main_thread = threading.current_thread() is threading.main_thread()
    if not main_thread or signal.getsignal(signal.SIGTERM) is signal.SIG_IGN:
        yield
        return
    previous = signal.signal(signal.SIGTERM, _raise_terminated)
    try:
        yield
    finally:
        # None: a handler not set from Python, which cannot be put back.
        signal.signal(signal.SIGTERM, signal.SIG_DFL if previous is None else previous)


def _one_line(exc):
    """Return the message of a library's exception on one line."""
    if isinstance(exc, OSError) and exc.strerror:
        where = exc.filename
        if where is not None and exc.filename2 is not None:
            where = f"{where} -> {exc.filename2}"
        return exc.strerror if where is None else f"{where}: {exc.strerror}"
    return " ".join(str(exc).split()) or type(exc).__name__


def main(argv=None):
    """Run the command line; returns the exit status.

    Parameters
    ----------
    argv : list of str, default=None
        The arguments, ``sys.argv[1:]`` when ``None``.

    Returns
    -------
    status : int
        0 on success, 2 on an error the user can fix, 130 after Ctrl-C
        (SIGINT), 143 after SIGTERM.
    """
    try:
        with _sigterm_raises():
            args = parse_args(argv)
            return args.func(args)
    except CLIError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        # The reader of stdout went away (``| head``): stop quietly, and keep
        # Python from failing again when it flushes stdout at exit.
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        return 1
    except (ValueError, OSError) as exc:
        # What the checks above did not foresee: a bad value the libraries
        # reject, a file system that fails. The message says enough; a
        # traceback would only bury it.
        print(f"{PROG}: error: {_one_line(exc)}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"{PROG}: interrupted", file=sys.stderr)
        return 130
    except _Terminated:
        print(f"{PROG}: terminated", file=sys.stderr)
        return 128 + signal.SIGTERM
