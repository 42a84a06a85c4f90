"""The real engine: vLLM (CPU build) with the bundled SmolLM2 model. One engine for the module
(start-up ~20 s); every test drives it directly or through the planner.

The engine runs in float32 here, whatever dtype the CPU would get: a resumed generation
recomputes its last partial KV block by prefill where an uninterrupted one decoded those
positions, and in bfloat16 the two differ by up to ~0.1 nats while greedy margins are
multiples of bf16's logit step (0.0625-0.125, exact ties happen); which near-tie flips then
depends on the CPU's kernels. In float32 the difference is ~1e-5 nats against a smallest
margin of 0.02 in these plans (`python scripts/investigations/resume_numerics.py`, docs/engine.md, "Resuming
is exact"), so token identity is a deterministic check of resuming on any CPU.)"""

import os

import pytest

if os.environ.get("LLM_PLANNER_REQUIRE_VLLM"):  # `make test`: a missing vLLM is an error, not a skip
    import vllm  # noqa: F401  (an error, not a skip)
else:
    pytest.importorskip("vllm")

from llm_planner.catalog.grammar import check_plan
from llm_planner.catalog.skills import load_skill_set
from llm_planner.domain.clock import VirtualClock
from llm_planner.engine.plan_constraint import EXTRA_ARG
from llm_planner.testing.engine_runs import ENGINE_TASKS as TASKS
from llm_planner.testing.engine_runs import plan_request as request
from llm_planner.testing.engine_runs import run_plans

pytestmark = pytest.mark.vllm


@pytest.fixture(scope="module")
def engine(config):
    from llm_planner.engine.factory import make_vllm_engine

    engine = make_vllm_engine(config.with_engine_dtype("float32"), VirtualClock())
    yield engine
    engine.reset()


def generate(engine, requests, segmented):
    engine.reset()
    return run_plans(engine, requests, segmented)[0]


def exactness_requests(constrained=True):
    return [request(f"g{i}", ss, task, max_tokens=56, constrained=constrained) for i, (ss, task) in enumerate(TASKS)]


@pytest.fixture(scope="module")
def uninterrupted(engine):
    """Each exactness plan generated without a suspension, constrained and not."""
    return {c: generate(engine, exactness_requests(c), segmented=False) for c in (True, False)}


def resume_differences(reference, segmented, tokenizer) -> list[str]:
    """Where each suspended-and-resumed generation differs from the uninterrupted one."""
    problems = []
    for gen_id, ref in reference.items():
        run = segmented[gen_id]
        if run.token_ids != ref.token_ids:
            at = next((i for i, (a, b) in enumerate(zip(ref.token_ids, run.token_ids)) if a != b),
                      min(len(ref.token_ids), len(run.token_ids)))
            problems.append(f"{gen_id}: differs at output token {at}: "
                            f"{tokenizer.decode(run.token_ids[at:at + 1])!r} after resuming vs "
                            f"{tokenizer.decode(ref.token_ids[at:at + 1])!r} uninterrupted")
        elif run.text != ref.text:
            problems.append(f"{gen_id}: same tokens, different reported text")
    return problems


@pytest.mark.parametrize("constrained", [True, False], ids=["constrained", "unconstrained"])
def test_segmented_generation_is_token_identical_to_unsegmented(engine, uninterrupted, constrained):
    plain = uninterrupted[constrained]
    segmented = generate(engine, exactness_requests(constrained), segmented=True)
    for gen_id, run in segmented.items():  # a plan without a skill call has no boundary to resume at
        if load_skill_set(TASKS[int(gen_id[1:])][0]).find_calls(plain[gen_id].text):
            assert run.suspensions >= 1, f"{gen_id} was never suspended: the test would not exercise a resume"
    assert sum(r.suspensions for r in segmented.values()) >= len(TASKS)
    assert resume_differences(plain, segmented, engine.tokenizer) == []
    for run in plain.values():
        assert run.text == engine.tokenizer.decode(run.token_ids, skip_special_tokens=True)


