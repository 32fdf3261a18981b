"""Optional analyses of stored results (studies built on the platform, not part of it)."""
