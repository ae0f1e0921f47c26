"""Decide what failures and disruptions restart, and account for them in the ledger before
anything acts.

Scope (docs/architecture.md, "Restart scope"):
- pod:   replace only the failed pod, by its own replica type's policy (PyTorchTrainingJob,
         as T9k's manual restarts replicas; torchrun agents re-join; GenericJob replicas are
         independent);
- group: replace every pod of the attempt (DeepSpeed: worker-0's `deepspeed` cannot take a
         new member); one failure is one restart however many pods died;
- none:  never restart (ColossalAI: a restarted pod cannot re-join `colossalai run`).
Limits: each replica's own limit (GenericJob's restartPolicy.limit), else backoffLimit summed
over the job.  Counts: backoffCount counts restarts of the job, where failures of different
pods within INCIDENT_WINDOW of the first are one incident, counted once (a NCCL abort or a
lost switch takes every rank down within seconds; DeepSpeed's group restart already counts
them once); each type's restartCount sums its replicas' restarts, as T9k's status documents.
Back-off: per pod (a group: per gang), 10 s doubling to 5 min like the kubelet's
CrashLoopBackOff, lengthened by up to 10 % (a hash of the pod and its step, so decisions stay
pure), and started over once the pod had run for RESET_AFTER.  A failure is accounted for in
the cycle that sees it: its pod leaves `released` (so it is never counted twice) and is
deleted; its successor is created once the pod is gone (a group restart's once every pod of
the old attempt is gone) and released after its back-off.
Disruptions (outcomes.py) are replaced at once and never counted: a disrupted pod alone
(pod scope), or the whole gang as a new attempt (group and none scopes); a pod its node
refused at admission after the pod's (the gang's) back-off, since a node may refuse it again.
A failure that would not be restarted (so may decide the job) settles for SETTLE first, its
pod kept released: a kubelet's eviction reports the evicted pod only once its containers have
stopped, so a peer whose session broke can fail first, and the eviction seen within SETTLE
makes that failure the disruption's doing (outcomes.py) instead of the job's end.  A job of
one pod has no peer: its own disruption shows on the pod with its failure, so it never settles.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..model import CLOCK_SLACK, JobView, Ledger, PodState
from .exitcodes import retryable
from .outcomes import NODE_NOTICE, Disruption, Failure

BACKOFF_BASE = 10.0  # seconds before the first restart is released
BACKOFF_CAP = 300.0  # like kubelet's CrashLoopBackOff: 10 s doubling to 5 min
RESET_AFTER = 600.0  # a pod that ran this long starts its back-off over (the kubelet's reset)
INCIDENT_WINDOW = 30.0  # seconds: failures of other pods this soon after the first are one incident
INCIDENT_SPLIT = 120.0  # seconds: failures that ended this far apart are two incidents, seen together or not
JITTER = 0.1  # each back-off is lengthened by up to this fraction...
JITTER_BLOCKS = 8  # ...in this many steps, by the pod's block of the rank order
GANG = "*"  # the back-off key of a group restart
# Seconds a failure for good waits for a disruption that explains it: the node's notice and 5 s
# for the watch and a cycle (a kubelet's eviction shows once the pod stopped: within its grace).
SETTLE = NODE_NOTICE + 5.0


@dataclass(frozen=True)
class RestartDecision:
    """The ledger after accounting for failures, and what happened, for events and status."""

    ledger: Ledger
    restarted: tuple[str, ...] = ()  # pod names being replaced
    fatal: Failure | None = None  # a failure that cannot be restarted and ends the job
    exhausted: bool = False  # the fatal failure hit the restart limit (BackoffLimitExceeded)
    events: tuple[tuple[str, str, str], ...] = field(default=())  # (type, reason, message)
    wake_at: float | None = None  # when a settling failure is decided


def backoff(restarts: int) -> float:
    """Seconds to wait before releasing the replacement after the n-th restart in a row (the
    exponent is capped: past 2**1023 the float product overflows)."""
    return min(BACKOFF_BASE * 2 ** min(max(restarts - 1, 0), 64), BACKOFF_CAP)


def jittered(delay: float, job: JobView, name: str) -> float:
    """`delay` lengthened by up to JITTER, in JITTER_BLOCKS steps by the pod's block of the
    rank order: replacements of many pods that failed together come back in waves, not in one
    instant; the same cycle decides the same wait on every run (decisions stay pure); and the
    ledger, which groups pods by time as brace ranges, stays a few lines (a jitter per pod
    would write 5000 times for 5000 pods)."""
    spec = job.pod(name)
    block = (spec.rank * JITTER_BLOCKS) // max(len(job.pods), 1) if spec is not None else 0
    return delay * (1.0 + JITTER * block / JITTER_BLOCKS)


def _step(ledger: Ledger, key: str, started_at: float | None, now: float) -> int:
    """The back-off steps `key` has taken in a row, started over after a long enough run."""
    if started_at is not None and now - started_at >= RESET_AFTER:
        return 0
    return ledger.levels.get(key, 0)


def _delayed(job: JobView, ledger: Ledger, key: str, started_at: float | None, now: float) -> tuple[Ledger, float]:
    """The ledger with `key`'s next back-off step taken, and when its replacement may start."""
    step = _step(ledger, key, started_at, now) + 1
    return ledger.evolve(levels={**ledger.levels, key: step}), now + jittered(backoff(step), job, key)


