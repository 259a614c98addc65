"""``kai``: a small terminal client for the portal's REST API (standard library only)."""
