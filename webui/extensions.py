"""The Flask extensions, created unbound here and set up in `create_app` with `init_app`."""

from __future__ import annotations

from flask_limiter import Limiter
from flask_limiter.util import get_remote_address
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
# Flask-Limiter counts in the console's database (`webui.ratelimit.DatabaseStorage`, set up by
# `ratelimit.init_app`), so every gunicorn worker shares one budget without Redis; no default
# limits: only `ratelimit.login_limit` (the login page and the token endpoint). The lockout per
# account is not a rate limit: `services/logins.py` keeps it in `login_attempts`.
limiter = Limiter(key_func=get_remote_address, default_limits=[])
