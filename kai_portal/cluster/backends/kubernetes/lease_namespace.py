"""The namespace of the leader-election Lease, on a cluster that lacks it (a bare cluster).

deploy/rbac and the chart make it (``kai-portal``, the release's namespace). Without it every
Lease write fails, with 404 or, for an account whose Role lives in that namespace, 403, and no
cycle could ever run. The elector asks here whether the namespace exists (the worker may ``get``
namespaces) and creates it when its account may (an admin's kubeconfig; the chart's account may
not, unless the optional namespace rights are granted); otherwise it says what to create.
"""

from __future__ import annotations

import logging

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .client import CALL_ERRORS, release

logger = logging.getLogger(__name__)


class LeaseNamespace:
    """Whether the Lease's namespace exists, and its creation when it does not."""

    def __init__(self, core: client.CoreV1Api) -> None:
        self.core = core

    def missing(self, name: str) -> bool:
        """True only when the API server says the namespace does not exist."""
        try:
            release(self.core.read_namespace(name, _preload_content=False, _request_timeout=5))
        except ApiException as error:
            return error.status == 404
        except CALL_ERRORS:
            return False
        return False

    def create(self, name: str) -> str | None:
        """Create the namespace; None when it exists afterwards, else why it could not be made."""
        body = client.V1Namespace(metadata=client.V1ObjectMeta(name=name))
        try:
            release(self.core.create_namespace(body, _preload_content=False, _request_timeout=5))
        except ApiException as error:
            if error.status == 409:  # another replica made it meanwhile
                return None
            why = "this account may not create it"
            if error.status != 403:
                why = f"its creation failed ({error.status})"
            return (
                f"the namespace {name!r} (LEADER_ELECTION_NAMESPACE) does not exist and {why}: create it "
                f"(kubectl create namespace {name}, or kubectl apply -f deploy/rbac/, which makes it), or "
                "set LEADER_ELECTION_NAMESPACE to the namespace the portal runs in (the chart does)"
            )
        except CALL_ERRORS as error:
            return f"the namespace {name!r} (LEADER_ELECTION_NAMESPACE) does not exist; making it: {error!r}"
        logger.info("created the namespace %s for the leader-election Lease", name)
        return None
