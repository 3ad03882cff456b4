"""Nightly runs: a suite of models x devices x targets, compared with a baseline run."""
