"""Resource units, as KAI counts them.

* GPU: devices, fixed-point with 2 decimals (0.5 = half a device).
* CPU: millicores (1000 = one core).
* Memory: MiB (2**20 bytes) inside the portal. KAI Queue YAML gives queue
  memory in MB (10**6 bytes); convert only at that boundary. Queue memory
  keeps 3 decimals of MiB so that every whole MB value converts back exactly
  (1024000 MB = 976562.5 MiB); pods and nodes use whole MiB.
* ``-1`` means unlimited for every quota and limit.
"""

from __future__ import annotations

from decimal import ROUND_HALF_UP, Decimal

UNLIMITED = -1
RESOURCES = ("gpu", "cpu", "memory")
UNIT_NAMES = {"gpu": "GPUs", "cpu": "millicores", "memory": "MiB"}

_BYTES_PER_MIB = 2**20
_BYTES_PER_MB = 10**6


def format_amount(resource: str, value: Decimal | int) -> str:
    """``4 GPUs``, ``0.5 GPUs``, ``2000 millicores``, ``1024 MiB``, ``unlimited``."""
    if value == UNLIMITED:
        return "unlimited"
    if isinstance(value, Decimal):
        value = value.normalize() if value != value.to_integral_value() else value.to_integral_value()
    if resource == "gpu" and value == 1:
        return "1 GPU"
    return f"{value} {UNIT_NAMES[resource]}"


def plain_number(value: object) -> object:
    """A stored decimal as a person writes it: ``"8.00"`` -> ``"8"``, ``"2.50"`` -> ``"2.5"``;
    anything that is not a decimal number (a name, None, True) unchanged."""
    if isinstance(value, bool) or not isinstance(value, str | int | float | Decimal):
        return value
    try:
        number = Decimal(str(value))
    except ArithmeticError:
        return value
    if not number.is_finite():
        return value
    whole = number.to_integral_value()
    return format(whole if number == whole else number.normalize(), "f")


def cores_text(millicores: int) -> str:
    """CPU millicores as cores for people: ``1 core``, ``0.5 cores``, ``0.01 cores``, ``2 cores``."""
    cores = (Decimal(millicores) / 1000).normalize()
    if cores == cores.to_integral_value():
        cores = cores.to_integral_value()
    return f"{cores} core" if cores == 1 else f"{cores} cores"


def mb_to_mib(mb: int | Decimal) -> Decimal:
    """KAI queue memory (MB) to MiB with 3 decimals; -1 stays -1."""
    if mb == UNLIMITED:
        return Decimal(UNLIMITED)
    return (Decimal(mb) * _BYTES_PER_MB / _BYTES_PER_MIB).quantize(Decimal("0.001"), rounding=ROUND_HALF_UP)


def mib_to_mb(mib: int | Decimal) -> int:
    """Whole MiB to KAI queue memory (MB), rounding to the nearest MB; -1 stays -1."""
    if mib == UNLIMITED:
        return UNLIMITED
    return int((Decimal(mib) * _BYTES_PER_MIB / _BYTES_PER_MB).quantize(Decimal(1), rounding=ROUND_HALF_UP))
