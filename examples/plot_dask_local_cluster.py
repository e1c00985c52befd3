"""
Fitting on a dask cluster
=========================

:class:`~skrbfkmeans.RBFKMeans` and :class:`~skrbfkmeans.AnnealedRBFKMeans`
accept dask arrays (install the ``dask`` extra). The data are never gathered:
each EM iteration maps the block kernel over the row chunks on the workers
and brings back ``n_clusters x (n_features + 1)`` sums, and ``predict``
returns a lazy dask array.

This example starts a small :class:`dask.distributed.LocalCluster` in this
process (``processes=False``: threads, no new processes), fits on a chunked
array and closes the cluster. On a real cluster, pass its address to
:class:`~dask.distributed.Client` instead; the rest of the code is the same.
"""

# %%
# A local cluster, a chunked array, three fits
# --------------------------------------------
# The ``with`` block closes the client and the cluster when it ends, also on
# an error.

import dask.array as da
import numpy as np
from dask.distributed import Client, LocalCluster
from sklearn.cluster import KMeans
from sklearn.datasets import make_blobs

from skrbfkmeans import AnnealedRBFKMeans, RBFKMeans

X_np, _ = make_blobs(n_samples=40_000, n_features=4, centers=6, random_state=0)

with (
    LocalCluster(
        n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None
    ) as cluster,
    Client(cluster) as client,
):
    X = da.from_array(X_np, chunks=(10_000, 4)).persist()
    n_threads = sum(w["nthreads"] for w in client.scheduler_info()["workers"].values())
    print(f"{X.npartitions} chunks of {X.chunksize[0]} rows, {n_threads} threads")

    # labels_ and predict are lazy dask arrays; score is one compute.
    km = RBFKMeans(n_clusters=6, activation="entmax15", random_state=0).fit(X)
    labels = km.predict(X)
    print(f"RBFKMeans: {km.n_iter_} EM iterations, labels {type(labels).__name__}")
    counts = np.bincount(labels.compute(), minlength=6)
    print(f"cluster sizes {counts}, score {km.score(X):.6g}")

    # The annealing runs its schedule on a sample in memory, then the final
    # Lloyd iterations and the certificate on every chunk.
    ann = AnnealedRBFKMeans(n_clusters=6).fit(X)
    print(
        f"AnnealedRBFKMeans: certified_ = {ann.certified_}, inertia {ann.inertia_:.6g}"
    )

# %%
# The same data in memory
# -----------------------
# On 40,000 rows the dask fits run on a sample of 10,000 rows for the
# initialisation (and, for the annealing, the schedule), so they equal the
# in-memory fits to rounding only when the sample is all the data; the
# certified annealing result is a Lloyd fixed point of all the rows either
# way.

best = KMeans(6, n_init=10, random_state=0).fit(X_np).inertia_
print(f"KMeans(n_init=10) in memory: inertia {best:.6g}")
print(f"annealed on dask / KMeans(n_init=10): {ann.inertia_ / best:.6f}")
