"""`hoodie-console`: serve the console, run the job runner, migrate the database, add users.

    hoodie-console serve [--host 127.0.0.1] [--port 8000]   development server (gunicorn in production)
    hoodie-console worker [--once] [--max-jobs N] [--master M]
    hoodie-console worker-health [--max-age S]                exit 0 if this host's runner lives and beats
    hoodie-console db upgrade                                 (also: flask --app webui db upgrade)
    hoodie-console create-user NAME --role viewer|operator|admin   password from stdin or $CONSOLE_NEW_PASSWORD
    hoodie-console seed-demo                                  register demo_trips and queue its first batch
    hoodie-console run                                        make run: gunicorn + worker + demo table

`worker`, `create-user` and `seed-demo` are the app's Flask CLI commands (`webui.commands`; also
`flask --app webui worker`, `... create-user`).
"""

from __future__ import annotations

import sys

import click
from flask import Flask
from flask.cli import FlaskGroup


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
