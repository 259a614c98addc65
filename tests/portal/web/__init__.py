"""Tests of the pages and the REST API, grouped as ``kai_portal/web/`` is: ``queues/``, ``workloads/``,
``teams/`` and ``cluster/`` hold an area's page tests and its ``test_api_*.py`` side by side; ``api/``
holds the API-wide checks (permission matrix, schema fuzzing, CLI, docs, tokens); pages that span
areas (access, query counts, showback) sit here. Page tests use ``conftest.py``'s ``world``; API tests
take ``api_world.py``'s ``world`` (personas with tokens) by importing it.
"""
