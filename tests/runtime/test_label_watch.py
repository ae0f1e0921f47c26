"""The namespace runtime's LabelWatch caches only the names its served jobs want (runtime/lookups.py): a name wanted while a list is out is read again, never "known, absent" (review hx20)."""

from __future__ import annotations

from typing import Any

from flatjob.runtime.informer import Informer
from flatjob.runtime.nameset import PodNames


class _NoWatch:
    def __iter__(self) -> Any:
        return iter(())

    def close(self) -> None:
        pass


def _pg(name: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "resourceVersion": "5"}}


def test_label_watch_a_name_wanted_while_the_list_is_out_is_not_read_as_absent() -> None:
    """A second job's want() while the namespace list is in flight (the cycle threads let the
    lock go around requests): the list's page was gated by the old names, so the object comes
    back a stub; nothing reads it again, and get() said 'known, absent' for an existing object."""
    inf: Informer

    def list_fn() -> tuple[list[dict[str, Any]], str]:
        gate = inf.gate(lambda o: o)
        items = [gate(_pg("a")), gate(_pg("b"))]  # the server's answer, gated as it arrives
        inf.readmit(PodNames.of({}, {"a", "b"}))  # job b's cycle wants its PodGroup meanwhile
        return items, "5"

    inf = Informer(list_fn=list_fn, watch_fn=lambda rv: _NoWatch(), key_of=lambda o: o["metadata"]["name"])  # type: ignore[arg-type,return-value]
    inf.readmit(PodNames.of({}, {"a"}))
    inf.start()
    assert inf.get("a") is not None
    assert inf.get("b") is not None or not inf.ready_for("b"), "b exists, yet the cache is ready and lacks it"
