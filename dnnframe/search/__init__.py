"""Adaptive search: pruning behind a protocol the runner asks after each epoch
(:mod:`.pruner`; ASHA, decided by store queries, is :mod:`.asha`, chosen by
:mod:`.pruner_factory`), and model-based samplers (Optuna's TPE and CMA-ES) asked for
configurations as results arrive (:mod:`.driver`)."""
