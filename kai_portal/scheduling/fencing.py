"""Fencing tokens: a cycle that lost the cycle lock applies and persists nothing.

The cycle lock (lock.py) lives in Redis, and Redis can lose it under a running cycle: a restart
without persistence, or the key expiring while the worker stalls. The next beat tick then starts a
second cycle next to the first (issue 26 saw both commit ``succeeded`` at ``--concurrency 2``).

So every cycle that runs takes a token from a database row (``CycleFence``, one per lock name):
one more than the last, in its own short transaction. The transaction that applies the cycle's
result to the cluster and persists it first checks, with a conditional ``UPDATE`` of that row,
that the token is still the newest. The ``UPDATE`` also locks the row (PostgreSQL) or the database
(SQLite) until the transaction ends, so no newer cycle can take a token between the check and the
commit: it waits for the commit and then plans from what was committed. A cycle whose token was
overtaken raises ``Superseded`` before it touches the cluster and rolls back; at most one of two
overlapping cycles applies and commits. The row does not depend on Redis surviving.
"""

from __future__ import annotations

from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from kai_portal.history.models import CycleFence


class LockLost(Exception):
    """This cycle may no longer act as the lock holder; the text says why."""


class Superseded(LockLost):
    """A newer cycle took a fencing token after this one."""


def take_token(name: str, holder: int | None = None) -> int:
    """The next token for lock ``name``, committed at once (``holder``: the cycle's id, for messages).

    One statement (an upsert), so two first-ever takers cannot both get token 1. It waits while a
    cycle holding an older token is inside its persist transaction (the row is locked there).
    """
    table = connection.ops.quote_name(CycleFence._meta.db_table)
    taken_at = connection.ops.adapt_datetimefield_value(timezone.now())
    with transaction.atomic(), connection.cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {table} (name, token, holder, taken_at) VALUES (%s, 1, %s, %s) "
            f"ON CONFLICT (name) DO UPDATE SET token = {table}.token + 1, holder = excluded.holder, "
            "taken_at = excluded.taken_at RETURNING token",
            [name, holder, taken_at],
        )
        return int(cursor.fetchone()[0])


def check_token(name: str, token: int) -> None:
    """Raise ``Superseded`` unless ``token`` is still the newest for ``name``.

    Call inside the transaction that applies and persists: the row stays locked until it ends.
    """
    if not connection.in_atomic_block:
        raise RuntimeError("check_token must run inside the persist transaction (it holds the row)")
    # A no-op write, not a read: it takes the row's lock (PostgreSQL waits out a newer taker's
    # uncommitted token and re-reads the row) or SQLite's write lock, held until the commit.
    if CycleFence.objects.filter(name=name, token=token).update(token=F("token")):
        return
    newest = CycleFence.objects.filter(name=name).first()
    if newest is None:
        raise Superseded(f"no fencing token was ever taken for {name}")
    which = f" (#{newest.holder})" if newest.holder else ""
    when = f" at {timezone.localtime(newest.taken_at):%H:%M:%S}" if newest.taken_at else ""
    raise Superseded(
        f"a newer cycle{which} took over{when} while this one ran "
        f"(fencing token {newest.token}, this cycle's {token})"
    )
