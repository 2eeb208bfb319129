"""Pure validators for tasq's kinds and the topology annotations on Jobs and pod templates.

Each returns every error as a `FieldError` with its Kubernetes field path; shared by the
validating webhook handlers and `tasq simulate`. Entry points: `validate`, `validate_update`.
"""

from webhooks.validation.dispatching import validate, validate_update
from webhooks.validation.errors import FieldError

__all__ = ["FieldError", "validate", "validate_update"]
