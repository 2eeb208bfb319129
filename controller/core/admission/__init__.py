"""Admission: Job -> Workload, quotas and cohorts, queues, flavor assignment and the admission cycle.

Pure code (no clock, no API): callers pass a snapshot and get decisions back as values. API (used by
`tasq simulate`, the benchmarks and the controller's scheduler loop):
- `workloads.workload_from_job(job)` -> the Workload manifest; `workload_info(manifest)` -> WorkloadInfo.
- `snapshot.build_snapshot(cluster_queues, local_queues, flavors, topologies, nodes, pods, namespaces)`.
- `cycle.AdmissionState(snapshot)`: `submit(info)`, `release(key)` (finished/deleted: quota and nodes
  come back, parked workloads retry), `capacity_changed()`, `waiting()`; `run_until_quiet(state)` /
  `run_cycle(state)` -> [Admit(key, cluster_queue, admission) | Pending(key, ..., reason, detail,
  message)]; `explain(state, key)` recomputes why a workload waits.
- `conditions.mark_admitted / mark_pending / mark_finished(workload_model, ..., now)`.
"""
