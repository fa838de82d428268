"""The Dockerfiles and the containers' shell scripts, linted offline: hadolint (with its
shellcheck of RUN lines) and a checklist of our own (stack_checks.check_dockerfile), and
shellcheck on the entrypoint, healthcheck and bucket-init scripts. Each also fails on a
deliberately broken input, so passing means something."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.stack_config.stack_checks import (
    DOCKERFILES,
    REPO,
    SHELL_SCRIPTS,
    check_dockerfile,
    venv_tool,
)


def hadolint(path) -> subprocess.CompletedProcess:
    # failure threshold "info" (the default): even an info-level finding fails
    return subprocess.run([str(venv_tool("hadolint")), "--no-color", str(path)],
                          capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_hadolint_passes(dockerfile):
    done = hadolint(dockerfile)
    assert (done.returncode, done.stdout, done.stderr) == (0, "", "")


def test_hadolint_fails_a_bad_dockerfile(tmp_path):
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\nUSER hoodie\n")
    done = hadolint(bad)
    assert done.returncode == 1
    assert sorted(set(re.findall(r"\b(DL\d{4})\b", done.stdout))) == ["DL3007", "DL3008", "DL3009", "DL3015", "DL3066"]


@pytest.mark.parametrize("dockerfile", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_checklist_passes(dockerfile):
    assert check_dockerfile(dockerfile.read_text()) == []


def test_checklist_catches_each_rule():
    assert check_dockerfile(
        "FROM python:latest AS base\n"
        "ARG ADMIN_PASSWORD\n"
        "ENV API_TOKEN=abc \\\n    PLAIN=1\n"
        "ADD https://example.org/x.tar.gz /opt/\n"
        "RUN apt-get update && apt-get install -y curl\n"
        "FROM base\n"
    ) == [
        "FROM python:latest: base image not pinned to a tag",
        "ARG ADMIN_PASSWORD: no secret in an image (pass it at run time)",
        "ENV API_TOKEN: no secret in an image (pass it at run time)",
        "ADD https://example.org/x.tar.gz /opt/: download with a checksum in a RUN instead",
        "RUN apt-get install without removing /var/lib/apt/lists in the same layer",
        "the final stage runs as root: add USER with a non-root id",
    ]
    # a stage built FROM an earlier one inherits its user; FROM a digest counts as pinned
    assert check_dockerfile("FROM a@sha256:00 AS one\nUSER 10001\nFROM one AS two\n") == []
    assert check_dockerfile("FROM a:1 AS one\nUSER 10001\nFROM one\nUSER 0:0\n") == [
        "the final stage runs as 0:0: add USER with a non-root id"]


def test_the_images_run_as_non_root_and_expose_the_stack_ports():
    app, hbase = (p.read_text() for p in DOCKERFILES)
    assert re.findall(r"^USER (\S+)$", app, re.M) == ["10001:10001", "0:0", "10001:10001"]
    assert re.findall(r"^FROM (\S+)", app, re.M) == ["python:3.11.14-slim-bookworm", "base", "base", "runtime"]
    assert "openjdk-17-jre-headless" in app
    assert re.findall(r"^USER (\S+)$", hbase, re.M) == ["10001:10001"]
    assert re.findall(r"^FROM (\S+)", hbase, re.M) == ["eclipse-temurin:17.0.17_10-jre-noble"]
    assert re.findall(r"^EXPOSE (.+)$", hbase, re.M) == ["9090 9095 16010"]


def test_the_hbase_tarball_is_verified_against_a_pinned_sha512():
    text = (REPO / "hbase" / "Dockerfile").read_text()
    version = re.search(r"^ARG HBASE_VERSION=(\S+)$", text, re.M).group(1)
    sha512 = re.search(r"^ARG HBASE_SHA512=(\S+)$", text, re.M).group(1)
    assert version == "2.6.5" and re.fullmatch(r"[0-9a-f]{128}", sha512)
    assert re.search(r"^ARG HBASE_ARCHIVE=https://archive\.apache\.org/dist/hbase$", text, re.M)
    assert 'echo "${HBASE_SHA512}  /tmp/${tarball}" | sha512sum --check --strict -' in text
    assert '"${HBASE_ARCHIVE}/${HBASE_VERSION}/${tarball}.sha512"' in text  # the archive's own file too


@pytest.mark.parametrize("published", [
    # the two forms Apache releases use: gpg --print-md (HBase's), and sha512sum's
    "hbase-2.6.5-bin.tar.gz: {UPPER_GROUPS}\n",
    "{lower}  hbase-2.6.5-bin.tar.gz\n",
])
def test_the_build_reads_the_archives_sha512_file_in_either_form(tmp_path, published):
    """The Dockerfile's normalisation of the published .sha512 (sed + tr), run here in bash."""
    text = (REPO / "hbase" / "Dockerfile").read_text()
    sha512 = re.search(r"^ARG HBASE_SHA512=(\S+)$", text, re.M).group(1)
    line = re.search(r'published="\$\((.+)\)" \\$', text, re.M).group(1)
    groups = " ".join(sha512[i:i + 8].upper() for i in range(0, 128, 8))
    wrapped = groups[:90] + "\n" + " " * 24 + groups[90:]  # gpg wraps its line
    (tmp_path / "hbase-2.6.5-bin.tar.gz.sha512").write_text(published.format(UPPER_GROUPS=wrapped, lower=sha512))
    script = f'tarball=hbase-2.6.5-bin.tar.gz\ncd {tmp_path}\necho "$({line.replace("/tmp/", "")})"'
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=10)
    assert (done.returncode, done.stdout.strip()) == (0, sha512)


@pytest.mark.parametrize("script", SHELL_SCRIPTS, ids=lambda p: str(p.relative_to(REPO)))
def test_shellcheck_passes(script):
    done = subprocess.run([str(venv_tool("shellcheck")), str(script)], capture_output=True, text=True, timeout=60)
    assert (done.returncode, done.stdout) == (0, "")


def test_shellcheck_fails_a_bad_script(tmp_path):
    bad = tmp_path / "bad.sh"
    bad.write_text("#!/bin/sh\nrm -rf $1/data\n")
    done = subprocess.run([str(venv_tool("shellcheck")), str(bad)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 1 and "SC2086" in done.stdout


def test_the_build_context_sends_only_what_the_images_use():
    """.env (local secrets), .venv, lakehouse data and git history never reach a build."""
    lines = [ln for ln in (REPO / ".dockerignore").read_text().splitlines() if ln and not ln.startswith("#")]
    assert lines == ["*", "!pyproject.toml", "!README.md", "!engine/", "!webui/", "!docker/", "!tests/",
                     "**/__pycache__", "**/*.pyc"]
    # the runtime image drops tests/ (the HBase stand-in is never shipped); only stack-test adds it back
    app = (REPO / "Dockerfile").read_text()
    assert "COPY . /src\nRUN rm -rf /src/tests\n" in app
    assert app.index("COPY tests /opt/hoodie/tests") > app.index("FROM runtime AS stack-test")
