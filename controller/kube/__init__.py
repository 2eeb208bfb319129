"""The only package that talks to the Kubernetes API: kopf handlers and the writes they make.

Turns the pure core's decisions into patches; imports kopf and `kubernetes.aio`.
"""
