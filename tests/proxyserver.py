"""A small real forwarding proxy on 127.0.0.1 for the crawler's tests.

One listening port speaks both protocols, told apart by the first byte a client sends:

* HTTP (RFC 9110 forward proxy): an absolute-form request (``GET http://host:port/path``)
  is sent on to the origin over a new connection and the answer relayed back, with
  ``Connection: close`` (one request per client connection); ``CONNECT host:port`` opens a
  tunnel (``200 Connection established``) and relays bytes both ways (HTTPS);
* SOCKS5 (RFC 1928, 1929): no authentication or username/password, the CONNECT command
  with an IPv4, IPv6 or domain-name address, then a tunnel.

With ``auth=(user, password)`` the proxy demands them (``407`` with
``Proxy-Authenticate`` for HTTP, method 0x02 for SOCKS5). ``log`` keeps what each request
asked for: protocol, target ``host:port``, and the credentials it offered. The proxy
resolves names itself (as real proxies do) and connects anywhere: it is the crawler that
must refuse private targets.
"""

from __future__ import annotations

import base64
import contextlib
import socket
import socketserver
import struct
import threading
import urllib.parse
from dataclasses import dataclass

__all__ = ["ProxyRequest", "ProxyServer"]


@dataclass(frozen=True)
class ProxyRequest:
    protocol: str  # "http", "connect" or "socks5"
    target: str  # host:port as the client asked
    credentials: tuple[str, str] | None  # what the client offered
    line: str = ""  # the HTTP request line as received (http only)


def _read_until(sock: socket.socket, marker: bytes, limit: int = 65536) -> bytes:
    data = b""
    while marker not in data:
        chunk = sock.recv(4096)
        if not chunk:
            break
        data += chunk
        if len(data) > limit:
            raise ValueError("request head too large")
    return data


def _read_exact(sock: socket.socket, n: int) -> bytes:
    data = b""
    while len(data) < n:
        chunk = sock.recv(n - len(data))
        if not chunk:
            raise ConnectionError("closed")
        data += chunk
    return data


