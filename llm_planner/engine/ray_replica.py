"""Engine replicas as Ray actors.

A replica's engine (sim or vLLM) lives in a Ray actor, `EngineHost`, built there by a
picklable factory. The planner drives it through `RayEngine`, an `Engine` that keeps a mirror
of what the planner reads most (the running generations in batch order, their context, the
free KV) so that admission decisions cost no call. Suspend, resume and release are messages
queued in order and carried by the next call; one call per iteration carries them and brings
back the iteration's tokens for the whole batch, the contexts and the free KV. Adding a
generation is a call of its own, as its errors (a prompt that does not fit) belong to the
admission that made it.

Ray delivers one caller's calls to an actor in the order they were made, so the replica sees
the planner's decisions exactly as an engine in the planner's process would: the same tokens
in the same iterations (test/test_ray_replicas.py checks it on the sim engine).

Ray is imported only here and in engine/ray_compat.py.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any

from llm_planner.domain.clock import Clock, VirtualClock, WallClock
from llm_planner.engine.base import Continuation, Engine, EngineError, EngineStats, GenerationRequest, StepResult
from llm_planner.engine.calibration import StepCorrection
from llm_planner.engine.ray_compat import keep_on_loopback

log = logging.getLogger(__name__)

EngineBuilder = Callable[[Clock], Engine]
Op = tuple[Any, ...]  # ("suspend", gen_id) | ("resume", gen_id, urgency) | ("release", gen_id)


def start_ray(address: str = "", cpus: int | None = None) -> None:
    """Join the cluster at `address` (else RAY_ADDRESS), or start a local one that listens on
    127.0.0.1 only (Ray binds every interface and the machine's outside address otherwise)."""
    import ray

    if ray.is_initialized():
        return
    address = address or os.environ.get("RAY_ADDRESS", "")
    if address:
        log.info("joining the Ray cluster at %s", address)
        ray.init(address=address, log_to_driver=False)
        return
    keep_on_loopback()
    ray.init(include_dashboard=False, num_cpus=cpus or os.cpu_count(), log_to_driver=False)


def cluster_gpus() -> float:
    import ray

    return float(ray.cluster_resources().get("GPU", 0.0))


def cluster_cpus() -> float:
    import ray

    return float(ray.cluster_resources().get("CPU", 0.0))


class EngineHost:
    """The actor: one engine and the messages that drive it."""

    def __init__(self, build: EngineBuilder, live: bool) -> None:
        self.build = build
        self.clock: Clock = WallClock() if live else VirtualClock()
        self.engine = build(self.clock)

    def describe(self) -> dict[str, Any]:
        e = self.engine
        return {
            "name": type(e).__name__,
            "profile": e.profile,
            "needs_recorded_plan": e.needs_recorded_plan,
            "tuned_skill_sets": e.tuned_skill_sets,
            "pid": os.getpid(),
        }

    def _apply(self, ops: list[Op]) -> None:
        for op in ops:
            getattr(self.engine, op[0])(*op[1:])

    def prompt_tokens(self, request: GenerationRequest) -> int:
        return self.engine.prompt_tokens(request)

    def add(self, ops: list[Op], request: GenerationRequest, urgency: float) -> tuple[int, int]:
        self._apply(ops)
        self.engine.add(request, urgency)
        return self.engine.context_tokens(request.gen_id), self.engine.kv_free_tokens()

    def detach(self, ops: list[Op], gen_id: str) -> tuple[Continuation, int]:
        self._apply(ops)
        return self.engine.detach(gen_id), self.engine.kv_free_tokens()

    def attach(self, ops: list[Op], continuation: Continuation, urgency: float) -> tuple[int, int]:
        self._apply(ops)
        self.engine.attach(continuation, urgency)
        return self.engine.context_tokens(continuation.request.gen_id), self.engine.kv_free_tokens()

    def step(self, ops: list[Op], start_s: float) -> tuple[StepResult, dict[str, int], int, StepCorrection]:
        self._apply(ops)
        if isinstance(self.clock, VirtualClock):
            self.clock.advance_to(start_s)
        result = self.engine.step()
        contexts = {o.gen_id: self.engine.context_tokens(o.gen_id) for o in result.outputs}
        return result, contexts, self.engine.kv_free_tokens(), self.engine.step_correction()

    def apply(self, ops: list[Op]) -> int:
        self._apply(ops)
        return self.engine.kv_free_tokens()

    def warm_up(self, ops: list[Op], requests: list[GenerationRequest]) -> int:
        self._apply(ops)
        self.engine.warm_up(requests)
        return self.engine.kv_free_tokens()

    def reset(self, live: bool) -> int:
        self.clock = WallClock() if live else VirtualClock()
        self.engine.reset(self.clock)
        return self.engine.kv_free_tokens()

    def restart(self) -> int:
        self.engine.restart()
        return self.engine.kv_free_tokens()

    def stats(self, ops: list[Op]) -> EngineStats:
        self._apply(ops)
        return self.engine.stats

    def attribute(self, name: str) -> tuple[bool, Any]:
        """(True, None) for a method (called with `call`), else (False, its value)."""
        value = getattr(self.engine, name)
        return (True, None) if callable(value) else (False, value)

    def call(self, ops: list[Op], name: str, *args: Any) -> Any:
        self._apply(ops)
        return getattr(self.engine, name)(*args)

    def close(self) -> None:
        self.engine.close()


_actor_class = None


def _host_class():
    global _actor_class
    if _actor_class is None:
        import ray

        _actor_class = ray.remote(EngineHost)
    return _actor_class


def _unwrap(exc: Exception) -> Exception:
    """What a call to the actor raised, as the planner handles engine faults: what the engine
    raised as itself (an EngineError is a fault, anything else a bug), a dead actor as an
    EngineError that says so."""
    from ray.exceptions import RayActorError, RayTaskError

    if isinstance(exc, RayTaskError):
        return exc.cause if isinstance(exc.cause, Exception) else exc
    if isinstance(exc, RayActorError):
        return EngineError(f"the replica's Ray actor died ({type(exc).__name__})")
    return exc


# A vLLM replica loads its model, and warms up, before it plans: on two contended CPU cores
# that takes minutes, far beyond one iteration's timeout.
START_TIMEOUT_S = 600.0


class RayEngine(Engine):
    """An engine in a Ray actor, driven as if it were in this process."""

    def __init__(
        self,
        build: EngineBuilder,
        clock: Clock,
        name: str = "replica",
        cpus: float = 1.0,
        gpus: float = 0.0,
        call_timeout_s: float | None = None,
        start_timeout_s: float = START_TIMEOUT_S,
    ) -> None:
        """`build(clock)`: makes the engine inside the actor (picklable: a module-level function
        or a partial of one). `call_timeout_s`: a call not answered in time fails as a hung engine;
        starting the engine (loading and warming a model) has `start_timeout_s`."""
        self.build = build
        self.clock = clock
        self.name = name
        self.cpus, self.gpus = cpus, gpus
        self.call_timeout_s = call_timeout_s
        self.start_timeout_s = start_timeout_s
        self._actor: Any = None  # Ray's handle to the EngineHost actor (an untyped remote class)
        self._start_actor()

    # ------------------------------------------------------------------ the actor
    def _start_actor(self) -> None:
        self._actor = _host_class().options(num_cpus=self.cpus, num_gpus=self.gpus).remote(self.build, self._live)
        info = self._get(self._actor.describe.remote(), timeout_s=self.start_timeout_s)
        self.engine_name = info["name"]
        self.profile = info["profile"]
        self.needs_recorded_plan = info["needs_recorded_plan"]
        self.tuned_skill_sets = info["tuned_skill_sets"]
        self.pid = info["pid"]
        self._correction = StepCorrection()  # until its first iteration brings the engine's own
        self._forget()

    @property
    def _live(self) -> bool:
        return isinstance(self.clock, WallClock)

    def _forget(self, kv_free: int | None = None) -> None:
        self._order: list[str] = []
        self._context: dict[str, int] = {}
        self._ops: list[Op] = []
        # Prompt token counts asked since the engine was last given a prompt: a prompt it is
        # given may add to its prefix cache (its skill set's prefix, or the whole prompt of a
        # task that recurs), which lowers the counts.
        self._prompt_cache: dict[str, int] = {}
        self._kv_free = kv_free if kv_free is not None else self._get(self._actor.apply.remote([]))

    def _get(self, ref, timeout_s: float | None = None):
        import ray

        timeout_s = timeout_s if timeout_s is not None else self.call_timeout_s
        try:
            return ray.get(ref, timeout=timeout_s)
        except ray.exceptions.GetTimeoutError:
            raise EngineError(f"{self.name} did not answer within {timeout_s} s") from None
        except Exception as exc:
            raise _unwrap(exc) from exc

    def _take_ops(self) -> list[Op]:
        ops, self._ops = self._ops, []
        return ops

    def kill(self, timeout_s: float = 30.0) -> None:
        """End the actor at once (a replica lost with its machine), and return once it is gone:
        Ray ends it asynchronously, and a call made just after `ray.kill` can still be served."""
        import ray
        from ray.exceptions import RayActorError

        ray.kill(self._actor, no_restart=True)
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            try:
                ray.get(self._actor.describe.remote(), timeout=timeout_s)
            except RayActorError:
                return
            time.sleep(0.05)
        raise EngineError(f"{self.name} still answers {timeout_s} s after it was killed")

    # ------------------------------------------------------------------ Engine
    def add(self, request: GenerationRequest, urgency: float = 0.0) -> None:
        if request.gen_id in self._context:
            raise EngineError(f"generation {request.gen_id} already exists")
        context, self._kv_free = self._get(self._actor.add.remote(self._take_ops(), request, urgency))
        self._order.append(request.gen_id)
        self._context[request.gen_id] = context
        self._prompt_cache.clear()

    def detach(self, gen_id: str) -> Continuation:
        self._known(gen_id)
        continuation, self._kv_free = self._get(self._actor.detach.remote(self._take_ops(), gen_id))
        del self._context[gen_id]
        if gen_id in self._order:
            self._order.remove(gen_id)
        return continuation

    def attach(self, continuation: Continuation, urgency: float = 0.0) -> None:
        gen_id = continuation.request.gen_id
        if gen_id in self._context:
            raise EngineError(f"generation {gen_id} already exists")
        context, self._kv_free = self._get(self._actor.attach.remote(self._take_ops(), continuation, urgency))
        self._order.append(gen_id)
        self._context[gen_id] = context
        self._prompt_cache.clear()

    def continuation_of(self, request: GenerationRequest, text: str, tokens: int) -> Continuation:
        return self._get(self._actor.call.remote(self._take_ops(), "continuation_of", request, text, tokens))

    def _known(self, gen_id: str) -> None:
        if gen_id not in self._context:
            raise EngineError(f"unknown generation {gen_id}")

    def suspend(self, gen_id: str) -> None:
        self._known(gen_id)
        if gen_id in self._order:
            self._order.remove(gen_id)
        self._ops.append(("suspend", gen_id))

    def resume(self, gen_id: str, urgency: float = 0.0) -> None:
        self._known(gen_id)
        if gen_id not in self._order:
            self._order.append(gen_id)
        self._ops.append(("resume", gen_id, urgency))

    def release(self, gen_id: str) -> None:
        if self._context.pop(gen_id, None) is not None and gen_id in self._order:
            self._order.remove(gen_id)
        self._ops.append(("release", gen_id))

    def start_step(self) -> Future:
        return self._actor.step.remote(self._take_ops(), self.clock.now()).future()

    def end_step(self, future: Future, timeout_s: float | None = None) -> StepResult:
        try:
            result, contexts, self._kv_free, self._correction = future.result(
                timeout_s if timeout_s is not None else self.call_timeout_s
            )
        except TimeoutError:
            raise EngineError(f"{self.name} did not answer within {self.call_timeout_s} s") from None
        except Exception as exc:
            raise _unwrap(exc) from exc
        for gen_id, context in contexts.items():
            if gen_id in self._context:  # not released while the iteration ran
                self._context[gen_id] = context
        self.clock.spent(result.duration_s)
        return result

    def step(self) -> StepResult:
        return self.end_step(self.start_step())

    @property
    def running(self) -> list[str]:
        return list(self._order)

    def context_tokens(self, gen_id: str) -> int:
        self._known(gen_id)
        return self._context[gen_id]

    def prompt_tokens(self, request: GenerationRequest) -> int:
        count = self._prompt_cache.get(request.gen_id)
        if count is None:
            count = self._prompt_cache[request.gen_id] = self._get(self._actor.prompt_tokens.remote(request))
        return count

    def kv_free_tokens(self) -> int:
        return self._kv_free

    def predict_step_s(self, batch_size: int, context_tokens: int, prefill_tokens: int = 0, resumes: int = 0) -> float:
        return self._correction.predict_step_s(self.profile, batch_size, context_tokens, prefill_tokens, resumes)

    def step_correction(self) -> StepCorrection:
        return self._correction

    def warm_up(self, requests: list[GenerationRequest]) -> None:
        # warming prefills every skill set's prompt (and a new vLLM engine's first batch): part of starting
        self._kv_free = self._get(
            self._actor.warm_up.remote(self._take_ops(), requests), timeout_s=self.start_timeout_s
        )
        self._prompt_cache.clear()

    def reset(self, clock: Clock) -> None:
        self.clock = clock
        self._forget(self._get(self._actor.reset.remote(self._live)))

    def restart(self) -> None:
        """A new actor in place of the old one, which is ended whatever state it is in (dead,
        hung or failed)."""
        import ray

        try:
            ray.kill(self._actor, no_restart=True)
        except Exception as exc:  # noqa: BLE001 -- already gone
            log.debug("%s: kill: %s", self.name, exc)
        self._start_actor()

    def close(self) -> None:
        import ray

        try:
            self._get(self._actor.close.remote(), timeout_s=30.0)
        except Exception as exc:  # noqa: BLE001 -- a dead or hung replica has nothing left to close
            log.debug("%s: close: %s", self.name, exc)
        ray.kill(self._actor, no_restart=True)

    @property
    def stats(self) -> EngineStats:  # type: ignore[override]  # read from the actor, so not writable here
        return self._get(self._actor.stats.remote(self._take_ops()))

    def __getattr__(self, name: str) -> Any:
        """The hosted engine's other attributes (a vLLM engine's dtype, its `output_ids`), read
        or called in the actor."""
        if name.startswith("_") or self.__dict__.get("_actor") is None:
            raise AttributeError(name)
        try:
            method, value = self._get(self._actor.attribute.remote(name))
        except EngineError as exc:
            raise AttributeError(f"{self.engine_name} has no attribute {name!r} ({exc})") from None
        if not method:
            return value
        return lambda *args: self._get(self._actor.call.remote(self._take_ops(), name, *args))
