"""flatjob compiler: T9k job specs in, fully rendered Kubernetes manifests out."""

from .version import __version__

__all__ = ["__version__"]
