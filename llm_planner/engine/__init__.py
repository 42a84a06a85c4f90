from llm_planner.engine.base import Engine, EngineError, EngineStats, GenerationRequest, StepResult, TokenOutput
from llm_planner.engine.profile import EngineProfile, load_engine_profile
from llm_planner.engine.sim import SimEngine

__all__ = [
    "Engine",
    "EngineError",
    "EngineProfile",
    "EngineStats",
    "GenerationRequest",
    "SimEngine",
    "StepResult",
    "TokenOutput",
    "load_engine_profile",
]
