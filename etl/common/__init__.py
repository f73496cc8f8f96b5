"""Shared streaming-tar plumbing for the ETL servers in ``etl/``."""
