"""ONNX's narrow float types (float8, bfloat16, float4) on CoreML: held in fp32, and a Cast to one
rounded to its values by elementwise MIL ops. Checked value for value against ml_dtypes (what ONNX's
reference casts with) over every value of the type, every midpoint between two neighbours and the
floats either side of it, and the specials, with `saturate` on and off."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import ml_dtypes
import numpy as np
import onnx
import pytest
from onnx import TensorProto
from onnx.reference import ReferenceEvaluator

from ondevice_farm.errors import CompileError
from ondevice_farm.runtimes.coreml.compile import compile_coreml, predict_drift
from ondevice_farm.runtimes.coreml.compile.kernels import KERNELS, Kernel
from ondevice_farm.targets import Target
from tests.coreml.harness import save
from tests.coreml.onnx_models import Graph

pytest.importorskip("coremltools")

FORMATS = {
    "float8_e4m3fn": TensorProto.FLOAT8E4M3FN,
    "float8_e4m3fnuz": TensorProto.FLOAT8E4M3FNUZ,
    "float8_e5m2": TensorProto.FLOAT8E5M2,
    "float8_e5m2fnuz": TensorProto.FLOAT8E5M2FNUZ,
    "float4_e2m1fn": TensorProto.FLOAT4E2M1,
    "bfloat16": TensorProto.BFLOAT16,
}


def _reference(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    """The model's one output by ONNX's reference implementation, in fp32."""
    (output,) = list(ReferenceEvaluator(model).run(None, feeds))
    return np.asarray(output).astype(np.float32)


def _probes(name: str) -> np.ndarray:
    """Every finite value of the type, the midpoints between neighbours (where ties to even
    decide), the fp32 values either side of each midpoint, and inf, NaN, 0, huge and tiny."""
    if name == "float4_e2m1fn":  # packed two to a byte: no view of its codes
        values = _float4_values().reshape(-1)
    else:
        dtype = np.dtype(getattr(ml_dtypes, name))
        codes = np.arange(2 ** (8 * dtype.itemsize)).astype(np.uint8 if dtype.itemsize == 1 else np.uint16)
        values = codes.view(dtype).astype(np.float32)
    grid = np.unique(values[np.isfinite(values)].astype(np.float64))
    middles = (grid[1:] + grid[:-1]) / 2
    top = float(grid.max())
    # the midpoint between max and the next grid step above it (where overflow begins)
    step = top - float(grid[grid < top].max())
    beyond = np.array(
        [top + step / 2, -(top + step / 2), top + step, 2 * top, 1e30, -1e30, 3e38, 1e-30, -1e-30]
    )
    points = np.concatenate([grid, middles, beyond]).astype(np.float32)
    around = np.concatenate(
        [np.nextafter(points, np.float32(np.inf)), np.nextafter(points, np.float32(-np.inf))]
    )
    specials = np.array([np.inf, -np.inf, np.nan, 0.0, -0.0], np.float32)
    return np.concatenate([points, around, specials])


def _float4_values() -> np.ndarray:
    return np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6], np.float32) * np.array([[1], [-1]], np.float32)


def _cast_model(to: int, saturate: int | None, source: int = TensorProto.FLOAT) -> onnx.ModelProto:
    g = Graph(opset=23)
    x = g.input("x", ["n"], source)
    attrs = {"to": to} if saturate is None else {"to": to, "saturate": saturate}
    y = g.one("Cast", [x], **attrs)
    g.output(y, to)
    return g.model()


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("name", sorted(FORMATS))
def test_cast_rounds_every_value_as_the_reference(name: str, saturate: int, tmp_path: Path) -> None:
    if saturate == 0 and not name.startswith("float8"):
        pytest.skip("only float8 casts take `saturate`")
    model = _cast_model(FORMATS[name], saturate if name.startswith("float8") else None)
    x = _probes(name)
    expected = _reference(model, {"x": x})
    got = next(iter(predict_drift(save(model, tmp_path), {"x": x}, precision="fp32").values()))
    assert got.dtype == np.float32
    wrong = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    assert not wrong.any(), [
        (float(a), float(b), float(c)) for a, b, c in zip(x[wrong], got[wrong], expected[wrong], strict=True)
    ][:10]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_a_narrow_float_input_is_held_exactly_in_fp32(name: str, tmp_path: Path) -> None:
    model = _cast_model(TensorProto.FLOAT, None, source=FORMATS[name])
    x = _float4_values().astype(getattr(ml_dtypes, name)).reshape(-1)
    got = next(iter(predict_drift(save(model, tmp_path), {"x": x}, precision="fp32").values()))
    np.testing.assert_array_equal(got, x.astype(np.float32))


def test_the_report_says_which_inputs_and_outputs_are_held_in_fp32(tmp_path: Path) -> None:
    g = Graph(opset=23)
    x = g.input("x", [2, 3], TensorProto.BFLOAT16)
    g.output(g.one("Cast", [x], to=TensorProto.FLOAT8E4M3FN), TensorProto.FLOAT8E4M3FN)
    artifact = compile_coreml(save(g.model(), tmp_path), Target.parse("coreml/cpu"), tmp_path / "out")
    notes = " | ".join(artifact.report.notes)
    assert "input x is bfloat16 in ONNX and fp32" in notes
    assert "is float8_e4m3fn in ONNX and fp32 in the ML Program" in notes


def test_an_op_on_bfloat16_rounds_its_result_once(tmp_path: Path) -> None:
    g = Graph(opset=23)
    x, y = g.input("x", [64], TensorProto.BFLOAT16), g.input("y", [64], TensorProto.BFLOAT16)
    g.output(g.one("Div", [x, y]), TensorProto.BFLOAT16)
    model = g.model()
    rng = np.random.default_rng(0)
    feeds = {name: rng.uniform(0.5, 2, 64).astype(ml_dtypes.bfloat16) for name in ("x", "y")}
    expected = _reference(model, feeds)
    (got,) = predict_drift(save(model, tmp_path), feeds, precision="fp32").values()
    np.testing.assert_array_equal(got, expected)


def test_an_op_onnx_rounds_step_by_step_in_bfloat16_is_refused(tmp_path: Path) -> None:
    g = Graph(opset=23)
    x = g.input("x", [2, 8], TensorProto.BFLOAT16)
    g.output(g.one("Softmax", [x]), TensorProto.BFLOAT16)
    with pytest.raises(CompileError, match="Softmax on bfloat16: ONNX rounds each of its steps"):
        predict_drift(
            save(g.model(), tmp_path), {"x": np.zeros((2, 8), ml_dtypes.bfloat16)}, precision="fp32"
        )


def _e8m0_probes() -> np.ndarray:
    powers = np.ldexp(1.0, np.arange(-149, 128))  # exact, where fp32 exp2 need not be
    points = np.concatenate([powers, 1.5 * powers, 1.25 * powers, [0.0, 3e38, 2.0**127 * 1.9]]).astype(
        np.float32
    )
    around = np.concatenate([np.nextafter(points, np.float32(np.inf)), np.nextafter(points, np.float32(0))])
    values = np.concatenate([points, around, [np.inf, np.nan]]).astype(np.float32)
    return np.concatenate([values, -values[: len(values) // 4]])


@pytest.mark.parametrize("saturate", [1, 0])
@pytest.mark.parametrize("round_mode", ["up", "nearest", "down"])
def test_cast_to_e8m0_rounds_as_the_reference(round_mode: str, saturate: int, tmp_path: Path) -> None:
    g = Graph(opset=24)
    g.output(
        g.one(
            "Cast", [g.input("x", ["n"])], to=TensorProto.FLOAT8E8M0, round_mode=round_mode, saturate=saturate
        ),
        TensorProto.FLOAT8E8M0,
    )
    model = g.model()
    x = _e8m0_probes()
    expected = _reference(model, {"x": x})
    got = next(iter(predict_drift(save(model, tmp_path), {"x": x}, precision="fp32").values()))
    wrong = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    assert not wrong.any(), [
        (float(a), float(b), float(c)) for a, b, c in zip(x[wrong], got[wrong], expected[wrong], strict=True)
    ][:10]


def _one_ulp(direction: float) -> Callable[[Callable[..., np.ndarray]], Kernel]:
    """A kernel that computes an op as numpy does, then moves every result one ulp toward `direction`."""

    def wrap(compute: Callable[..., np.ndarray]) -> Kernel:
        def kernel(args: dict[str, Any]) -> list[np.ndarray]:
            exact = np.asarray(compute(args), np.float32)
            return [np.nextafter(exact, np.float32(direction)).astype(np.float32)]

        return kernel

    return wrap


def _transcendentals_one_ulp_off(monkeypatch: pytest.MonkeyPatch, direction: float) -> None:
    """The host executor's exp2, log and pow made one ulp high (or low) everywhere, as a device's GPU
    or Neural Engine (or numpy's exp2 on an AVX-512 CPU, at 2**127) may give them."""
    off = _one_ulp(direction)
    monkeypatch.setitem(KERNELS, "exp2", off(lambda a: np.exp2(a["x"])))
    monkeypatch.setitem(KERNELS, "log", off(lambda a: np.log(a["x"] + a.get("epsilon", 0))))
    monkeypatch.setitem(KERNELS, "pow", off(lambda a: np.power(a["x"], a["y"])))


@pytest.mark.parametrize("direction", [np.inf, -np.inf], ids=["one_ulp_high", "one_ulp_low"])
def test_e8m0_holds_when_exp2_and_log_are_one_ulp_off(
    direction: float, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _transcendentals_one_ulp_off(monkeypatch, direction)
    x = _e8m0_probes()
    for round_mode in ("up", "nearest", "down"):
        for saturate in (1, 0):
            g = Graph(opset=24)
            cast = g.one(
                "Cast",
                [g.input("x", ["n"])],
                to=TensorProto.FLOAT8E8M0,
                round_mode=round_mode,
                saturate=saturate,
            )
            g.output(cast, TensorProto.FLOAT8E8M0)
            model = g.model()
            expected = _reference(model, {"x": x})
            path = save(model, tmp_path, f"{round_mode}-{saturate}.onnx")
            got = next(iter(predict_drift(path, {"x": x}, precision="fp32").values()))
            wrong = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
            assert not wrong.any(), (round_mode, saturate, x[wrong][:5], got[wrong][:5], expected[wrong][:5])


@pytest.mark.parametrize("direction", [np.inf, -np.inf], ids=["one_ulp_high", "one_ulp_low"])
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_a_narrow_cast_holds_when_exp2_and_log_are_one_ulp_off(
    name: str, direction: float, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    _transcendentals_one_ulp_off(monkeypatch, direction)
    model = _cast_model(FORMATS[name], 0 if name.startswith("float8") else None)
    x = _probes(name)
    expected = _reference(model, {"x": x})
    got = next(iter(predict_drift(save(model, tmp_path), {"x": x}, precision="fp32").values()))
    wrong = ~((got == expected) | (np.isnan(got) & np.isnan(expected)))
    assert not wrong.any(), (x[wrong][:5], got[wrong][:5], expected[wrong][:5])
