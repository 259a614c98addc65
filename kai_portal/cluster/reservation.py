"""Entrypoint of a GPU reservation pod: ``python -m kai_portal.cluster.reservation``.

The command the binder gives reservation pods (``backends/kubernetes/gpu_sharing.py``); the work is
``backends/kubernetes/reservation.py``. No Django, no database.
"""

from __future__ import annotations

import sys

from kai_portal.cluster.backends.kubernetes.reservation import main

if __name__ == "__main__":
    sys.exit(main())
