"""The subcommands: each reads, builds and fits, writes, then prints.

A ``_cmd_*`` function only orchestrates; the model it builds, the rows of
the table it prints and its summary line come from the small helpers next
to it. The estimators, scikit-learn and matplotlib are imported inside the
functions: ``--help`` and the errors found before any work stay quick.
"""

import os
import time

from .errors import CLIError, one_line_warnings, warn
from .input import check_output, check_replaceable, read_input, same_file
from .output import (
    FIGURE_NOTE,
    assignments_writer,
    centers_writer,
    convergence_writer,
    format_table,
    format_value,
    have_matplotlib,
    output_dir,
    save_figure,
    write_outputs,
)

# -- cluster -----------------------------------------------------------------


def _cmd_cluster(args):
    """``skrbfkmeans cluster``: cluster INPUT, write OUT (and the centres)."""
    if args.activation == "auto" and not args.anneal:
        raise CLIError("--activation auto needs --anneal")
    if args.sigma == 0 and args.activation is not None:
        # At width 0 every map gives one-hot responsibilities: the option
        # would be ignored, and the user believe it was used.
        raise CLIError(
            f"--activation {args.activation} has no effect with --sigma 0 "
            "(KMeans's fit: the responsibilities are one-hot); leave it out, "
            "or pass a width above 0"
        )
    X, names = read_input(args.input, args.header, args.columns)
    _check_cluster_args(args, n_samples=X.shape[0])
    if args.verbose:
        print(_read_message(args, X.shape, names))
    est = _build_estimator(args)
    start = time.perf_counter()
    resp = _fit(est, X)
    elapsed = time.perf_counter() - start
    n_clusters = est.cluster_centers_.shape[0]
    outputs = [(args.output, assignments_writer(est.labels_, resp, n_clusters))]
    if args.centers is not None:
        write = centers_writer(est.cluster_centers_, names, X.shape[1])
        outputs.append((args.centers, write))
    write_outputs(outputs)
    print(_cluster_summary(args, est, X.shape[0], elapsed))
    return 0


def _check_cluster_args(args, n_samples):
    """Refuse outputs that cannot be written, and more clusters than rows."""
    check_output(args.output, "--output", args)
    if args.centers is not None:
        check_output(args.centers, "--centers", args)
        if same_file(args.centers, args.output):
            raise CLIError("--centers and --output are the same file")
    if args.n_clusters == "auto":
        if not args.anneal:
            raise CLIError("--n-clusters auto needs --anneal")
        if args.max_clusters is None:
            args.max_clusters = min(20, n_samples)
        elif args.max_clusters > n_samples:
            raise CLIError(
                f"--max-clusters {args.max_clusters} is larger than the number "
                f"of rows ({n_samples}) in {args.input}"
            )
    elif args.max_clusters is not None:
        raise CLIError("--max-clusters needs --n-clusters auto")
    elif args.n_clusters > n_samples:
        raise CLIError(
            f"--n-clusters {args.n_clusters} is larger than the number of rows "
            f"({n_samples}) in {args.input}"
        )


def _read_message(args, shape, names):
    """Return the ``--verbose`` line that says what was read."""
    header = ""
    if names is not None:
        header = " (header)" if args.header else " (header detected)"
    return f"read {args.input}: {shape[0]} rows x {shape[1]} columns{header}"


def _build_estimator(args):
    """Return the unfitted estimator the options of ``cluster`` ask for."""
    from .._annealed_rbf_kmeans import AnnealedRBFKMeans
    from .._rbf_kmeans import RBFKMeans

    extra = {} if args.max_iter is None else {"max_iter": args.max_iter}
    if args.anneal:
        if args.max_clusters is not None:
            extra["max_clusters"] = args.max_clusters
        return AnnealedRBFKMeans(
            n_clusters=args.n_clusters,
            activation=args.activation or "auto",
            verbose=args.verbose,
            random_state=args.random_state,
            **extra,
        )
    return RBFKMeans(
        n_clusters=args.n_clusters,
        sigma="auto" if args.sigma is None else args.sigma,
        activation=args.activation or "softmax",
        verbose=args.verbose,
        random_state=args.random_state,
        **extra,
    )


