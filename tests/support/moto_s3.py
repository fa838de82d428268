"""A real moto S3 server on 127.0.0.1 (free port, in a thread) for tests.

The server speaks HTTP like S3 does, so pyarrow's S3 filesystem and boto3 both reach
it the same way they would reach MinIO or AWS.
"""

from __future__ import annotations

import json
import os
import tempfile
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

# moto's request recorder reads where to write when moto is imported: a temporary file, not
# ./moto_recording in the working directory
os.environ.setdefault("MOTO_RECORDER_FILEPATH", os.path.join(tempfile.mkdtemp(prefix="moto-recorder-"), "recording"))

import boto3  # noqa: E402
import botocore.config  # noqa: E402
from moto.moto_server.threaded_moto_server import ThreadedMotoServer  # noqa: E402


@dataclass(frozen=True)
class S3Request:
    """One request the server received: method, path (/bucket/key) and query."""

    method: str
    path: str
    query: dict[str, list[str]]

    @property
    def is_list(self) -> bool:
        """A LIST (ListObjects[V2]): a GET on the bucket itself."""
        return self.method == "GET" and self.path.strip("/").count("/") == 0

    @property
    def prefix(self) -> str:
        return (self.query.get("prefix") or [""])[0]


@dataclass
class MotoS3:
    """A running moto S3 server and the credentials to talk to it (moto accepts any)."""

    endpoint_url: str
    access_key: str = "testing"
    secret_key: str = "testing"
    region: str = "us-east-1"
    _server: ThreadedMotoServer | None = field(default=None, repr=False)

    def storage_options(self) -> dict[str, str]:
        """Options for `engine.storage.storage_for(uri, options)`."""
        return {
            "endpoint_url": self.endpoint_url,
            "access_key_id": self.access_key,
            "secret_access_key": self.secret_key,
            "region": self.region,
        }

    def env(self) -> dict[str, str]:
        """The AWS_* environment variables pointing at this server (for subprocesses)."""
        return {
            "AWS_ENDPOINT_URL": self.endpoint_url,
            "AWS_ACCESS_KEY_ID": self.access_key,
            "AWS_SECRET_ACCESS_KEY": self.secret_key,
            "AWS_REGION": self.region,
        }

    def client(self) -> Any:
        """A boto3 S3 client for this server."""
        return boto3.session.Session().client(
            "s3",
            endpoint_url=self.endpoint_url,
            aws_access_key_id=self.access_key,
            aws_secret_access_key=self.secret_key,
            region_name=self.region,
            config=botocore.config.Config(s3={"addressing_style": "path"}),
        )

    def create_bucket(self, name: str | None = None) -> str:
        """Create a bucket (a fresh unique name unless given) and return its name."""
        name = name or f"test-{uuid.uuid4().hex[:12]}"
        self.client().create_bucket(Bucket=name)
        return name

    def _recorder(self, action: str) -> bytes:
        method = "GET" if action == "download-recording" else "POST"
        request = urllib.request.Request(f"{self.endpoint_url}/moto-api/recorder/{action}", method=method)
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.read()

    @contextmanager
    def recording(self) -> Iterator[list[S3Request]]:
        """Record the HTTP requests the server receives inside the block (moto's recorder); the
        list is filled when the block ends."""
        out: list[S3Request] = []
        self._recorder("reset-recording")
        self._recorder("start-recording")
        try:
            yield out
        finally:
            self._recorder("stop-recording")
            for line in self._recorder("download-recording").decode("utf-8").splitlines():
                if line.strip():
                    entry = json.loads(line)
                    url = urllib.parse.urlparse(entry["url"])
                    out.append(S3Request(entry["method"], url.path, urllib.parse.parse_qs(url.query)))

    def stop(self) -> None:
        """Stop the server; safe to call twice."""
        if self._server is not None:
            self._server.stop()
            self._server = None


def start_moto_s3() -> MotoS3:
    """Start a moto server on 127.0.0.1 on a free port and return its handle. Its request
    recorder (`MotoS3.recording`) writes to a temporary file, not `./moto_recording`."""
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    return MotoS3(endpoint_url=f"http://{host}:{port}", _server=server)
