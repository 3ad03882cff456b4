from __future__ import annotations

from pathlib import Path

import pytest

from tests.android.peer_fixtures import adb_key, pixel8_peer  # noqa: F401  (test_generate_over_adb.py)

from .tiny_llama import build_tiny_llama


@pytest.fixture(scope="session")
def tiny_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny random Llama folder for the whole test session (building it takes seconds)."""
    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("transformers")
    return build_tiny_llama(tmp_path_factory.mktemp("tiny-llama"))


#: the slower folder of the compare tests: twice the width and the layers of `tiny_llama`, so
#: every prefill and decode step does several times the work (real compute, not faked numbers)
SLOWER_HIDDEN_SIZE, SLOWER_LAYERS = 128, 4


@pytest.fixture(scope="session")
def slower_llama(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A bigger tiny Llama (same tokenizer and context as `tiny_llama`): B in the compare tests."""
    pytest.importorskip("onnxruntime_genai")
    pytest.importorskip("transformers")
    return build_tiny_llama(
        tmp_path_factory.mktemp("slower-llama"), hidden_size=SLOWER_HIDDEN_SIZE, layers=SLOWER_LAYERS
    )
