"""Sizes and ages written the way ``ollama list`` writes them (ollama format/bytes.go,
format/time.go), so Lantern's listing reads like the one users know.
"""

from __future__ import annotations

import math
from datetime import datetime

_UNITS = ((10**12, "TB"), (10**9, "GB"), (10**6, "MB"), (10**3, "KB"))


def human_bytes(size: int) -> str:
    """Decimal units; whole numbers from 10 up, one decimal below: "397 MB", "4.7 GB"."""
    for scale, unit in _UNITS:
        if size >= scale:
            value = size / scale
            if value >= 10 or value == math.trunc(value):
                return f"{int(value)} {unit}"
            return f"{value:.1f} {unit}"
    return f"{size} B"


def _duration(seconds: float) -> str:
    whole = int(seconds)
    if whole < 1:
        return "Less than a second"
    if whole == 1:
        return "1 second"
    if whole < 60:
        return f"{whole} seconds"
    minutes = whole // 60
    if minutes == 1:
        return "About a minute"
    if minutes < 60:
        return f"{minutes} minutes"
    hours = int(seconds / 3600 + 0.5)        # Go math.Round: halves away from zero
    if hours == 1:
        return "About an hour"
    if hours < 48:
        return f"{hours} hours"
    if hours < 24 * 7 * 2:
        return f"{hours // 24} days"
    if hours < 24 * 30 * 2:
        return f"{hours // 24 // 7} weeks"
    if hours < 24 * 365 * 2:
        return f"{hours // 24 // 30} months"
    return f"{int(seconds // 3600) // 24 // 365} years"


def human_time(when: datetime, now: datetime | None = None) -> str:
    """"4 hours ago", "About a minute ago", "2 days from now"."""
    now = now or datetime.now(tz=when.tzinfo)
    delta = (now - when).total_seconds()
    if delta < 0:
        return _duration(-delta) + " from now"
    return _duration(delta) + " ago"


def human_eta(seconds: float) -> str:
    """A short time left: "45s", "2m05s", "1h20m"."""
    seconds = int(seconds)
    if seconds >= 3600:
        return f"{seconds // 3600}h{seconds % 3600 // 60:02d}m"
    return f"{seconds // 60}m{seconds % 60:02d}s" if seconds >= 60 else f"{seconds}s"