# Resume faults the exactness check must catch, injected at the engine's two seams: the context
# a resumed request is given, and where its grammar matcher starts reading the plan so far.
RESUME_FAULTS = {
    "token dropped": ("_context_ids", lambda gen: gen.prompt_ids + gen.out_ids[:-1]),
    "token duplicated": ("_context_ids", lambda gen: gen.prompt_ids + gen.out_ids + gen.out_ids[-1:]),
    # (the tuned model writes the same plans with its prompt's first token dropped: a fault must
    # change what the model sees of the task or the plan to be seen at all)
    "plan so far read from its second token": ("_context_ids", lambda gen: gen.prompt_ids + gen.out_ids[1:]),
    "grammar not restored to the plan so far": (
        "_grammar_args",
        lambda gen: {EXTRA_ARG: {"grammar": gen.grammar, "plan_start": len(gen.prompt_ids) + len(gen.out_ids)}}),
}


def test_a_generation_moved_at_every_segment_goes_on_exactly(engine, uninterrupted):
    """Detached at every segment boundary and attached again (what moving it to another
    replica does: a new request with the prompt and the plan so far, its grammar matcher
    brought to the plan so far): the tokens and text of an uninterrupted run."""
    engine.reset()
    before = engine.stats.moved_in
    moved = run_plans(engine, exactness_requests(), segmented=True, move=True)[0]
    assert engine.stats.moved_in - before == sum(r.suspensions for r in moved.values()) >= len(TASKS)
    assert resume_differences(uninterrupted[True], moved, engine.tokenizer) == []


def test_a_generation_whose_engine_was_lost_goes_on_from_its_text(engine, uninterrupted):
    """Released at every segment boundary and started again from the text the planner holds
    (its ids as the tokenizer reads that text, the grammar brought to it): the plans of an
    uninterrupted run."""
    engine.reset()
    lost = run_plans(engine, exactness_requests(), segmented=True, from_text=True)[0]
    assert all(run.suspensions >= 1 for run in lost.values())
    assert {g: run.text for g, run in lost.items()} == {g: run.text for g, run in uninterrupted[True].items()}


@pytest.mark.ray
def test_a_vllm_replica_on_ray_resumes_exactly_as_in_process(engine, uninterrupted, config):
    """The engine in a Ray actor (one CPU), driven through the replica's messages: every
    suspended and resumed plan has the in-process engine's tokens, and the replica predicts
    iterations with the correction its engine learned, and a queued prompt's token count falls
    once an identical prompt has been given to the engine."""
    ray = pytest.importorskip("ray")
    from functools import partial

    from llm_planner.engine.calibration import StepCorrection
    from llm_planner.engine.factory import make_engine
    from llm_planner.engine.ray_replica import RayEngine, start_ray

    start_ray()
    exact = config.with_engine_dtype("float32").model_copy(update={"engine": "vllm"})
    replica = RayEngine(partial(make_engine, exact), VirtualClock(), "vLLM replica", cpus=1)
    try:
        assert replica.engine_name == "VllmEngine" and replica.dtype == "float32"
        segmented = run_plans(replica, exactness_requests(), segmented=True)[0]
        correction = replica.step_correction()
        assert correction != StepCorrection()
        assert replica.predict_step_s(2, 500) == pytest.approx(correction.predict_step_s(replica.profile, 2, 500))
        task = "Scene: [shelf, plant, person]. Rise 50 cm, turn left 45 degrees and take a photo."  # a new prompt
        queued, repeat = (request(f"ray-{name}", "minispec_drone", task, max_tokens=4) for name in ("queued", "repeat"))
        before = replica.prompt_tokens(queued)
        run_plans(replica, [repeat], segmented=False)
        after = replica.prompt_tokens(queued)
    finally:
        replica.close()
        ray.shutdown()
    assert all(run.suspensions >= 1 for run in segmented.values())
    assert resume_differences(uninterrupted[True], segmented, engine.tokenizer) == []
    assert after <= engine.block_size < before


@pytest.mark.parametrize("fault", list(RESUME_FAULTS))
def test_the_exactness_check_catches_a_faulty_resume(engine, uninterrupted, monkeypatch, fault):
    seam, faulty = RESUME_FAULTS[fault]
    original = getattr(engine, seam)

    def inject(gen):  # the first run of a generation is left alone: only resumes are faulty
        return faulty(gen) if gen.out_ids else original(gen)

    monkeypatch.setattr(engine, seam, inject)
    segmented = generate(engine, exactness_requests(), segmented=True)
    assert resume_differences(uninterrupted[True], segmented, engine.tokenizer), f"{fault} went unnoticed"


