"""Admission webhooks: pure validation/defaulting (`webhooks.validation`) and thin handlers.

`webhooks.validation` is shared with `tasq simulate`; only the handlers turn errors into denials.
"""
