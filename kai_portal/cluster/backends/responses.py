"""Raw responses of the `kubernetes` client, read so that their connection is reused.

With ``_preload_content=False`` the client returns urllib3's response unread, and urllib3 gives a
connection back to its pool only once the body has been read. A caller that drops such a response
unread leaves the connection to the garbage collector, and the next call opens a new one: a TCP and
TLS handshake per call, on both sides (benchmarks/kwok-throughput.md: before this, half of each
bind's and each event's client time was handshakes, and the API server paid its own share).
Every write whose answer we do not need goes through ``release``.
"""

from __future__ import annotations

from typing import Any


def release(response: Any) -> None:
    """Read what is left of ``response`` and give its connection back to the pool.

    Anything that is not a raw urllib3 response (a deserialized model, None) is left alone.
    """
    read = getattr(response, "read", None)
    if read is None:
        return
    read()
    release_conn = getattr(response, "release_conn", None)
    if release_conn is not None:
        release_conn()  # a no-op when the read already gave the connection back
