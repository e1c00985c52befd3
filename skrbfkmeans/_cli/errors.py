"""How the command line reports problems: one line each, on stderr.

:class:`CLIError` is an error the user can fix; :func:`main
<skrbfkmeans._cli.main>` prints it and exits with status 2. Warnings, the
command's own and those of the libraries underneath, print one line
``skrbfkmeans: warning: ...``, and notes of what the command did on its own
one line ``skrbfkmeans: note: ...``.
"""

import contextlib
import sys
import warnings

PROG = "skrbfkmeans"


class CLIError(Exception):
    """An error the user can fix: printed as one line, exit status 2."""


def warn(message):
    """Print ``message`` as one ``skrbfkmeans: warning: ...`` line on stderr."""
    print(f"{PROG}: warning: {message}", file=sys.stderr)


def note(message):
    """Print ``message`` as one ``skrbfkmeans: note: ...`` line on stderr.

    For what the command did on its own that the user should know of (a
    column it left out), where nothing is wrong.
    """
    print(f"{PROG}: note: {message}", file=sys.stderr)


@contextlib.contextmanager
def one_line_warnings():
    """Print each warning as one ``skrbfkmeans: warning: ...`` line."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            seen = set()
            for w in caught:
                # Deprecation and future warnings are for developers of the
                # libraries underneath, not for the user of the command.
                if not issubclass(w.category, (UserWarning, RuntimeWarning)):
                    continue
                message = " ".join(str(w.message).split())
                if message not in seen:
                    seen.add(message)
                    warn(message)
