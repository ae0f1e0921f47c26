"""The `flatjob` command: a thin click group whose subcommands load on first use.

Built-in commands live in this package.  Commands of other flatjob packages (the runtime's
`runtime` and `run-local`) arrive through the `flatjob.commands` entry-point group, so the
compiler never imports the runtime, and `flatjob lint` never pays for the kubernetes client.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from typing import Any

import click

from ..errors import RUNTIME_INSTALL
from ..interrupts import by_ctrl_c
from ..version import __version__

BUILTIN: dict[str, str] = {
    "lint": "flatjob.compiler.cli.lint:lint",
    "compile": "flatjob.compiler.cli.compile:compile_command",
    "diff": "flatjob.compiler.cli.compile:diff_command",
    "schema": "flatjob.compiler.cli.schema:schema_command",
    "explain": "flatjob.compiler.cli.explain:explain_command",
    "krm": "flatjob.compiler.cli.krm:krm_command",
    "init": "flatjob.compiler.cli.init:init_command",
}

EXIT_INTERNAL = 3


def _load(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _plugins() -> dict[str, Any]:
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group="flatjob.commands")}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand is used."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        names = {n for n in BUILTIN if _exists(BUILTIN[n])} | set(_plugins())
        return sorted(names)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        if cmd_name in BUILTIN and _exists(BUILTIN[cmd_name]):
            return _load(BUILTIN[cmd_name])
        ep = _plugins().get(cmd_name)
        if ep is None:
            return None
        try:
            return ep.load()
        except ImportError as exc:  # e.g. `pip install flatjob` without the [runtime] extra
            return _unavailable(cmd_name, exc)
        except AttributeError as exc:  # the entry point names a command its module lacks
            return _unavailable(cmd_name, exc)

    def resolve_command(self, ctx: click.Context, args: list[str]) -> tuple[str | None, click.Command | None, list[str]]:
        """click's, with a "did you mean" for a misspelt command, as click gives for options."""
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as exc:
            from ..validate.suggest import closest

            near = closest(args[0], self.list_commands(ctx)) if args else None
            if near is not None and near != args[0]:
                exc.message += f" Did you mean {near!r}?"
            raise


def _exists(target: str) -> bool:
    module = target.partition(":")[0]
    return importlib.util.find_spec(module) is not None


def _unavailable(name: str, exc: Exception) -> click.Command:
    """A stand-in for a plugin command that cannot load, so `flatjob --help` still works."""
    if isinstance(exc, ImportError):
        why = f"`flatjob {name}` needs extra packages: {exc}. Install them with: {RUNTIME_INSTALL}"
    else:
        why = f"`flatjob {name}` cannot load ({exc}); reinstall flatjob"

    @click.command(name, help=f"(unavailable: {exc})", context_settings={"ignore_unknown_options": True})
    @click.argument("args", nargs=-1, type=click.UNPROCESSED)
    def command(args: tuple[str, ...]) -> None:
        raise click.UsageError(why)

    return command


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.version_option(__version__, "-V", "--version", prog_name="flatjob")
def cli() -> None:
    """Compile TensorStack T9k training jobs into plain, reviewable Kubernetes manifests.

    \b
    Typical use:
      flatjob lint jobs/                  check specs; errors point at the exact line
      flatjob compile jobs/ -o rendered/  write manifests for Argo CD or Flux to sync
      flatjob compile jobs/ -o rendered/ --check   fail in CI when rendered/ is stale
      flatjob explain PyTorchTrainingJob.spec.torchrunConfig
      flatjob run-local job.yaml          smoke-test a job with local processes (runtime extra)
      flatjob init --gitops argocd repo/  scaffold a GitOps repository (or --gitops flux)

    Docs: docs/ in the repository; every diagnostic code is listed in docs/diagnostics.md.
    """


def main(argv: list[str] | None = None) -> None:
    """Console-script entry point: no traceback ever reaches the user unless asked for."""
    guarded(cli, argv, "flatjob")


def guarded(command: click.Command, argv: list[str] | None, prog_name: str) -> None:
    """Run a click command; a bug in flatjob is one line and exit 3, never a traceback; Ctrl-C
    is exit 130 whenever it comes (click's standalone mode made one during a command's imports
    "Aborted!" and exit 1: `flatjob run-local` said the job failed)."""
    try:
        code = command.main(args=argv, prog_name=prog_name, standalone_mode=False)
    except SystemExit:
        raise
    except (KeyboardInterrupt, click.Abort):
        click.echo("interrupted", err=True)
        sys.exit(130)
    except click.ClickException as exc:  # usage errors and the like, as standalone mode shows them
        exc.show()
        sys.exit(exc.exit_code)
    except Exception as exc:  # a bug in flatjob: say so plainly, keep the traceback opt-in
        if by_ctrl_c(exc):  # an exception a Ctrl-C caused is a Ctrl-C (interrupts.py)
            click.echo("interrupted", err=True)
            sys.exit(130)
        if os.environ.get("FLATJOB_DEBUG"):
            raise
        click.echo(f"flatjob: internal error: {type(exc).__name__}: {exc}", err=True)
        click.echo("This is a bug in flatjob; rerun with FLATJOB_DEBUG=1 for the traceback and report it.", err=True)
        sys.exit(EXIT_INTERNAL)
    sys.exit(code if isinstance(code, int) else 0)


def entry() -> None:
    """The `flatjob` console script: main(), then exit without tearing the interpreter down.

    Freeing every object of a large compile at interpreter exit takes tens of milliseconds and
    serves nothing once output is flushed and files are closed (mypy's hard_exit does the same).
    """
    code: int | str | None = 0
    try:
        main()
    except SystemExit as exc:
        code = exc.code
    if isinstance(code, str):
        sys.stderr.write(code + "\n")
        code = 1
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
