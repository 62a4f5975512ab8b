"""A whole-request deadline for HTTP calls to an endpoint.

httpx's timeouts bound each socket operation, not the request: a server that sends one byte a second
keeps a request with `timeout_s = 5` alive for minutes. The client's HTTP connections go through a network
backend whose every connect, read and write is given at most the time left before the deadline of the
request running in this thread (`deadline`), so the request ends there with a read timeout, which the
client retries as any transient error. Threads without a deadline are unaffected.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any

__all__ = ["deadline", "http_client", "http_errors"]

_local = threading.local()


@contextlib.contextmanager
def deadline(seconds: float) -> Iterator[None]:
    """Requests made by this thread inside the block end at most `seconds` from now."""
    before = getattr(_local, "until", None)
    _local.until = time.monotonic() + seconds
    try:
        yield
    finally:
        _local.until = before


def _left(timeout: float | None, expired: type[Exception]) -> float | None:
    until = getattr(_local, "until", None)
    if until is None:
        return timeout
    left = until - time.monotonic()
    if left <= 0:
        raise expired("the request's deadline (timeout_s) passed")
    return left if timeout is None else min(timeout, left)


class _Stream:
    """A network stream (httpcore's interface) whose every operation keeps the deadline."""

    def __init__(self, inner: Any, expired: type[Exception]) -> None:
        self._inner, self._expired = inner, expired

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, self._expired))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, self._expired))

    def close(self) -> None:
        self._inner.close()

    def start_tls(self, ssl_context: Any, server_hostname: str | None = None, timeout: float | None = None):
        inner = self._inner.start_tls(ssl_context, server_hostname, _left(timeout, self._expired))
        return _Stream(inner, self._expired)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend:
    """A network backend (httpcore's interface) whose connections keep the deadline; `expired` is the
    read-timeout error of the httpcore the pool belongs to (openai may ship its own, httpcore2)."""

    def __init__(self, inner: Any, expired: type[Exception]) -> None:
        self._inner, self._expired = inner, expired

    def connect_tcp(self, host, port, timeout=None, local_address=None, socket_options=None):
        stream = self._inner.connect_tcp(
            host, port, _left(timeout, self._expired), local_address, socket_options
        )
        return _Stream(stream, self._expired)

    def connect_unix_socket(self, path, timeout=None, socket_options=None):
        stream = self._inner.connect_unix_socket(path, _left(timeout, self._expired), socket_options)
        return _Stream(stream, self._expired)

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


def _package(obj: Any) -> Any:
    return sys.modules[type(obj).__module__.split(".")[0]]


def http_errors(client: Any) -> type[Exception]:
    """The base error class of the httpx package `client` comes from (httpx, or openai's httpx2)."""
    for cls in type(client).__mro__:
        package = sys.modules.get(cls.__module__.split(".")[0])
        if package is not None and hasattr(package, "HTTPError"):
            return package.HTTPError
    return Exception


def http_client(**kwargs: Any) -> Any:
    """openai's default httpx client (its timeouts, limits, redirects, proxies from the environment)
    whose connections keep the deadline of `deadline`."""
    import openai

    client = openai.DefaultHttpxClient(**kwargs)
    # httpx builds one httpcore pool per transport (the default one and one per proxy mount); each pool
    # opens its connections through `_network_backend` (httpcore 1.x), which is wrapped here
    for transport in [client._transport, *client._mounts.values()]:
        if transport is None:  # a NO_PROXY pattern: its requests go through the default transport
            continue
        pool = getattr(transport, "_pool", None)
        if pool is None or not hasattr(pool, "_network_backend"):
            raise RuntimeError("httpx/httpcore changed: cannot set the request deadline (tasks/llm/deadline)")
        if not isinstance(pool._network_backend, _Backend):
            pool._network_backend = _Backend(pool._network_backend, _package(pool).ReadTimeout)
    return client
