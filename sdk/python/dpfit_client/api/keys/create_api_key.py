from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.key_create import KeyCreate
from ...models.key_created import KeyCreated
from ...models.problem import Problem
from ...types import Response


def _get_kwargs(
    *,
    body: KeyCreate,
) -> dict[str, Any]:
    headers: dict[str, Any] = {}

    _kwargs: dict[str, Any] = {
        "method": "post",
        "url": "/v1/keys",
    }

    _kwargs["json"] = body.to_dict()

    headers["Content-Type"] = "application/json"

    _kwargs["headers"] = headers
    return _kwargs


def _parse_response(*, client: AuthenticatedClient | Client, response: httpx.Response) -> KeyCreated | Problem | None:
    if response.status_code == 201:
        response_201 = KeyCreated.from_dict(response.json())

        return response_201

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[KeyCreated | Problem]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    body: KeyCreate,
) -> Response[KeyCreated | Problem]:
    """Create a key

     Create an API key; the key is shown once.

    A new name creates the principal with this role; an existing name with the same role gets
    one more key (rotation, also after all its keys were revoked); an existing name with another
    role is refused with 409 (`field: role`) — a principal has one role, and names are never
    reused for someone else.

    Args:
        body (KeyCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyCreated | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    body: KeyCreate,
) -> KeyCreated | Problem | None:
    """Create a key

     Create an API key; the key is shown once.

    A new name creates the principal with this role; an existing name with the same role gets
    one more key (rotation, also after all its keys were revoked); an existing name with another
    role is refused with 409 (`field: role`) — a principal has one role, and names are never
    reused for someone else.

    Args:
        body (KeyCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyCreated | Problem
    """

    return sync_detailed(
        client=client,
        body=body,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    body: KeyCreate,
) -> Response[KeyCreated | Problem]:
    """Create a key

     Create an API key; the key is shown once.

    A new name creates the principal with this role; an existing name with the same role gets
    one more key (rotation, also after all its keys were revoked); an existing name with another
    role is refused with 409 (`field: role`) — a principal has one role, and names are never
    reused for someone else.

    Args:
        body (KeyCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[KeyCreated | Problem]
    """

    kwargs = _get_kwargs(
        body=body,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    body: KeyCreate,
) -> KeyCreated | Problem | None:
    """Create a key

     Create an API key; the key is shown once.

    A new name creates the principal with this role; an existing name with the same role gets
    one more key (rotation, also after all its keys were revoked); an existing name with another
    role is refused with 409 (`field: role`) — a principal has one role, and names are never
    reused for someone else.

    Args:
        body (KeyCreate):

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        KeyCreated | Problem
    """

    return (
        await asyncio_detailed(
            client=client,
            body=body,
        )
    ).parsed
