"""A tiny random Llama as an ONNX Runtime GenAI folder, built here in seconds and offline.

A `transformers` LlamaConfig with random weights (seeded) and a byte-level BPE trained with
`tokenizers` on a small synthetic corpus go through onnxruntime-genai's own model builder
(`python -m onnxruntime_genai.models.builder -i HF_DIR -o OUT -p fp32 -e cpu`, HF_HUB_OFFLINE=1):
what a user's folder would be, only small. No hub is reachable here, and none is asked.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

#: small enough to build and run in seconds, big enough that the KV cache and decode are real
VOCAB_SIZE = 320
HIDDEN_SIZE = 64
LAYERS = 2
HEADS = 4
KV_HEADS = 2
CONTEXT_LENGTH = 512
BUILD_TIMEOUT_S = 300


def _corpus() -> list[str]:
    words = ["token", "cache", "prefill", "decode", "phone", "farm", "model", "layer", "kernel", "tensor"]
    return [" ".join(words[(i * 7 + j * 3) % len(words)] for j in range(12)) for i in range(200)]


def _tokenizer(hf_dir: Path) -> None:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers
    from transformers import PreTrainedTokenizerFast

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=VOCAB_SIZE,
        special_tokens=["<unk>", "<s>", "</s>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tokenizer.train_from_iterator(_corpus(), trainer)
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<s>", eos_token="</s>"
    )
    fast.save_pretrained(str(hf_dir))


def _checkpoint(hf_dir: Path, vocab_size: int, hidden_size: int, layers: int) -> None:
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab_size,
        hidden_size=hidden_size,
        intermediate_size=2 * hidden_size,
        num_hidden_layers=layers,
        num_attention_heads=HEADS,
        num_key_value_heads=KV_HEADS,
        max_position_embeddings=CONTEXT_LENGTH,
        bos_token_id=1,
        eos_token_id=2,
        tie_word_embeddings=False,
    )
    LlamaForCausalLM(config).eval().save_pretrained(str(hf_dir))


def build_tiny_llama(workdir: Path, hidden_size: int = HIDDEN_SIZE, layers: int = LAYERS) -> Path:
    """The GenAI folder `workdir/genai` (built once: an existing folder is returned as it is);
    `hidden_size` and `layers` make a bigger one (benchmarks/genai_fidelity.py)."""
    out = workdir / "genai"
    if (out / "genai_config.json").is_file():
        return out
    hf_dir = workdir / "hf"
    hf_dir.mkdir(parents=True, exist_ok=True)
    _tokenizer(hf_dir)
    from transformers import AutoTokenizer

    _checkpoint(hf_dir, len(AutoTokenizer.from_pretrained(str(hf_dir))), hidden_size, layers)
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1"}
    partial = workdir / "genai.partial"
    done = subprocess.run(
        [sys.executable, "-m", "onnxruntime_genai.models.builder", "-i", str(hf_dir), "-o", str(partial),
         "-p", "fp32", "-e", "cpu", "-c", str(workdir / "cache")],
        capture_output=True, text=True, timeout=BUILD_TIMEOUT_S, env=env,
    )  # fmt: skip
    if done.returncode != 0:
        raise RuntimeError(f"the model builder failed:\n{done.stdout[-2000:]}\n{done.stderr[-4000:]}")
    partial.rename(out)
    return out