def _incident(ledger: Ledger, f: Failure, now: float) -> tuple[Ledger, bool]:
    """The ledger with this failure in an incident, and whether it began a new one (counted).

    A failure joins the incident when it was seen, or ended (its container's finishedAt), within
    INCIDENT_WINDOW of when the incident was counted: a runtime that saw one of them late (it
    restarted, its watch reconnected, its cycle waited) must not split one incident in two.
    But where both programs' ends are known and lie more than INCIDENT_SPLIT apart, they are two
    incidents however they were seen: ranks that failed minutes apart during a runtime outage.
    (The ends are dated by each node's kubelet; INCIDENT_SPLIT is far beyond the skew NTP leaves
    between nodes, so skew never splits failures that came together.)"""
    at, first_ended = ledger.incident_at, ledger.incident_ended
    if at is not None and f.name not in ledger.incident:
        seen = any(abs(t - at) <= INCIDENT_WINDOW for t in ((now,) if f.finished_at is None else (now, f.finished_at)))
        apart = first_ended is not None and f.finished_at is not None and abs(f.finished_at - first_ended) > INCIDENT_SPLIT
        if seen and not apart:
            return ledger.evolve(incident=(*ledger.incident, f.name)), False
    return ledger.evolve(incident_at=now, incident_ended=f.finished_at, incident=(f.name,)), True


def _within_limits(job: JobView, ledger: Ledger, name: str, rtype: str, counted: bool = True) -> bool:
    """The replica's own limit ("the maximum restarts of this replica", T9k) and backoffLimit
    (`counted`: the restart would count against it; a failure joining an incident does not)."""
    rule = job.rules.get(rtype)
    if rule is not None and rule.limit is not None and ledger.replica_restarts.get(name, 0) >= rule.limit:
        return False
    return not counted or job.backoff_limit is None or ledger.backoff_count < job.backoff_limit


def _counted(job: JobView, ledger: Ledger, names: list[str]) -> Ledger:
    """One more restart for each of these replicas: per type (status), per replica (limits).

    Per-replica counts are kept only where a replica has its own limit, so a group restart
    of thousands of pods does not grow the ledger by a line per pod.
    """
    restarts = dict(ledger.restarts)
    mine = dict(ledger.replica_restarts)
    for name in names:
        spec = job.pod(name)
        if spec is None:
            continue
        restarts[spec.type] = restarts.get(spec.type, 0) + 1
        rule = job.rules.get(spec.type)
        if rule is not None and rule.limit is not None:
            mine[name] = mine.get(name, 0) + 1
    return ledger.evolve(restarts=restarts, replica_restarts=mine)


