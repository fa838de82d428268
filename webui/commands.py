"""The console app's Flask CLI commands (`create_app` registers them): the job runner, users, the
demo table. `hoodie-console` (`webui.cli`) serves them with its own commands.
"""

from __future__ import annotations

import os
import sys

import click
from flask import Flask
from flask.cli import with_appcontext


def register_flask_commands(app: Flask) -> None:
    app.cli.add_command(worker_command)
    app.cli.add_command(create_user_command)
    app.cli.add_command(seed_demo_command)


@click.command("worker")
@click.option("--once", is_flag=True, help="stop when the queue is empty")
@click.option("--max-jobs", type=int, default=None, help="stop after N jobs")
@click.option("--master", default=None, help="Spark master (default $SPARK_MASTER or local[*])")
@click.option("--poll", type=float, default=1.0, help="seconds between looks at an empty queue")
@with_appcontext
def worker_command(once: bool, max_jobs: int | None, master: str | None, poll: float) -> None:
    """Run the job runner (holds the SparkSession)."""
    from flask import current_app

    from webui.jobs.runner import Runner

    app = current_app._get_current_object()  # type: ignore[attr-defined]
    runner = Runner(app, master=master)
    click.echo(f"hoodie-console worker {runner.worker_id}: waiting for jobs", err=True)
    runner.run(max_jobs=max_jobs, once=once, poll_s=poll)


@click.command("create-user")
@click.argument("name")
@click.option("--role", type=click.Choice(["viewer", "operator", "admin"]), required=True)
@with_appcontext
def create_user_command(name: str, role: str) -> None:
    """Create a user; the password comes from $CONSOLE_NEW_PASSWORD or the first line of stdin."""
    from webui.services.users import UserError, create_user

    password = os.environ.get("CONSOLE_NEW_PASSWORD")
    if not password:
        if sys.stdin.isatty():
            password = click.prompt("password", hide_input=True, confirmation_prompt=True)
        else:
            password = sys.stdin.readline().rstrip("\n")
    try:
        user = create_user(name, password, role)
    except UserError as exc:
        raise click.ClickException(str(exc)) from exc
    click.echo(f"created user {user.username!r} ({user.role})")


@click.command("seed-demo")
@click.option("--rows", type=int, default=300)
@with_appcontext
def seed_demo_command(rows: int) -> None:
    """Register the demo table demo_trips (first run only) and queue its first batch."""
    from webui.services.demo import seed_demo

    message = seed_demo(rows)
    click.echo(message)
