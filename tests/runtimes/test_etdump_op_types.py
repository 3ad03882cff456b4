"""A portable kernel's op type in the ExecuTorch per-op profile is the op it is named after, also
where its debug handle names several graph nodes (a Linear: `native_call_addmm.out` carries
`aten.permute_copy.default` and `aten.addmm.default`, as the Inspector gave them for a real
`executorch/portable` job of `Linear(16, 8)` + ReLU on this host)."""

from __future__ import annotations

from types import SimpleNamespace

from ondevice_farm_agents.runtimes.executorch.profile import kernel_op_type


def _event(name: str, op_types: list[str], delegated: bool = False) -> SimpleNamespace:
    return SimpleNamespace(name=name, op_types=op_types, is_delegated_op=delegated)


def test_the_kernels_own_op_wins_over_the_first_node_of_its_handle() -> None:
    both = ["aten.permute_copy.default", "aten.addmm.default"]
    assert kernel_op_type(_event("native_call_addmm.out", both)) == "aten.addmm.default"
    assert kernel_op_type(_event("native_call_permute_copy.out", ["aten.permute_copy.default"])) == (
        "aten.permute_copy.default"
    )


def test_without_a_match_the_first_node_and_without_an_etrecord_the_kernel_name() -> None:
    assert kernel_op_type(_event("native_call_mean.out", ["aten.mean.dim"])) == "aten.mean.dim"
    assert kernel_op_type(_event("native_call_mean.out #2", [])) == "mean.out"
    delegated = _event("Convolution (NHWC, F32) IGEMM #1", ["aten.convolution.default"], delegated=True)
    assert kernel_op_type(delegated) == "Convolution (NHWC, F32) IGEMM"