def test_the_repeat_guard_lets_a_plan_only_end_once_a_statement_repeats(engine):
    """The constraint of a request whose plan so far repeats a statement: where the grammar
    allows the plan to end, only the end is allowed; mid-statement the grammar still rules."""
    import torch
    import xgrammar as xgr
    from transformers import AutoTokenizer

    from llm_planner.catalog.grammar import plan_grammar
    from llm_planner.catalog.statements import RepeatGuard
    from llm_planner.engine.plan_constraint import _RequestConstraint, stop_token_ids

    tokenizer = AutoTokenizer.from_pretrained(engine.model_dir)
    vocab = engine.llm.vllm_config.model_config.get_vocab_size()
    stops = stop_token_ids(engine.model_dir, tokenizer)
    info = xgr.TokenizerInfo.from_huggingface(tokenizer, vocab_size=vocab, stop_token_ids=stops)
    compiled = xgr.GrammarCompiler(info).compile_grammar(plan_grammar(load_skill_set("minispec_drone")))

    def allowed_next(plan: str) -> set[int]:
        ids = tokenizer.encode(plan, add_special_tokens=False)
        constraint = _RequestConstraint(xgr.GrammarMatcher(compiled), 0, vocab, RepeatGuard("minispec"),
                                        lambda t: tokenizer.decode([t]), stops)
        logits = constraint(ids, [], torch.zeros(vocab))  # the whole plan so far is in the prompt
        return set(torch.nonzero(logits > float("-inf")).flatten().tolist())

    ends_allowed = set(stops) & allowed_next("tp();")
    assert ends_allowed and allowed_next("tp();tp();") == ends_allowed
    assert len(allowed_next("tp();tc(90);")) > 10  # no repeat: any statement may follow
    mid_statement = allowed_next("tp();tp();mf(")  # cannot end here: the grammar decides
    assert mid_statement and not mid_statement & set(stops)


def test_resumed_generation_hits_the_prefix_cache(engine):
    generate(engine, [request("r0", *TASKS[0], max_tokens=40)], segmented=True)
    stats = engine.stats
    resumes = sum(stats.resumes.values())
    assert resumes >= 2
    # Only the last, partial KV block of each resumed context is recomputed.
    assert stats.resume_cached_tokens >= stats.resume_prompt_tokens - resumes * engine.block_size
    assert stats.resume_cached_tokens > 0.9 * stats.resume_prompt_tokens


def test_the_engine_predicts_the_prompt_tokens_it_prefills(engine):
    """What admission prices a newcomer's first iteration by: with its skill set's system
    prompt cached, a prompt prefills from that prefix's last partial block on, and the same
    prompt again only its own last partial block."""
    skill_set, task = TASKS[3]
    generate(engine, [request("prefix-only", skill_set, "Scene: [door]. Land.", max_tokens=4)], segmented=False)
    first, again = (request(f"prefill-{n}", skill_set, task, max_tokens=4) for n in range(2))
    predicted, prefilled = [], []
    for req in (first, again):
        predicted.append(engine.prompt_tokens(req))
        run_plans(engine, [req], segmented=False)
        prefilled.append(engine.stats.prefill_tokens[req.gen_id])
    assert prefilled == predicted
    assert predicted[1] <= engine.block_size < predicted[0]


def test_the_engine_corrects_its_profiles_step_predictions_by_the_iterations_it_runs(engine, monkeypatch):
    """Decode-only iterations teach the engine how far off its profile is: afterwards its
    predictions of those iterations are at least as close as the profile's, whatever the CPU."""
    import statistics

    from llm_planner.engine.calibration import StepCalibration, StepCorrection

    engine.calibration = StepCalibration(engine.profile)
    decode_steps = []  # (batch, context, measured s)
    step = engine.step

    def recorded():
        running = engine.running
        decoding = not any(engine._gens[g].awaiting_first for g in running)
        batch, context = len(running), sum(engine.context_tokens(g) for g in running)
        result = step()
        if decoding and batch:
            decode_steps.append((batch, context, result.duration_s))
        return result

    monkeypatch.setattr(engine, "step", recorded)
    generate(engine, [request(f"c{i}", ss, task, max_tokens=40) for i, (ss, task) in enumerate(TASKS)],
             segmented=True)
    assert len(decode_steps) >= 8
    assert engine.step_correction() != StepCorrection()
    assert engine.stats.step_corrections == [engine.step_correction()]

    def median_error(predict):
        return statistics.median(abs(measured - predict(batch, context)) for batch, context, measured in decode_steps)

    assert median_error(engine.predict_step_s) <= median_error(engine.profile.predict_step_s) + 0.002


