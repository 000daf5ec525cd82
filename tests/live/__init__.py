"""Tests against real processes: `dpfit serve`, Dask clusters, PostgreSQL, Chromium, S3."""
