"""`flatjob init`: scaffold a GitOps repository for T9k jobs (jobs, overlays, rendered, CI)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import click

GITOPS_CHOICES = ("argocd", "flux", "none")


def _origin(folder: Path) -> str | None:
    """The folder's git remote `origin`, when it is a clone."""
    try:
        out = subprocess.run(["git", "-C", str(folder), "remote", "get-url", "origin"], capture_output=True, text=True, timeout=10, check=False)
    except (OSError, subprocess.SubprocessError):
        return None
    return (out.stdout.strip() or None) if out.returncode == 0 else None


@click.command("init", short_help="Scaffold a repo: jobs, overlays, rendered/, CI, GitOps.")
@click.argument("folder", default=".", type=click.Path(file_okay=False))
@click.option("--gitops", type=click.Choice(GITOPS_CHOICES), default="argocd", show_default=True, help="Which GitOps tool's objects to write under gitops/.")
@click.option("--repo-url", default=None, help="The repository's URL for the GitOps objects (default: git remote origin, else REPO_URL to fill in).")
@click.option("--force", is_flag=True, help="Overwrite files that already exist.")
def init_command(folder: str, gitops: str, repo_url: str | None, force: bool) -> None:
    """Write a working repository into FOLDER (default: the current folder).

    \b
    jobs/hello-ddp.yaml            an example job to copy
    overlays/dev, overlays/prod    per-environment changes (namespace, replicas, images)
    rendered/dev, rendered/prod    compiled here; commit them, Argo CD or Flux syncs them
    .github/workflows/flatjob.yml  CI: lint, compile --check, the rendered diff on PRs
    gitops/                        the Argo CD Applications or Flux objects
    README.md                      how to change a job and connect the cluster

    Existing files are never overwritten without --force.

    \b
    Then:
      git init -b main && git add -A && git commit -m "flatjob init"
      git remote add origin URL && git push -u origin main
    """
    from ..journal import session
    from ..options import CompileOptions
    from ..overlay import load_overlays
    from ..pipeline import compile_paths
    from ..report import format_text
    from ..scaffold import ENVIRONMENTS, REPO_PLACEHOLDER, init_files

    root = Path(folder)
    url = repo_url or _origin(root) or REPO_PLACEHOLDER
    files = init_files(gitops, url)
    existing = sorted(rel for rel in files if (root / rel).exists())
    if existing and not force:
        for rel in existing:
            click.echo(f"{root / rel}: already exists", err=True)
        click.echo("flatjob init: refusing to overwrite existing files; nothing was written. Use --force to overwrite them.", err=True)
        sys.exit(1)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for env in ENVIRONMENTS:
        result = compile_paths([str(root / "jobs")], CompileOptions(), load_overlays([root / "overlays" / env]))
        if result.failed:  # pragma: no cover - the scaffold's own job compiles (tests/test_init.py)
            sys.stderr.write(format_text(result.diagnostics))
            sys.exit(1)
        out = root / "rendered" / env
        with session(out, write=True) as s:
            changes = s.plan(result.tree(out))
            if (changes.conflicts and not force) or changes.links or changes.blocked:
                click.echo(f"{out}: holds files flatjob did not write, or links; nothing was rendered there. Use --force for files.", err=True)
                sys.exit(1)
            s.apply(changes)
    click.echo(f"{root}: wrote {len(files)} files and rendered/{{{','.join(ENVIRONMENTS)}}}; see README.md", err=True)
    if url == REPO_PLACEHOLDER:
        click.echo(f"Replace {REPO_PLACEHOLDER} under gitops/ with the repository's URL (or rerun with --repo-url --force).", err=True)
