import math

import pytest

from llm_planner.domain.tuf import MIN_SLACK_S, Tuf, pud_priority
from llm_planner.settings.config import load_planner_config
from llm_planner.settings.model_file import ConfigError

NORMAL = Tuf(1.0, 1.0, 1.5)
URGENT = Tuf(2.0, 0.2, 0.5)


def test_tuf_shape():
    assert NORMAL.alpha == pytest.approx(-2.0)
    assert URGENT.alpha == pytest.approx(-20 / 3)
    assert NORMAL.utility(0.3) == 1.0
    assert NORMAL.utility(1.0) == 1.0
    assert NORMAL.utility(1.25) == pytest.approx(0.5)
    assert NORMAL.utility(1.5) == pytest.approx(0.0)
    assert NORMAL.utility(9.0) == 0.0  # clamped, never negative
    assert URGENT.utility(0.35) == pytest.approx(1.0)


def test_resumed_tuf_keeps_slope_with_zero_ert():
    r = URGENT.resumed()
    assert (r.beta, r.ert_s, r.cutoff_s) == (2.0, 0.0, pytest.approx(0.3))
    assert r.alpha == pytest.approx(URGENT.alpha)
    assert r.utility(0.0) == 2.0 and r.utility(0.15) == pytest.approx(1.0)


@pytest.mark.parametrize("args", [(0, 1, 2), (1, 1, 1), (1, 2, 1), (1, -1, 1), (math.nan, 1, 2), (1, 0, math.inf)])
def test_invalid_tuf_rejected(args):
    with pytest.raises(ValueError):
        Tuf(*args)


def test_pud_formula():
    # on time: utility beta, slack = ref + ert - now - G
    assert pud_priority(NORMAL, ref_s=0.0, gen_time_s=0.1, now_s=0.4) == pytest.approx(1.0 / (0.1 * 0.5))
    # late: expected response 1.2 s -> utility 0.6, slack clamped
    assert pud_priority(NORMAL, 0.0, 0.1, 1.1) == pytest.approx(0.6 / (0.1 * MIN_SLACK_S))
    # past the cutoff: zero priority, still schedulable
    assert pud_priority(NORMAL, 0.0, 0.1, 5.0) == 0.0


def test_urgent_outranks_normal_arriving_together():
    assert pud_priority(URGENT, 0.0, 0.2, 0.0) > pud_priority(NORMAL, 0.0, 0.2, 0.0)


def test_priority_rises_as_deadline_nears():
    values = [pud_priority(NORMAL, 0.0, 0.2, t) for t in (0.0, 0.3, 0.6, 0.75)]
    assert values == sorted(values)


def test_config_levels_match_the_paper():
    config = load_planner_config()
    assert config.level(0).tuf == NORMAL and config.level("urgent").tuf == URGENT
    assert config.level_for_tuf(Tuf(2, 0.2, 0.5)) == "urgent"
    assert config.level_for_tuf(Tuf(3, 0.2, 0.5)) is None
    with pytest.raises(ValueError, match="out of range"):
        config.level(5)


def test_bad_config_is_reported_with_the_field(tmp_path):

    bad = tmp_path / "planner.yaml"
    bad.write_text("urgency_levels: [{name: n, beta: 1, ert_s: 1, cutoff_s: 0.5}]\nrobot_types: {}\n")
    with pytest.raises(ConfigError, match=r"urgency level 'n': TUF cutoff_s \(0.5\) must be greater than ert_s"):
        load_planner_config(bad)
    bad.write_text("policy: nope\nurgency_levels: [{name: n, beta: 1, ert_s: 1, cutoff_s: 2}]\nrobot_types: {}\n")
    with pytest.raises(ConfigError, match="policy"):
        load_planner_config(bad)
