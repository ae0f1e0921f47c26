"""The garbage collector's effect on ownerReferences (pkg/controller/garbagecollector).

When an owner is removed from storage, each dependent in its namespace that names it (by uid):
- loses the reference when another owner it names still exists (the collector patches the
  dangling reference away);
- is deleted, with background propagation, when none of its owners exists any more (pods
  then terminate gracefully, like any pod deletion).
Deleting with `propagationPolicy: Orphan` strips the reference from the dependents instead.
An object created with owners that are all known kinds and all absent is collected at once.
The real collector does this asynchronously from its informers, seconds later; here it runs
right after the write.  Foreground deletion (the owner waits for its blocking dependents) is
not emulated: it is treated as background.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING

from ...api import NotFound, Obj
from . import kinds
from .copies import clone

if TYPE_CHECKING:
    from .store import Store

MANAGER = "generic-garbage-collector"


def _exists(store: Store, namespace: str, ref: Obj) -> bool:
    """Whether the referenced owner is there; kinds the fake does not serve count as present."""
    res = kinds.by_kind(ref.get("apiVersion", ""), ref.get("kind", ""))
    if res is None:
        return True
    owner = store.objects.get((res.key, namespace, ref.get("name", "")))
    return owner is not None and owner["metadata"].get("uid") == ref.get("uid")


def _dependents(store: Store, namespace: str, uid: str) -> list[tuple[tuple[str, str, str], Obj]]:
    return [(key, store.objects[key]) for key in sorted(store.dependents.get(uid, ())) if key[1] == namespace and key in store.objects]


def _strip(store: Store, key: tuple[str, str, str], obj: Obj, drop: set[str]) -> None:
    new = clone(obj)
    refs = [r for r in new["metadata"].get("ownerReferences") or [] if r.get("uid") not in drop]
    if refs:
        new["metadata"]["ownerReferences"] = refs
    else:
        new["metadata"].pop("ownerReferences", None)
    store.system_update(key, new, MANAGER)


def collect(store: Store, owner: Obj) -> None:
    """After `owner` left storage: remove or release what depended on it."""
    ns, uid = owner["metadata"].get("namespace", ""), owner["metadata"].get("uid")
    for key, obj in _dependents(store, ns, uid):
        if key not in store.objects:
            continue
        refs = obj["metadata"].get("ownerReferences") or []
        alive = [r for r in refs if r.get("uid") != uid and _exists(store, ns, r)]
        if alive:
            _strip(store, key, obj, {r.get("uid") for r in refs if r not in alive})
        else:
            with contextlib.suppress(NotFound):
                store.system_delete(key)


def orphan(store: Store, owner: Obj) -> None:
    """propagationPolicy Orphan: the dependents stay, without the reference."""
    ns, uid = owner["metadata"].get("namespace", ""), owner["metadata"].get("uid")
    for key, obj in _dependents(store, ns, uid):
        _strip(store, key, obj, {uid})


def orphaned_at_birth(store: Store, key: tuple[str, str, str], obj: Obj) -> None:
    """A new object whose owners are all absent is collected."""
    refs = obj["metadata"].get("ownerReferences") or []
    if refs and not any(_exists(store, key[1], r) for r in refs):
        store.system_delete(key)
