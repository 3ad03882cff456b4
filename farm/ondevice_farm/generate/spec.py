"""What a generation job asks for: `--generate prompt=64,decode=32,depth=0,512,reps=5,warmup=1`.

The keys follow llama.cpp's `llama-bench`: `prompt` is its `-p` (tokens prefilled, timed),
`decode` its `-n` (tokens generated one at a time, timed), `depth` its `-d` (tokens already in
the KV cache before the timed prompt, untimed; several values sweep), `reps` its `-r`
(generations timed per depth). `warmup`: untimed generations before them.
"""

from __future__ import annotations

from dataclasses import dataclass

from ondevice_farm.errors import UsageError

DEFAULT_PROMPT_TOKENS = 128
DEFAULT_DECODE_TOKENS = 64
#: llama-bench's default repetitions (`-r 5`)
DEFAULT_GENERATE_REPS = 5
DEFAULT_GENERATE_WARMUP = 1
#: the keys `--generate` takes, in the order `text()` writes them
KEYS = ("prompt", "decode", "depth", "reps", "warmup")


@dataclass(frozen=True)
class GenerateSpec:
    """Token counts of one generation job; `depths` always holds at least one value (0: an empty
    cache). `prompt_tokens` is None where `--prompt-file` gives the prompt."""

    prompt_tokens: int | None = DEFAULT_PROMPT_TOKENS
    decode_tokens: int = DEFAULT_DECODE_TOKENS
    depths: tuple[int, ...] = (0,)
    reps: int = DEFAULT_GENERATE_REPS
    warmup: int = DEFAULT_GENERATE_WARMUP

    def text(self) -> str:
        """The spec as `--generate` takes it (what the run's settings record)."""
        parts = [] if self.prompt_tokens is None else [f"prompt={self.prompt_tokens}"]
        parts += [f"decode={self.decode_tokens}", "depth=" + ",".join(map(str, self.depths))]
        parts += [f"reps={self.reps}", f"warmup={self.warmup}"]
        return ",".join(parts)

    def context_tokens(self, prompt_tokens: int) -> int:
        """The longest context a generation of this job reaches: deepest cache, prompt, decode."""
        return max(self.depths) + prompt_tokens + self.decode_tokens


@dataclass(frozen=True)
class PromptSource:
    """`--prompt-file`'s content, read at the CLI (it travels inline to a controller): text for the
    model's own tokenizer, or (a `.json` file) a list of token ids as they are."""

    text: str
    is_ids: bool = False
    #: the file's name, for messages
    name: str = "--prompt-file"


def parse_generate(text: str, *, prompt_from_file: bool = False) -> GenerateSpec:
    """`prompt=64,decode=32,depth=0,512`: a bare number after `depth=` is one more depth."""
    values: dict[str, list[int]] = {}
    key: str | None = None
    for item in (part.strip() for part in text.split(",")):
        if not item:
            raise UsageError(
                f"--generate {text!r}: an empty item", hint="e.g. --generate prompt=64,decode=32"
            )
        name, sep, raw = item.partition("=")
        if sep:
            key = name.strip()
            if key not in KEYS:
                raise UsageError(f"--generate: unknown key {key!r}", hint=f"keys: {', '.join(KEYS)}")
            if key in values:
                raise UsageError(f"--generate: {key} given twice")
            values[key] = []
        else:
            raw = name
            if key != "depth":
                raise UsageError(
                    f"--generate: {item!r} has no key", hint="only depth takes several values: depth=0,512"
                )
        assert key is not None
        values[key].append(_count(key, raw))
    single = {k: v[0] for k, v in values.items() if k != "depth"}
    if prompt_from_file and "prompt" in single:
        raise UsageError("--generate prompt= and --prompt-file both give the prompt; give one")
    depths = tuple(values.get("depth", [0]))
    if len(set(depths)) != len(depths):
        raise UsageError("--generate: a depth is given twice")
    spec = GenerateSpec(
        prompt_tokens=None if prompt_from_file else single.get("prompt", DEFAULT_PROMPT_TOKENS),
        decode_tokens=single.get("decode", DEFAULT_DECODE_TOKENS),
        depths=depths,
        reps=single.get("reps", DEFAULT_GENERATE_REPS),
        warmup=single.get("warmup", DEFAULT_GENERATE_WARMUP),
    )
    if spec.prompt_tokens is not None and spec.prompt_tokens < 1:
        raise UsageError("--generate: prompt must be at least 1 token")
    if spec.decode_tokens < 2:
        # the decode rate is of the tokens after the first: it needs a second one
        raise UsageError(
            "--generate: decode must be at least 2 tokens (the rate is of those after the first)"
        )
    if spec.reps < 1:
        raise UsageError("--generate: reps must be at least 1")
    return spec


def _count(key: str, raw: str) -> int:
    try:
        value = int(raw.strip())
    except ValueError:
        raise UsageError(f"--generate: {key}={raw!r} is not a whole number") from None
    if value < 0:
        raise UsageError(f"--generate: {key} cannot be negative")
    return value
