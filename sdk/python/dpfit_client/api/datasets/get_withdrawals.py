from http import HTTPStatus
from typing import Any

import httpx

from ... import errors
from ...client import AuthenticatedClient, Client
from ...models.dataset_withdrawal_out import DatasetWithdrawalOut
from ...models.problem import Problem
from ...types import UNSET, Response, Unset


def _get_kwargs(
    *,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> dict[str, Any]:

    params: dict[str, Any] = {}

    params["limit"] = limit

    json_cursor: None | str | Unset
    if isinstance(cursor, Unset):
        json_cursor = UNSET
    else:
        json_cursor = cursor
    params["cursor"] = json_cursor

    params = {k: v for k, v in params.items() if v is not UNSET and v is not None}

    _kwargs: dict[str, Any] = {
        "method": "get",
        "url": "/v1/datasets/withdrawals",
        "params": params,
    }

    return _kwargs


def _parse_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Problem | list[DatasetWithdrawalOut] | None:
    if response.status_code == 200:
        response_200 = []
        _response_200 = response.json()
        for response_200_item_data in _response_200:
            response_200_item = DatasetWithdrawalOut.from_dict(response_200_item_data)

            response_200.append(response_200_item)

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


def _build_response(
    *, client: AuthenticatedClient | Client, response: httpx.Response
) -> Response[Problem | list[DatasetWithdrawalOut]]:
    return Response(
        status_code=HTTPStatus(response.status_code),
        content=response.content,
        headers=response.headers,
        parsed=_parse_response(client=client, response=response),
    )


def sync_detailed(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[Problem | list[DatasetWithdrawalOut]]:
    """Withdrawn datasets (admins)

     The datasets withdrawn with `DELETE /v1/datasets/{id}`, oldest first, one page per call
    (`limit`, `cursor` and `X-Next-Cursor` as every list): what each was, who withdrew it,
    when. Admins only.

    Args:
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[DatasetWithdrawalOut]]
    """

    kwargs = _get_kwargs(
        limit=limit,
        cursor=cursor,
    )

    response = client.get_httpx_client().request(
        **kwargs,
    )

    return _build_response(client=client, response=response)


def sync(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Problem | list[DatasetWithdrawalOut] | None:
    """Withdrawn datasets (admins)

     The datasets withdrawn with `DELETE /v1/datasets/{id}`, oldest first, one page per call
    (`limit`, `cursor` and `X-Next-Cursor` as every list): what each was, who withdrew it,
    when. Admins only.

    Args:
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[DatasetWithdrawalOut]
    """

    return sync_detailed(
        client=client,
        limit=limit,
        cursor=cursor,
    ).parsed


async def asyncio_detailed(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Response[Problem | list[DatasetWithdrawalOut]]:
    """Withdrawn datasets (admins)

     The datasets withdrawn with `DELETE /v1/datasets/{id}`, oldest first, one page per call
    (`limit`, `cursor` and `X-Next-Cursor` as every list): what each was, who withdrew it,
    when. Admins only.

    Args:
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Response[Problem | list[DatasetWithdrawalOut]]
    """

    kwargs = _get_kwargs(
        limit=limit,
        cursor=cursor,
    )

    response = await client.get_async_httpx_client().request(**kwargs)

    return _build_response(client=client, response=response)


async def asyncio(
    *,
    client: AuthenticatedClient,
    limit: int | Unset = 100,
    cursor: None | str | Unset = UNSET,
) -> Problem | list[DatasetWithdrawalOut] | None:
    """Withdrawn datasets (admins)

     The datasets withdrawn with `DELETE /v1/datasets/{id}`, oldest first, one page per call
    (`limit`, `cursor` and `X-Next-Cursor` as every list): what each was, who withdrew it,
    when. Admins only.

    Args:
        limit (int | Unset): Items per page (default 100, at most 1000). Default: 100.
        cursor (None | str | Unset): The `X-Next-Cursor` of the previous page (opaque); omit for
            the first.

    Raises:
        errors.UnexpectedStatus: If the server returns an undocumented status code and Client.raise_on_unexpected_status is True.
        httpx.TimeoutException: If the request takes longer than Client.timeout.

    Returns:
        Problem | list[DatasetWithdrawalOut]
    """

    return (
        await asyncio_detailed(
            client=client,
            limit=limit,
            cursor=cursor,
        )
    ).parsed
