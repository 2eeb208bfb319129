"""Admission webhooks: pure rules, tasq's handler table and the TLS server that answers with it.

Pure: `validation` (shared with `tasq simulate`), `defaulting`, `running_jobs`, `configurations`.
Runtime: `handlers` (the table; only handlers turn errors into denials), `reviewing` (answers reviews
with the table), `serving` (HTTPS, reloads its certificate files), `certificates` (a local CA).
Wired into the operator by controller.kube.webhooking and controller.kube.webhook_serving.
"""
