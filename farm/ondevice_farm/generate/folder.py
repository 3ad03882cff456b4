"""An ONNX Runtime GenAI model folder: `genai_config.json`, the decoder's ONNX (and its external
data), the tokenizer. Read here without onnxruntime_genai: what the farm needs to plan a job."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ondevice_farm.artifacts import sha256_tree
from ondevice_farm.errors import ModelError
from ondevice_farm.generate.trace import FIRST_STEP_LOGITS_OUTPUT, TOKENS_OUTPUT
from ondevice_farm.model import ModelInfo, TensorSpec

GENAI_CONFIG = "genai_config.json"
#: the input a generation job's document names for its prompt
PROMPT_INPUT = "prompt_ids"
_HINT = "pass an ONNX Runtime GenAI model folder (python -m onnxruntime_genai.models.builder ... -o DIR)"
#: ONNX elem types of a decoder's logits -> what they compute in
_LOGITS_PRECISION = {1: "fp32", 10: "fp16", 16: "fp16"}


def is_genai_folder(path: Path) -> bool:
    return path.is_dir() and (path / GENAI_CONFIG).is_file()


@dataclass(frozen=True)
class GenaiFolder:
    """What `genai_config.json` and the decoder's graph say about a model folder."""

    path: Path
    decoder_file: str
    context_length: int
    vocab_size: int
    layers: int
    kv_heads: int
    head_size: int
    #: token ids the runtime treats specially (end of sequence, padding, beginning): never in a
    #: synthetic prompt, where they would end or reset what is measured
    special_ids: frozenset[int]
    opset: int
    node_count: int
    op_types: dict[str, int]
    #: fp32 or fp16 (the logits' type); mixed where the graph holds block-quantised MatMuls
    precision: str
    #: the KV cache's element size in bytes (the logits' type: the builder keeps them alike)
    kv_element_bytes: int

    def kv_cache_bytes(self, context_tokens: int) -> int:
        """K and V for every layer at `context_tokens` positions (one sequence)."""
        return 2 * self.layers * self.kv_heads * self.head_size * context_tokens * self.kv_element_bytes

    @property
    def kv_cache_formula(self) -> str:
        return (
            f"2 (K, V) x {self.layers} layers x {self.kv_heads} KV heads x {self.head_size} head size "
            f"x context tokens x {self.kv_element_bytes} bytes"
        )

    def info(self, prompt_tokens: int) -> ModelInfo:
        """The folder as the run's model: its tree's hash, its decoder's graph, the job's I/O."""
        return ModelInfo(
            path=self.path,
            sha256=sha256_tree(self.path),
            name=self.path.name,
            opset=self.opset,
            inputs=(TensorSpec(PROMPT_INPUT, "int32", (prompt_tokens,)),),
            outputs=(
                TensorSpec(TOKENS_OUTPUT, "int32", ("decode",)),
                TensorSpec(FIRST_STEP_LOGITS_OUTPUT, "float32", (self.vocab_size,)),
            ),
            node_count=self.node_count,
            op_types=self.op_types,
        )


def _field(config: dict[str, Any], where: str, *keys: str) -> Any:
    value: Any = config
    for key in keys:
        if not isinstance(value, dict) or key not in value:
            raise ModelError(f"{where}: no {'.'.join(keys)}", hint=_HINT)
        value = value[key]
    return value


def _ids(value: Any) -> set[int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return {value}
    if isinstance(value, list):
        return {v for v in value if isinstance(v, int)}
    return set()


def read_folder(path: Path) -> GenaiFolder:
    """The folder checked (ModelError with one readable line if it is not a usable GenAI folder)."""
    if not path.exists():
        raise ModelError(f"{path}: no such folder", hint=_HINT)
    if not is_genai_folder(path):
        raise ModelError(f"{path}: not an ONNX Runtime GenAI folder (no {GENAI_CONFIG})", hint=_HINT)
    where = str(path / GENAI_CONFIG)
    try:
        config = json.loads((path / GENAI_CONFIG).read_text())
    except (OSError, ValueError) as exc:
        raise ModelError(f"{where}: not readable JSON ({exc})", hint=_HINT) from None
    decoder = _field(config, where, "model", "decoder")
    decoder_file = str(_field(config, where, "model", "decoder", "filename"))
    if not (path / decoder_file).is_file():
        raise ModelError(f"{path}: the decoder {decoder_file} named in {GENAI_CONFIG} is missing", hint=_HINT)
    numbers = {
        "context_length": _field(config, where, "model", "context_length"),
        "vocab_size": _field(config, where, "model", "vocab_size"),
        "layers": _field(decoder, where, "num_hidden_layers"),
        "kv_heads": _field(decoder, where, "num_key_value_heads"),
        "head_size": _field(decoder, where, "head_size"),
    }
    for name, value in numbers.items():
        if not isinstance(value, int) or isinstance(value, bool) or value < 1:
            raise ModelError(f"{where}: {name} is {value!r}, not a positive whole number", hint=_HINT)
    model = config["model"]
    special = (
        _ids(model.get("eos_token_id")) | _ids(model.get("pad_token_id")) | _ids(model.get("bos_token_id"))
    )
    graph = _decoder_graph(path / decoder_file)
    return GenaiFolder(
        path=path, decoder_file=decoder_file, special_ids=frozenset(special), **numbers, **graph
    )


def _decoder_graph(path: Path) -> dict[str, Any]:
    """Opset, nodes and the logits' type of the decoder, read without its external data."""
    import onnx

    try:
        model = onnx.load(str(path), load_external_data=False)
    except Exception as exc:  # protobuf raises DecodeError and friends
        raise ModelError(f"{path}: not a readable ONNX model ({type(exc).__name__})") from None
    op_types = dict(Counter(node.op_type for node in model.graph.node))
    logits = next((o for o in model.graph.output if o.name == "logits"), None)
    elem = logits.type.tensor_type.elem_type if logits is not None else 1
    precision = _LOGITS_PRECISION.get(elem, "fp32")
    if "MatMulNBits" in op_types:
        precision = "mixed"
    return {
        "opset": max((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), default=0),
        "node_count": len(model.graph.node),
        "op_types": op_types,
        "precision": precision,
        "kv_element_bytes": 2 if elem in (10, 16) else 4,
    }