def replica_failure_message(f: Failure) -> str:
    """T9k's ReplicaFailure message: `Pod[<pod>] exited with error code N` (ucman genericjob.md)."""
    if f.exit_code is not None:
        return f"Pod[{f.name}] exited with error code {f.exit_code}"
    return f"Pod[{f.name}] {f.reason}"


def _replace_disrupted(job: JobView, ledger: Ledger, disruptions: tuple[Disruption, ...], now: float) -> RestartDecision:
    """Disrupted pods come back at once and uncounted: alone, or with their whole gang when
    the launcher cannot take a new member (group and none scopes: a new attempt)."""
    first = disruptions[0]
    led = ledger.evolve(disruptions=ledger.disruptions + len(disruptions))
    roots = {d.name for d in disruptions if d.peer is None}
    if roots:  # each keeps its own trouble; a peer's failure never starts one (a crash loop would never count)
        led = led.evolve(disrupted={**led.disrupted, **dict.fromkeys(roots, now)}, disrupted_end={k: v for k, v in led.disrupted_end.items() if k not in roots})
    if job.scope in ("group", "none"):
        gang = None
        if any(d.rejected for d in disruptions):  # refused by a node, maybe every time (a pinned nodeName): the gang's back-off
            led, gang = _delayed(job, led, GANG, None, now)
        led = led.evolve(attempt=led.attempt + 1, released=(), succeeded=(), failed=(), not_before={}, gang_not_before=gang)
        event = ("Warning", "Disrupted", f"{first.name} {first.reason}; replacing all {len(job.pods)} pods as attempt {led.attempt}{_after(gang, now)} (not a restart)")
        return RestartDecision(led, tuple(p.name for p in job.pods), events=(event,))
    gone = {d.name for d in disruptions}
    not_before = {k: v for k, v in led.not_before.items() if k not in gone}
    for d in disruptions:
        if d.rejected:
            led, not_before[d.name] = _delayed(job, led, d.name, None, now)
    led = led.evolve(not_before=not_before)
    events = tuple(("Warning", "Disrupted", f"{d.name} {d.reason}; replacing it{_after(not_before.get(d.name), now)} (not a restart)") for d in disruptions)
    late = next((d for d in disruptions if d.peer is None and d.late), None)
    if late is not None:
        led, taken = _taken_back(job, led, late.name, late.since, now)
        events += taken
    return RestartDecision(led, tuple(sorted(gone)), events=events)


def _after(until: float | None, now: float) -> str:
    return f" in {until - now:.0f} s" if until is not None and until > now else ""


def _taken_back(job: JobView, ledger: Ledger, root: str, since: float | None, now: float, notice: float = 0.0) -> tuple[Ledger, tuple[tuple[str, str, str], ...]]:
    """A disruption seen only after a restart was counted may have caused it: a kubelet reports
    its own eviction (node pressure, a graceful node shutdown) once the pod has stopped
    (mergePodStatus), and a lost node shows up to NODE_NOTICE after it went (`notice`). A
    restart incident counted within SETTLE before now, after the disruption began (`since`, at
    most `notice` before it was marked), that `root` was not part of (pod scope: the gang's
    restart counts every pod), was its doing (a lost node's: counted before it was marked). Its count is taken back (backoffCount,
    restartCount, the replicas' own counts and back-off steps), and its replacements wait no longer."""
    at = ledger.incident_at
    if at is None or not ledger.incident or not 0 <= now - at <= SETTLE or (job.scope == "pod" and root in ledger.incident):
        return ledger, ()
    if since is None or at < since - notice - 1:  # began after the restart was counted: not its cause (1 s: RFC 3339 seconds)
        return ledger, ()
    if notice and at > since + CLOCK_SLACK:  # counted after the node was marked: its peers were excused then (the runtime's clock against the node controller's)
        return ledger, ()
    members = [n for n in ledger.incident if job.pod(n) is not None]
    restarts = dict(ledger.restarts)
    mine = dict(ledger.replica_restarts)
    levels = dict(ledger.levels)
    for name in members:
        rtype = job.pod(name).type  # type: ignore[union-attr]
        restarts[rtype] = max(restarts.get(rtype, 0) - 1, 0)
        if name in mine:
            mine[name] = max(mine[name] - 1, 0)
    for key in [GANG] if job.scope == "group" else members:
        if levels.get(key, 0) > 0:
            levels[key] -= 1
    led = ledger.evolve(
        restarts=restarts, replica_restarts={k: v for k, v in mine.items() if v}, levels={k: v for k, v in levels.items() if v},
        backoff_count=max(ledger.backoff_count - 1, 0), incident_at=None, incident_ended=None, incident=(),
        not_before={k: v for k, v in ledger.not_before.items() if k not in members},
        gang_not_before=None if job.scope == "group" else ledger.gang_not_before,
    )
    who = f"all {len(members)} pods" if job.scope == "group" else ", ".join(members[:3]) + (f" and {len(members) - 3} more" if len(members) > 3 else "")
    return led, (("Normal", "RestartNotCounted", f"the restart of {who} {now - at:.0f} s before was {root}'s disruption's doing: not counted"),)


