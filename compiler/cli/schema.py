"""`flatjob schema`: regenerate the JSON Schemas and CRDs under schemas/."""

from __future__ import annotations

import sys
from pathlib import Path

import click


def schema_files() -> dict[str, str]:
    """Every generated file under schemas/: job JSON Schemas, record CRDs, kustomize openapi."""
    from ..jsonschemas import job_schema_files
    from ..overlay.openapi import openapi_files

    files = dict(job_schema_files())
    files.update(openapi_files())  # schemas/kustomize/openapi.json for kustomize's openapi: field
    try:
        from ..render.crd import crd_files
    except ImportError:  # the record CRDs arrive with the compiler core
        return files
    files.update(crd_files())
    return files


@click.command("schema", short_help="Regenerate schemas/ (job JSON Schemas, record CRDs).")
@click.option("-o", "--out", "out", type=click.Path(file_okay=False), default="schemas", show_default=True, help="Folder to write into (the project's schemas/).")
@click.option("--check", is_flag=True, help="Write nothing; exit 1 and name each file that is missing or differs (for CI).")
def schema_command(out: str, check: bool) -> None:
    """Write the JSON Schemas of the four T9k kinds and the CRDs of flatjob's job records.

    \b
    OUT/jobs/<kind>.json   JSON Schema per kind, generated from the models (for editors)
    OUT/crds/*.yaml        CRDs of the in-cluster job records: kubectl apply -k OUT/crds
    OUT/kustomize/openapi.json   merge keys of the T9k kinds for kustomize's openapi: field

    Only files whose content changed are rewritten. Point an editor (the YAML language
    server of VS Code and others) at a kind's schema with a first line such as:

    \b
      # yaml-language-server: $schema=https://raw.githubusercontent.com/flatjob/flatjob/main/schemas/jobs/pytorchtrainingjob.json

    See docs/editors.md.
    """
    from ..outdir import LinkFound, NotAFile, SafeDir
    from ..output import write_files

    root = Path(out)
    files = schema_files()
    try:  # read and written as compile's output is: never through a link, no file read past its size
        with SafeDir(root) as d:
            present = d.open_root(create=False)
            stale = [rel for rel, text in sorted(files.items()) if not present or d.read(rel, limit=len(text.encode("utf-8"))) != text.encode("utf-8")]
        if not check:
            write_files(root, {rel: files[rel] for rel in stale})
    except (LinkFound, NotAFile) as exc:
        click.echo(f"{exc.where(root)}: error: is a symbolic link (or not a plain file or folder); flatjob never reads or writes through it [FJ702]", err=True)
        sys.exit(1)
    if check:
        for rel in stale:
            click.echo(f"{root / rel}: stale; run `flatjob schema -o {out}`", err=True)
        if not stale:  # as `compile --check` says it: silence read like nothing was checked
            click.echo(f"{root}: up to date ({len(files)} schema files)", err=True)
        sys.exit(1 if stale else 0)
    click.echo(f"{len(stale)} of {len(files)} schema files updated in {root}", err=True)
