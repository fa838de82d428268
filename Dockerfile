# syntax=docker/dockerfile:1
#
# The project image: Spark master and workers, the console (gunicorn) and its job runner all
# run this one image, so the Python, pyspark and engine versions are the same everywhere.
# Spark comes from pip's pyspark (spark-class, its jars); Java is Debian's OpenJDK 17.
# Object-store I/O goes through the engine's pyarrow/boto3 storage: no Hadoop s3a jars.
# No secret is baked in: credentials come from the compose file's environment at run time.
#
# Targets: `runtime` (what the stack runs) and `stack-test` (runtime + tests/ + the test
# extra, used by `make stack-test`; the HBase stand-in in tests/support is never in `runtime`).

FROM python:3.11.14-slim-bookworm AS base

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYSPARK_PYTHON=/usr/local/bin/python \
    PYSPARK_DRIVER_PYTHON=/usr/local/bin/python \
    SPARK_LOCAL_DIRS=/tmp

# Packages come from the pinned bookworm base's archive; apt versions are not pinned because
# Debian replaces them with security updates (an exact pin would stop building).
# /usr/share/man/man1: the JRE's postinst links man pages there and slim images lack the dir.
# procps: Spark's launch scripts call `ps`.
# hadolint ignore=DL3008
RUN mkdir -p /usr/share/man/man1 \
 && apt-get update \
 && apt-get install -y --no-install-recommends openjdk-17-jre-headless procps \
 && rm -rf /var/lib/apt/lists/*

RUN groupadd --system --gid 10001 hoodie \
 && useradd --system --uid 10001 --gid hoodie --create-home --home-dir /home/hoodie hoodie \
 && mkdir -p /opt/spark-work /var/lib/hoodie-console \
 && chown hoodie:hoodie /opt/spark-work /var/lib/hoodie-console \
 && chmod 0700 /var/lib/hoodie-console

# Everything of the context but the tests (engine/, webui/, ...).
FROM base AS source
COPY . /src
RUN rm -rf /src/tests

FROM base AS runtime
COPY --from=source /src /opt/hoodie
# The project itself, from this checkout, with its console and HBase extras.
RUN pip install "/opt/hoodie[console,hbase]" \
 && install -m 0755 /opt/hoodie/docker/healthcheck.py /usr/local/bin/stack-health
USER 10001:10001
WORKDIR /home/hoodie
# console 8000; Spark master 7077 (cluster) and 8080 (UI); Spark worker UI 8081
EXPOSE 8000 7077 8080 8081

FROM runtime AS stack-test
USER 0:0
COPY tests /opt/hoodie/tests
RUN pip install "/opt/hoodie[console,hbase,stack-test]"
USER 10001:10001
WORKDIR /opt/hoodie
CMD ["python", "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "stack", "tests/stack"]
