"""The HTTP front of the devcluster: what clients see on the wire.

Routing and request decoding (`serving`), discovery and OpenAPI documents, kubectl's Table output,
protobuf encoding and JSONPath. Calls into `devcluster.server`; nothing below calls back up.
"""