def test_a_new_engine_runs_a_warm_up_batch_once_and_keeps_nothing_of_it(engine, monkeypatch):
    """A new engine's first warm-up runs a batch of generations through it together (its first
    iterations are slow otherwise), and leaves nothing of it: no clock moved, no generation,
    no statistics; the shared prefix stays cached; the next warm-up runs none."""
    import dataclasses

    from llm_planner.engine.vllm_engine import WARM_UP_BATCH
    from llm_planner.planning.prompts import shared_request

    skill_set = load_skill_set("minispec_drone")
    shared = shared_request(skill_set, skill_set.name in engine.tuned_skill_sets)
    clock = VirtualClock()
    engine.reset(clock)
    engine.warm_batch_run = False  # as a new engine
    together = []
    step = engine.llm.step
    monkeypatch.setattr(engine.llm, "step", lambda: together.append(engine.llm.get_num_unfinished_requests()) or step())
    engine.warm_up([shared])
    assert max(together) == WARM_UP_BATCH and engine.warm_batch_run
    assert clock.now() == 0.0
    assert not engine.running and not engine.llm.has_unfinished_requests()
    assert engine.stats.steps == 0 and engine.stats.generated_tokens == 0
    together.clear()
    engine.warm_up([shared])
    assert max(together) == 1  # the shared prefix alone

    # The shared prefix is still cached for the tasks that come.
    task = dataclasses.replace(shared, gen_id="after-warm-up", prompt="Take a photo of the door.", max_tokens=1)
    _, prefix_len = engine.chat_ids(task)
    engine.add(task)
    while not any(out.finished for out in engine.step().outputs):
        pass
    engine.release(task.gen_id)
    assert engine.stats.cached_tokens >= prefix_len // engine.block_size * engine.block_size > 0
    engine.reset()


def test_constrained_plans_parse(engine):
    requests = [request(f"p{i}", ss, task, max_tokens=160) for i, (ss, task) in enumerate(TASKS)]
    for gen_id, run in generate(engine, requests, segmented=True).items():
        ss = load_skill_set(requests[int(gen_id[1:])].prefix_key)
        text = run.text
        problem = check_plan(ss, text)
        if run.truncated:  # cut at the token limit: whatever was generated must still be a valid prefix
            assert problem in (None, "plan ends in the middle of a statement"), (text, problem)
        else:
            assert problem is None, (text, problem)
        assert ss.find_calls(text), text


def test_a_plan_is_cut_at_the_engine_limit_times_its_skill_sets_scale(engine, monkeypatch):
    """Python plans take about twice MiniSpec's tokens per action: the Python arm's plans get
    twice the engine's limit (`plan_token_scale: 2`), MiniSpec's the limit itself."""
    monkeypatch.setattr(engine, "max_plan_tokens", 12)
    task = "Scene: [stapler, mug, crate]. Put the stapler in the crate, then the mug in the crate."
    requests = [request(f"s{n}", ss, task, max_tokens=1000) for n, ss in enumerate(["minispec_arm", "python_arm"])]
    runs = generate(engine, requests, segmented=False)
    assert runs["s0"].truncated and len(runs["s0"].token_ids) == 12, runs["s0"]
    assert runs["s1"].truncated and len(runs["s1"].token_ids) == 24, runs["s1"]

def test_vllm_priority_orders_prefills(engine):
    """Two long prompts that do not fit one step's token budget: the more urgent one (higher
    urgency), added second, gets its first token first."""
    engine.reset()
    filler = " ".join(["the robot waits by the door"] * 220)  # ~1400 tokens each
    order = []
    engine.add(request("background", "minispec_drone", f"{filler} Fly to the door."), urgency=-1.0)
    engine.add(request("urgent", "minispec_drone", f"{filler} Land now."), urgency=0.0)
    while len(order) < 2:
        for out in engine.step().outputs:
            if out.gen_id not in order:
                order.append(out.gen_id)
    assert order == ["urgent", "background"]
    engine.reset()


