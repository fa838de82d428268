"""`hoodie-console`: serve the console, run the job runner, migrate the database, add users.

    hoodie-console serve [--host 127.0.0.1] [--port 8000]   development server (gunicorn in production)
    hoodie-console worker [--once] [--max-jobs N] [--master M]
    hoodie-console worker-health [--max-age S]                exit 0 if this host's runner lives and beats
    hoodie-console db upgrade                                 (also: flask --app webui db upgrade)
    hoodie-console create-user NAME --role viewer|operator|admin   password from stdin or $CONSOLE_NEW_PASSWORD
    hoodie-console seed-demo                                  register demo_trips and queue its first batch
    hoodie-console run                                        make run: gunicorn + worker + demo table

The same commands are Flask CLI commands (`flask --app webui worker`, `... create-user`).
"""

from __future__ import annotations

import os
import sys

import click
from flask import Flask
from flask.cli import FlaskGroup, with_appcontext


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


def _create_app() -> Flask:
    from webui import create_app

    return create_app()


@click.group(cls=FlaskGroup, create_app=_create_app, add_default_commands=False, add_version_option=False)
def main() -> None:
    """hoodie admin console."""


@main.command("worker-health", with_appcontext=False)
@click.option("--max-age", type=float, default=30.0, show_default=True,
              help="seconds a heartbeat may be old (the runner beats every 2 s)")
def worker_health_command(max_age: float) -> None:
    """Exit 0 when a job runner of this host runs and beats in the database (a healthcheck)."""
    from datetime import timedelta

    import sqlalchemy.exc

    from webui import create_app
    from webui.extensions import db
    from webui.jobs.claim import local_runner_health

    app = create_app({"CONSOLE_BOOTSTRAP_ADMIN": False})
    with app.app_context():
        try:
            healthy, seen = local_runner_health(db.session, timedelta(seconds=max_age))
        except sqlalchemy.exc.SQLAlchemyError as exc:
            healthy, seen = False, f"the console database does not answer: {type(exc.orig or exc).__name__}"
    click.echo(seen, err=not healthy)
    sys.exit(0 if healthy else 1)


@main.command("serve")
@click.option("--host", default="127.0.0.1")
@click.option("--port", type=int, default=None, help="default $CONSOLE_PORT or 8000")
@click.option("--debug", is_flag=True)
def serve_command(host: str, port: int | None, debug: bool) -> None:
    """Run the development server (use gunicorn 'webui:create_app()' in production)."""
    from werkzeug.serving import run_simple

    from webui.config import Settings

    app = _create_app()
    # not app.run(): under a FlaskGroup (FLASK_RUN_FROM_CLI is set) Flask ignores app.run() and
    # returns at once, so `hoodie-console serve` exited without serving
    run_simple(host, port or Settings.from_env().port, app, use_debugger=debug, use_reloader=False, threaded=True)


@main.command("run")
@click.option("--host", default="127.0.0.1")
@click.option("--port", type=int, default=None)
def run_command(host: str, port: int | None) -> None:
    """make run: migrate, seed the demo table, start gunicorn and the job runner; Ctrl-C stops both."""
    from webui.devrun import run

    sys.exit(run(host, port))


if __name__ == "__main__":
    main()
