import pytest

from llm_planner.planning.segmenter import MiniSpecSegmenter, make_segmenter, split_segments


def stream(skill_set, text, chunk):
    seg = make_segmenter(skill_set)
    out = []
    for i in range(0, len(text), chunk):
        out += seg.feed(text[i : i + chunk])
    tail = seg.flush()
    return out + ([tail] if tail else [])


PLAN = "s('bottle');g('bottle');tp();l('done; all)');"


@pytest.mark.parametrize("chunk", [1, 2, 3, 5, 7, 100])
def test_token_boundaries_do_not_change_segments(drone, chunk):
    segments = stream(drone, PLAN, chunk)
    assert [s.text for s in segments] == ["s('bottle');", "g('bottle');", "tp();", "l('done; all)');"]
    assert [s.index for s in segments] == [0, 1, 2, 3]


def test_segment_reported_on_the_token_that_completes_it(drone):
    seg = MiniSpecSegmenter(drone)
    assert seg.feed("mf(") == []
    assert seg.feed("5") == []
    assert seg.feed("0)") == []  # a call without its ';' is not yet a complete statement
    done = seg.feed(";tc")
    assert [s.text for s in done] == ["mf(50);"]
    assert done[0].call_texts == ["mf(50)"]


def test_quoted_semicolon_and_paren_do_not_split(drone):
    segments = stream(drone, "l('a;b)c');p(\"is it ; or )?\");", 1)
    assert [s.call_texts for s in segments] == [["l('a;b)c')"], ['p("is it ; or )?")']]


def test_call_inside_a_string_is_not_a_call(drone):
    (segment,) = split_segments(drone, "l('mf(50) was done');")
    assert segment.call_texts == ["l('mf(50) was done')"]


def test_loop_and_conditional_are_sent_whole(drone):
    seg = MiniSpecSegmenter(drone)
    assert seg.feed("8{") == []  # header alone: no skill call to execute
    assert seg.feed("?iv('cat')==True{->True};") == []  # inside the loop: not complete
    done = seg.feed("tc(45)}g('cat');")
    assert [s.text for s in done] == ["8{?iv('cat')==True{->True};tc(45)}", "g('cat');"]
    assert done[0].call_texts == ["iv('cat')", "tc(45)"]


def test_statements_without_calls_join_the_next_segment(drone):
    segments = stream(drone, "_1=5;_2=3;mf(_1);", 2)
    assert [s.text for s in segments] == ["_1=5;_2=3;mf(_1);"]
    assert segments[0].call_texts == ["mf(_1)"]
    assert segments[0].calls[0].start == len("_1=5;_2=3;")


def test_flush_returns_unfinished_rest(drone):
    seg = make_segmenter(drone)
    assert [s.text for s in seg.feed("mf(50);tc(90)")] == ["mf(50);"]
    tail = seg.flush()
    assert tail.text == "tc(90)" and tail.call_texts == ["tc(90)"]
    assert seg.flush() is None


def test_text_that_never_becomes_a_call_is_flushed_without_calls(drone):
    seg = make_segmenter(drone)
    assert seg.feed("I cannot plan this task") == []
    tail = seg.flush()
    assert tail.text == "I cannot plan this task" and tail.calls == []


@pytest.mark.parametrize("chunk", [1, 3, 1000])
def test_segments_concatenate_to_the_output(drone, chunk):
    text = "_1=od('p');?_1>100{mf(50)};8{?iv('c')==True{->True}tc(45)}->False"
    assert "".join(s.text for s in stream(drone, text, chunk)) == text


def test_longer_identifier_is_not_a_skill(drone):
    assert drone.find_calls("xmf(50);amf(2)") == []


PY_PLAN = (
    "for o in ['a', 'b']:\n"
    "    move_to(object_x(o), object_y(o))\n"
    "    take(o)\n"
    "else:\n"
    "    say('x;y)')\n"
    "move_to(1, 2)\n"
    "# now drop it\n"
    "drop('bin')\n"
)


@pytest.mark.parametrize("chunk", [1, 4, 1000])
def test_python_blocks_and_lines(python_arm, chunk):
    segments = stream(python_arm, PY_PLAN, chunk)
    assert [s.text for s in segments] == [
        "for o in ['a', 'b']:\n    move_to(object_x(o), object_y(o))\n    take(o)\nelse:\n    say('x;y)')\n",
        "move_to(1, 2)\n",
        "# now drop it\ndrop('bin')\n",
    ]
    # inner calls are evaluated first
    assert segments[0].call_texts[:3] == ["object_x(o)", "object_y(o)", "move_to(object_x(o), object_y(o))"]