def test_planner_runs_a_workload_on_the_real_engine(engine, config):
    """lrtrace's simulation with plans generated live: every task ends, segments were
    generated with suspensions (the paper's policy pauses after each), and every executed
    call is a skill call."""
    from llm_planner.domain.tasks import TaskState
    from llm_planner.lrtrace.formats import Job, Workload
    from llm_planner.lrtrace.load import load_traces
    from llm_planner.lrtrace.simulate import simulate

    traces = load_traces("config/traces/timely_tasks.yaml")
    jobs = [Job(job_id=i, trace_id=t, agent=i, arrival_s=0.2 * i) for i, t in enumerate([1, 6, 9])]
    workload = Workload(name="tiny", duration_s=5, agents=3, jobs=jobs)
    cfg = config.model_copy(update={"vllm": config.vllm.model_copy(update={"max_plan_tokens": 40})})
    result = simulate(workload, traces, "timelyllm-paper", cfg, 0, engine=engine)
    assert len(result.records) == 3
    for record in result.records:
        assert record.state.terminal and record.message, record
        assert record.request.recorded_plan is None  # the model wrote the plan
        if record.state == TaskState.SUCCEEDED:
            assert record.plan and record.segments
            assert all(call.skill for seg in record.segments for call in seg.calls)
    assert sum(result.engine_stats.resumes.values()) > 0
    assert result.engine_stats.generated_tokens > 0


def test_lrtrace_compare_runs_an_imported_artifact_workload_on_the_real_engine(tmp_path):
    """`lrtrace compare --engine vllm`: the TimelyLLM artifact's files, plans written by the
    model, the documented JSON, engine statistics and the sim-vs-real timing check printed.
    (Its own process: vLLM keeps process-wide state, one engine per process.)"""
    import json
    import subprocess
    import sys

    from test_importer import ARTIFACT_JOBS, ARTIFACT_TRACES

    from llm_planner.lrtrace.metrics import METRIC_KEYS

    traces, jobs = tmp_path / "traces.json", tmp_path / "workload.json"
    traces.write_text(json.dumps(ARTIFACT_TRACES))
    jobs.write_text(json.dumps(ARTIFACT_JOBS))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "llm_planner.commands.lrtrace", "compare", str(jobs),
                           "--traces", str(traces), "--engine", "vllm", "--policies", "timely,vllm", "--check-sim",
                           "--json", str(out), "--no-plots", "--quiet"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    # run as a command, the libraries' chatter (vLLM, torch) goes to the log, not the terminal
    assert "library messages go to out/lrtrace.log" in proc.stderr
    assert "vllm" in (tmp_path / "out" / "lrtrace.log").read_text().lower()
    assert "WARNING" not in proc.stderr and "Warning" not in proc.stderr, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    assert list(result) == ["timely", "vllm", "recorded traces", "timely (sim)", "vllm (sim)"]
    assert result["recorded traces"]["plans"]["plans"] == len(ARTIFACT_JOBS)
    for name in ("timely", "vllm", "timely (sim)", "vllm (sim)"):
        assert set(result[name]["all"]) == set(METRIC_KEYS)
        assert result[name]["all"]["tasks"] == len(ARTIFACT_JOBS)
    # the real engine's runs replayed in simulation with the same plans: which policy wins?
    assert "utility % of max: real engine vs sim (same plans)" in proc.stdout
    assert "all: best on the real engine" in proc.stdout
    assert "engine vllm" in proc.stdout and "prefix cache" in proc.stdout
    # the engine profile of this machine's CPU class (model, dtype, class in its name)
    assert "sim (smollm2-135m-instruct-" in proc.stdout and ") vs real vLLM engine" in proc.stdout


