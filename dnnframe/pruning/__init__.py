"""Pruning: which trials stop early, asked by the runner after each epoch.

Below the runner, above the store: the protocol the runner knows (:mod:`.pruner`), the one
place that picks a pack's pruner (:mod:`.factory`) and ASHA, decided by store queries
(:mod:`.asha`). Nothing here knows who runs trials (executors) or proposes them (the
drivers in :mod:`dnnframe.search`).
"""
