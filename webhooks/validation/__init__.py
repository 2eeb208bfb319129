"""Pure validators and defaulting for tasq's kinds and the topology annotations on Jobs and pods.

Each returns every error with its field path; shared by the webhook handlers and `tasq simulate`.
"""
