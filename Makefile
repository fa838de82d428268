# hoodie engine — see README.md
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup test unit run demo console worker bench bench-console lint clean

$(VENV)/.installed: pyproject.toml
	python3 -m venv $(VENV)
	$(PIP) install -q --upgrade pip
	$(PIP) install -q -e ".[dev,console,hbase]"
	touch $@

setup: $(VENV)/.installed

test: setup
	$(PY) -m pytest -q

unit: setup
	$(PY) -m pytest -q tests/unit

run: setup  ## the admin console + its job runner on local Spark, ./lakehouse and SQLite (Ctrl-C stops both)
	$(VENV)/bin/hoodie-console run

demo: setup  ## the engine's end-to-end demo (no console)
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

lint: setup
	$(VENV)/bin/ruff check engine webui tests bench
	$(VENV)/bin/mypy engine

clean:
	rm -rf lakehouse spark-warehouse .pytest_cache artifacts
