"""The job framework: one pure adapter per integrated kind, and the registry listing them.

`framework.GenericJob` is what each adapter implements (`batch_job.BatchJob` for batch/v1 Jobs);
`integrations.INTEGRATIONS` lists them. Pure (no clock, no API): controller.kube.job_reconciling
drives them, and the watch list, the router's wakes and the webhook rules derive from the registry.
"""
