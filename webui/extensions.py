"""The Flask extensions, created unbound here and set up in `create_app` with `init_app`."""

from __future__ import annotations

from flask_login import LoginManager
from flask_migrate import Migrate
from flask_sqlalchemy import SQLAlchemy
from flask_wtf.csrf import CSRFProtect
from sqlalchemy.orm import DeclarativeBase


class Base(DeclarativeBase):
    pass


db = SQLAlchemy(model_class=Base)
migrate = Migrate()
login_manager = LoginManager()
csrf = CSRFProtect()
# no Flask-Limiter: its storages share nothing between gunicorn workers without Redis, so the
# login throttle and lockout count attempts in the console's database (`services/logins.py`)
