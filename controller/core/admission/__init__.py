"""Admission: Job -> Workload, quotas and cohorts, queues, flavor assignment and the admission cycle.

Pure (no clock, no API). Entry points: `workloads.workload_from_job` / `workload_info`,
`snapshot.build_snapshot`, `cycle.AdmissionState` (`submit`, `release` of a finished workload,
`capacity_changed`, `waiting`) with `run_until_quiet` / `run_cycle` / `explain` (decisions are values:
Admit or Pending), `conditions.mark_*` and `queue_status.queue_statuses`. Used by `tasq simulate`,
the benchmarks and the controller.
"""
