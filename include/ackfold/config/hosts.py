"""Telling a host on this machine from a remote one: a local endpoint (SQS, a Spark
master) is treated differently from a production one.

Example:
    >>> is_loopback_host("127.0.0.2"), is_loopback_host("10.0.0.5")
    (True, False)
"""

from __future__ import annotations

import ipaddress


def is_loopback_host(host: str) -> bool:
    """True for a host on this machine: 127.0.0.0/8, ::1 or localhost."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
