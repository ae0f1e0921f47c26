"""Kubernetes schema knowledge for one pinned version: strict validation of manifests.

`validator` is the public entry point; `trim` regenerates the schema data it reads.
"""

from .validator import KUBERNETES_VERSION, Violation, validate, validate_manifest

__all__ = ["KUBERNETES_VERSION", "Violation", "validate", "validate_manifest"]
