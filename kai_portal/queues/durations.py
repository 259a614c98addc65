"""Go duration strings (``10m``, ``1h30m``, ``90s``, ``1.5h``) as KAI writes min-runtimes."""

from __future__ import annotations

import re
from datetime import timedelta
from decimal import Decimal

_UNITS = {
    "ns": Decimal("1e-9"),
    "us": Decimal("1e-6"),
    "µs": Decimal("1e-6"),
    "ms": Decimal("1e-3"),
    "s": Decimal(1),
    "m": Decimal(60),
    "h": Decimal(3600),
}
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_go_duration(text: str) -> timedelta:
    """Parse a non-negative Go duration; raises ValueError naming the bad text."""
    value = text.strip()
    if value in {"0", ""}:
        if value == "":
            raise ValueError("empty duration")
        return timedelta(0)
    if value.startswith("+"):
        value = value[1:]
    if value.startswith("-"):
        raise ValueError(f"negative duration {_cut(text)}")
    pos, seconds = 0, Decimal(0)
    while pos < len(value):
        match = _PART.match(value, pos)
        if match is None:
            raise ValueError(f"invalid Go duration {_cut(text)}; use forms like 90s, 10m or 1h30m")
        seconds += Decimal(match.group(1)) * _UNITS[match.group(2)]
        pos = match.end()
    try:
        return timedelta(seconds=float(seconds))
    except OverflowError:
        raise ValueError(f"duration {_cut(text)} is too long") from None


def _cut(text: str, limit: int = 40) -> str:
    return repr(text) if len(text) <= limit else repr(text[:limit] + "…")


def format_go_duration(delta: timedelta) -> str:
    """Compact Go form without zero units: ``1h30m``, ``10m``, ``45s``, ``0s``."""
    micros = delta // timedelta(microseconds=1)
    if micros < 0:
        raise ValueError("negative durations are not used for min-runtimes")
    if micros == 0:
        return "0s"
    hours, rest = divmod(micros, 3_600_000_000)
    minutes, rest = divmod(rest, 60_000_000)
    seconds = Decimal(rest) / Decimal(1_000_000)
    text = ""
    if hours:
        text += f"{hours}h"
    if minutes:
        text += f"{minutes}m"
    if seconds:
        text += f"{seconds.normalize():f}s"
    return text
