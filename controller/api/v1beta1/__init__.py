"""Kueue's v1beta1 (and Topology's v1alpha1) models, kept only for their CRD schemas.

tasq's code reads and writes the v1beta2 models of `controller.api` (the hub); objects sent or read
in these versions are converted by `controller.api.conversion`. Used by `controller.api.crds`.
"""
