"""Prometheus metrics over the results store and the live fleet (docs/metrics.md)."""