def explained(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, now: float) -> tuple[Ledger, tuple[tuple[str, str, str], ...]]:
    """Take back the last restart when a pod it did not restart is found to have been disrupted
    first: a pod whose node was marked lost (any scope), or, in group scope, an earlier attempt's
    pod whose eviction shows only now (the gang's restart already replaced it, so it is no
    disruption of this attempt).  Pod scope's late evictions are taken back as they are replaced."""
    if ledger.incident_at is None or not 0 <= now - ledger.incident_at <= SETTLE:
        return ledger, ()
    counted = ledger.attempt - 1 if job.scope == "group" else ledger.attempt  # the attempt whose pods ran when it was counted
    for pod in sorted(pods.values(), key=lambda p: p.name):
        if not pod.ours or pod.attempt != counted or (pod.started_at is not None and pod.started_at > ledger.incident_at + CLOCK_SLACK):  # a kubelet's clock against the runtime's
            continue  # a pod that started after the restart never caused it
        if pod.node_lost_since is not None:
            led, events = _taken_back(job, ledger, pod.name, pod.node_lost_since, now, NODE_NOTICE)
        elif job.scope == "group" and pod.disruption is not None:
            led, events = _taken_back(job, ledger, pod.name, pod.disrupted_since, now)
        else:
            continue
        if events:
            return led, events
    return ledger, ()


def settle_for(job: JobView, settle: float) -> float:
    """How long a failure for good waits for a disruption that explains it: not at all in a job
    of one pod, which has no peer (its own disruption shows on it with its failure), as T9k."""
    return 0.0 if len(job.pods) == 1 else settle