def test_python_block_is_not_ready_until_dedent(python_arm):
    seg = make_segmenter(python_arm)
    assert seg.feed("for i in range(2):\n    take('a')\n") == []
    done = seg.feed("drop('b')\n")
    assert [s.text for s in done] == ["for i in range(2):\n    take('a')\n", "drop('b')\n"]


def test_python_multiline_call(python_arm):
    segments = stream(python_arm, "move_to(\n  1,\n  2)\ntake('a')\n", 1)
    assert [s.call_texts for s in segments] == [["move_to(\n  1,\n  2)"], ["take('a')"]]


def test_a_call_text_parses_to_the_one_call_it_is(drone, python_arm):
    """What a robot server does with a goal's `calls` entries."""
    call = drone.parse_call(" l('mf(50) done') ")
    assert (call.skill, call.text) == ("l", "l('mf(50) done')")  # not the call text in its string
    assert drone.parse_call("mf(50)").number == 50
    assert python_arm.parse_call("move_to(1, 2)").skill == "move_to"
    for bad in ("zz(1)", "mf(50);tc(90)", ""):
        with pytest.raises(ValueError, match="is not a call"):
            drone.parse_call(bad)


ONE_LINE = "def task(): move_to(1, 2); take('box'); move_to(3, 4); drop('box')"
ONE_PER_LINE = "move_to(1, 2)\ntake('box')\nmove_to(3, 4)\ndrop('box')\n"


@pytest.mark.parametrize("chunk", [1, 3, 1000])
@pytest.mark.parametrize("plan", [ONE_LINE, ONE_PER_LINE, "move_to(1, 2); take('box')\nmove_to(3, 4); drop('box')\n",
                                  "def task():\n    move_to(1, 2)\n    take('box')\n"
                                  "    move_to(3, 4)\n    drop('box')\n"])
def test_a_one_line_plan_segments_as_one_statement_per_line(python_arm, plan, chunk):
    segments = stream(python_arm, plan, chunk)
    assert [s.call_texts for s in segments] == [["move_to(1, 2)"], ["take('box')"], ["move_to(3, 4)"], ["drop('box')"]]
    assert "".join(s.text for s in segments) == plan


def test_a_header_with_its_body_on_its_line_stays_one_statement(python_arm):
    segments = stream(python_arm, "for o in ['a', 'b']: take(o); drop('bin')\nsay('x'); say('y;z')\n", 1)
    assert [s.call_texts for s in segments] == [["take(o)", "drop('bin')"], ["say('x')"], ["say('y;z')"]]
    nested = "def task():\n    take('a')\n    for o in ['b']:\n        take(o)\n    drop('bin')\n"
    assert [s.call_texts for s in stream(python_arm, nested, 2)] == [["take('a')"], ["take(o)"], ["drop('bin')"]]


@pytest.mark.parametrize("plan", [ONE_LINE, ONE_PER_LINE, PY_PLAN, "say('a;b'); take('c')  # x; y\ndrop('d')\n",
                                  "def task():\n    take('a'); take('b')\n    for o in ['c']: take(o); drop(o)\n"])
def test_cuts_agree_with_pythons_tokenizer(python_arm, plan):
    """Python's own tokenize, on the whole plan, as the reference: the segmenter cuts only
    where a statement ends (a NEWLINE token, or a ';' outside brackets), and at every ';' that
    ends a simple statement (not one in a block header's line) after a call."""
    import io
    import tokenize

    offsets = [0]
    for line in plan.splitlines(keepends=True):
        offsets.append(offsets[-1] + len(line))
    statement_ends, semicolons, depth, header = set(), set(), 0, False
    for tok in tokenize.generate_tokens(io.StringIO(plan).readline):
        at = offsets[tok.end[0] - 1] + tok.end[1]
        if tok.type == tokenize.OP and tok.string in "([{":
            depth += 1
        elif tok.type == tokenize.OP and tok.string in ")]}":
            depth -= 1
        elif tok.type == tokenize.OP and tok.string == ":" and depth == 0:
            header = not tok.line.lstrip().startswith("def ")
        elif tok.type == tokenize.OP and tok.string == ";" and depth == 0:
            statement_ends.add(at)
            if not header:
                semicolons.add(at)
        elif tok.type == tokenize.NEWLINE:
            statement_ends.add(at)
            header = False
    segments = stream(python_arm, plan, 1)
    cuts = {sum(len(s.text) for s in segments[:i + 1]) for i in range(len(segments) - 1)}
    assert cuts <= statement_ends
    assert {at for at in semicolons if python_arm.find_calls(plan[:at])} <= cuts
