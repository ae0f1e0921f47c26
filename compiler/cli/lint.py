"""`flatjob lint`: check job specs and report every finding at its line."""

from __future__ import annotations

import sys

import click

from .paths import ExistingPath

# The names of report.FORMATS, kept here so `flatjob --help` does not import the validator
# (tests/test_cli_help.py keeps the two in step).
FORMAT_NAMES = ("github", "json", "sarif", "text")


@click.command("lint", short_help="Check job specs; report each problem at its file:line:col.")
@click.argument(
    "paths", nargs=-1, required=True, type=ExistingPath(dir_okay=True, allow_dash=False)
)
@click.option(
    "-f",
    "--format",
    "fmt",
    type=click.Choice(FORMAT_NAMES),
    default="text",
    show_default=True,
    help="text: for people; json: for scripts; github: workflow commands that annotate the PR "
    "lines; sarif: for GitHub code scanning.",
)
@click.option("-q", "--quiet", is_flag=True, help="Print findings only, no summary line on stderr.")
@click.option("-n", "--namespace", default=None, help="Namespace for jobs that set none, as compile's -n (two jobs that land in one namespace must differ; default: none).")
@click.option("--allow-empty", is_flag=True, help="Pass a folder that holds no job (a repository whose last job was removed), as compile's --allow-empty.")
def lint(paths: tuple[str, ...], fmt: str, quiet: bool, namespace: str | None, allow_empty: bool) -> None:
    """Check T9k job specs: fields, cross-field rules and pod templates (Kubernetes 1.32, strict).

    PATHS are files or folders. Folders are searched for *.yaml/*.yml files and every
    document with apiVersion batch.tensorstack.dev/... is checked; other YAML is skipped.
    A file named explicitly must hold a job, and a folder at least one (--allow-empty
    lets a folder hold none).

    Each finding is `path:line:col: error|warning: message [CODE]`, followed by the line
    and a caret, with a "did you mean" where a near name exists. docs/diagnostics.md
    explains every code; `flatjob explain KIND.field` shows what a field takes.

    \b
    Examples:
      flatjob lint jobs/
      flatjob lint --format github jobs/     # in GitHub Actions: annotations on the PR
      flatjob lint --format sarif jobs/ > flatjob.sarif

    \b
    Exit status: 0 no errors (warnings allowed), 1 errors found, 2 usage error.
    """
    from ..lint import lint_paths
    from ..options import CompileOptions
    from ..report import FORMATS, format_json, format_text, summary_line, use_color

    why = CompileOptions(namespace=namespace).problems().get("namespace")
    if why:
        raise click.BadParameter(f"{namespace!r} {why}", param_hint="--namespace")
    result = lint_paths(paths, namespace, allow_empty)
    if fmt == "text":
        sys.stdout.write(format_text(result.diagnostics, color=use_color(sys.stdout.isatty())))
    elif fmt == "json":
        sys.stdout.write(format_json(result.diagnostics, result.jobs, result.files))
    else:
        sys.stdout.write(FORMATS[fmt](result.diagnostics))
    if not quiet and fmt in ("text", "github"):
        sys.stdout.flush()  # findings first, then the summary, also when both go to one pipe
        click.echo(summary_line(result.diagnostics, result.jobs, result.files), err=True)
    sys.exit(1 if result.failed else 0)
