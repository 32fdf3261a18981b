"""Helpers for dnnframe's own tests and benchmarks; nothing else in the library imports
them. Workers load :mod:`.hooks` only when ``DNNFRAME_TRAIN_FN`` names it."""
