"""The farm's runtimes, one folder each, listed in one table (`registry.py`); `spec.py` says
what a runtime tells the farm. docs/runtimes.md is the guide to adding one."""
