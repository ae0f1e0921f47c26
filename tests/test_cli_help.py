"""`flatjob --help` and every subcommand's `--help` work and say what the command does.

Covers: the group help lists every command with a summary; each built-in
command's help has a usage line, a description and its options; plugin commands (the
runtime's) load, so their help is real rather than an "unavailable" stand-in; the lint
command's format list matches the report formats; --version.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from lintkit import run_cli

from flatjob.compiler.cli import BUILTIN, LazyGroup, cli
from flatjob.compiler.cli.lint import FORMAT_NAMES
from flatjob.compiler.report import FORMATS
from flatjob.compiler.version import __version__

COMMANDS = LazyGroup.list_commands(cli, None)  # type: ignore[arg-type]
BUILTINS = sorted(name for name in COMMANDS if name in BUILTIN)

# What each built-in's help must mention, beyond its usage line.
MUST_SAY = {
    "lint": ["PATHS are files or folders", "--format", "Exit status: 0", "docs/diagnostics.md"],
    "compile": ["--out", "--check", "Exit status"],
    "diff": ["unified diff", "--out", "Exit status"],
    "schema": ["jobs/<kind>.json", "yaml-language-server", "--check"],
    "explain": ["kubectl explain", "Examples:"],
    "krm": ["ResourceList"],
}


def test_group_help_lists_every_command() -> None:
    result = run_cli("--help")
    assert result.exit_code == 0
    assert result.stdout.startswith("Usage: flatjob [OPTIONS] COMMAND [ARGS]...\n")
    assert "flatjob lint jobs/" in result.stdout
    listed = result.stdout.split("Commands:\n", 1)[1]
    for name in COMMANDS:
        assert f"\n  {name} " in "\n" + listed, name


def test_every_command_has_a_summary() -> None:
    listed = run_cli("--help").stdout.split("Commands:\n", 1)[1]
    summaries = dict(
        line.split(None, 1)
        for line in listed.splitlines()
        if line.startswith("  ") and not line.startswith("   ")
    )
    assert sorted(summaries) == sorted(COMMANDS)
    assert all(len(text.split()) >= 3 for text in summaries.values()), summaries


@pytest.mark.parametrize("name", BUILTINS)
def test_builtin_help(name: str) -> None:
    result = run_cli(name, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: flatjob {name} ")
    description = result.stdout.split("\n\n", 2)[1]
    assert len(description.split()) >= 6, description
    assert "-h, --help" in result.stdout
    for phrase in MUST_SAY.get(name, []):
        assert phrase in result.stdout, phrase


@pytest.mark.parametrize("name", sorted(set(COMMANDS) - set(BUILTIN)))
def test_plugin_help_is_real(name: str) -> None:
    result = run_cli(name, "--help")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith(f"Usage: flatjob {name} ")
    assert "(unavailable" not in result.stdout, (
        f"the {name!r} entry point does not load: {result.stdout}"
    )


@pytest.mark.parametrize(
    ("args", "meant"),
    [
        (("lint", "job/"), "jobs/"),
        (("compile", "jbs", "-o", "out"), "jobs"),
        (("diff", "jobs/traim.yaml", "-o", "out"), "jobs/train.yaml"),
        (("compile", "jobs", "-o", "out", "--overlay", "overlays/prd"), "overlays/prod"),
        (("run-local", "jobs/trian.yaml"), "jobs/train.yaml"),
    ],
)
def test_a_misspelt_path_says_which_was_meant(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: tuple[str, ...], meant: str) -> None:
    """`flatjob lint job/` beside jobs/ said only "does not exist"."""
    (tmp_path / "jobs").mkdir()
    (tmp_path / "jobs" / "train.yaml").write_text("kind: GenericJob\n")
    (tmp_path / "overlays" / "prod").mkdir(parents=True)
    monkeypatch.chdir(tmp_path)
    result = run_cli(*args)
    assert result.exit_code == 2
    assert f"does not exist. Did you mean '{meant}'?" in result.stderr


def test_a_path_nothing_is_near_says_only_that_it_does_not_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "jobs").mkdir()
    monkeypatch.chdir(tmp_path)
    result = run_cli("lint", "zzzzz")
    assert result.exit_code == 2
    assert result.stderr.endswith("Path 'zzzzz' does not exist.\n")


# Options whose help names what happens without them in other words.
SAYS_ITS_DEFAULT = {("runtime", "--kind"), ("runtime", "--name")}


@pytest.mark.parametrize("name", COMMANDS)
def test_every_option_says_what_it_does_and_its_default(name: str) -> None:
    """`flatjob runtime --log-level` had no help at all, and run-local's --job and --timeout,
    compile's -n and --overlay did not say what they do when left out."""
    import click

    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    for param in command.params:
        if not isinstance(param, click.Option) or param.hidden:
            continue
        assert param.help, (name, param.opts)
        valued = not (param.is_flag or param.required or param.multiple or param.show_default)
        if valued and (name, param.opts[-1]) not in SAYS_ITS_DEFAULT:
            assert "default" in param.help, (name, param.opts, param.help)


