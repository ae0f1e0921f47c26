"""Deployments (apps/v1), stored only: pkg/registry/apps/deployment/strategy.go keeps status
apart from spec and counts spec changes in metadata.generation.  No Deployment controller
runs here: a test writes the status a controller would (readyReplicas, observedGeneration).
Not decoded into the Go type: flatjob's trimmed 1.32 schema keeps no Deployment status."""

from __future__ import annotations

from .strategy import Strategy


class DeploymentStrategy(Strategy):
    status_subresource = True
    generation = True
