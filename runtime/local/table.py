"""What the user sees: a status table on stderr and each pod's log lines, prefixed, on stdout.

The table has a section per job: its title is the record's status (its phase, restarts and
what the runtime waits for), its rows the replicas in rank order with each pod as last seen
in the API server, as `kubectl get` shows them.  On a terminal it is redrawn in place under
the logs; otherwise a plain line is printed whenever a pod's row changes, so CI logs read
top to bottom.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TextIO

from ..events import COMBINED
from ..model import Ledger
from ..trim import pod as trim_pod

HEADER = ("POD", "PHASE", "RESTARTS", "EXIT", "ADDRESS")
OUTCOMES = ("Succeeded", "Failed")
Row = tuple[str, str, str, str, str]
Section = tuple[str, Sequence[Row]]  # a job's title line and its pods' rows
Obj = dict[str, Any]


class Seen:
    """The job's pods as last seen in the API server (`kubectl get pods -w`): each name's latest
    object, kept (trimmed) after it is deleted, and how many times the runtime created it."""

    def __init__(self) -> None:
        self.pods: dict[str, Obj] = {}
        self.present: set[str] = set()
        self.created: dict[str, int] = {}

    def apply(self, etype: str, obj: Obj) -> None:
        """One watch event on a pod."""
        name = (obj.get("metadata") or {}).get("name", "")
        if etype == "ADDED":
            self.created[name] = self.created.get(name, 0) + 1
        self.pods[name] = trim_pod(obj)
        if etype == "DELETED":
            self.present.discard(name)
        else:
            self.present.add(name)


def _exit_code(pod: Obj | None, container: str | None) -> int | None:
    """The training container's exit code (else the first container's), once terminated."""
    statuses = ((pod or {}).get("status") or {}).get("containerStatuses") or []
    chosen = next((s for s in statuses if s.get("name") == container), statuses[0] if statuses else None)
    code = (((chosen or {}).get("state") or {}).get("terminated") or {}).get("exitCode")
    return code if isinstance(code, int) else None


def pod_phase(pod: Obj | None, present: bool, recorded: str) -> str:
    """The phase column, in kubectl's words: SchedulingGated, Pending, Running, Terminating...;
    a pod that is gone is Deleted (Creating while the runtime is about to create it)."""
    if pod is None:
        return recorded  # never created yet (Creating), or a seat beyond an elastic target (Deleted)
    if not present:
        return "Creating" if recorded == "Creating" else "Deleted"
    if pod["metadata"].get("deletionTimestamp"):
        return "Terminating"
    if pod["spec"].get("schedulingGates"):
        return "SchedulingGated"
    return (pod.get("status") or {}).get("phase") or "Pending"


def rows(status: Mapping[str, Any], seen: Seen, training: Mapping[str, str | None], addresses: Mapping[str, str]) -> list[Row]:
    """One row per pod the job renders, in rank order: the record's status names them, the
    pods as last seen give phase, restarts (creations after the first) and exit code."""
    out: list[Row] = []
    for task in status.get("tasks") or []:
        for replica in task.get("replicas") or []:
            name = replica["name"]
            pod = seen.pods.get(name)
            phase = pod_phase(pod, name in seen.present, replica.get("phase", ""))
            code = _exit_code(pod, training.get(name)) if phase != "Creating" else None  # not the previous incarnation's
            made = seen.created.get(name, 0)
            out.append((name, phase, str(made - 1) if made else "-", "" if code is None else str(code), addresses.get(name, "")))
    return out


def title(kind: str, name: str, status: Mapping[str, Any], elapsed: float) -> str:
    """The table's first line: the job's phase, what it waits for, its restarts, time so far."""
    phase = status.get("phase", "Pending")
    restarts = status.get("backoffCount", 0)
    why = waiting_for(status)
    return f"{kind} {name}: {phase}{f' ({why})' if why else ''}, restarts {restarts}, {elapsed:.0f}s"


def waiting_for(status: Mapping[str, Any]) -> str | None:
    """What the runtime waits for, from the Reconciling condition (None when nothing particular)."""
    for c in status.get("conditions") or []:
        if c.get("type") == "Reconciling" and c.get("status") == "True":
            message = str(c.get("message") or "")
            return None if message.startswith("The job is ") else message or None
    return None


@dataclass
class Shown:
    """One job as the table shows it: its record's status as last seen, and when it had its outcome."""

    kind: str
    name: str
    training: Mapping[str, str | None]  # pod -> its training container
    addresses: Mapping[str, str]  # pod -> its loopback address
    status: dict[str, Any] = field(default_factory=dict)
    ended: float | None = None  # seconds into the run when its outcome was seen

    @property
    def outcome(self) -> str | None:
        """Succeeded or Failed, once the runtime has written it."""
        phase = self.status.get("phase")
        return phase if phase in OUTCOMES else None

    def saw(self, status: dict[str, Any], elapsed: float) -> None:
        """The record's status, `elapsed` seconds into the run."""
        self.status = status
        if self.outcome and self.ended is None:
            self.ended = elapsed

    def section(self, seen: Seen, elapsed: float, stopped: bool = False) -> Section:
        """Its title line (the time stops at its outcome; `stopped`: the run was stopped before
        it) and its pods' rows."""
        head = title(self.kind, self.name, self.status, self.ended if self.ended is not None else elapsed)
        return head + (" (stopped)" if stopped and not self.outcome else ""), rows(self.status, seen, self.training, self.addresses)

    def verdict(self) -> str:
        """How it ended: `<kind> <name> Succeeded in 9.1s`, or Failed with the runtime's reason and message."""
        ledger = Ledger.from_dict(self.status.get("runtime"))
        if self.outcome == "Succeeded":
            return f"{self.kind} {self.name} Succeeded in {self.ended or 0.0:.1f}s"
        why = f" ({ledger.reason})" if ledger.reason and ledger.reason != "Failed" else ""  # "Failed (Failed)" said nothing
        message = (ledger.message or "").removeprefix(f"{self.kind} {self.name} has failed: ")  # T9k's prefix: the line names the job already
        return f"{self.kind} {self.name} Failed{why} after {self.ended or 0.0:.1f}s: {message}"


