from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.health import Health
from ...models.problem import Problem
from ...types import Response


def _get_kwargs() -> dict[str, Any]:

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/healthz",
    }

    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Health | Problem | None:
    if response.status_code == 200:
        response_200 = Health.from_dict(response.json())

        return response_200

    if response.status_code == 401:
        response_401 = Problem.from_dict(response.json())

        return response_401

    if response.status_code == 403:
        response_403 = Problem.from_dict(response.json())

        return response_403

    if response.status_code == 404:
        response_404 = Problem.from_dict(response.json())

        return response_404

    if response.status_code == 409:
        response_409 = Problem.from_dict(response.json())

        return response_409

    if response.status_code == 413:
        response_413 = Problem.from_dict(response.json())

        return response_413

    if response.status_code == 422:
        response_422 = Problem.from_dict(response.json())

        return response_422

    if response.status_code == 503:
        response_503 = Problem.from_dict(response.json())

        return response_503

    if client.raise_on_unexpected_status:
        raise errors.UnexpectedStatus(response.status_code, response.content)
    else:
        return None


def _build_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> Response[Health | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Health | Problem]:
    """Health

     ok only when the database answers, is intact (SQLite: ``PRAGMA quick_check`` at most
    every 30 s, service/api/health.py) AND carries the schema revision this code expects.

    Unreachable database → 503 (middleware); reachable but empty or at another Alembic
    revision (e.g. recreated, or not migrated) → 503 naming both revisions. Both carry
    ``Retry-After``.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Health | Problem]
    """

    kwargs = _get_kwargs()

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient | Client,
) -> Health | Problem | None:
    """Health

     ok only when the database answers, is intact (SQLite: ``PRAGMA quick_check`` at most
    every 30 s, service/api/health.py) AND carries the schema revision this code expects.

    Unreachable database → 503 (middleware); reachable but empty or at another Alembic
    revision (e.g. recreated, or not migrated) → 503 naming both revisions. Both carry
    ``Retry-After``.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Health | Problem
    """

    return sync_detailed(
        client=client,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient | Client,
) -> Response[Health | Problem]:
    """Health

     ok only when the database answers, is intact (SQLite: ``PRAGMA quick_check`` at most
    every 30 s, service/api/health.py) AND carries the schema revision this code expects.

    Unreachable database → 503 (middleware); reachable but empty or at another Alembic
    revision (e.g. recreated, or not migrated) → 503 naming both revisions. Both carry
    ``Retry-After``.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Health | Problem]
    """

    kwargs = _get_kwargs()

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient | Client,
) -> Health | Problem | None:
    """Health

     ok only when the database answers, is intact (SQLite: ``PRAGMA quick_check`` at most
    every 30 s, service/api/health.py) AND carries the schema revision this code expects.

    Unreachable database → 503 (middleware); reachable but empty or at another Alembic
    revision (e.g. recreated, or not migrated) → 503 naming both revisions. Both carry
    ``Retry-After``.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Health | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
        )
    ).parsed