def _fit(est, X):
    """Fit ``est`` to ``X``; return the responsibilities of ``X``.

    The estimator's ``ValueError`` is a problem with the data or the
    options, so it is reported as the user's error.
    """
    with one_line_warnings():
        try:
            est.fit(X)
        except ValueError as exc:
            raise CLIError(" ".join(str(exc).split())) from None
        return est.predict_proba(X)


def _cluster_summary(args, est, n_samples, elapsed):
    """Return the line ``cluster`` prints once its outputs are written."""
    certified = f", certified={est.certified_}" if args.anneal else ""
    n_clusters = f"{est.cluster_centers_.shape[0]} clusters"
    if args.n_clusters == "auto":
        n_clusters += f" (auto, longest-lived of 1..{args.max_clusters})"
    return (
        f"{type(est).__name__}: {n_samples} samples, {n_clusters}, "
        f"inertia {est.inertia_:.6g}, sigma {est.sigma_:.4g}{certified} "
        f"({elapsed:.2f} s); wrote {args.output}"
        + (f" and {args.centers}" if args.centers else "")
    )


# -- demo --------------------------------------------------------------------

_DEMO_HEADER = [
    "data",
    "n x d",
    "k",
    "method",
    "inertia",
    "vs KMeans",
    "ARI",
    "time (s)",
    "vs KMeans time",
    "certified",
]
_DEMO_NOTE = (
    "ARI: adjusted Rand index against the true classes; certified: the "
    "end point is proven an exact K-Means fixed point. Times: one fit each, "
    "both at one thread (threadpoolctl.threadpool_limits(1)), so that "
    "neither gains from the cores the other cannot use; on data of this "
    "size AnnealedRBFKMeans takes several times KMeans(n_init=10)'s time, "
    "and a smaller multiple on many rows, where it anneals on a sample: the "
    'README\'s "Which tool when" table gives the measured ranges.'
)


def _cmd_demo(args):
    """``skrbfkmeans demo``: AnnealedRBFKMeans against KMeans, table and figure."""
    out_dir = output_dir(args.output_dir)
    figure = os.path.join(out_dir, "annealing_path.png")
    if have_matplotlib():
        # Before the minutes of work, not after.
        check_replaceable(figure, figure, args.force)
    datasets = _demo_datasets()
    rows, annealed = [], []
    with one_line_warnings():
        for name, X, y, k in datasets:
            compared, ann = _demo_compare(name, X, y, k)
            rows += compared
            annealed.append((name, ann))
    print(format_table(_DEMO_HEADER, rows))
    print(_DEMO_NOTE)
    if not have_matplotlib():
        warn(f"no figure written; {FIGURE_NOTE}")
        return 0
    save_figure(_demo_figure(annealed), figure)
    return 0


def _demo_datasets():
    """``(name, X, y, k)`` of the data sets of the demo."""
    from sklearn.datasets import load_digits, make_blobs

    X_digits, y_digits = load_digits(return_X_y=True)
    X_blobs, y_blobs = make_blobs(
        n_samples=1000, centers=5, cluster_std=1.5, random_state=0
    )
    return [
        ("blobs", X_blobs, y_blobs, 5),
        ("digits", X_digits, y_digits, 10),
    ]


def _demo_compare(name, X, y, k):
    """Fit both methods to one data set: its table rows, and the annealed fit."""
    from sklearn.cluster import KMeans
    from sklearn.metrics import adjusted_rand_score
    from threadpoolctl import threadpool_limits

    from .._annealed_rbf_kmeans import AnnealedRBFKMeans

    # The same thread count for both: at the default, each uses the cores
    # its own way and a loaded machine decides the ratio.
    with threadpool_limits(1):
        start = time.perf_counter()
        km = KMeans(n_clusters=k, n_init=10, random_state=0).fit(X)
        km_time = time.perf_counter() - start
        start = time.perf_counter()
        ann = AnnealedRBFKMeans(n_clusters=k).fit(X)
        ann_time = time.perf_counter() - start
    shape = f"{X.shape[0]}x{X.shape[1]}"
    rows = []
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
                f"{t / km_time:.1f}x",
                cert,
            ]
        )
    return rows, ann


