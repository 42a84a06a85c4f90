from llm_planner.catalog.tokenizer import count_tokens, token_pieces


def test_pieces_rebuild_the_text(tokenizer):
    text = "s('person');g('person');mf(150)\nmove_to(object_x('apple'), 0.3)  # done"
    pieces = token_pieces(tokenizer, text)
    assert "".join(pieces) == text
    assert len(pieces) == count_tokens(tokenizer, text) > 10
    assert pieces[:4] == ["s", "('", "person", "');"]
    assert pieces[pieces.index("mf") + 2 : pieces.index("mf") + 5] == ["1", "5", "0"]  # digits one by one


def test_chat_markers_are_single_tokens(tokenizer):
    assert tokenizer.encode("<|im_start|>user", add_special_tokens=False).ids[0] == 1
