"""Admission webhooks: pure rules, kopf handlers and the TLS server that serves them.

Pure: `validation` (shared with `tasq simulate`), `defaulting`, `running_jobs`, `configurations`.
Runtime: `handlers` (kopf adapters; only they turn errors into denials), `serving` (HTTPS, reloads
its certificate files), `certificates` (a local CA). Wired into the operator by controller.kube.webhooking.
"""