def _pipe(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(65536):
            target.sendall(chunk)
    with contextlib.suppress(OSError):
        target.shutdown(socket.SHUT_WR)


def _tunnel(a: socket.socket, b: socket.socket) -> None:
    other = threading.Thread(target=_pipe, args=(b, a), daemon=True)
    other.start()
    _pipe(a, b)
    other.join(30)


class _Handler(socketserver.BaseRequestHandler):
    server: _Server

    def handle(self) -> None:
        sock: socket.socket = self.request
        sock.settimeout(30)
        with contextlib.suppress(OSError, ValueError, ConnectionError):
            first = sock.recv(1, socket.MSG_PEEK)
            if first == b"\x05":
                self._socks5(sock)
            elif first:
                self._http(sock)

    # -- HTTP ------------------------------------------------------------------------

    def _http(self, sock: socket.socket) -> None:
        head = _read_until(sock, b"\r\n\r\n")
        head, _, rest = head.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target, version = lines[0].split(" ", 2)
        headers = [line.split(":", 1) for line in lines[1:] if ":" in line]
        offered = None
        for name, value in headers:
            if name.strip().lower() == "proxy-authorization":
                kind, _, token = value.strip().partition(" ")
                if kind.lower() == "basic":
                    user, _, password = base64.b64decode(token).decode().partition(":")
                    offered = (user, password)
        if method == "CONNECT":
            self.server.record(ProxyRequest("connect", target, offered, lines[0]))
            if not self._allowed(offered):
                sock.sendall(self._denied())
                return
            host, port = target.rsplit(":", 1)
            upstream = socket.create_connection((host.strip("[]"), int(port)), timeout=30)
            sock.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            with upstream:
                if rest:
                    upstream.sendall(rest)
                _tunnel(sock, upstream)
            return
        url = urllib.parse.urlsplit(target)
        authority = url.netloc.rpartition("@")[2]
        self.server.record(ProxyRequest("http", authority, offered, lines[0]))
        if not self._allowed(offered):
            sock.sendall(self._denied())
            return
        path = url.path or "/"
        path += f"?{url.query}" if url.query else ""
        kept = [
            f"{name}:{value}"
            for name, value in headers
            if name.strip().lower() not in ("proxy-authorization", "proxy-connection", "connection")
        ]
        request = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close"])
        address = (url.hostname or "", url.port or 80)
        upstream = socket.create_connection(address, timeout=30)
        with upstream:
            upstream.sendall(request.encode("latin-1") + b"\r\n\r\n" + rest)
            answer = _read_until(upstream, b"\r\n\r\n")
            answer_head, _, body = answer.partition(b"\r\n\r\n")
            answer_lines = answer_head.decode("latin-1").split("\r\n")
            answer_kept = [
                line
                for line in answer_lines
                if line.split(":", 1)[0].strip().lower() not in ("connection", "keep-alive")
            ]
            sock.sendall(
                "\r\n".join([*answer_kept, "Connection: close"]).encode("latin-1")
                + b"\r\n\r\n"
                + body
            )
            _pipe(upstream, sock)

    def _allowed(self, offered: tuple[str, str] | None) -> bool:
        return self.server.auth is None or offered == self.server.auth

    @staticmethod
    def _denied() -> bytes:
        return (
            b"HTTP/1.1 407 Proxy Authentication Required\r\n"
            b'Proxy-Authenticate: Basic realm="test"\r\nContent-Length: 0\r\n'
            b"Connection: close\r\n\r\n"
        )

    # -- SOCKS5 ----------------------------------------------------------------------

    def _socks5(self, sock: socket.socket) -> None:
        _, count = _read_exact(sock, 2)
        methods = _read_exact(sock, count)
        wanted = 0x00 if self.server.auth is None else 0x02
        if wanted not in methods:
            sock.sendall(b"\x05\xff")
            self.server.record(ProxyRequest("socks5", "?", None))
            return
        sock.sendall(bytes([5, wanted]))
        offered = None
        if wanted == 0x02:
            _, ulen = _read_exact(sock, 2)
            user = _read_exact(sock, ulen).decode()
            (plen,) = _read_exact(sock, 1)
            offered = (user, _read_exact(sock, plen).decode())
            ok = offered == self.server.auth
            sock.sendall(b"\x01\x00" if ok else b"\x01\x01")
            if not ok:
                self.server.record(ProxyRequest("socks5", "?", offered))
                return
        _, command, _, kind = _read_exact(sock, 4)
        if kind == 1:
            host = socket.inet_ntop(socket.AF_INET, _read_exact(sock, 4))
        elif kind == 4:
            host = socket.inet_ntop(socket.AF_INET6, _read_exact(sock, 16))
        else:
            (length,) = _read_exact(sock, 1)
            host = _read_exact(sock, length).decode()
        (port,) = struct.unpack("!H", _read_exact(sock, 2))
        self.server.record(ProxyRequest("socks5", f"{host}:{port}", offered))
        if command != 1:
            sock.sendall(b"\x05\x07\x00\x01" + bytes(6))
            return
        try:
            upstream = socket.create_connection((host, port), timeout=30)
        except OSError:
            sock.sendall(b"\x05\x05\x00\x01" + bytes(6))
            return
        sock.sendall(b"\x05\x00\x00\x01" + bytes(6))
        with upstream:
            _tunnel(sock, upstream)


class _Server(socketserver.ThreadingTCPServer):
    daemon_threads = True
    allow_reuse_address = True
    block_on_close = False

    def __init__(self, auth: tuple[str, str] | None) -> None:
        self.auth = auth
        self.lock = threading.Lock()
        self.log: list[ProxyRequest] = []
        super().__init__(("127.0.0.1", 0), _Handler)

    def record(self, request: ProxyRequest) -> None:
        with self.lock:
            self.log.append(request)


class ProxyServer:
    """``with ProxyServer(auth=None) as proxy:`` serves on ``proxy.port`` until closed."""

    def __init__(self, auth: tuple[str, str] | None = None) -> None:
        self._server = _Server(auth)
        self.port = int(self._server.server_address[1])
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()

    @property
    def log(self) -> list[ProxyRequest]:
        with self._server.lock:
            return list(self._server.log)

    def url(self, scheme: str = "http", auth: tuple[str, str] | None = None) -> str:
        user = f"{auth[0]}:{auth[1]}@" if auth else ""
        return f"{scheme}://{user}127.0.0.1:{self.port}"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    def __enter__(self) -> ProxyServer:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()
