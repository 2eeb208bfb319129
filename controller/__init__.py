"""tasq: topology-aware, all-or-nothing admission for batch Jobs (Kueue-compatible API).

`controller.api` and `controller.core` are pure; `controller.kube` is the only package that talks to
the Kubernetes API; `controller.cli` is the `tasq` command.
"""
