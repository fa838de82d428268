# hoodie engine — see README.md
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

# The local lakehouse (docker-compose.yml). make up needs Docker Engine + the Compose plugin.
DOCKER ?= docker
COMPOSE ?= $(DOCKER) compose
HOST_PYTHON ?= python3
STACK_WAIT ?= 900
# tests/stack against the process-based stack (CI: no Docker engine); seconds for the suite
STACK_LOCAL_TIMEOUT ?= 900

.PHONY: setup test unit run demo console worker bench bench-console lint docs clean clean-lakehouse up down logs ps stack-test stack-local docker-check

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[dev,console,hbase]"
	touch $@

setup: $(VENV)/.installed

# Everything but tests/stack in one pytest run, then tests/stack against the process stack
# (its own pytest process: it needs a SparkSession on the stack's master). Two pytest workers
# (pytest-xdist), each test file on one of them (its module fixtures and tables shared), each with
# its own SparkSession; the slowest tests are listed at the end. The files that wait most (the
# console's browser and process tests) go first, the many quick unit tests last, to even out the end.
PYTEST_WORKERS ?= 2
test: setup
	$(PY) -m pytest -q -m "not stack" -n $(PYTEST_WORKERS) --dist loadfile --durations=25 \
		tests/webui tests/integration tests/stack_config tests/unit
	$(MAKE) --no-print-directory stack-local

unit: setup
	$(PY) -m pytest -q tests/unit tests/stack_config

run: setup  ## the admin console + its job runner on local Spark, ./lakehouse and SQLite (Ctrl-C stops both)
	$(VENV)/bin/hoodie-console run

demo: setup  ## a guided walk through a trips table (load, upsert, delete, incremental, time travel, rollback, clean) with console links
	$(PY) -m engine.demo

console: setup  ## the console alone under gunicorn (run `make worker` beside it)
	$(VENV)/bin/hoodie-console db upgrade
	$(VENV)/bin/gunicorn -b 127.0.0.1:8000 -w 2 --threads 4 'webui:create_app()'

worker: setup  ## the console's job runner alone
	$(VENV)/bin/hoodie-console worker

bench: setup
	$(PY) bench/upsert.py

bench-console: setup
	$(PY) bench/console.py

lint: setup  ## ruff, mypy and the architecture's import contracts (pyproject.toml [tool.importlinter])
	$(VENV)/bin/ruff check engine webui tests bench docker
	$(VENV)/bin/mypy engine
	$(VENV)/bin/lint-imports

docs: setup  ## the documentation site into ./site (--strict: a broken link or reference fails)
	$(VENV)/bin/mkdocs build --strict --site-dir site

# ./lakehouse is data, not build output: its tables, and lakehouse/.console (the console's SQLite
# database, its secret key, the dev admin's password). clean keeps it; clean-lakehouse asks first.
clean:  ## build and test leftovers; keeps ./lakehouse (tables, console database, secret key, admin password)
	rm -rf spark-warehouse .pytest_cache artifacts site
	@if [ -e lakehouse ]; then echo "make clean: kept ./lakehouse (its tables, and lakehouse/.console: the console's database, secret key and admin password); 'make clean-lakehouse' deletes it"; fi

clean-lakehouse:  ## delete ./lakehouse, console database, secret key and admin password included (asks; CONFIRM=yes skips)
	@if [ ! -e lakehouse ]; then echo "make clean-lakehouse: no ./lakehouse"; exit 0; fi; \
	answer="$(CONFIRM)"; \
	if [ "$$answer" != yes ]; then \
		printf "Delete ./lakehouse: every table in it, and the console's database, secret key and admin password? Type yes: "; \
		read -r answer || answer=""; \
	fi; \
	if [ "$$answer" = yes ]; then rm -rf lakehouse && echo "make clean-lakehouse: deleted ./lakehouse"; \
	else echo "make clean-lakehouse: kept ./lakehouse (nothing deleted)"; exit 1; fi

# --- the local lakehouse ------------------------------------------------------------------

docker-check:
	@command -v $(DOCKER) >/dev/null 2>&1 || { echo "make: '$(DOCKER)' not found: the local lakehouse needs Docker Engine with the Compose plugin (see docs/lakehouse.md)" >&2; exit 1; }
	@$(DOCKER) info >/dev/null 2>&1 || { echo "make: no Docker engine answers ('$(DOCKER) info' failed): start Docker, then retry" >&2; exit 1; }
	@$(COMPOSE) version >/dev/null 2>&1 || { echo "make: '$(COMPOSE)' does not run: install the Docker Compose v2 plugin" >&2; exit 1; }

up: docker-check
	$(COMPOSE) up --build --detach
	@$(HOST_PYTHON) docker/stack_wait.py --timeout $(STACK_WAIT) --compose "$(COMPOSE)"

down: docker-check
	$(COMPOSE) down

logs: docker-check
	$(COMPOSE) logs --follow --tail=200

ps: docker-check
	$(COMPOSE) ps --all

# tests/stack inside the running stack's network (Spark executors must reach the test driver)
stack-test: docker-check
	$(COMPOSE) --profile test run --rm --build stack-test

# tests/stack against the same roles started as processes on 127.0.0.1 (no Docker)
stack-local: setup
	$(PY) -m tests.support.process_stack --timeout $(STACK_LOCAL_TIMEOUT) -- \
		$(PY) -m pytest -q -p no:cacheprovider -m stack tests/stack
