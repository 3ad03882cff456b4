"""The machines TVM builds for: an LLVM target (a JSON dict in this TVM; the string form
`llvm -mtriple=...` is refused) and the C++ compiler that links the kernels into a `.so`.

The host build is the farm's `tvm/cpu` on `host-cpu`. The aarch64 build is the phone's artifact
(Android and Linux boards run aarch64 code; docs/compilers.md says what a phone run needs): the
compile request names no device yet, so the registry's compiler builds for the host, and the
aarch64 build is reached from Python (`compile_tvm(..., machine=AARCH64_LINUX)`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass(frozen=True)
class Machine:
    name: str
    #: the LLVM target TVM generates code for
    target: dict[str, Any]
    #: the cross compiler that links the library; None: the host's own (TVM's default)
    linker: str | None = None
    #: the package that brings the linker, for the refusal's hint
    linker_package: str = field(default="g++", compare=False)


#: this host: LLVM's own triple and a generic CPU, so the `.so` runs on any x86-64 host
HOST = Machine("host", {"kind": "llvm"})
#: 64-bit Arm phones and boards: NEON is every ARMv8-A core's
AARCH64_LINUX = Machine(
    "aarch64-linux",
    {"kind": "llvm", "mtriple": "aarch64-linux-gnu", "mattr": ["+neon"]},
    linker="aarch64-linux-gnu-g++",
    linker_package="g++-aarch64-linux-gnu",
)
