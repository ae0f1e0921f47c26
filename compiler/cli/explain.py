"""`flatjob explain`: field documentation for the T9k kinds, offline."""

from __future__ import annotations

import sys

import click


@click.command("explain", short_help="Show what a job kind or field means and takes, offline.")
@click.argument("target", metavar="KIND[.FIELD.PATH]")
def explain_command(target: str) -> None:
    """Describe a job kind or one of its fields, like `kubectl explain`, without a cluster.

    KIND is GenericJob, PyTorchTrainingJob, DeepSpeedJob or ColossalAIJob (any case);
    fields are written as in YAML. Pod templates are Kubernetes objects: for those use
    `kubectl explain pod.spec`. Exit status 1 when the kind or field does not exist.

    \b
    Examples:
      flatjob explain DeepSpeedJob
      flatjob explain deepspeedjob.spec.config.run
      flatjob explain PyTorchTrainingJob.spec.torchrunConfig.procPerNode
    """
    from ..explain import ExplainError, explain

    try:
        sys.stdout.write(explain(target))
    except ExplainError as exc:
        click.echo(f"flatjob explain: {exc}", err=True)
        sys.exit(1)
