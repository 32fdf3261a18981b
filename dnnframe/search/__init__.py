"""Search drivers: model-based samplers (Optuna's TPE and CMA-ES) asked for configurations
as results arrive (:mod:`.driver`), the service that drives them under a store lease
(:mod:`.service`, :mod:`.lease`) and the child process a server runs it in (:mod:`.child`).

Drivers sit above the executors and submission, which they hand trials to; pruning, which
the runner asks, is the lower package :mod:`dnnframe.pruning`."""
