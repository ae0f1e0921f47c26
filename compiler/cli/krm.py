"""`flatjob krm`: run as a KRM function (ResourceList on stdin, ResourceList on stdout)."""

from __future__ import annotations

import sys

import click


@click.command("krm", short_help="KRM function for kustomize and kpt (ResourceList in, out).")
def krm_command() -> None:
    """Read a config.kubernetes.io/v1 ResourceList on stdin and write it to stdout with every
    T9k job replaced by its rendered manifests; other items pass through unchanged.

    Problems are reported in results[] (with the job, the field path and the item's file);
    any error exits 1. Options go in a ConfigMap functionConfig's data: namespace,
    clusterDomain, scheduler, kueueQueue, runtimeImage (fluxAnnotations is still accepted
    and ignored: git holds PodTemplates, never pods).

    \b
    kustomize (exec functions need the standalone kustomize binary):
      kustomize build --enable-alpha-plugins --enable-exec DIR
    kpt:
      kpt fn eval jobs/ --exec "flatjob krm" --output unwrap
      kpt fn source jobs/ | flatjob krm | kpt fn sink rendered/

    See docs/gitops.md.
    """
    from ..krm import run
    from ..limits import DEFAULT

    text, status = run(sys.stdin.buffer.read(DEFAULT.file_bytes + 1))
    sys.stdout.write(text)
    sys.exit(status)
