"""Planner configuration (config/planner.yaml), validated with pydantic so that a bad file
fails at start with the offending field named."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator

from llm_planner.domain.policy import PolicyName
from llm_planner.domain.tuf import Tuf
from llm_planner.settings.model_file import load_model_file
from llm_planner.settings.paths import data_path


def validate_stat(stat: str) -> str:
    """A statistic of an execution-time model: min, mean, max or qNN (a percentile)."""
    if stat in ("min", "mean", "max"):
        return stat
    if stat.startswith("q") and stat[1:].replace(".", "", 1).isdigit() and 0 <= float(stat[1:]) <= 100:
        return stat
    raise ValueError(f"unknown estimate statistic {stat!r} (min, mean, max, qNN)")


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class UrgencyLevel(_Strict):
    name: str = Field(description="the level's name (Task.urgency is its index in the list)")
    beta: float = Field(gt=0, description="utility of a response within ert_s")
    ert_s: float = Field(ge=0, description="expected response time (s): full utility up to it")
    cutoff_s: float = Field(gt=0, description="response time (s) from which the utility is 0")

    @model_validator(mode="after")
    def _valid_tuf(self) -> UrgencyLevel:
        try:
            _ = self.tuf
        except ValueError as exc:
            raise ValueError(f"urgency level {self.name!r}: {exc}") from None
        return self

    @property
    def tuf(self) -> Tuf:
        return Tuf(self.beta, self.ert_s, self.cutoff_s)


class RobotTypeConfig(_Strict):
    skill_set: str
    exec_model: str


class BatchConfig(_Strict):
    max_batch_size: int = Field(default=32, ge=1, description="most generations in the engine at once")
    latency_guided: bool = Field(
        default=True,
        description="admit a generation only while the most urgent running segment keeps its slack (TimelyLLM 4.4)",
    )


class FeaturesConfig(_Strict):
    """Switches for what the policies add to the TimelyLLM paper's algorithm (all on: the
    policy's own set; one off: an ablation, `lrtrace compare --ablation`, in this order). A
    policy only uses a feature it has."""

    hold: bool = Field(
        default=True,
        description="hold segments back while streaming them would leave the "
        "robot waiting later (dispatch by expected utility)",
    )
    shrink: bool = Field(
        default=True, description="suspend generations that can wait so that a more important one decodes faster"
    )
    keep_running: bool = Field(
        default=True,
        description="no pause after a segment; a generation is suspended only when the batch controller must",
    )
    bound_wait: bool = Field(
        default=True,
        description="a segment whose utility has been lost for lost_wait_s "
        "goes first, the longest lost first, in the slack of "
        "segments that can still earn utility: none waits without "
        "bound",
    )
    lost_wait_s: float = Field(
        default=40.0, gt=0, description="bound_wait: how long a segment may wait once its utility is lost"
    )
    importance_guard: bool = Field(
        default=True,
        description="latency-guided admission holds a task back only "
        "if it loses nothing by waiting, or less than the "
        "running generations at least as important lose "
        "in its company, and then holds back no one "
        "behind it; "
        "preemption suspends no running generation that would "
        "lose utility by waiting, for a less important one, "
        "nor one for a newcomer at most as important that "
        "would earn nothing at the running batch either",
    )


class RtlmConfig(_Strict):
    """The `rtlm` policy (RT-LM, Li et al., RTSS 2023, adapted to plans; sched/queues.py)."""

    uncertainty_weight: float = Field(
        default=1.0,
        ge=0,
        description="how far into the predicted length's 90% interval a plan is priced: 0 the median, 1 the upper end",
    )
    batch_size: int = Field(default=32, ge=1, description="consolidation: most generations in one batch (b)")
    consolidation: float = Field(
        default=1.0,
        gt=0,
        description="consolidation: a generation joins a running "
        "batch only if its predicted remaining tokens are within a factor e^lambda of "
        "the batch's median (lambda)",
    )
    offload_quantile: float = Field(
        default=0.9,
        gt=0,
        le=1,
        description="offload: plans predicted longer than "
        "this quantile of the predictor's training plans go to the lower lane (tau)",
    )


class ReplanConfig(_Strict):
    max_attempts: int = Field(
        default=1,
        ge=0,
        description="error follow-ups the planner makes for one task when "
        "its robot fails a call (0: a failure ends the task)",
    )
    when_utility_lost: bool = Field(
        default=False,
        description="replan also a task that has earned no utility and can earn none any more (past its cutoff)",
    )
    urgency: str = Field(
        default="",
        description="the follow-up's urgency level (empty: the most urgent, the level with the shortest ert_s)",
    )


class VllmConfig(_Strict):
    """The real engine. `engine_args` go to vllm.EngineArgs unchanged (dtype, max_model_len,
    block_size, kv_cache_memory_bytes, tensor_parallel_size, pipeline_parallel_size, ...)."""

    model: str = Field(
        default="smollm2-135m-planner", description="the bundled model's name or a local Hugging Face model folder"
    )
    engine_profile: str = Field(
        default="auto", description="timing predictions: auto (this model, dtype and CPU class) or a profile's name"
    )
    constrained: bool = Field(default=True, description="decode only plans in the skill set's grammar")
    task_grammar: bool = Field(
        default=True,
        description="with constrained: each task's own plan grammar, in which "
        "an action names only the scene's objects (a search also what the task names) and "
        "an error follow-up opens with a plain action",
    )
    alert_hazards: bool = Field(
        default=True,
        description="with task_grammar: where an alert places its hazard or tells of one close by, "
        "its first action moves neither that way nor toward an object; a warning in plain words "
        "that places a hazard counts as an alert (catalog/hazards.py)",
    )
    retrieved_examples: int = Field(
        default=0,
        ge=0,
        le=8,
        description="the example corpus's tasks nearest to each task's instruction, shown "
        "before it with their plans (planning/retrieval.py; 0: none)",
    )
    example_corpus: str = Field(
        default="config/tuning/corpus.jsonl",
        description="where retrieved examples come from: a tuning corpus (its tuning split)",
    )
    max_plan_tokens: int = Field(
        default=96, gt=0, description="a plan's token limit, times its skill set's `plan_token_scale`"
    )
    calibrate: bool = Field(
        default=True,
        description="correct the profile's step predictions by the iterations the engine runs (engine/calibration.py)",
    )
    engine_args: dict[str, Any] = Field(default={}, description="vllm.EngineArgs fields, passed unchanged")
    # Greedy by default; a repetition penalty counts prompt and output tokens together, so a
    # resumed generation (plan so far in its prompt) continues exactly as an uninterrupted one
    # would (output-only penalties would not).
    sampling: dict[str, Any] = Field(default={"temperature": 0.0}, description="vllm.SamplingParams fields")


class RayConfig(_Strict):
    """Where several engine replicas run: each is a Ray actor (engine/ray_replica.py)."""

    address: str = Field(
        default="",
        description="a Ray cluster to join (as RAY_ADDRESS); empty: the environment's "
        "RAY_ADDRESS, else a local cluster on 127.0.0.1 started by the planner",
    )
    cpus_per_replica: float = Field(
        default=1.0,
        gt=0,
        description="CPUs each replica's actor holds (a vLLM CPU replica computes with OMP_NUM_THREADS threads)",
    )
    gpus_per_replica: float = Field(
        default=1.0,
        ge=0,
        description="GPUs each vLLM replica's actor holds where the cluster has GPUs (sim replicas hold none)",
    )


class LiveViewConfig(_Strict):
    port: int = Field(
        default=-1,
        ge=-1,
        le=65535,
        description="live node: serve the live view to Foxglove on "
        "127.0.0.1 at this port (0: any free port, -1: no server)",
    )
    publish: bool = Field(
        default=False,
        description="live node: also publish the live view's channels on "
        "/llm_planner/view, where `lrtrace record` and `lrtrace replay --record` write them to MCAP",
    )

    @property
    def enabled(self) -> bool:
        return self.port >= 0 or self.publish


class LifecycleConfig(_Strict):
    autostart: bool = Field(
        default=True,
        description="live node: configure and activate the planner node as it "
        "starts; false: it waits for lifecycle transitions (change_state)",
    )
    deactivate: Literal["finish", "cancel"] = Field(
        default="finish",
        description="live node: what deactivating does with the tasks in flight: finish them "
        "(new ones are rejected) or cancel them",
    )


class PlannerConfig(_Strict):
    policy: PolicyName = Field(default=PolicyName.TIMELY, description="the scheduling policy")
    engine: Literal["sim", "vllm"] = Field(
        default="sim", description="sim (recorded plans, profiled timing) or vllm (real generation)"
    )
    engine_profile: str = Field(
        default="llama3-8b-fp16-rtx4090",
        description="the sim engine's timing profile (config/engine_profiles/<name>.yaml)",
    )
    tokenizer: str = Field(default="smollm2-135m-instruct", description="token counts for the sim engine")
    # The minimum (paper's choice) makes the next segment early rather than late.
    exec_estimate: Annotated[str, AfterValidator(validate_stat)] = Field(
        default="min",
        description="statistic of the execution-time model that predicts when a robot finishes a "
        "segment: min, mean, max or qNN (a percentile)",
    )
    urgency_levels: list[UrgencyLevel] = Field(description="time-utility functions, index = Task.urgency")
    robot_types: dict[str, RobotTypeConfig] = Field(description="robot type -> skill set and execution-time model")
    finished_tasks_kept: int = Field(
        default=5000,
        ge=1,
        description="live node: finished tasks whose records it "
        "keeps (memory stays bounded; a duplicate task_id is found among these)",
    )
    # Generous: a step prefilling a full batch of prompts on a slow CPU takes seconds.
    engine_step_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="live planning: an engine step (or warm-up) "
        "that takes longer fails the tasks inside and the engine is replaced",
    )
    robot_links: Literal["process", "threads"] = Field(
        default="process",
        description="live node: the robot links (the action clients that send segments) run in "
        "a process of their own, where the planner's work cannot hold them up, or as threads of the planner's "
        "process (docs/performance/ros-path.md)",
    )
    batch: BatchConfig = BatchConfig()
    replicas: int = Field(
        default=1,
        ge=1,
        description="engine replicas behind the planner, each with its own batch and KV cache (sched/placement.py)",
    )
    placement: Literal["round-robin", "least-tokens", "deadline"] = Field(
        default="deadline",
        description="which replica a generation joins: round-robin, least-tokens (fewest "
        "predicted tokens to write) or deadline (where its next segment is predicted to end first)",
    )
    ray: RayConfig = RayConfig()
    vllm: VllmConfig = VllmConfig()
    # planning/segment_lengths.py
    predictor: str = Field(
        default="none",
        min_length=1,
        description="a segment's expected tokens: none (the skill set's segment_tokens), auto "
        "(config/predictor/<vllm.model>.pt) or a checkpoint's path",
    )
    features: FeaturesConfig = FeaturesConfig()
    rtlm: RtlmConfig = RtlmConfig()
    replan: ReplanConfig = ReplanConfig()
    live_view: LiveViewConfig = LiveViewConfig()
    lifecycle: LifecycleConfig = LifecycleConfig()

    @model_validator(mode="after")
    def _unique_levels(self) -> PlannerConfig:
        names = [lvl.name for lvl in self.urgency_levels]
        if not names:
            raise ValueError("at least one urgency level is required")
        if len(set(names)) != len(names):
            raise ValueError(f"urgency level names must be unique: {names}")
        if self.replan.urgency and self.replan.urgency not in names:
            raise ValueError(f"replan.urgency {self.replan.urgency!r} is not an urgency level ({names})")
        return self

    @property
    def replan_level(self) -> UrgencyLevel:
        """The urgency level of the planner's error follow-ups."""
        if self.replan.urgency:
            return self.level(self.replan.urgency)
        return min(self.urgency_levels, key=lambda lvl: (lvl.ert_s, -lvl.beta))

    def level(self, index_or_name: int | str) -> UrgencyLevel:
        if isinstance(index_or_name, int):
            if not 0 <= index_or_name < len(self.urgency_levels):
                raise ValueError(f"urgency {index_or_name} out of range 0..{len(self.urgency_levels) - 1}")
            return self.urgency_levels[index_or_name]
        for lvl in self.urgency_levels:
            if lvl.name == index_or_name:
                return lvl
        raise ValueError(f"unknown urgency level {index_or_name!r}")

    def level_for_tuf(self, tuf: Tuf, tolerance: float = 1e-6) -> str | None:
        """The configured level whose (beta, ERT, cutoff) equals this TUF, if any."""
        for lvl in self.urgency_levels:
            if all(abs(a - b) <= tolerance for a, b in zip(lvl.tuf.as_triple(), tuf.as_triple())):
                return lvl.name
        return None

    def with_engine_dtype(self, dtype: str) -> PlannerConfig:
        """The same config with the real engine computing in `dtype` (its engine_args' dtype)."""
        return self.model_copy(
            update={"vllm": self.vllm.model_copy(update={"engine_args": {**self.vllm.engine_args, "dtype": dtype}})}
        )

    def robot_type(self, name: str) -> RobotTypeConfig:
        try:
            return self.robot_types[name]
        except KeyError:
            raise ValueError(f"unknown robot type {name!r}; configured: {sorted(self.robot_types)}") from None


def load_planner_config(path: str | Path | None = None, **overrides) -> PlannerConfig:
    path = Path(path) if path else data_path("config", "planner.yaml")
    return load_model_file(PlannerConfig, path, "planner config", overrides)
