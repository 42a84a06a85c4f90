from .base import Engine, EngineError, EngineStats, GenerationRequest, StepResult, TokenOutput
from .profile import EngineProfile, load_engine_profile
from .sim import SimEngine

__all__ = [
    "Engine", "EngineError", "EngineProfile", "EngineStats", "GenerationRequest", "SimEngine",
    "StepResult", "TokenOutput", "load_engine_profile",
]
