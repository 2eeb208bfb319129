"""The job framework: one pure adapter per integrated kind, and the registry listing them.

`framework.GenericJob` is what each adapter implements (`batch_job.BatchJob` for batch/v1 Jobs);
`integrations.INTEGRATIONS` lists them. `pod_group` holds the plain-pod integration's transforms (a
composable kind: many pods, one Workload), driven by controller.kube.pod_group_reconciling. Pure (no
clock, no API): controller.kube.job_reconciling drives the adapters, and the watch list, the
router's wakes and the webhook rules derive from the registry.
"""
