"""A few Prometheus metrics, exposed in the text format (no client library needed for five series)."""

from __future__ import annotations

import threading
from collections import defaultdict
from dataclasses import dataclass, field

BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0)

HELP = {
    "flatjob_restarts_total": ("counter", "Pod restarts performed by the runtime, by replica type."),
    "flatjob_releases_total": ("counter", "Pods released (scheduling gate removed)."),
    "flatjob_api_errors_total": ("counter", "Kubernetes API errors, by operation and status (0: unreachable)."),
    "flatjob_loop_errors_total": ("counter", "Unexpected failures of a reconcile cycle, contained and retried."),
    "flatjob_status_writes_total": ("counter", "Status writes of the job record."),
    "flatjob_reconcile_seconds": ("histogram", "Time spent in one reconcile cycle."),
    "flatjob_cycle_status_writes_max": ("gauge", "Most status writes made in one reconcile cycle (1 by design)."),
    "flatjob_lease_waiting_seconds": ("gauge", "Seconds this runtime has waited for the Lease others hold (0 while it holds it or may take it)."),
}


@dataclass
class Metrics:
    """Counters and one histogram, thread-safe, rendered on /metrics."""

    counters: dict[tuple[str, tuple[tuple[str, str], ...]], float] = field(default_factory=lambda: defaultdict(float))
    buckets: list[int] = field(default_factory=lambda: [0] * len(BUCKETS))
    hist_sum: float = 0.0
    hist_count: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def inc(self, name: str, amount: float = 1.0, **labels: str) -> None:
        with self.lock:
            self.counters[(name, tuple(sorted(labels.items())))] += amount

    def maximum(self, name: str, value: float) -> None:
        """A gauge that keeps the largest value seen."""
        with self.lock:
            key = (name, ())
            self.counters[key] = max(self.counters.get(key, value), value)

    def set(self, name: str, value: float) -> None:
        with self.lock:
            self.counters[(name, ())] = value

    def observe(self, seconds: float) -> None:
        with self.lock:
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    self.buckets[i] += 1
            self.hist_sum += seconds
            self.hist_count += 1

    def render(self) -> str:
        """The Prometheus text exposition format."""
        lines: list[str] = []
        with self.lock:
            for name, (kind, text) in HELP.items():
                lines += [f"# HELP {name} {text}", f"# TYPE {name} {kind}"]
                if kind == "histogram":
                    for bound, count in zip(BUCKETS, self.buckets, strict=True):
                        lines.append(f'{name}_bucket{{le="{bound}"}} {count}')
                    lines += [f'{name}_bucket{{le="+Inf"}} {self.hist_count}', f"{name}_sum {self.hist_sum}", f"{name}_count {self.hist_count}"]
                    continue
                for (metric, labels), value in sorted(self.counters.items()):
                    if metric == name:
                        rendered = ",".join(f'{k}="{v}"' for k, v in labels)
                        lines.append(f"{name}{{{rendered}}} {value:g}" if rendered else f"{name} {value:g}")
        return "\n".join(lines) + "\n"
