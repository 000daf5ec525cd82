"""Every source backend the service ships, registered: open and reopen sources through here.

Importing this module imports each backend, and each registers its URI scheme with the source
registry (:mod:`service.data.opening`): local files under the data roots (the default),
``s3://`` object stores, ``sql://`` tables. The registry itself imports no backend.
"""

from __future__ import annotations

from service.data import local_files, object_store, sql_source
from service.data.opening import open_source, reopen_source

__all__ = ["open_source", "reopen_source"]

BACKENDS = (local_files, object_store, sql_source)
