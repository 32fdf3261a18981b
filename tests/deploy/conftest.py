"""Fixtures for tests/deploy; they live in deploy_support.py beside the helpers they use."""

from deploy_support import compose_cmd, run_compose, secrets_only_env, stack  # noqa: F401
