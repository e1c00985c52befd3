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
"""

import argparse
import contextlib
import csv
import itertools
import math
import os
import signal
import sys
import tempfile
import threading
import time
import warnings

import numpy as np

PROG = "skrbfkmeans"
FIGURE_NOTE = 'figures need matplotlib: pip install "skrbfkmeans[plot]"'


class CLIError(Exception):
    """An error the user can fix: printed as one line, exit status 2."""


class _Terminated(BaseException):
    """Raised by the SIGTERM handler of :func:`main`.

    A ``BaseException``, as ``KeyboardInterrupt`` is: ``except Exception`` in
    the libraries underneath does not swallow it, and the cleanups it unwinds
    through (``write_atomic``'s) run.
    """


class _Parser(argparse.ArgumentParser):
    # argparse prints the usage and the message on several lines; the
    # command line promises one line per error.
    def error(self, message):
        raise CLIError(f"{message} (see '{self.prog} --help')")


def _positive_int(text):
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text):
    try:
        value = float(text)
    except ValueError:
        value = np.nan
    if not (value > 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(
            f"expected a positive finite number, got {text!r}"
        )
    return value


# -- files ------------------------------------------------------------------


def _read_csv(path, header=None):
    """Numbers of a comma-separated file, with or without a header row.

    ``header=True`` takes the first row as the header and ``False`` as data.
    ``None`` takes it as the header only when none of its fields is a number
    and a later row is all numbers (see :func:`_is_header`): a data row with
    a bad field, ``NA,2`` or ``1,``, is reported, never dropped. Returns
    ``(X, names)`` with ``names`` ``None`` without a header.
    """
    rows, names, n_columns = [], None, None
    try:
        with open(path, newline="", encoding="utf-8-sig") as f:
            reader = csv.reader(f)
            # (line number, fields) of each row that is not blank.
            records = (
                (reader.line_num, fields)
                for fields in reader
                if any(field.strip() for field in fields)
            )
            first = next(records, None)
            detected = header is None and first is not None
            if detected:
                header, read = _is_header(first[1], records)
                records = itertools.chain(read, records)
            if header and first is not None:
                names = [field.strip() for field in first[1]]
                n_columns = len(names)
            elif first is not None:
                records = itertools.chain([first], records)
            for line_num, fields in records:
                line = f"{path}, line {line_num}"
                if n_columns is not None and len(fields) != n_columns:
                    plural = "" if len(fields) == 1 else "s"
                    raise CLIError(
                        f"{line}: {len(fields)} field{plural}, expected {n_columns}"
                    )
                n_columns = len(fields)
                values = _parse_numbers(fields)
                if values is None:
                    hint = ""
                    first_row = names is None and not rows
                    if detected and first_row and not any(map(_is_number, fields)):
                        hint = "; no later row is all numbers (pass --header if "
                        hint += "it is a header)"
                    raise CLIError(f"{line}: {_first_non_number(fields, names)}{hint}")
                if not all(math.isfinite(v) for v in values):
                    raise CLIError(f"{line}: NaN or infinite value")
                rows.append(values)
    except UnicodeDecodeError:
        raise CLIError(f"cannot read {path}: not UTF-8 text") from None
    except csv.Error as exc:
        raise CLIError(f"cannot read {path}: {exc}") from None
    if not rows:
        raise CLIError(f"{path}: no data rows")
    return np.array(rows, dtype=np.float64), names


def _is_header(fields, records):
    """Whether the first row ``fields`` is a header; and the next row read.

    A header has no field that is a number, and some later row has only
    numbers (or no row follows: a header alone, reported as "no data rows").
    ``records`` is read up to that row, but only the row after the first is
    returned, to be read again: when it is not all numbers it is an error
    whichever the first row is, and reading stops there. So a file with a
    text column (no row all numbers) is scanned, not held in memory.
    """
    if any(_is_number(field) for field in fields):
        return False, []
    second = next(records, None)
    if second is None:
        return True, []
    if all(_is_number(field) for field in second[1]):
        return True, [second]
    later = any(all(_is_number(field) for field in r[1]) for r in records)
    return later, [second]


def _is_number(field):
    try:
        float(field)
    except ValueError:
        return False
    return True


def _parse_numbers(fields):
    try:
        return [float(field) for field in fields]
    except ValueError:
        return None


def _first_non_number(fields, names):
    for i, field in enumerate(fields):
        try:
            float(field)
        except ValueError:
            column = f"column {i + 1}"
            if names is not None and i < len(names) and names[i]:
                column += f" ({names[i]})"
            what = "empty field" if not field.strip() else f"{field.strip()!r}"
            hint = ""
            if ";" in field or "\t" in field:
                hint = " (fields are separated by commas)"
            return f"{column}: {what} is not a number{hint}"
    return "not a number"  # pragma: no cover - _parse_numbers failed somewhere


def _read_npy(path):
    with open(path, "rb") as f:
        if f.read(6) != b"\x93NUMPY":
            raise CLIError(f"{path}: not a .npy file")
        f.seek(0)
        try:
            X = np.lib.format.read_array(f, allow_pickle=False)
        except (ValueError, EOFError) as exc:
            raise CLIError(f"cannot read {path}: {exc}") from None
    if X.dtype.kind not in "biuf":
        raise CLIError(f"{path}: non-numeric array of dtype {X.dtype}")
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise CLIError(f"{path}: expected a 1-D or 2-D array, got {X.ndim}-D")
    if X.shape[0] == 0 or X.shape[1] == 0:
        raise CLIError(f"{path}: empty array of shape {X.shape}")
    return X.astype(np.float64, copy=False), None


def read_input(path, header=None):
    """Read INPUT (``.csv`` or ``.npy``): ``(X, feature names or None)``.

    ``header`` (``.csv`` only): whether the first row is a header; ``None``
    decides from the file (see :func:`_read_csv`).
    """
    if not os.path.exists(path):
        raise CLIError(f"{path}: no such file")
    if os.path.isdir(path):
        raise CLIError(f"{path}: is a directory")
    extension = os.path.splitext(path)[1].lower()
    if extension not in (".csv", ".npy"):
        raise CLIError(
            f"{path}: unknown extension {extension or '(none)'!r}; "
            "INPUT must be .csv or .npy"
        )
    if header is not None and extension != ".csv":
        raise CLIError(f"{path}: --header and --no-header apply to .csv input")
    try:
        if extension == ".csv":
            X, names = _read_csv(path, header)
        else:
            X, names = _read_npy(path)
    except OSError as exc:
        raise CLIError(f"cannot read {path}: {exc.strerror or exc}") from None
    bad = np.flatnonzero(~np.isfinite(X).all(axis=1))
    if bad.size:
        raise CLIError(f"{path}: NaN or infinite value in row {bad[0]}")
    return X, names


def _same_file(a, b):
    if os.path.exists(a) and os.path.exists(b):
        return os.path.samefile(a, b)
    return os.path.realpath(a) == os.path.realpath(b)


def _check_output(path, option, args):
    if os.path.splitext(path)[1].lower() != ".csv":
        raise CLIError(f"{option} {path}: unknown extension; outputs are .csv files")
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(directory):
        raise CLIError(f"{option} {path}: directory {directory} does not exist")
    if os.path.isdir(path):
        raise CLIError(f"{option} {path}: is a directory")
    if _same_file(path, args.input) and not args.force:
        raise CLIError(
            f"{option} {path} is the input file; pass --force to overwrite it"
        )
    _check_replaceable(path, f"{option} {path}", args.force)


def _check_replaceable(path, what, force):
    """Refuse to replace an existing read-only file ``path`` without --force.

    The directory decides whether ``os.replace`` may replace a file, not the
    file's own permissions: a file made read-only to protect it would be
    replaced silently. The mode bits are checked as well as ``os.access``,
    which is always true for root.
    """
    if force or not os.path.exists(path):
        return
    if not os.access(path, os.W_OK) or not os.stat(path).st_mode & 0o222:
        raise CLIError(f"{what} is read-only; pass --force to replace it")


@contextlib.contextmanager
def _signals_deferred():
    """Hold SIGINT and SIGTERM back until the block is done.

    For steps that must not be cut in two by Ctrl-C: a temporary file made
    but not yet recorded for removal, the umask read by setting it, a set of
    outputs half renamed. A signal that came meanwhile is handled when the
    block ends. Where signals cannot be blocked (Windows) the block runs as
    is.
    """
    if not hasattr(signal, "pthread_sigmask"):
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def write_atomic(outputs, binary=False):
    """Write every ``(path, write)`` pair; all outputs appear, or none changes.

    Each ``write(file)`` fills a temporary file (text, or bytes if
    ``binary``) in its destination's directory; only once all are written
    are they renamed into place (``os.replace`` is atomic within a file
    system). Whatever stops it, an exception, Ctrl-C or SIGTERM (see
    :func:`main`), removes the temporary files.
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
                    dir=directory, prefix=f".{os.path.basename(path)}.", suffix=".tmp"
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


def _write_outputs(outputs, binary=False):
    """:func:`write_atomic`, its ``OSError`` reported as one line."""
    try:
        write_atomic(outputs, binary)
    except OSError as exc:
        paths = " and ".join(path for path, _ in outputs)
        raise CLIError(f"cannot write {paths}: {exc.strerror or exc}") from None


@contextlib.contextmanager
def _one_line_warnings():
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
                    print(f"{PROG}: warning: {message}", file=sys.stderr)


# -- subcommands -----------------------------------------------------------


def _cmd_cluster(args):
    from ._annealed_rbf_kmeans import AnnealedRBFKMeans
    from ._rbf_kmeans import RBFKMeans

    if args.activation == "auto" and not args.anneal:
        raise CLIError("--activation auto needs --anneal")
    X, names = read_input(args.input, args.header)
    _check_output(args.output, "--output", args)
    if args.centers is not None:
        _check_output(args.centers, "--centers", args)
        if _same_file(args.centers, args.output):
            raise CLIError("--centers and --output are the same file")
    n_samples, n_features = X.shape
    if args.n_clusters > n_samples:
        raise CLIError(
            f"--n-clusters {args.n_clusters} is larger than the number of rows "
            f"({n_samples}) in {args.input}"
        )
    header = ""
    if names is not None:
        header = " (header)" if args.header else " (header detected)"
    if args.verbose:
        print(f"read {args.input}: {n_samples} rows x {n_features} columns{header}")

    extra = {} if args.max_iter is None else {"max_iter": args.max_iter}
    if args.anneal:
        est = AnnealedRBFKMeans(
            n_clusters=args.n_clusters,
            activation=args.activation or "auto",
            verbose=args.verbose,
            random_state=args.random_state,
            **extra,
        )
    else:
        est = RBFKMeans(
            n_clusters=args.n_clusters,
            sigma="auto" if args.sigma is None else args.sigma,
            activation=args.activation or "softmax",
            verbose=args.verbose,
            random_state=args.random_state,
            **extra,
        )
    start = time.perf_counter()
    with _one_line_warnings():
        try:
            est.fit(X)
        except ValueError as exc:
            raise CLIError(" ".join(str(exc).split())) from None
        resp = est.predict_proba(X)
    elapsed = time.perf_counter() - start

    def write_assignments(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["label"] + [f"resp_{j}" for j in range(args.n_clusters)])
        for label, row in zip(est.labels_, resp):
            writer.writerow([int(label)] + [f"{v:.12g}" for v in row])

    def write_centers(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(names or [f"feature_{i}" for i in range(n_features)])
        for row in est.cluster_centers_:
            # repr: the shortest text that reads back as the same float.
            writer.writerow([repr(float(v)) for v in row])

    outputs = [(args.output, write_assignments)]
    if args.centers is not None:
        outputs.append((args.centers, write_centers))
    _write_outputs(outputs)
    certified = f", certified={est.certified_}" if args.anneal else ""
    print(
        f"{type(est).__name__}: {n_samples} samples, {args.n_clusters} clusters, "
        f"inertia {est.inertia_:.6g}, sigma {est.sigma_:.4g}{certified} "
        f"({elapsed:.2f} s); wrote {args.output}"
        + (f" and {args.centers}" if args.centers else "")
    )
    return 0


def _format_table(header, rows):
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


def _output_dir(path):
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as exc:
        raise CLIError(f"cannot create --output-dir {path}: {exc.strerror}") from None
    return path


def _save_figure(fig, path):
    _write_outputs([(path, lambda f: fig.savefig(f, format="png", dpi=110))], True)
    print(f"wrote {os.path.abspath(path)}")


def _have_matplotlib():
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return False
    return True


def _cmd_demo(args):
    from sklearn.cluster import KMeans
    from sklearn.datasets import load_digits, make_blobs
    from sklearn.metrics import adjusted_rand_score

    from ._annealed_rbf_kmeans import AnnealedRBFKMeans

    out_dir = _output_dir(args.output_dir)
    figure = os.path.join(out_dir, "annealing_path.png")
    if _have_matplotlib():
        # Before the minutes of work, not after.
        _check_replaceable(figure, figure, args.force)
    X_digits, y_digits = load_digits(return_X_y=True)
    X_blobs, y_blobs = make_blobs(
        n_samples=1000, centers=5, cluster_std=1.5, random_state=0
    )
    datasets = [
        ("blobs", X_blobs, y_blobs, 5),
        ("digits", X_digits, y_digits, 10),
    ]
    rows, annealed = [], []
    with _one_line_warnings():
        for name, X, y, k in datasets:
            start = time.perf_counter()
            km = KMeans(n_clusters=k, n_init=10, random_state=0).fit(X)
            km_time = time.perf_counter() - start
            start = time.perf_counter()
            ann = AnnealedRBFKMeans(n_clusters=k).fit(X)
            ann_time = time.perf_counter() - start
            annealed.append((name, ann))
            shape = f"{X.shape[0]}x{X.shape[1]}"
            for label, est, t, cert in [
                ("KMeans(n_init=10)", km, km_time, "-"),
                ("AnnealedRBFKMeans", ann, ann_time, str(ann.certified_)),
            ]:
                rows.append(
                    [
                        name,
                        shape,
                        k,
                        label,
                        f"{est.inertia_:.6g}",
                        f"{100 * (est.inertia_ / km.inertia_ - 1):+.2f}%",
                        f"{adjusted_rand_score(y, est.labels_):.3f}",
                        f"{t:.2f}",
                        cert,
                    ]
                )
    header = [
        "data",
        "n x d",
        "k",
        "method",
        "inertia",
        "vs KMeans",
        "ARI",
        "time (s)",
        "certified",
    ]
    print(_format_table(header, rows))
    print(
        "ARI: adjusted Rand index against the true classes; certified: the "
        "end point is proven an exact K-Means fixed point."
    )
    if not _have_matplotlib():
        print(f"{PROG}: warning: no figure written; {FIGURE_NOTE}", file=sys.stderr)
        return 0
    from matplotlib.figure import Figure

    from .plotting import plot_annealing_path

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    for ax, (name, ann) in zip(fig.subplots(1, len(annealed)), annealed):
        plot_annealing_path(ann, ax=ax)
        ax.set_title(f"{name}: {ax.get_title()}")
    _save_figure(fig, figure)
    return 0


def _fmt(value, spec=".4g"):
    if value is None or (isinstance(value, float) and np.isnan(value)):
        return "-"
    return format(value, spec)


def _cmd_reproduce(args):
    from . import _reproduce

    # k-means needs a row per cluster: found here rather than as a ValueError
    # from deep inside the experiment.
    need = max(_reproduce.make_dataset(name, 1)[1] for name in _reproduce.DATASETS)
    if args.n_samples < need:
        raise CLIError(
            f"--n-samples {args.n_samples} is too small: a data set has {need} "
            f"clusters, so at least {need} samples are needed"
        )
    out_dir = _output_dir(args.output_dir)
    csv_path = os.path.join(out_dir, "convergence.csv")
    figures = ["convergence.png", "trajectories.png"] if _have_matplotlib() else []
    figures = [os.path.join(out_dir, name) for name in figures]
    for path in [csv_path, *figures]:
        # Before the minutes of work, not after.
        _check_replaceable(path, path, args.force)
    start = time.perf_counter()
    with _one_line_warnings():
        results = _reproduce.run_experiment(args.n_samples, args.n_widths)
    elapsed = time.perf_counter() - start

    rows = []
    for r in results:
        for activation in _reproduce.ACTIVATIONS:
            s = _reproduce.summarize(r, activation)
            entmax = activation == "entmax15"
            rows.append(
                [
                    s.dataset,
                    s.activation,
                    _fmt(s.slope, ".2f"),
                    "-" if entmax else _fmt(s.exp_rate, ".2f"),
                    _fmt(s.sigma_star),
                    _fmt(s.largest_zero),
                    _fmt(s.next_above),
                    ("yes" if s.agrees else "NO") if entmax else "-",
                    "yes" if s.monotone else "no",
                    s.n_not_converged,
                ]
            )
    header = [
        "data",
        "map",
        "slope",
        "exp rate",
        "sigma*",
        "largest 0",
        "next width",
        "agrees",
        "monotone",
        "unconverged",
    ]
    print(_format_table(header, rows))
    print(
        f"slope: log-log fit over the non-zero distances of the {args.n_widths} "
        "grid widths; exp rate: b in distance ~ exp(-b sigma*^2/sigma^2) below "
        "sigma*; largest 0: largest width with entmax distance exactly 0; agrees: "
        "largest 0 <= sigma* < next width; unconverged: EM runs stopped at "
        f"max_iter ({elapsed:.1f} s)."
    )

    def write_csv(f):
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["dataset", "activation", "sigma", "distance"])
        for name, activation, sigma, distance in _reproduce.convergence_rows(results):
            writer.writerow([name, activation, repr(sigma), repr(distance)])

    _write_outputs([(csv_path, write_csv)])
    print(f"wrote {os.path.abspath(csv_path)}")
    if not figures:
        print(f"{PROG}: warning: no figures written; {FIGURE_NOTE}", file=sys.stderr)
        return 0
    _save_figure(_reproduce.convergence_figure(results), figures[0])
    _save_figure(_reproduce.trajectories_figure(results), figures[1])
    return 0


# -- parser ------------------------------------------------------------------

_REPRODUCE_HELP = """\
The paper's experiment (arXiv:2603.04625): soft fixed points collapse onto a
K-Means fixed point mu_KM as the width sigma shrinks.

Data (2-D, seed 0, N = --n-samples): blobs (make_blobs, 3 centres, std 0.5,
k=3), moons (make_moons, noise 0.05, k=2), spiral (3 arms of radius 0.1-1
turning through 3/4 of a revolution, noise 0.05, k=3), circles (make_circles,
noise 0.05, factor 0.5, k=2). mu_KM: KMeans(n_init=10, tol=0, random_state=0),
checked to be a Lloyd fixed point. Widths: --n-widths geometric from 0.3 to 30
times sigma* = sqrt(min margin / 4), plus sigma* (1 -+ 1e-3). At each width,
softmax and entmax15 EM from mu_KM; distance = max_j |mu_j(sigma) - mu_KM_j|.

Writes DIR/convergence.csv (dataset,activation,sigma,distance),
DIR/convergence.png and DIR/trajectories.png, and prints the fitted slopes,
sigma* and the largest width with entmax distance exactly 0.
"""


def build_parser():
    """Build the argument parser of the ``skrbfkmeans`` command."""
    parser = _Parser(
        prog=PROG,
        description="K-Means as a differentiable RBF network.",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    demo = sub.add_parser(
        "demo",
        help="compare AnnealedRBFKMeans with KMeans on digits and blobs",
        description="Run AnnealedRBFKMeans and KMeans(n_init=10) on the digits "
        "data (1797 x 64, k=10) and on 1000 generated 2-D blobs (k=5); print "
        "a table and write annealing_path.png.",
    )
    demo.add_argument(
        "--output-dir",
        default=".",
        metavar="DIR",
        help="where annealing_path.png goes (default: current directory)",
    )
    demo.add_argument("--force", action="store_true", help="replace a read-only output")
    demo.set_defaults(func=_cmd_demo)

    cluster = sub.add_parser(
        "cluster",
        help="cluster a .csv or .npy file",
        description="Cluster the rows of INPUT (comma-separated .csv, or .npy) "
        "and write OUT: a .csv with a header label,resp_0,...,resp_{K-1} and "
        "one row per sample. Without --header or --no-header, the first row of "
        "a .csv is a header when none of its fields is a number and a later row "
        "is all numbers.",
    )
    cluster.add_argument("input", metavar="INPUT", help="a .csv or .npy file")
    cluster.add_argument(
        "--n-clusters",
        "-k",
        type=_positive_int,
        required=True,
        metavar="K",
        help="number of clusters, at most the number of rows",
    )
    cluster.add_argument(
        "--output", "-o", required=True, metavar="OUT", help="the output .csv"
    )
    cluster.add_argument(
        "--centers", metavar="FILE", help="also write the centres to this .csv"
    )
    head = cluster.add_mutually_exclusive_group()
    head.add_argument(
        "--header",
        action="store_const",
        const=True,
        help="the first row of the .csv is a header",
    )
    head.add_argument(
        "--no-header",
        action="store_const",
        const=False,
        dest="header",
        help="the first row of the .csv is data",
    )
    how = cluster.add_mutually_exclusive_group()
    how.add_argument(
        "--sigma",
        type=_positive_float,
        metavar="S",
        help="RBFKMeans at this width (default: RBFKMeans with sigma='auto')",
    )
    how.add_argument(
        "--anneal",
        action="store_true",
        help="AnnealedRBFKMeans: anneal to a certified K-Means solution",
    )
    cluster.add_argument(
        "--activation",
        choices=["softmax", "entmax15", "auto"],
        help="the map to responsibilities (default: softmax; auto with --anneal)",
    )
    cluster.add_argument(
        "--max-iter",
        type=_positive_int,
        metavar="N",
        help="EM iterations (per stage with --anneal); default: the estimator's",
    )
    cluster.add_argument(
        "--random-state",
        type=int,
        default=0,
        metavar="SEED",
        help="seeds the initialisation (default: 0, so that runs repeat)",
    )
    cluster.add_argument(
        "--force",
        action="store_true",
        help="allow OUT or FILE to be INPUT, or to replace a read-only file",
    )
    cluster.add_argument(
        "--verbose", "-v", action="count", default=0, help="print progress"
    )
    cluster.set_defaults(func=_cmd_cluster)

    reproduce = sub.add_parser(
        "reproduce",
        help="run the paper's convergence experiment",
        description=_REPRODUCE_HELP,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    reproduce.add_argument(
        "--output-dir",
        default=".",
        metavar="DIR",
        help="where the CSV and figures go (default: current directory)",
    )
    reproduce.add_argument(
        "--n-samples",
        type=_positive_int,
        default=300,
        metavar="N",
        help="samples per data set (default: 300)",
    )
    reproduce.add_argument(
        "--n-widths",
        type=_positive_int,
        default=16,
        metavar="M",
        help="widths of the geometric grid, at least 12 (default: 16)",
    )
    reproduce.add_argument(
        "--force", action="store_true", help="replace read-only outputs"
    )
    reproduce.set_defaults(func=_cmd_reproduce)
    return parser


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
            args = build_parser().parse_args(argv)
            if getattr(args, "n_widths", 12) < 12:
                raise CLIError("--n-widths must be at least 12")
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
