"""`flatjob lint`: check job specs and report every finding at its line."""

from __future__ import annotations

import sys

import click

from ..lint import lint_paths
from ..report import FORMATS, format_json, format_text, summary_line, use_color


@click.command("lint")
@click.argument("paths", nargs=-1, required=True, type=click.Path(exists=True, dir_okay=True, allow_dash=False))
@click.option("-f", "--format", "fmt", type=click.Choice(sorted(FORMATS)), default="text", show_default=True, help="Output format; github annotates PR lines, sarif feeds code scanning.")
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary line.")
def lint(paths: tuple[str, ...], fmt: str, quiet: bool) -> None:
    """Check T9k job specs: schema, cross-field rules and pod templates (Kubernetes 1.32, strict).

    PATHS are files or folders. Folders are searched for *.yaml/*.yml files and every
    document with apiVersion batch.tensorstack.dev/... is checked; other YAML is skipped.

    \b
    Exit status: 0 no errors (warnings allowed), 1 errors found, 2 usage error.
    """
    result = lint_paths(paths)
    if fmt == "text":
        sys.stdout.write(format_text(result.diagnostics, color=use_color(sys.stdout.isatty())))
    elif fmt == "json":
        sys.stdout.write(format_json(result.diagnostics, result.jobs, result.files))
    else:
        sys.stdout.write(FORMATS[fmt](result.diagnostics))
    if not quiet and fmt in ("text", "github"):
        click.echo(summary_line(result.diagnostics, result.jobs, result.files), err=True)
    sys.exit(1 if result.failed else 0)
