"""Typed, strict models of the four T9k job kinds, and the kind -> model table.

The source of truth for every field; the compile path uses their generated plain twins
(compiler/jobtypes) and loads these only to explain a spec that is wrong.
"""

from __future__ import annotations

from .base import T9kModel
from .colossalai import ColossalAIJob
from .deepspeed import DeepSpeedJob
from .generic import GenericJob
from .pytorch import PyTorchTrainingJob

Job = GenericJob | PyTorchTrainingJob | DeepSpeedJob | ColossalAIJob

MODELS: dict[str, type[T9kModel]] = {
    "GenericJob": GenericJob,
    "PyTorchTrainingJob": PyTorchTrainingJob,
    "DeepSpeedJob": DeepSpeedJob,
    "ColossalAIJob": ColossalAIJob,
}

__all__ = ["MODELS", "ColossalAIJob", "DeepSpeedJob", "GenericJob", "Job", "PyTorchTrainingJob", "T9kModel"]
