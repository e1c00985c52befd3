"""The argument parser: one function per subcommand's arguments.

:func:`build_parser` assembles them; :func:`parse_args` parses and makes the
checks argparse cannot express. Every parsing error is a
:class:`~skrbfkmeans._cli.errors.CLIError`, printed on one line.
"""

import argparse

import numpy as np

from .._version import __version__
from .commands import _cmd_cluster, _cmd_demo, _cmd_reproduce
from .errors import PROG, CLIError


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


def _n_clusters(text):
    """Parse a positive integer, or ``auto``."""
    if text == "auto":
        return text
    try:
        return _positive_int(text)
    except argparse.ArgumentTypeError:
        raise argparse.ArgumentTypeError(
            f"expected a positive integer or auto, got {text!r}"
        ) from None


def _non_negative_float(text):
    try:
        value = float(text)
    except ValueError:
        value = np.nan
    if not (value >= 0 and np.isfinite(value)):
        raise argparse.ArgumentTypeError(
            f"expected a non-negative finite number, got {text!r}"
        )
    return value


def _columns(text):
    """Parse ``--columns``: names (``str``) and positions from 1 (``int``).

    A field of digits only is a position, two joined by ``-`` a range of
    positions (``2-5``); anything else is a name.
    """
    columns = []
    for field in text.split(","):
        field = field.strip()
        if not field:
            raise argparse.ArgumentTypeError(
                f"expected column names or positions separated by commas, got {text!r}"
            )
        first, dash, last = field.partition("-")
        if dash and first.isdigit() and last.isdigit():
            if not 1 <= int(first) <= int(last):
                raise argparse.ArgumentTypeError(
                    f"expected a range of positions from 1, low-high, got {field!r}"
                )
            columns.extend(range(int(first), int(last) + 1))
        elif field.isdigit():
            if int(field) < 1:
                raise argparse.ArgumentTypeError(
                    f"column positions start at 1, got {field!r}"
                )
            columns.append(int(field))
        else:
            columns.append(field)
    return columns


def build_parser():
    """Build the argument parser of the ``skrbfkmeans`` command."""
    parser = _Parser(
        prog=PROG,
        description="K-Means as a differentiable RBF network.",
    )
    parser.add_argument(
        "--version", action="version", version=f"%(prog)s {__version__}"
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    _add_demo(sub)
    _add_cluster(sub)
    _add_reproduce(sub)
    return parser


def parse_args(argv=None):
    """Parse ``argv`` (``sys.argv[1:]`` when ``None``) into the namespace.

    The namespace's ``func`` runs the subcommand.
    """
    args = build_parser().parse_args(argv)
    if getattr(args, "n_widths", 12) < 12:
        raise CLIError("--n-widths must be at least 12")
    return args


# -- demo --------------------------------------------------------------------


def _add_demo(sub):
    """Add ``demo`` and its options to the subparsers ``sub``."""
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


# -- cluster -----------------------------------------------------------------


def _add_cluster(sub):
    """Add ``cluster`` and its options to the subparsers ``sub``."""
    # The order of the calls is the order of the options in --help.
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
        type=_n_clusters,
        required=True,
        metavar="K",
        help="number of clusters, at most the number of rows; auto (with "
        "--anneal): the count that lives longest along the annealing path",
    )
    cluster.add_argument(
        "--max-clusters",
        type=_positive_int,
        metavar="M",
        help="with --n-clusters auto, the largest count considered "
        "(default: 20, or the number of rows if fewer)",
    )
    cluster.add_argument(
        "--output", "-o", required=True, metavar="OUT", help="the output .csv"
    )
    cluster.add_argument(
        "--centers", metavar="FILE", help="also write the centres to this .csv"
    )
    _add_header_options(cluster)
    cluster.add_argument(
        "--columns",
        type=_columns,
        metavar="LIST",
        help="the columns to cluster, separated by commas: names from the "
        "header, or positions from 1 and ranges of them (2-5) (default: all, "
        "less the columns of text and an index: a first column with no name or "
        "an index's name (id, index, ...) holding distinct integers, as "
        "pandas' to_csv writes; a note says which were left out)",
    )
    _add_model_options(cluster)
    cluster.add_argument(
        "--force",
        action="store_true",
        help="allow OUT or FILE to be INPUT, or to replace a read-only file",
    )
    cluster.add_argument(
        "--verbose", "-v", action="count", default=0, help="print progress"
    )
    cluster.set_defaults(func=_cmd_cluster)


def _add_header_options(cluster):
    """Add ``--header`` and ``--no-header``; neither leaves ``header`` ``None``."""
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


def _add_model_options(cluster):
    """Add the options of the estimator that ``cluster`` fits."""
    how = cluster.add_mutually_exclusive_group()
    how.add_argument(
        "--sigma",
        type=_non_negative_float,
        metavar="S",
        help="RBFKMeans at this width; 0 is KMeans's fit, where --activation "
        "has no effect (default: RBFKMeans with sigma='auto')",
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


# -- reproduce ---------------------------------------------------------------

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


def _add_reproduce(sub):
    """Add ``reproduce`` and its options to the subparsers ``sub``."""
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
