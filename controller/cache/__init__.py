"""In-memory cluster state fed by watch events; builds the snapshots the core decides on.

Makes no API calls: `controller.kube` feeds it, `controller.core` reads its snapshots.
"""