def _demo_figure(annealed):
    """Draw the annealing path of each ``(name, fitted AnnealedRBFKMeans)``."""
    from matplotlib.figure import Figure

    from ..plotting import plot_annealing_path

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    for ax, (name, ann) in zip(fig.subplots(1, len(annealed)), annealed):
        plot_annealing_path(ann, ax=ax)
        ax.set_title(f"{name}: {ax.get_title()}")
    return fig


# -- reproduce ---------------------------------------------------------------

_REPRODUCE_HEADER = [
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


def _cmd_reproduce(args):
    """``skrbfkmeans reproduce``: the paper's experiment, table, CSV, figures."""
    from . import reproduce

    _check_n_samples(args.n_samples)
    out_dir = output_dir(args.output_dir)
    csv_path = os.path.join(out_dir, "convergence.csv")
    figures = ["convergence.png", "trajectories.png"] if have_matplotlib() else []
    figures = [os.path.join(out_dir, name) for name in figures]
    for path in [csv_path, *figures]:
        # Before the minutes of work, not after.
        check_replaceable(path, path, args.force)
    start = time.perf_counter()
    with one_line_warnings():
        results = reproduce.run_experiment(args.n_samples, args.n_widths)
    elapsed = time.perf_counter() - start
    print(format_table(_REPRODUCE_HEADER, _reproduce_rows(results)))
    print(_reproduce_note(args.n_widths, elapsed))
    rows = reproduce.convergence_rows(results)
    write_outputs([(csv_path, convergence_writer(rows))])
    print(f"wrote {os.path.abspath(csv_path)}")
    if not figures:
        warn(f"no figures written; {FIGURE_NOTE}")
        return 0
    save_figure(reproduce.convergence_figure(results), figures[0])
    save_figure(reproduce.trajectories_figure(results), figures[1])
    return 0


def _check_n_samples(n_samples):
    """Refuse ``--n-samples`` smaller than the clusters of a data set.

    k-means needs a row per cluster: found here rather than as a
    ``ValueError`` from deep inside the experiment.
    """
    from . import reproduce

    need = max(reproduce.make_dataset(name, 1)[1] for name in reproduce.DATASETS)
    if n_samples < need:
        raise CLIError(
            f"--n-samples {n_samples} is too small: a data set has {need} "
            f"clusters, so at least {need} samples are needed"
        )


def _reproduce_rows(results):
    """Return the rows of the table ``reproduce`` prints: a data set and map each."""
    from . import reproduce

    rows = []
    for r in results:
        for activation in reproduce.ACTIVATIONS:
            s = reproduce.summarize(r, activation)
            entmax = activation == "entmax15"
            rows.append(
                [
                    s.dataset,
                    s.activation,
                    format_value(s.slope, ".2f"),
                    "-" if entmax else format_value(s.exp_rate, ".2f"),
                    format_value(s.sigma_star),
                    format_value(s.largest_zero),
                    format_value(s.next_above),
                    ("yes" if s.agrees else "NO") if entmax else "-",
                    "yes" if s.monotone else "no",
                    s.n_not_converged,
                ]
            )
    return rows


def _reproduce_note(n_widths, elapsed):
    """Return the legend printed under the table of ``reproduce``."""
    return (
        f"slope: log-log fit over the non-zero distances of the {n_widths} "
        "grid widths; exp rate: b in distance ~ exp(-b sigma*^2/sigma^2) below "
        "sigma*; largest 0: largest width with entmax distance exactly 0; agrees: "
        "largest 0 <= sigma* < next width; unconverged: EM runs stopped at "
        f"max_iter ({elapsed:.1f} s)."
    )
