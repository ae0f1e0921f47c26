"""Kind -> planner: the one place that knows which planner handles which kind."""

from __future__ import annotations

from . import Planner
from .colossalai import plan_colossalai
from .deepspeed import plan_deepspeed
from .generic import plan_generic
from .pytorch import plan_pytorch

PLANNERS: dict[str, Planner] = {
    "GenericJob": plan_generic,
    "PyTorchTrainingJob": plan_pytorch,
    "DeepSpeedJob": plan_deepspeed,
    "ColossalAIJob": plan_colossalai,
}
