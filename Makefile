# hoodie engine — see README.md
VENV ?= .venv
PY := $(VENV)/bin/python
PIP := $(VENV)/bin/pip
export PYSPARK_PYTHON := $(abspath $(PY))
export PYSPARK_DRIVER_PYTHON := $(abspath $(PY))

.PHONY: setup test unit run bench lint clean

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

run: setup
	$(PY) -m engine.demo

bench: setup
	$(PY) bench/upsert.py

lint: setup
	$(VENV)/bin/ruff check engine tests bench
	$(VENV)/bin/mypy engine

clean:
	rm -rf lakehouse spark-warehouse .pytest_cache
