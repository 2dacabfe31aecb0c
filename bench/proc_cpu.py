"""CPU time from Linux's /proc: what a process or a thread has spent, user and system, in
seconds. The benchmarks read it for a JVM they did not start as a child (it is never
waited for) and for each of its threads."""

from __future__ import annotations

import os
from pathlib import Path

TICK = os.sysconf("SC_CLK_TCK")


def stat_fields(stat: Path) -> list[str]:
    """The fields of a /proc `stat` file after the command's name (which may hold spaces
    and parentheses): [0] the state, [1] the parent's pid, [11:13] user and system ticks,
    [13:15] those of the children it waited for."""
    return stat.read_text().rsplit(")", 1)[1].split()


def cpu_seconds(fields: list[str], *, waited_children: bool = False) -> float:
    """User and system seconds of `stat_fields`, with its waited-for children's if asked."""
    end = 15 if waited_children else 13
    return sum(int(field) for field in fields[11:end]) / TICK
