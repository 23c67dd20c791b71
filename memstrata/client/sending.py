"""The two transports: ``Transport`` runs an exchange over ``httpx.Client``, ``AsyncTransport``
over ``httpx.AsyncClient`` (``client.transport`` builds the requests and maps the errors for
both; the parts write each call once, as an exchange).

Each runs an exchange to its end: it sends each ``Request`` and sends the response back, writes
each ``Save``'s stream to its file, and returns what the exchange returns.  When a step fails
(an error response, no answer), the exchange is closed (its ``with`` blocks end) and the error
raised.
"""

from __future__ import annotations

from typing import Any, TypeVar

import httpx

from memstrata.client.transport import BaseTransport, Exchange, Request, Save

T = TypeVar("T")


class Transport(BaseTransport[httpx.Client]):
    """Exchanges over one ``httpx.Client``; thread-safe (its pool is)."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        super().__init__(httpx.Client, base_url, api_key, timeout)

    def close(self) -> None:
        self._http.close()

    def run(self, exchange: Exchange[T]) -> T:
        """Run ``exchange`` to its end; its result."""
        answer: Any = None
        try:
            while True:
                step = exchange.send(answer)
                if isinstance(step, Request):
                    answer = self._send(step)
                else:
                    self._save(step)
                    answer = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            exchange.close()
            raise

    def _send(self, step: Request) -> httpx.Response:
        request = self.build(step)
        try:
            response = self._http.send(request, stream=step.stream)
            if response.is_error and step.stream:
                response.read()
        except httpx.TransportError as exc:
            raise self.failed(request, exc) from exc
        if response.is_error:
            response.close()
            raise self.refused(response)
        return response

    def _save(self, step: Save) -> None:
        archive = step.target.open("xb")  # FileExistsError if it appeared: not ours to remove
        try:
            with archive:
                for piece in step.response.iter_bytes():
                    archive.write(piece)
        except BaseException as exc:
            step.target.unlink(missing_ok=True)
            if isinstance(exc, httpx.TransportError):
                raise self.failed(step.response.request, exc) from exc
            raise
        finally:
            step.response.close()


class AsyncTransport(BaseTransport[httpx.AsyncClient]):
    """Exchanges over one ``httpx.AsyncClient``, for one event loop at a time."""

    def __init__(self, base_url: str, api_key: str | None, timeout: float) -> None:
        super().__init__(httpx.AsyncClient, base_url, api_key, timeout)

    async def aclose(self) -> None:
        await self._http.aclose()

    async def run(self, exchange: Exchange[T]) -> T:
        """Run ``exchange`` to its end; its result."""
        answer: Any = None
        try:
            while True:
                step = exchange.send(answer)
                if isinstance(step, Request):
                    answer = await self._send(step)
                else:
                    await self._save(step)
                    answer = None
        except StopIteration as done:
            return done.value  # type: ignore[no-any-return]
        except BaseException:
            exchange.close()
            raise

    async def _send(self, step: Request) -> httpx.Response:
        request = self.build(step)
        try:
            response = await self._http.send(request, stream=step.stream)
            if response.is_error and step.stream:
                await response.aread()
        except httpx.TransportError as exc:
            raise self.failed(request, exc) from exc
        if response.is_error:
            await response.aclose()
            raise self.refused(response)
        return response

    async def _save(self, step: Save) -> None:
        archive = step.target.open("xb")  # FileExistsError if it appeared: not ours to remove
        try:
            with archive:
                async for piece in step.response.aiter_bytes():
                    archive.write(piece)
        except BaseException as exc:
            step.target.unlink(missing_ok=True)
            if isinstance(exc, httpx.TransportError):
                raise self.failed(step.response.request, exc) from exc
            raise
        finally:
            await step.response.aclose()
