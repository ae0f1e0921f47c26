"""How much input flatjob reads before it stops with FJ105: sizes, YAML nodes, nesting, pods.

Every input is a stranger's pull request, and a few hundred bytes of YAML can ask for
gigabytes (aliases of aliases, `<<` merges of merges, a `<<` list of a million aliases) or
for a nesting deep enough to crash a recursive parser; a million empty `---` documents ask
for a million objects.  Every node a merge brings in counts, built or overridden.  The
limits are counted while the YAML is read, before the objects it asks for are built, and are
far above any real job: the 92 real T9k specs hold at most
~400 nodes and 13 levels each, and the 50 000-pod benchmark ~30 000 nodes in all.  A replica
count is input too: `replicas: 1000000000` would render a billion pods, so pods are capped
per job and per run (the 50 000-pod benchmark is the run's cap).

What a run renders is bounded twice, before anything is rendered (compiler/budget.py, FJ105):
by run_render_bytes, and by what the run read: render_floor_bytes plus render_per_input_byte
times the bytes of its job files.  Compile, `--check`, `diff` and the Argo CD plugin hold
their output whole (a diff of it too), at 3-5 times its size, so a 17 KB file asking for
157 MB (a 16 000-byte env value times 9 000 workers) took 740 MiB; with the bound it may
ask for ~80 MiB.  The floor holds any one job of job_pods pods at ~3.5 KB a pod, twice
what the examples take (each at 10 000 pods renders 27-31 MiB of YAML), and the 50 000-pod
benchmark (500 files of 1.1 KB, 124 MiB) reads enough for run_render_bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Limits:
    """The reading limits of one run (tests shrink them; the defaults are the product's)."""

    file_bytes: int = 4 * MIB  # one input file
    run_bytes: int = 64 * MIB  # every input file of a run together
    file_nodes: int = 50_000  # YAML nodes built from one file, each alias or merge expansion counted again
    # The same over every file of a run.  Reading costs 2.5-10 us a node and checking a job about
    # as much again, so this is what bounds a refused run's CPU (the 50 000-pod benchmark reads
    # ~30 000 nodes): at 1 000 000, twenty files of 50 000 nodes took lint 5 s to refuse, and 25
    # files of 45 000 (11 MB, each file under its limit) 21 s and 383 MiB (hx34).
    run_nodes: int = 150_000
    depth: int = 100  # nesting of collections in one document (and of `<<` merges of merges)
    file_documents: int = 1_000  # YAML documents in one file (an empty `---` builds little, but costs ~100x a node)
    file_directives: int = 100  # `%TAG`/`%YAML` lines in one file (libyaml checks each tag handle against every earlier one: 50 000 took 3.5 s)
    run_documents: int = 10_000  # the same over every file of a run (the 50 000-pod benchmark: 500)
    run_files: int = 10_000  # files a run opens (an empty one holds no document but costs ~45 us: 100 000 took 4.5 s)
    job_pods: int = 10_000  # pods one job renders (replicas, or elastic maxReplicas)
    # Replica types of one job (a GenericJob's replicaSpecs): each is a task in the status, whose
    # size must stay far under etcd's 1.5 MiB (runtime/decisions/status.py lists each type's first
    # replica); real jobs have one to five.
    job_types: int = 100
    # Pods all the jobs of a run render together: the 50 000-pod benchmark, 100x a real sweep.
    # Each costs ~0.1 ms to lint and to compile, so a few KB asking for more is refused when
    # the jobs are read, before any is planned (ten 1 KB jobs of 10 000 pods took 12 s to refuse
    # when the cap was 100 000).
    run_pods: int = 50_000
    # What a run renders, as JSON (compiler/budget.py), checked before rendering.  The 50 000-pod
    # benchmark renders 124 MiB (140 MiB of YAML) and peaks at ~190 MiB of memory: compile holds
    # its output whole.
    run_render_bytes: int = 160 * MIB
    # ...and at most this plus render_per_input_byte per byte of the run's job files: what a
    # small file may ask for (see above).
    render_floor_bytes: int = 64 * MIB
    render_per_input_byte: int = 1000
    # One object as JSON: the API server's ConfigMap and Secret data limit, and two thirds of
    # etcd's default request limit (1.5 MiB), which must hold the object with its metadata.
    object_bytes: int = 1 * MIB
    # What applying an overlay's patches to the jobs they select may cost in all, in YAML values
    # (compiler/overlay/apply.py: each value a patch adds counts 4, each check of a target 2).
    run_patch_values: int = 1_000_000


DEFAULT = Limits()

# What a run refused at one of its own limits (not a file's) tells the user to do.
RUN_SPLIT_HINT = "no later file of this run is read: lint or compile fewer folders in one run, e.g. one per namespace, Argo CD Application or Flux Kustomization"


class Budget:
    """What a run may still read: bytes and nodes left, shared by every file it parses.

    `spent` says a limit of the run (not of one file) was crossed: the run is refused whole,
    and nothing it read is checked or compiled (loader.load_paths), since checking what was
    read costs as much again as reading it."""

    __slots__ = ("bytes", "documents", "files", "limits", "nodes", "spent")

    def __init__(self, limits: Limits = DEFAULT) -> None:
        self.limits = limits
        self.bytes = limits.run_bytes
        self.nodes = limits.run_nodes
        self.documents = limits.run_documents
        self.files = limits.run_files
        self.spent = False
