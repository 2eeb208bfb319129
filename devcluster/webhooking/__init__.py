"""Calling admission webhooks: configurations, AdmissionReviews over TLS, warnings back to the client.

Hooked into `devcluster.server.apiserver.ApiServer` by `devcluster.cluster.DevCluster`.
"""
