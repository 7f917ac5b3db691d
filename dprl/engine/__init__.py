"""The run engine: any registered experiment run in batches, resumably, in this process or on a
dask cluster (local, a running scheduler's, or Slurm jobs'), its result stored with provenance
and read back checked.

- :mod:`~dprl.engine.registry`: experiments, their configs per scale, the run order; the
  experiments themselves are registered by the catalogues of the ``dprl.catalogues`` entry
  points (the book's: :mod:`dprl.experiments.catalogue`), so the engine imports none of them.
- :mod:`~dprl.engine.batches`, :mod:`~dprl.engine.plan`, :mod:`~dprl.engine.runner`:
  computing, saving and assembling batches; :mod:`~dprl.engine.results`,
  :mod:`~dprl.engine.storage`, :mod:`~dprl.engine.provenance`: the stored results.
- :mod:`~dprl.engine.dask_engine`, :mod:`~dprl.engine.dask_workers`,
  :mod:`~dprl.engine.slurm`, :mod:`~dprl.engine.slurm_options`: the distributed runs.
- :mod:`~dprl.engine.run_all`, :mod:`~dprl.engine.report`, :mod:`~dprl.engine.scaling`:
  ``run --all``, listings, and the scaling of a regeneration with workers.
"""