def decide_restart(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, failures: tuple[Failure, ...], now: float, disruptions: tuple[Disruption, ...] = (), settle: float = SETTLE) -> RestartDecision:
    """Count each failure (once: its pod leaves `released`), restart what the policy allows,
    replace what was disrupted, and name a fatal failure."""
    if not failures and not disruptions:
        return RestartDecision(ledger)
    ended = [f.name for f in failures] + [d.name for d in disruptions]
    led = ledger.evolve(released=ledger.without("released", ended))  # their settling entries go with `released` (decisions._run)
    replaced: tuple[str, ...] = ()
    events: list[tuple[str, str, str]] = []
    if disruptions:
        dd = _replace_disrupted(job, led, disruptions, now)
        if job.scope in ("group", "none"):
            return dd  # the whole gang is replaced: its failures now were the disruption's doing
        led, replaced, events = dd.ledger, dd.restarted, list(dd.events)
    if not failures:
        return RestartDecision(led, replaced, events=tuple(events))
    led = led.evolve(replica_failed=replica_failure_message(failures[0]))
    settle = settle_for(job, settle)
    restarted: list[str] = list(replaced)
    wake: float | None = None
    held = False
    if job.scope != "pod":  # a failure that ends the gang's job goes first: no restart may hide it
        failures = tuple(sorted(failures, key=lambda f: not _final(job, led, f)))
    for f in failures:
        if f.name in restarted:
            continue
        policy, wants = _wants(job, f)
        trial, new_incident = _incident(led, f, now) if job.scope == "pod" else (led, True)
        final = not wants or not _within_limits(job, trial, f.name, f.type, counted=new_incident)
        if final or (held and job.scope != "pod"):
            seen = ledger.settling.get(f.name, now)
            if now - seen < settle or not final:  # may decide the job: wait for a disruption that explains it (the gang's other failures with it)
                led = led.evolve(released=(*led.released, f.name), settling={**led.settling, f.name: seen})
                wake = seen + settle if wake is None else min(wake, seen + settle)
                held = True
                continue
            exhausted = wants  # the policy would restart it, but the limit is reached
            led = led.evolve(failed=(*led.failed, f.name))
            events.append(("Warning", "ReplicaFailed", f"{f.name} {f.reason}; not restarted ({'limit reached' if exhausted else f'restartPolicy {policy}'})"))
            if _is_fatal(job, f):
                return RestartDecision(led, tuple(restarted), f, exhausted, tuple(events))
            continue
        led = trial
        count = led.backoff_count + (1 if new_incident else 0)
        if job.scope == "group":
            names = sorted(set(ledger.released) | {f.name})
            led, until = _delayed(job, led, GANG, f.started_at, now)
            led = _counted(job, led, names).evolve(
                attempt=led.attempt + 1,
                backoff_count=count,
                incident_at=now,  # what it counted, should a disruption seen later explain it (explained)
                incident_ended=None,  # a gang's restart is one incident by itself (_incident is pod scope's)
                incident=tuple(names),
                released=(),
                succeeded=(),
                failed=(),
                not_before={},
                gang_not_before=until,
            )
            events.append(("Warning", "Restarting", f"{f.name} {f.reason}; restarting all {len(job.pods)} pods (restart {count})"))
            restarted.extend(names)
            break  # the whole group is being replaced: one restart, whatever else failed
        led, until = _delayed(job, led, f.name, f.started_at, now)
        led = _counted(job, led, [f.name]).evolve(backoff_count=count, not_before={**led.not_before, f.name: until})
        counted = f"restart {count}" if new_incident else f"restart {count}, with {led.incident[0]}: they failed together"
        events.append(("Warning", "Restarting", f"{f.name} {f.reason}; restarting it ({counted})"))
        restarted.append(f.name)
    return RestartDecision(led, tuple(restarted), None, False, tuple(events), wake)


def restart_completed(job: JobView, pods: Mapping[str, PodState], ledger: Ledger, names: tuple[str, ...], now: float) -> RestartDecision:
    """restartPolicy Always: a replica that succeeded runs again (the job has not finished)."""
    always = [
        n for n in names
        if (p := job.pod(n)) is not None and job.rules.get(p.type) and job.rules[p.type].policy == "Always" and _within_limits(job, ledger, n, p.type)
    ]
    if not always:  # a completed pod that may not run again simply stays succeeded
        return RestartDecision(ledger)
    completions = tuple(Failure(n, pods[n].uid, job.pod(n).type, 0, "completed", 0) for n in always if n in pods)  # type: ignore[union-attr]
    led = ledger.evolve(succeeded=tuple(n for n in ledger.succeeded if n not in always))
    decision = decide_restart(job, pods, led, completions, now)
    return RestartDecision(decision.ledger, decision.restarted, None, False, decision.events)


def _wants(job: JobView, f: Failure) -> tuple[str, bool]:
    """The failed pod's restartPolicy, and whether it asks for a restart of this failure."""
    rule = job.rules.get(f.type)
    policy = rule.policy if rule is not None else "Never"
    return policy, job.scope != "none" and retryable(policy, f.code)


def _final(job: JobView, ledger: Ledger, f: Failure) -> bool:
    """Whether a failure of a gang (group or none scope) would not be restarted."""
    return not _wants(job, f)[1] or not _within_limits(job, ledger, f.name, f.type)


def _is_fatal(job: JobView, f: Failure) -> bool:
    """A failure that cannot be restarted ends the job when the group needs every member,
    or when the failed pod is the one whose outcome decides the job."""
    if job.scope in ("group", "none"):
        return True
    first = job.pods[0].name if job.pods else None
    return job.decider == "first" and f.name == first
