"""Cluster API tests run on the API world (personas with tokens), not the pages' one."""

from tests.portal.web.api_world import world  # noqa: F401
