"""The filter on the JVM's stderr: exactly the listed start-up lines are dropped, all else is kept."""

from __future__ import annotations

import os

from engine.spark.jvm_noise import NOISE, StderrFilter, drop_noise, is_noise

INCUBATOR = b"WARNING: Using incubator modules: jdk.incubator.vector"

# what a real error looks like on the JVM's stderr (spark-submit refusing a master URL)
ERROR = [
    b'Exception in thread "main" org.apache.spark.SparkException: Master must either be yarn or start'
    b" with spark, k8s, or local\n",
    b"\tat org.apache.spark.deploy.SparkSubmit.error(SparkSubmit.scala:1068)\n",
]


def test_noise_is_exactly_the_incubator_warning():
    assert NOISE == {INCUBATOR}


def test_is_noise_matches_whole_lines_only():
    assert is_noise(INCUBATOR)
    assert is_noise(INCUBATOR + b"\n")
    assert is_noise(INCUBATOR + b"\r\n")
    assert not is_noise(b"WARNING: Using incubator modules: jdk.incubator.vector, jdk.incubator.foo")
    assert not is_noise(b"x " + INCUBATOR)
    assert not is_noise(INCUBATOR.lower())
    assert not is_noise(b"WARNING: Using incubator modules:")
    # log lines are configuration's business (log4j2.properties), never the filter's
    assert not is_noise(b"Using Spark's default log4j profile: org/apache/spark/log4j2-defaults.properties")
    assert not is_noise(b'Setting default log level to "WARN".')
    assert not is_noise(b"26/11/26 05:12:12 WARN NativeCodeLoader: Unable to load native-hadoop library for"
                        b" your platform... using builtin-java classes where applicable")
    assert not is_noise(b"")


def test_drop_noise_keeps_every_other_line_unchanged():
    lines = [INCUBATOR + b"\n", *ERROR, b"\n", b"26/11/26 05:12:12 ERROR Executor: boom\r\n", INCUBATOR]
    assert list(drop_noise(lines)) == [*ERROR, b"\n", b"26/11/26 05:12:12 ERROR Executor: boom\r\n"]


def run_filter(chunks: list[bytes]) -> bytes:
    """Feed `chunks` through a StderrFilter to the end of its input; what came out."""
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    stderr = StderrFilter(source_read, target_write).start()
    for chunk in chunks:
        os.write(source_write, chunk)
    os.close(source_write)
    assert stderr.join(timeout=10)
    os.close(target_write)
    with os.fdopen(target_read, "rb") as out:
        return out.read()


def test_filter_forwards_all_but_noise_lines_split_anywhere():
    # the noise line arrives in two pieces, the error's line break in the next chunk
    chunks = [b"WARNING: Using incubator", b" modules: jdk.incubator.vector\n" + ERROR[0][:-1], b"\n" + ERROR[1],
              b"\xff\xfe not utf-8\n", b"last line without a break"]
    assert run_filter(chunks) == ERROR[0] + ERROR[1] + b"\xff\xfe not utf-8\nlast line without a break"


def test_filter_drops_a_final_noise_line_without_break():
    assert run_filter([ERROR[1], INCUBATOR]) == ERROR[1]
    assert run_filter([]) == b""


def test_flush_forwards_what_was_written_so_far():
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    stderr = StderrFilter(source_read, target_write).start()
    os.write(source_write, INCUBATOR + b"\n" + ERROR[0] + b"partial")
    assert stderr.flush(timeout=10)
    assert os.read(target_read, 65536) == ERROR[0] + b"partial"
    os.write(source_write, b" line\n")
    os.close(source_write)
    assert stderr.join(timeout=10)
    assert stderr.flush() is True  # the input has ended: nothing to wait for
    os.close(target_write)
    with os.fdopen(target_read, "rb") as out:
        assert out.read() == b" line\n"


def test_filter_keeps_reading_when_the_target_is_closed():
    source_read, source_write = os.pipe()
    target_read, target_write = os.pipe()
    os.close(target_read)  # writes fail (EPIPE): the JVM must still never block on a full pipe
    stderr = StderrFilter(source_read, target_write).start()
    for _ in range(64):
        os.write(source_write, b"x" * 4095 + b"\n")  # 256 KiB, more than a pipe holds
    os.close(source_write)
    assert stderr.join(timeout=10)
    os.close(target_write)
