"""The HTTP clients of the OpenAI-compatible model planmode builds: a deadline on the whole request and a cap on
the reply's size.

httpx's timeouts bound each network operation, not the request: a server that sends a byte every two seconds
keeps a request with a 3 s read timeout alive for ever, and a reply is read whole into memory however large it
is. The clients made here bound both:

- **the deadline**: every network operation of a request (connect, TLS, each write, each read of the headers and
  of the body) gets at most the time left until ``timeout`` seconds after the request started, and an operation
  past it fails with a timeout (``openai.APITimeoutError``). A request therefore ends within ``timeout`` from its
  connect to its last byte; the openai client retries a timed-out request ``max_retries`` times, so one model call
  ends within ``(max_retries + 1) * timeout`` plus the client's back-off between attempts (under 2 s for two
  retries).
- **the cap**: a reply whose ``Content-Length`` exceeds ``max_bytes`` is refused before its body is read, and one
  without (chunked, or ended by closing the connection) is refused once ``max_bytes`` of it have arrived; what was
  read is dropped. Memory stays within the cap. Requests ask for an uncompressed reply (``Accept-Encoding:
  identity``), so the cap counts the bytes the reply holds.

The deadline reaches the operations through the connection pool's network backend: httpx builds its pool without
a way to pass one, so `bounded_transport` sets httpcore's ``_network_backend`` of each pool it builds (a test that
holds a slow server against it fails if httpx ever changes that).
"""

from __future__ import annotations

import contextvars
import ssl
import time
import typing
from collections.abc import AsyncIterator, Iterable, Iterator
from typing import Any

import httpcore
import httpx

from planmode.errors import PlanModeError

__all__ = ["ReplyTooLargeError", "async_client", "sync_client"]

#: The monotonic time the current request must end by (None: no request of a bounded client is running here).
_DEADLINE: contextvars.ContextVar[float | None] = contextvars.ContextVar("planmode_http_deadline", default=None)


class ReplyTooLargeError(PlanModeError):
    """A model server's reply was larger than the ``max_reply_bytes`` setting; it was not read whole."""


def _left(timeout: float | None, what: str) -> float | None:
    """``timeout`` shortened to the time left before the request's deadline; a timeout error past it."""
    deadline = _DEADLINE.get()
    if deadline is None:
        return timeout
    left = deadline - time.monotonic()
    if left <= 0:
        error = httpcore.ConnectTimeout if what == "connect" else httpcore.ReadTimeout
        raise error(f"the model request took longer than its timeout (while waiting to {what})")
    return left if timeout is None else min(timeout, left)


class _Stream(httpcore.NetworkStream):
    def __init__(self, inner: httpcore.NetworkStream) -> None:
        self._inner = inner

    def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return self._inner.read(max_bytes, _left(timeout, "read"))

    def write(self, buffer: bytes, timeout: float | None = None) -> None:
        self._inner.write(buffer, _left(timeout, "write"))

    def close(self) -> None:
        self._inner.close()

    def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.start_tls(ssl_context, server_hostname, _left(timeout, "connect")))

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _Backend(httpcore.NetworkBackend):
    def __init__(self, inner: httpcore.NetworkBackend) -> None:
        self._inner = inner

    def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.NetworkStream:
        stream = self._inner.connect_tcp(host, port, _left(timeout, "connect"), local_address, socket_options)
        return _Stream(stream)

    def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.NetworkStream:
        return _Stream(self._inner.connect_unix_socket(path, _left(timeout, "connect"), socket_options))

    def sleep(self, seconds: float) -> None:
        self._inner.sleep(seconds)


class _AsyncStream(httpcore.AsyncNetworkStream):
    def __init__(self, inner: httpcore.AsyncNetworkStream) -> None:
        self._inner = inner

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        return await self._inner.read(max_bytes, _left(timeout, "read"))

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        await self._inner.write(buffer, _left(timeout, "write"))

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def start_tls(
        self, ssl_context: ssl.SSLContext, server_hostname: str | None = None, timeout: float | None = None
    ) -> httpcore.AsyncNetworkStream:
        inner = await self._inner.start_tls(ssl_context, server_hostname, _left(timeout, "connect"))
        return _AsyncStream(inner)

    def get_extra_info(self, info: str) -> Any:
        return self._inner.get_extra_info(info)


class _AsyncBackend(httpcore.AsyncNetworkBackend):
    def __init__(self, inner: httpcore.AsyncNetworkBackend) -> None:
        self._inner = inner

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        inner = await self._inner.connect_tcp(host, port, _left(timeout, "connect"), local_address, socket_options)
        return _AsyncStream(inner)

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        return _AsyncStream(await self._inner.connect_unix_socket(path, _left(timeout, "connect"), socket_options))

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def _too_large(max_bytes: int) -> ReplyTooLargeError:
    return ReplyTooLargeError(
        f"the model server's reply is larger than max_reply_bytes ({max_bytes:,} bytes): refused without reading "
        "the rest; raise the max_reply_bytes setting if replies need more"
    )


