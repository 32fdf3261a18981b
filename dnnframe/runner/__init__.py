"""Run trials: claim them, train them, report each epoch, record how each one ended.

:func:`run_pack` is the single place where a training exception becomes a FAILED trial
(with its traceback); a trial alone is a pack of one. The local process pool and the
Celery task both call it, so a trial behaves the same wherever it runs. It only needs
trial ids and a store: configurations are re-read from the store, never shipped with the
message.

Modules: :mod:`.packs` the claim-train-record loop, :mod:`.epochs` a running pack's
per-epoch bookkeeping (curve writes, heartbeats, cancel and pruning checks),
:mod:`.outcome` how each member's end is derived and recorded, :mod:`.heartbeat` the
background thread that beats for every running member, :mod:`.train_fns` the train
function's contract.
"""

from .epochs import PackObserver
from .packs import run_pack
from .train_fns import PackEpochFn, PackTrainFn

__all__ = ["PackEpochFn", "PackObserver", "PackTrainFn", "run_pack"]
