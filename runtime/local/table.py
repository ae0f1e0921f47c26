"""What the user sees: a status table on stderr and each pod's log lines, prefixed, on stdout.

On a terminal the table is redrawn in place under the logs; otherwise a plain line is
printed whenever a pod's row changes, so CI logs read top to bottom.
"""

from __future__ import annotations

import shutil
import sys
import threading
from collections.abc import Mapping, Sequence
from typing import Any, TextIO

from .pods import LocalPod

HEADER = ("POD", "PHASE", "RESTARTS", "EXIT", "ADDRESS")
Row = tuple[str, str, str, str, str]


def pod_phase(pod: LocalPod | None, recorded: str) -> str:
    """The phase column, in kubectl's words: SchedulingGated, Pending, Running, Terminating..."""
    if pod is None:
        return recorded  # Creating, or Deleted (by clean-up or a scale-down)
    if pod.deleting:
        return "Terminating"
    if pod.gated:
        return "SchedulingGated"
    return pod.phase


def rows(status: Mapping[str, Any], pods: Mapping[str, LocalPod], addresses: Mapping[str, str]) -> list[Row]:
    """One row per pod the job renders, in rank order, from the status and the local pods."""
    out: list[Row] = []
    for task in status.get("tasks") or []:
        for replica in task.get("replicas") or []:
            name = replica["name"]
            pod = pods.get(name)
            code = pod.ended.exit_code if pod is not None and pod.ended is not None else None
            restarts = str(pod.incarnation) if pod is not None else "-"
            out.append((name, pod_phase(pod, replica.get("phase", "")), restarts, "" if code is None else str(code), addresses.get(name, "")))
    return out


def title(kind: str, name: str, status: Mapping[str, Any], elapsed: float, why: str | None = None) -> str:
    """The table's first line: the job's phase, why it waits, its restarts, time so far."""
    phase = status.get("phase", "Pending")
    restarts = status.get("backoffCount", 0)
    return f"{kind} {name}: {phase}{f' ({why})' if why else ''}, restarts {restarts}, {elapsed:.0f}s"


def render(head: str, table: Sequence[Row], width: int | None = None) -> list[str]:
    """The table as aligned text lines, cut to `width` (a wrapped line would break the redraw)."""
    widths = [max(len(r[i]) for r in (HEADER, *table)) for i in range(len(HEADER))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [head, *(fmt.format(*r).rstrip() for r in (HEADER, *table))]
    return [line[: width - 1] if width and len(line) >= width else line for line in lines]


def change_line(row: Row) -> str:
    """A plain line for a changed row (when stderr is not a terminal)."""
    name, phase, restarts, code, _ = row
    extra = [f"exit {code}" if code else "", f"restart {restarts}" if restarts not in ("0", "-") else ""]
    return f"flatjob: {name} {phase}" + "".join(f", {e}" for e in extra if e)


class Screen:
    """Serialises log lines (stdout) and the table and notes (stderr) from many threads."""

    def __init__(self, out: TextIO | None = None, err: TextIO | None = None, live: bool | None = None):
        self.out = out or sys.stdout
        self.err = err or sys.stderr
        self.live = self.err.isatty() if live is None else live
        self._lock = threading.Lock()
        self._shown = 0  # table lines on screen (live mode)
        self._lines: list[str] = []
        self._last: dict[str, Row] = {}

    def _erase(self) -> None:
        if self._shown:
            self.err.write(f"\x1b[{self._shown}F\x1b[J")
            self.err.flush()
            self._shown = 0

    def _draw(self) -> None:
        if self.live and self._lines and not self._shown:
            self.err.write("\n".join(self._lines) + "\n")
            self.err.flush()
            self._shown = len(self._lines)

    def log(self, label: str, line: str) -> None:
        """One line of a pod's output, prefixed with the pod (and container) name."""
        with self._lock:
            self._erase()
            self.out.write(f"[{label}] {line}\n")
            self.out.flush()
            self._draw()

    def note(self, text: str) -> None:
        """A message from run-local itself (events, the outcome)."""
        with self._lock:
            self._erase()
            self.err.write(f"flatjob: {text}\n")
            self.err.flush()
            self._draw()

    def table(self, head: str, table: Sequence[Row]) -> None:
        """Show the current table: redrawn in place on a terminal, else changed rows as lines."""
        with self._lock:
            if self.live:
                self._erase()
                self._lines = render(head, table, shutil.get_terminal_size().columns)
                self._draw()
                return
            for row in table:
                if self._last.get(row[0]) != row:
                    self._last[row[0]] = row
                    self.err.write(change_line(row) + "\n")
            self.err.flush()

    def final(self, head: str, table: Sequence[Row]) -> None:
        """The last table, printed once (also when not on a terminal)."""
        with self._lock:
            self._erase()
            self._lines = []
            self.err.write("\n".join(render(head, table)) + "\n")
            self.err.flush()