def test_planner_node_generates_plans_with_the_real_engine_over_ros(engine, config):
    """The ROS 2 node on the vllm engine accepts any instruction (no recorded plan needed),
    streams the model's segments to the robot in order and ends the task with a status."""
    from ros_fixtures import Running

    from llm_planner.ros.fleet_main import Fleet
    from llm_planner.ros.task_client import TaskClient
    from llm_planner.settings.fleet import FleetConfig, RobotConfig

    cfg = config.model_copy(update={"engine": "vllm", "vllm": config.vllm.model_copy(update={"max_plan_tokens": 32})})
    fleet = FleetConfig(robots=[RobotConfig(id="drone1", type="tello", options={"time_scale": 0.05})],
                        robot_timeout_s=10)
    running = Running(Fleet(cfg, fleet, engine=engine).start(), TaskClient())
    try:
        c = running.client
        c.publish("free-text", "drone1", "Scene: [box, lamp]. Climb 50 cm, then take a photo of the lamp.", urgency=1)
        assert c.wait_terminal(["free-text"], timeout=120)
        final = c.terminal("free-text")
        assert final.state == final.SUCCEEDED, final.message
        texts = [m.segment_text for _, m in c.statuses["free-text"] if m.state == m.EXECUTING]
        # the plan ends with its end-of-sequence step: an empty last segment tells the robot
        assert texts and all(load_skill_set("minispec_drone").find_calls(t) for t in texts if t)
        assert "" not in texts[:-1]
        assert c.segments_executing("free-text") == list(range(len(texts)))
    finally:
        running.stop()


def test_a_restarted_engine_plans_again(engine):
    """After a failed step the planner restarts the engine in place: a new vLLM
    engine, without the generations that were inside the old one. (Last in this module: the
    tests above use the engine they started with.)"""
    engine.reset()
    engine.add(request("lost", *TASKS[0], max_tokens=8))
    old = engine.llm
    engine.restart()
    assert engine.llm is not old and not engine.running
    runs = generate(engine, [request("again", *TASKS[0], max_tokens=24)], segmented=False)
    assert runs["again"].text.strip()


@pytest.mark.ray
def test_lrtrace_compare_runs_two_real_engine_replicas(tmp_path):
    """`lrtrace compare --engine vllm --replicas 1,2`: one vLLM engine, then two on Ray, each
    planning the workload to the end, with the replicas' statistics merged in the report."""
    import json
    import subprocess
    import sys

    from test_importer import ARTIFACT_JOBS, ARTIFACT_TRACES

    traces, jobs = tmp_path / "traces.json", tmp_path / "workload.json"
    traces.write_text(json.dumps(ARTIFACT_TRACES))
    jobs.write_text(json.dumps(ARTIFACT_JOBS))
    out = tmp_path / "out.json"
    proc = subprocess.run([sys.executable, "-m", "llm_planner.commands.lrtrace", "compare", str(jobs),
                           "--traces", str(traces), "--engine", "vllm", "--replicas", "1,2", "--policies", "timely",
                           "--json", str(out), "--no-plots", "--quiet"],
                          capture_output=True, text=True, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    result = json.loads(out.read_text())
    runs = [name for name in result if name.startswith("timely")]
    assert len(runs) == 2, list(result)
    for name in runs:
        assert result[name]["all"]["tasks"] == len(ARTIFACT_JOBS)
    assert "step predictions corrected by" in proc.stdout


def test_retrieved_examples_are_chat_turns_between_the_shared_prefix_and_the_task(engine):
    """The examples come after the skill set's cached prefix, as user and assistant turns, and
    the engine prefills them as the task's own tokens."""
    import dataclasses

    plain = request("ex-plain", "minispec_drone", "Scene: [door]. Back off half a metre.")
    examples = (("Objects: 'wall'\nTask: Back up 30 cm.", "mb(30);"),)
    shown = dataclasses.replace(plain, gen_id="ex-shown", examples=examples)
    (plain_ids, plain_prefix), (shown_ids, shown_prefix) = engine.chat_ids(plain), engine.chat_ids(shown)
    assert shown_prefix == plain_prefix and shown_ids[:plain_prefix] == plain_ids[:plain_prefix]
    text = engine.tokenizer.decode(shown_ids[shown_prefix:])
    assert text.index("Back up 30 cm.") < text.index("mb(30);") < text.index("Back off half a metre.")
    assert "assistant" in text[text.index("Back up 30 cm.") : text.index("mb(30);")]
    # the sim engine counts what the examples add as the real chat template does, within a token
    from llm_planner.engine.sim import EXAMPLE_TEMPLATE_TOKENS

    counted = sum(len(engine.tokenizer.encode(t, add_special_tokens=False)) for pair in examples for t in pair)
    assert abs(len(shown_ids) - len(plain_ids) - (counted + EXAMPLE_TEMPLATE_TOKENS)) <= 1
