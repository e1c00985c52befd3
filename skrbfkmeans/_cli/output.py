"""What the command line writes: files, atomically, and text tables.

Outputs are written to a temporary file in the destination directory and
renamed into place (:func:`write_atomic`), so an output is either complete
or untouched, whenever the command stops; the steps that Ctrl-C or SIGTERM
must not cut in two run with those signals held back.
"""

import contextlib
import csv
import os
import signal
import tempfile
import threading

import numpy as np

from .errors import CLIError

FIGURE_NOTE = 'figures need matplotlib: pip install "skrbfkmeans[plot]"'


# -- atomic writing ----------------------------------------------------------

# What mkstemp adds to its prefix: 8 random characters, then the suffix.
_TEMPORARY_EXTRA = len("..") + 8 + len(".tmp")


def name_max(directory):
    """Return the longest file name, in bytes, allowed in ``directory``."""
    try:
        return os.pathconf(directory, "PC_NAME_MAX")
    except (AttributeError, OSError, ValueError):
        # No pathconf (Windows) or no answer: the common limit (ext4, XFS,
        # APFS, NTFS all allow 255).
        return 255


def _temporary_prefix(path, directory):
    """Return mkstemp's prefix ``.NAME.`` for the output ``path``.

    The temporary name is ``_TEMPORARY_EXTRA`` bytes longer than ``NAME``:
    an output name near the file system's limit is cut in the temporary
    name (mkstemp's random characters keep it unique), so that any name the
    file system accepts can be written.
    """
    name = os.path.basename(path)
    keep = max(name_max(directory) - _TEMPORARY_EXTRA, 0)
    name = name[:keep]
    while len(os.fsencode(name)) > keep:
        name = name[:-1]  # a character of several bytes
    return f".{name}."


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT and SIGTERM back until the block is done.

    For steps that must not be cut in two by Ctrl-C: a temporary file made
    but not yet recorded for removal, the umask read by setting it, a set of
    outputs half renamed. While the block runs, the Python handlers of both
    signals only record them; the first recorded signal is then passed to
    the previous handler. (Blocking the signals with ``pthread_sigmask``
    would hold them in the main thread only: the kernel then delivers them
    to a BLAS thread, and Python still raises in the main thread.) Outside
    the main thread, where handlers cannot be set, the block runs as is.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    received = []
    numbers = [signal.SIGINT, signal.SIGTERM]
    previous = {}
    for number in numbers:
        previous[number] = signal.signal(
            number, lambda signum, frame: received.append((signum, frame))
        )
    try:
        yield
    finally:
        for number in numbers:
            signal.signal(number, previous[number])
        if received:
            signum, frame = received[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(signum)


def write_atomic(outputs, binary=False):
    """Write every ``(path, write)`` pair; all outputs appear, or none changes.

    Each ``write(file)`` fills a temporary file (text, or bytes if
    ``binary``) in its destination's directory; only once all are written
    are they renamed into place (``os.replace`` is atomic within a file
    system). Whatever stops it, an exception, Ctrl-C or SIGTERM (see
    :func:`skrbfkmeans._cli.main`), removes the temporary files.
    """
    with _signals_deferred():
        umask = os.umask(0)
        os.umask(umask)
    temporary = []
    text = {} if binary else {"newline": "", "encoding": "utf-8"}
    try:
        for path, write in outputs:
            directory = os.path.dirname(os.path.abspath(path))
            with _signals_deferred():
                fd, tmp = tempfile.mkstemp(
                    dir=directory,
                    prefix=_temporary_prefix(path, directory),
                    suffix=".tmp",
                )
                temporary.append(tmp)
                f = os.fdopen(fd, "wb" if binary else "w", **text)
            with f:
                # mkstemp makes the file private (0600); a normal output is not.
                os.chmod(tmp, 0o666 & ~umask)
                write(f)
        # Renamed together: an interrupt waits until the set is in place.
        with _signals_deferred():
            for (path, _), tmp in zip(outputs, temporary):
                os.replace(tmp, path)
    except BaseException:
        with _signals_deferred():
            for tmp in temporary:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)
        raise


def write_outputs(outputs, binary=False):
    """:func:`write_atomic`, its ``OSError`` reported as one line."""
    try:
        write_atomic(outputs, binary)
    except OSError as exc:
        paths = " and ".join(path for path, _ in outputs)
        raise CLIError(f"cannot write {paths}: {exc.strerror or exc}") from None


def output_dir(path):
    """Create the directory ``path`` of ``--output-dir`` if need be; return it."""
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create --output-dir {path}: {exc.strerror}") from None
    return path


# -- CSV files ---------------------------------------------------------------
# Each returns a ``write(file)`` for :func:`write_atomic`.


def assignments_writer(labels, resp, n_clusters):
    """Writer of ``label,resp_0,...,resp_{K-1}``, one row per sample."""

    def write(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["label"] + [f"resp_{j}" for j in range(n_clusters)])
        for label, row in zip(labels, resp):
            writer.writerow([int(label)] + [f"{v:.12g}" for v in row])

    return write


def centers_writer(centers, names, n_features):
    """Writer of the centres, under the input's feature names if it had any."""

    def write(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(names or [f"feature_{i}" for i in range(n_features)])
        for row in centers:
            # repr: the shortest text that reads back as the same float.
            writer.writerow([repr(float(v)) for v in row])

    return write


def convergence_writer(rows):
    """Writer of ``convergence.csv``: ``(dataset, activation, sigma, distance)``."""

    def write(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["dataset", "activation", "sigma", "distance"])
        for name, activation, sigma, distance in rows:
            writer.writerow([name, activation, repr(sigma), repr(distance)])

    return write


# -- figures -----------------------------------------------------------------


def have_matplotlib():
    """Whether matplotlib, needed for the figures only, can be imported."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def save_figure(fig, path):
    """Write ``fig`` as a PNG to ``path``, atomically, and say so."""
    write_outputs([(path, lambda f: fig.savefig(f, format="png", dpi=110))], True)
    print(f"wrote {os.path.abspath(path)}")


# -- text tables -------------------------------------------------------------


def format_table(header, rows):
    """Left-aligned text columns, right-aligned numbers."""
    cells = [header] + [[str(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(header))]
    numeric = [
        all(_looks_numeric(row[i]) for row in cells[1:]) for i in range(len(header))
    ]
    lines = []
    for n, row in enumerate(cells):
        parts = [
            c.rjust(w) if num else c.ljust(w) for c, w, num in zip(row, widths, numeric)
        ]
        lines.append("  ".join(parts).rstrip())
        if n == 0:
            lines.append("  ".join("-" * w for w in widths))
    return "\n".join(lines)


def _looks_numeric(text):
    try:
        float(text.rstrip("%"))
    except ValueError:
        return text in ("-", "")
    return True


def format_value(value, spec=".4g"):
    """``value`` formatted by ``spec``; ``-`` for ``None`` or NaN."""
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return format(value, spec)