def render(sections: Sequence[Section], width: int | None = None) -> list[str]:
    """The sections as text lines, each its title, the header and its rows, aligned across
    all of them; cut to `width` (a wrapped line would break the redraw)."""
    widths = [max(len(r[i]) for r in (HEADER, *(r for _, t in sections for r in t))) for i in range(len(HEADER))]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    lines = [line for head, table in sections for line in (head, *(fmt.format(*r).rstrip() for r in (HEADER, *table)))]
    return [line[: width - 1] if width and len(line) >= width else line for line in lines]


def fit(lines: list[str], height: int) -> list[str]:
    """The live table cut to the terminal's height, less the line the cursor rests on: a
    redraw moves the cursor up over the lines it drew, which stops at the screen's top, so a
    taller table (several jobs' sections) left a copy of its top in the scrollback at each
    redraw (rich's Live crops the same way).  The final table is printed whole."""
    room = max(height - 1, 1)
    if len(lines) <= room:
        return lines
    keep = room - 1
    return [*lines[:keep], f"… {len(lines) - keep} more lines: the final table shows every pod"]


def terminal_size(stream: TextIO) -> os.terminal_size:
    """The size of the terminal the table is drawn on (stderr's), not stdout's as
    shutil.get_terminal_size asks: with the logs piped (`run-local jobs/ | tee log`) that
    answered 80x24 whatever the terminal; COLUMNS and LINES still win, as there."""
    size = shutil.get_terminal_size()
    if "COLUMNS" in os.environ and "LINES" in os.environ:
        return size
    try:
        return os.get_terminal_size(stream.fileno())
    except (AttributeError, OSError, ValueError):  # not a terminal, or no file descriptor (a test's StringIO)
        return size


QUIET_NOTE, QUIET_NOTE_CAP = 60.0, 600.0  # a silent run says it still runs after this, doubling


def quiet_note_due(quiet: float, notes: int) -> bool:
    """Whether a run silent for `quiet` seconds, after `notes` such notes in a row, says so again
    (60 s, then 120, 240, at most every 10 min)."""
    return quiet >= min(QUIET_NOTE * 2 ** notes, QUIET_NOTE_CAP)


def quiet_note(sections: Sequence[Section], quiet: float) -> str:
    """What a silent run says in a log: each job's title line and its pods, and how to end it (a
    job waiting for a hung peer looked like a hung run-local)."""
    jobs = " | ".join(f"{head} ({'; '.join(change_line(r).removeprefix('flatjob: ') for r in table)})" for head, table in sections)
    return f"nothing new for {quiet:.0f}s: {jobs or 'no job status yet'}. Ctrl-C stops the run; --timeout SECONDS ends one by itself"


def event_note(etype: str, event: Obj, counts: dict[str, int]) -> str | None:
    """The note for a watch event on one of the runtime's Events, or None.  The runtime writes a
    repeat of a reason within 10 s as a patch of the Event's count and message (runtime/events.py,
    as client-go's recorder does), so a second pod's restart in one incident arrives as a
    MODIFIED Event: shown too, with how many occurrences it adds, or the table said a pod failed
    and came back with no word of why.  `counts`: each Event's count as last shown."""
    name = (event.get("metadata") or {}).get("name") or ""
    count = event.get("count") if isinstance(event.get("count"), int) else 1
    if etype == "DELETED" or (etype == "MODIFIED" and count <= counts.get(name, 0)):
        return None
    new = count - counts.get(name, 0) if etype == "MODIFIED" else count
    counts[name] = count
    message = str(event.get("message") or "").removeprefix(COMBINED)
    more = f" (and {new - 1} more like it)" if new > 1 else ""
    return f"{event.get('reason')}: {message}{more}"


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
        self.written = time.monotonic()  # when a line was last printed
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
            self.written = time.monotonic()
            self._draw()

    def note(self, text: str) -> None:
        """A message from run-local itself (events, the outcome)."""
        with self._lock:
            self._erase()
            self.err.write(f"flatjob: {text}\n")
            self.err.flush()
            self.written = time.monotonic()
            self._draw()

    def table(self, sections: Sequence[Section]) -> None:
        """Show the current table: redrawn in place on a terminal, else changed rows as lines."""
        with self._lock:
            if self.live:
                self._erase()
                size = terminal_size(self.err)
                self._lines = fit(render(sections, size.columns), size.lines)
                self._draw()
                return
            for row in (r for _, table in sections for r in table):
                if self._last.get(row[0]) != row:
                    self._last[row[0]] = row
                    self.err.write(change_line(row) + "\n")
                    self.written = time.monotonic()
            self.err.flush()

    def final(self, sections: Sequence[Section]) -> None:
        """The last table, printed once (also when not on a terminal)."""
        with self._lock:
            self._erase()
            self._lines = []
            self.err.write("\n".join(render(sections)) + "\n")
            self.err.flush()


class RuntimeLog(logging.Handler):
    """The runtime's warnings as notes, one line each and never a traceback (the runtime's
    Events, shown as notes too, say what it did)."""

    def __init__(self, screen: Screen):
        super().__init__(logging.WARNING)
        self.screen = screen

    def emit(self, record: logging.LogRecord) -> None:
        error = getattr(record, "error", None)
        self.screen.note(f"runtime: {record.getMessage()}" + (f" ({error})" if error else ""))
