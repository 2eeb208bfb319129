"""The job framework: one pure adapter per integrated kind, and the registry listing them.

`framework.GenericJob` is what each single-object adapter implements (`batch_job.BatchJob` for
batch/v1 Jobs, `jobset.JobSet`), `framework.ComposableJob` what a composable one does
(`pod_group.PodGroupJob`: many pods, one Workload); `integrations` lists them. Pure (no
clock, no API): controller.kube.job_reconciling drives the adapters, and the watch list, the
router's wakes and the webhook rules derive from the registry.
"""
