"""`flatjob init`: scaffold a GitOps repository for T9k jobs (jobs, overlays, rendered, CI)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterable
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


def without_credentials(url: str) -> str:
    """The URL without a password, nor an http(s) user (a token is often given as one): it is
    written into files meant to be committed (review of round 13: a clone made with
    https://user:TOKEN@host put the token in git).  ssh://git@host and git@host:path keep
    their user, which names no secret."""
    from urllib.parse import urlsplit, urlunsplit

    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.scheme or "@" not in parts.netloc:
        return url
    user, _, host = parts.netloc.rpartition("@")
    keep = "" if parts.scheme.lower() in ("http", "https") else user.partition(":")[0]
    return urlunsplit(parts._replace(netloc=f"{keep}@{host}" if keep else host))


def _link_on_the_way(root: Path, rel: str) -> str | None:
    """The first symbolic link on the way to root/rel (itself included), relative to root."""
    parts = Path(rel).parts
    for depth in range(1, len(parts) + 1):
        if (root / Path(*parts[:depth])).is_symlink():
            return str(Path(*parts[:depth]))
    return None


def _rendered(files: dict[str, str], root: Path) -> dict[str, dict[str, str]]:
    """Each environment's rendered tree, compiled from the scaffold's files in a folder of its
    own, so nothing is written before every environment is known to take its tree."""
    import tempfile

    from ..options import CompileOptions
    from ..overlay import load_overlays
    from ..pipeline import compile_paths
    from ..report import format_text
    from ..scaffold import ENVIRONMENTS

    trees = {}
    with tempfile.TemporaryDirectory(prefix="flatjob-init-") as tmp:
        for rel, text in files.items():
            (Path(tmp) / rel).parent.mkdir(parents=True, exist_ok=True)
            (Path(tmp) / rel).write_text(text, encoding="utf-8")
        for env in ENVIRONMENTS:
            result = compile_paths([str(Path(tmp) / "jobs")], CompileOptions(), load_overlays([Path(tmp) / "overlays" / env]))
            if result.failed:  # pragma: no cover - the scaffold's own job compiles (tests/test_init.py)
                sys.stderr.write(format_text(result.diagnostics))
                sys.exit(1)
            trees[env] = result.tree(Path(tmp) / "rendered" / env)  # inputs named as from root/rendered/<env>
    return trees


def _jobs_of_its_own(root: Path, files: dict[str, str]) -> bool:
    """Whether root/jobs already holds YAML besides the scaffold's: rendered/ is compiled from the
    scaffold alone, so the repository's own jobs are missing from it (CI's --check fails)."""
    from ..reading import Input, find_inputs

    jobs = root / "jobs"
    if not jobs.is_dir():
        return False
    ours = {root / rel for rel in files}
    return any(isinstance(found, Input) and found.path not in ours for found in find_inputs([str(jobs)]))


def _url_note(gitops: str, url: str) -> str | None:
    """What the user must still do about the repository URL written into gitops/."""
    from ..flux import FLUX_URL, flux_url
    from ..scaffold import REPO_PLACEHOLDER

    if url == REPO_PLACEHOLDER:
        return f"Replace {REPO_PLACEHOLDER} under gitops/ with the repository's URL (or rerun with --repo-url --force)."
    if gitops == "flux" and not FLUX_URL.fullmatch(flux_url(url)):
        return f"Flux's GitRepository takes only http(s):// and ssh:// URLs, not {url}: edit gitops/flux/gitrepository.yaml (or rerun with --repo-url --force)."
    return None


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
    from ..outdir import LinkFound
    from ..scaffold import REPO_PLACEHOLDER, init_files

    root = Path(folder)
    given = repo_url or _origin(root)
    url = without_credentials(given) if given else REPO_PLACEHOLDER
    if given and url != given:
        click.echo(f"flatjob init: the repository URL's credentials are left out of the files ({url})", err=True)
    files = init_files(gitops, url)
    linked = sorted({link for rel in files if (link := _link_on_the_way(root, rel)) is not None})
    if linked:  # never written through, even with --force: a link may lead out of the folder
        for rel in linked:
            click.echo(f"{root / rel}: is a symbolic link; flatjob init writes no file through one", err=True)
        click.echo("flatjob init: refusing to write through links; nothing was written. Remove them first.", err=True)
        sys.exit(1)
    existing = sorted(rel for rel in files if os.path.lexists(root / rel))
    if existing and not force:
        for rel in existing:
            click.echo(f"{root / rel}: already exists", err=True)
        click.echo("flatjob init: refusing to overwrite existing files; nothing was written. Use --force to overwrite them.", err=True)
        sys.exit(1)
    trees = _rendered(files, root)
    own_jobs = _jobs_of_its_own(root, files)
    for env, tree in trees.items():  # every environment checked before anything is written
        try:
            with session(root / "rendered" / env, write=False) as s:
                changes = s.plan(tree)
        except LinkFound:
            changes = None
        if changes is None or (changes.conflicts and not force) or changes.links or changes.blocked:
            click.echo(f"{root / 'rendered' / env}: holds files flatjob did not write, or links; nothing was written. Use --force for files.", err=True)
            sys.exit(1)
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    for env, tree in trees.items():
        with session(root / "rendered" / env, write=True) as s:
            s.apply(s.plan(tree))
    click.echo(f"{root}: wrote {len(files)} files and rendered/{{{','.join(trees)}}}; see README.md", err=True)
    for note in _notes(root, trees, own_jobs, gitops, url):
        click.echo(note, err=True)


def _notes(root: Path, envs: Iterable[str], own_jobs: bool, gitops: str, url: str) -> list[str]:
    """What is left to do: compile the repository's own jobs when jobs/ held some (a newcomer
    adopting flatjob in a repository of jobs: rendered/ holds the example alone, and CI's
    --check failed at once), and fill in the repository URL."""
    notes = []
    if own_jobs:
        jobs = root / "jobs"
        notes.append(f"{jobs} held job specs already; rendered/ holds the example alone. Compile them before you commit:")
        notes += [f"  flatjob compile {jobs} --overlay {root / 'overlays' / env} -o {root / 'rendered' / env}" for env in envs]
    url_note = _url_note(gitops, url)
    return [*notes, url_note] if url_note else notes
