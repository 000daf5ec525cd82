"""dpfit: differentially private model fitting as an HTTP service."""

__version__ = "0.1.0"
