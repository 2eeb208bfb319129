"""The input boundary of `tasq simulate`: YAML/JSON streams read strictly, each document checked
(tasq's kinds through their models and the webhook validators, core kinds against Kubernetes' schema)
and turned into the objects the simulation keeps. Called by controller.commands.simulate.
"""
