"""Helpers for dnnframe's own tests and benchmarks; nothing else in the library imports
them. Workers load :mod:`.hooks` only when ``DNNFRAME_TRAIN_FN`` names it; :mod:`.packs`
adapts the tests' single-trial train functions to the pack contract production knows."""
