"""Benchmarks (not tests): `python -m bench <suite>`. See bench/README or `python -m bench -h`."""
