"""The jobs' cluster on this machine: an API server holding the jobs' objects, and the real
runtime talking to it over HTTP.

The API server is the test bed's fake kube-apiserver (runtime/sim/server.py over
runtime/sim/apiserver/'s store) on 127.0.0.1, an ephemeral port.  It gets what a GitOps tool
applies from git: each job's record, PodTemplates and PodGroup.  The runtime is the one the
runtime image runs, in the mode the jobs are compiled in (namespace: one runtime for every
job of the namespace): `Controller` in `runtime.cli.run_loop`, through `runtime.kube` and the
real `kubernetes` client, on a thread of its own.  It creates the pods from their
PodTemplates, the SSH Secrets, the Events and the records' status, as in a cluster; no Lease
(nothing else competes for the jobs here).  The kubelet is run-local's (kubelet.py).
"""

from __future__ import annotations

import copy
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from flatjob.compiler.errors import RUNTIME_INSTALL

from .errors import LocalError, Unsupported

Obj = dict[str, Any]
IDENTITY = "run-local"  # the runtime's User-Agent suffix and identity


class LocalCluster:
    """A fake API server with the jobs' objects, and their namespace's runtime on a thread."""

    def __init__(self, objects: Iterable[Obj], namespace: str, backoff_scale: float = 1.0):
        try:
            from ..controller import CONCURRENCY, Controller
            from ..kube import KubeCluster
        except ImportError as exc:  # the kubernetes client: the runtime extra
            raise Unsupported(f"run-local runs the jobs' namespace runtime, which needs the kubernetes client ({exc}): {RUNTIME_INSTALL}") from None
        from ..sim.cluster import FakeCluster
        from ..sim.server import FakeApiServer

        self.namespace = namespace
        self.fake = FakeCluster(time.time)
        for obj in objects:
            self.apply(obj)
        self.server = FakeApiServer(self.fake)
        kube = KubeCluster(self.server.api_client().configuration, identity=IDENTITY)
        self._notify = kube.notify
        # No node is lost and no pod evicted here: a failure ends a job at once, as T9k's does.
        self.controller = Controller(kube, namespace, identity=IDENTITY, use_lease=False, backoff_scale=backoff_scale, settle=0.0,
                                     concurrency=CONCURRENCY, notify=kube.notify)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def store(self) -> Any:
        """The API server's storage: listeners, its lock and condition (in-process readers)."""
        return self.fake.store

    def listen(self, listener: Callable[[Any], None]) -> None:
        """Call `listener(change)` after every write (under the store's lock: keep it short)."""
        self.store.listeners.append(listener)

    def get(self, resource_key: str, name: str) -> Obj:
        """A stored object of the jobs' namespace (`secrets`, `records/<plural>`...)."""
        from ..sim.apiserver import kinds

        return self.fake.store.get(kinds.by_key(resource_key), self.namespace, name)

    def apply(self, obj: Obj) -> None:
        """Create an object as `kubectl apply` would (an existing one is left alone); one the
        API server refuses is a LocalError with its message, as kubectl would print it."""
        from ..api import ApiError

        try:
            self.fake.apply(copy.deepcopy(obj))
        except ApiError as exc:
            meta = obj.get("metadata") or {}
            raise LocalError(f"the API server refused {obj.get('kind')} {meta.get('name')}: {exc}") from None

    def start_runtime(self) -> None:
        """Run the namespace's runtime (runtime.cli.run_loop) on its own thread."""
        from ..cli import run_loop
        from ..server import Health

        self._thread = threading.Thread(target=run_loop, args=(self.controller, self._stop, self._notify, Health()), name="flatjob runtime", daemon=True)
        self._thread.start()

    def stop_runtime(self) -> None:
        """Stop the runtime after its current cycle (as on SIGTERM) and close its watches."""
        self._stop.set()
        self._notify.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        self.controller.close()

    def close(self) -> None:
        """Stop the runtime and the API server; no thread of either is left."""
        self.stop_runtime()
        self.server.close()
