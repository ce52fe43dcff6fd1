"""A local HTTP server (127.0.0.1, a thread) for download tests: never the network.

``http_server.files[path] = bytes`` publishes a file; ``http_server.requests`` records
``(path, range_header)`` for every GET; ``http_server.honour_range = False`` makes it ignore
``Range`` like some servers do.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest


class _Handler(BaseHTTPRequestHandler):
    server: _Server

    def do_GET(self) -> None:  # noqa: N802 - http.server API
        srv = self.server
        srv.requests.append((self.path, self.headers.get("Range")))
        data = srv.files.get(self.path)
        if data is None:
            self.send_error(404)
            return
        start, status = 0, 200
        header = self.headers.get("Range")
        if header and srv.honour_range and header.startswith("bytes="):
            start = int(header[len("bytes="):].split("-")[0])
            if start >= len(data):
                self.send_response(416)
                self.send_header("Content-Range", f"bytes */{len(data)}")
                self.end_headers()
                return
            status = 206
        body = data[start:]
        self.send_response(status)
        if status == 206:
            self.send_header("Content-Range", f"bytes {start}-{len(data) - 1}/{len(data)}")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:  # silence the default stderr log
        return


class _Server(ThreadingHTTPServer):
    files: dict[str, bytes]
    requests: list[tuple[str, str | None]]
    honour_range: bool

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"


@pytest.fixture
def http_server() -> Iterator[_Server]:
    server = _Server(("127.0.0.1", 0), _Handler)
    server.files, server.requests, server.honour_range = {}, [], True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
