"""Adaptive search: ASHA pruning decided by store queries (:mod:`.asha`), and model-based
samplers (Optuna's TPE and CMA-ES) asked for configurations as results arrive
(:mod:`.driver`)."""
