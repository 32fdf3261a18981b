"""Thin shim: the project is configured in pyproject.toml (kept for tools that still call setup.py)."""

from setuptools import setup

setup()
