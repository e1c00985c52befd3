"""Fixed-width EM and the certificate, over any rows.

Written once against the rows record (``_rows.MemoryRows``,
``_dask.DaskRows``): each iteration is one ``rows.stats`` pass, so the same
code runs on arrays in memory and on dask chunks (Lloyd's algorithm on dask
rows is EM at width 0: ``_finish``). ``ACTIVATIONS``, the engine's
activations, are the estimators' choices.
"""

import numpy as np

from ._certificate import margin_checks
from ._engine.blocks import ACTIVATIONS  # noqa: F401 (the estimators' choices)
from ._engine.passes import m_step


def em_step(rows, centers, sigma, activation, **options):
    """One EM iteration over ``rows``: the new centres and the pass's result.

    The E-step is one ``rows.stats`` pass at ``sigma`` (``options``: its
    keywords, ``prior`` and ``inertia`` in memory), the M-step the means of
    its statistics (``_engine.passes.m_step``: a centre with no mass stays
    put). Every EM of the package takes its steps here: at a fixed width,
    the annealing's stages, Lloyd's step of the certificate.
    """
    res = rows.stats(centers, sigma, activation, **options)
    return m_step(res.N, res.S, centers, rows.offset), res


def em_fixed_sigma(rows, centers_init, sigma, activation, *, max_iter, tol, verbose=0):
    """EM at a fixed width from ``centers_init`` over ``rows``.

    Stops when the summed squared centre shift is at most ``tol`` (already
    scaled to the data, as KMeans does) or after ``max_iter`` iterations.
    Cost: one ``rows.stats`` pass per iteration (``em_step``).

    Returns
    -------
    centers : ndarray of shape (n_clusters, n_features)
        The final centres.
    n_iter : int
        Number of E/M iterations run.
    converged : bool
        Whether the shift criterion was met.
    """
    centers = np.array(centers_init, dtype=centers_init.dtype, copy=True)
    converged = False
    n_iter = 0
    # verbose: the user's units, the inertia as the fit reports it.
    user = rows.units.to_user_energy
    for n_iter in range(1, max_iter + 1):
        new, res = em_step(rows, centers, sigma, activation)
        shift = float(((new - centers) ** 2).sum())
        if verbose:
            inertia = float(user(rows.reported(centers, res)[1]))
            print(
                f"Iteration {n_iter - 1}, inertia {inertia:.6g}, "
                f"center shift {float(user(shift)):.3e}."
            )
        centers = new
        if shift <= tol:
            converged = True
            if verbose:
                print(
                    f"Converged at iteration {n_iter - 1}: center shift "
                    f"{float(user(shift)):.3e} within tolerance "
                    f"{float(user(tol)):.3e}."
                )
            break
    return centers, n_iter, converged


def stage_tolerance(tol, sigma):
    """Return the squared centre shift that ends EM at ``sigma``: ``(30 tol)^2 T``.

    The square of an annealing stage's move tolerance, for EM at a float
    ``sigma_end`` (``T = 2 sigma^2``).
    """
    return 0.0 if tol == 0 else (30 * tol) ** 2 * 2.0 * sigma**2


def certify(rows, centers, sigma_max):
    """Largest certified width (at most ``sigma_max``) and whether it holds.

    The centres are certified when every margin is positive, the explicit
    check of ``_certificate`` agrees (margins from explicit differences, each
    centre its cluster's mean, no single-sample move that lowers the
    distortion), and the engine's Lloyd step leaves them equal to themselves
    to rounding: entmax-1.5 at the certified width is exactly one-hot, so
    its EM step is that Lloyd step. The width is shrunk by a few ulps of the
    margin so that the one-hot test holds after the rounding of ``1 / T``.
    Cost: ``_certificate.margin_checks`` and one ``stats`` pass (none on
    dask rows, which keep their last pass, after a converged Lloyd run).
    """
    min_margin, explicit = margin_checks(rows, centers)
    eps = np.finfo(centers.dtype).eps
    if not min_margin > 0 or not np.isfinite(min_margin):
        return sigma_max, min_margin == np.inf
    # The engine's margins share the GEMM's rounding: the width must also
    # pass the margins of explicit differences, and the centres their means.
    explicit_margin, fixed, stable = explicit
    if not (explicit_margin > 0 and fixed and stable):
        return sigma_max, False
    min_margin = min(min_margin, explicit_margin)
    sigma = min(sigma_max, 0.5 * np.sqrt(min_margin * (1.0 - 16.0 * eps)))
    # The margins make entmax-1.5 at ``sigma`` one-hot: its step is Lloyd's
    # (the pass a converged Lloyd run has just made at these centres).
    new, _ = em_step(rows, centers, 0.0, "entmax15")
    offset = rows.offset
    # Rounding relative to the data's own magnitude (never an absolute 1:
    # tiny data would pass any test).
    scale = float(np.abs(centers - offset).max()) + float(np.abs(offset).max())
    ok = np.allclose(new, centers, rtol=64 * eps, atol=64 * eps * scale)
    return sigma, bool(ok)
