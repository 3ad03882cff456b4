"""CoreML tests: the collector kept off what is alive before each test (imports, module fixtures).

`ct.convert` runs `gc.collect()` on every call, and the MIL builder allocates enough to trigger the
collector's full passes besides: each such pass walks every object in the process, and with torch and
coremltools imported (and ONNX's ~1,900 generated node cases held by the conformance test) that is
half a million objects, ~0.5 s per lowered case, most of these tests' time. Frozen objects are skipped
by the collector (node_suite.run_suite does the same for its workers). What a test allocates is
collected as usual; a frozen object that dies is freed by its reference count as usual; only a cycle
among frozen objects waits until `gc.unfreeze()`, which runs at the end of each module.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator

import pytest


@pytest.fixture(scope="module", autouse=True)
def _unfreeze_after_the_module() -> Iterator[None]:
    yield
    gc.unfreeze()


@pytest.fixture(autouse=True)
def _frozen_before_each_test(_unfreeze_after_the_module: None) -> None:
    # the first collect of a module walks everything once; later ones only what is new since
    gc.collect()
    gc.freeze()
