#!/usr/bin/env python3
"""Is the portal's scheduling loop running on this cluster? Print who holds its Lease, or nothing.

The portal in kubernetes mode renews a ``coordination.k8s.io`` Lease named ``kai-portal-<SCHEDULER_NAME>``
(in ``LEADER_ELECTION_NAMESPACE``, default ``kai-portal``) at the start of every cycle. A Lease named
``kai-portal*`` in any namespace, renewed within its duration plus a grace, means a portal is
scheduling the cluster now. A portal run with ``LEADER_ELECTION=0`` holds no Lease and cannot be
seen this way. Standard library only: kai-up.sh runs it with the system's python3.

Usage: portal_lease.py KUBECTL   (KUBECONFIG from the environment)
"""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import UTC, datetime
from typing import Any

# A loop renews at least every CYCLE_SECONDS; past the lease's duration plus this, it has stopped.
GRACE_SECONDS = 30


def _parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


def fresh_portal_leases(leases: list[dict[str, Any]], now: datetime) -> list[str]:
    """``namespace/name held by X, renewed N s ago`` for each portal Lease still being renewed."""
    out = []
    for lease in leases:
        meta, spec = lease.get("metadata", {}), lease.get("spec") or {}
        renewed = spec.get("renewTime")
        if not meta.get("name", "").startswith("kai-portal") or not renewed or not spec.get("holderIdentity"):
            continue
        age = (now - _parse_time(renewed)).total_seconds()
        if age <= int(spec.get("leaseDurationSeconds") or 15) + GRACE_SECONDS:
            where = f"{meta.get('namespace')}/{meta['name']}"
            out.append(f"Lease {where} held by {spec['holderIdentity']}, renewed {age:.0f} s ago")
    return out


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    done = subprocess.run(
        [argv[1], "get", "leases", "-A", "-o", "json"], capture_output=True, text=True, timeout=60
    )
    if done.returncode != 0:
        print(
            f"kai-testbed: cannot list Leases to check for a running portal: {done.stderr.strip()}",
            file=sys.stderr,
        )
        return 1
    found = fresh_portal_leases(json.loads(done.stdout)["items"], datetime.now(UTC))
    if found:
        print("; ".join(found))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
