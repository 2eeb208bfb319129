"""Admission: Job -> Workload, quotas and cohorts, queues, flavor assignment and the admission cycle.

Pure code (no clock, no API): callers pass a snapshot and get decisions back as values.
Used by `tasq simulate`, the benchmarks and the controller's scheduler loop.
"""