def _over(response: httpx.Response, max_bytes: int) -> bool:
    """Whether the reply's declared length is past the cap."""
    length = response.headers.get("content-length", "")
    return length.isdigit() and int(length) > max_bytes


class _CappedStream(httpx.SyncByteStream):
    """The reply's body, read within the request's deadline and refused past ``max_bytes``."""

    def __init__(self, inner: httpx.SyncByteStream, deadline: float, max_bytes: int) -> None:
        self._inner, self._deadline, self._max = inner, deadline, max_bytes

    def __iter__(self) -> Iterator[bytes]:
        seen = 0
        parts = iter(self._inner)
        while True:
            token = _DEADLINE.set(self._deadline)
            try:
                part = next(parts, None)
            finally:
                _DEADLINE.reset(token)
            if part is None:
                return
            seen += len(part)
            if seen > self._max:
                raise _too_large(self._max)
            yield part

    def close(self) -> None:
        self._inner.close()


class _AsyncCappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, deadline: float, max_bytes: int) -> None:
        self._inner, self._deadline, self._max = inner, deadline, max_bytes

    async def __aiter__(self) -> AsyncIterator[bytes]:
        seen = 0
        parts = aiter(self._inner)
        while True:
            token = _DEADLINE.set(self._deadline)
            try:
                part = await anext(parts, None)
            finally:
                _DEADLINE.reset(token)
            if part is None:
                return
            seen += len(part)
            if seen > self._max:
                raise _too_large(self._max)
            yield part

    async def aclose(self) -> None:
        await self._inner.aclose()


class _Bounded(httpx.BaseTransport):
    def __init__(self, inner: httpx.HTTPTransport, timeout: float, max_bytes: int) -> None:
        _bound_pool(inner, _Backend)
        self._inner, self._timeout, self._max = inner, timeout, max_bytes

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self._timeout
        request.headers["Accept-Encoding"] = "identity"
        token = _DEADLINE.set(deadline)
        try:
            response = self._inner.handle_request(request)
        finally:
            _DEADLINE.reset(token)
        if _over(response, self._max):
            response.close()
            raise _too_large(self._max)
        stream = typing.cast(httpx.SyncByteStream, response.stream)
        response.stream = _CappedStream(stream, deadline, self._max)
        return response

    def close(self) -> None:
        self._inner.close()


class _AsyncBounded(httpx.AsyncBaseTransport):
    def __init__(self, inner: httpx.AsyncHTTPTransport, timeout: float, max_bytes: int) -> None:
        _bound_pool(inner, _AsyncBackend)
        self._inner, self._timeout, self._max = inner, timeout, max_bytes

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        deadline = time.monotonic() + self._timeout
        request.headers["Accept-Encoding"] = "identity"
        token = _DEADLINE.set(deadline)
        try:
            response = await self._inner.handle_async_request(request)
        finally:
            _DEADLINE.reset(token)
        if _over(response, self._max):
            await response.aclose()
            raise _too_large(self._max)
        stream = typing.cast(httpx.AsyncByteStream, response.stream)
        response.stream = _AsyncCappedStream(stream, deadline, self._max)
        return response

    async def aclose(self) -> None:
        await self._inner.aclose()


def _bound_pool(transport: httpx.HTTPTransport | httpx.AsyncHTTPTransport, wrap: Any) -> None:
    """Put the deadline between ``transport``'s connection pool and its network backend (see the module)."""
    pool = transport._pool
    pool._network_backend = wrap(pool._network_backend)  # httpcore's pools (direct, HTTP and SOCKS proxy) all have it


def _proxies() -> dict[str, str | None]:
    """The proxies of the environment (HTTP_PROXY, HTTPS_PROXY, ALL_PROXY, NO_PROXY), as httpx mounts them."""
    from httpx._utils import get_environment_proxies  # the function httpx's own clients use

    return dict(get_environment_proxies())


def sync_client(timeout: float, max_bytes: int) -> httpx.Client:
    """An ``httpx.Client`` for the openai client whose requests end within ``timeout`` seconds, connect to last
    byte, and whose replies are refused past ``max_bytes`` (see the module); proxies from the environment are
    bounded the same way."""
    mounts = {
        pattern: _Bounded(httpx.HTTPTransport(proxy=url), timeout, max_bytes) if url else None
        for pattern, url in _proxies().items()
    }
    return httpx.Client(
        transport=_Bounded(httpx.HTTPTransport(), timeout, max_bytes),
        mounts=mounts,
        trust_env=False,  # the environment's proxies are the mounts above
        follow_redirects=True,  # as the openai client's own
        timeout=timeout,
    )


def async_client(timeout: float, max_bytes: int) -> httpx.AsyncClient:
    """`sync_client` for the async openai client."""
    mounts = {
        pattern: _AsyncBounded(httpx.AsyncHTTPTransport(proxy=url), timeout, max_bytes) if url else None
        for pattern, url in _proxies().items()
    }
    return httpx.AsyncClient(
        transport=_AsyncBounded(httpx.AsyncHTTPTransport(), timeout, max_bytes),
        mounts=mounts,
        trust_env=False,
        follow_redirects=True,
        timeout=timeout,
    )
