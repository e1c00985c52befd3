"""How every loop over rows is cut into blocks: one rule, one iterator.

A loop over ``n`` rows visits them in blocks of ``block_rows`` rows, in order
(``row_blocks``). The rule: as many rows as fill the loop's *target* with its
largest per-block array, ``target // row_size`` (both in bytes, or both in
elements), at least ``min_rows``, within scikit-learn's ``working_memory``
for the memory a block holds per row (``held``), at most ``n`` and at least
1. With ``even`` the rows are then cut into equal blocks of at most that
many rows.

Each loop names its target where its reason was measured:

=====================================  ==========================  ===========
loop                                   target (per row)            options
=====================================  ==========================  ===========
engine passes (``blocks.BlockPlan``)   4 MiB of scores and rows,   even,
                                       1 MiB for passes that       64 rows,
                                       sweep the scores            held
``passes.squared_norms``               1 MiB of centred rows
second moments, within a block         1 MiB of outer products
(``block_stats.accumulate_moments``)
entmax maps (``entmax_rows._blocks``)  2**17 scores
the certificate (``_certificate``)     8 MiB of differences
=====================================  ==========================  ===========

Block sizes decide results: a pass adds its blocks' sums in block order, and
a BLAS kernel may round a row differently by its place in a block. The cut
depends on the shape (and ``working_memory``) alone, never on the number of
threads. The engine's passes even their blocks out, since a short last block
costs a whole block's Python steps and idles a thread; the other loops keep
full blocks, whose sums' rounding their results were recorded with.
"""

from sklearn import get_config


def block_rows(n_rows, row_size, target, *, min_rows=1, held=None, even=False):
    """Return the rows per block of a loop over ``n_rows`` rows (module docstring).

    Parameters
    ----------
    n_rows : int
        The rows of the loop (0 gives 1: ``row_blocks`` then yields nothing).
    row_size : int
        What one row adds to the block's largest array, in the unit of
        ``target``.
    target : int
        The size that array should have.
    min_rows : int, default=1
        Fewer rows than this only under ``held``'s bound or ``n_rows``.
    held : float, default=None
        Bytes a block holds per row, all its buffers together: blocks stay
        within ``working_memory``. ``None``: no such bound.
    even : bool, default=False
        Cut the rows into equal blocks (the last one shorter by less than
        the number of blocks) of at most the rule's rows.

    Returns
    -------
    step : int
        Rows per block, at least 1.
    """
    step = max(min_rows, target // max(1, row_size))
    if held is not None:
        step = min(step, int(get_config()["working_memory"] * 2**20 // held))
    step = int(max(1, min(n_rows, step)))
    if not even:
        return step
    n_blocks = max(1, -(-n_rows // step))
    return max(1, -(-n_rows // n_blocks))


def row_blocks(n_rows, step):
    """Yield the slices of ``step`` rows (the last one shorter) over ``n_rows`` rows."""
    for start in range(0, n_rows, step):
        yield slice(start, min(start + step, n_rows))