def test_lint_format_choices_match_the_report_formats() -> None:
    assert sorted(FORMAT_NAMES) == sorted(FORMATS)


def test_version() -> None:
    result = run_cli("--version")
    assert (result.exit_code, result.stdout) == (0, f"flatjob, version {__version__}\n")


def test_unknown_command_is_a_usage_error() -> None:
    result = run_cli("xyzzy")
    assert result.exit_code == 2
    assert "No such command 'xyzzy'.\n" in result.stderr


@pytest.mark.parametrize(("typed", "meant"), [("lnt", "lint"), ("comple", "compile"), ("run_local", "run-local"), ("Diff", "diff")])
def test_a_misspelt_command_says_which_was_meant(typed: str, meant: str) -> None:
    """click suggests a misspelt option but not a misspelt command: `flatjob comple` said only
    "No such command"."""
    result = run_cli(typed)
    assert result.exit_code == 2
    assert f"No such command '{typed}'. Did you mean '{meant}'?" in result.stderr


def test_run_local_without_the_runtime_extra_says_both_ways_to_install_it() -> None:
    """A newcomer in a clone has `pip install -e .`: the message gives that form beside the
    package's, and exits 2 before any work."""
    import subprocess
    import sys
    from pathlib import Path

    code = "import sys; sys.modules['kubernetes'] = None; sys.argv = ['flatjob', 'run-local', 'examples/local/torchrun-cpu.yaml']; from flatjob.compiler.cli import entry; entry()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, cwd=Path(__file__).resolve().parents[1])
    assert done.returncode == 2, done.stderr
    assert "pip install 'flatjob[runtime]'" in done.stderr and "pip install -e '.[runtime]'" in done.stderr


def test_the_runtime_outside_a_cluster_without_a_kubeconfig_says_so_not_an_internal_error(tmp_path: Path) -> None:
    """`flatjob runtime` started by hand where there is neither a service account nor a
    kubeconfig is the user's to fix: exit 1 with what is missing, never 'a bug in flatjob'."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if not k.startswith("KUBERNETES_")}
    env.update(HOME=str(tmp_path), KUBECONFIG=str(tmp_path / "absent"))
    code = "import sys; sys.argv = ['flatjob', 'runtime']; from flatjob.compiler.cli import entry; entry()"
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False, env=env)
    assert done.returncode == 1, done.stderr
    assert "no cluster to serve" in done.stderr and "KUBECONFIG" in done.stderr
    assert "internal error" not in done.stderr and "Traceback" not in done.stderr


def test_flatjob_ci_help_as_flatjob_s() -> None:
    """flatjob-ci takes -h as flatjob does, and says where its report goes and its exit status
    (run locally, it printed status lines only, and -h was 'No such option', issue 25)."""
    from click.testing import CliRunner

    from flatjob.compiler.ci import main

    for flag in ("-h", "--help"):
        result = CliRunner().invoke(main, [flag], prog_name="flatjob-ci")
        assert result.exit_code == 0, result.output
        assert "flatjob-ci --base main --summary report.md" in result.output
        assert "Exit status: 0 lint clean and every environment up to date" in result.output
