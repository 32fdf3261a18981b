"""Store and broker URLs as they are shown: in messages, logs and labels, never a password."""

from __future__ import annotations

from urllib.parse import urlsplit, urlunsplit


def redact(url: str, mask: str = "***") -> str:
    """The URL with any password replaced by ``mask`` (safe for error messages and logs)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if parts.password is None:
        return url
    netloc = parts.netloc.replace(f":{parts.password}@", f":{mask}@", 1)
    return urlunsplit(parts._replace(netloc=netloc))
