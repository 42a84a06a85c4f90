"""The one private setting of Ray the planner relies on, kept here with the version it was
written for: a local cluster that listens on 127.0.0.1 only."""

from __future__ import annotations

import logging
import os

log = logging.getLogger(__name__)

RAY_VERSION = "2.60.0"


def keep_on_loopback() -> None:
    """Make the next local cluster a single node on 127.0.0.1. By default Ray binds every
    interface and takes the machine's outside address as the node's, and replaces a
    localhost address given to it. RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0 turns that off, but Ray
    reads it once, at import, into a module constant: set both."""
    os.environ["RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER"] = "0"
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")  # no token file written under ~/.ray per start
    import ray
    from ray._private import ray_constants

    if ray.__version__ != RAY_VERSION:
        log.warning("ray %s: the planner was written for %s (engine/ray_compat.py)", ray.__version__, RAY_VERSION)
    ray_constants.ENABLE_RAY_CLUSTER = False
