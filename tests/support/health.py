"""A relay's health endpoints read the way a probe reads them."""

from __future__ import annotations

import urllib.error
import urllib.request


def readyz(port: int) -> tuple[int, str]:
    """Status and body of the relay's /readyz on loopback (0 and "" while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""


def healthz(port: int) -> tuple[int, str]:
    """Status and body of the relay's /healthz on loopback (0 and "" while it does not answer)."""
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()
    except OSError:
        return 0, ""
