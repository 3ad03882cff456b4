"""IREE's session module: a `.vmfb` module run by `iree.runtime` on the backend's HAL driver.
numpy and the runtime only, no farm: it is pushed to units as one file
(`ondevice_farm_agents.runtimes.spec` has the contract).

`iree/cpu` runs on the `local-sync` driver: each dispatch on the calling thread, no task system.
On the farm's small models it ran about twice as fast as `local-task` (the task system's wake-ups
cost more than the work; DESIGN.md, and 0.067 against 0.153 ms on a small CNN here), so the
thread count the farm sizes pools with does not apply: one thread runs it, and the runner says so.
`iree/vulkan` runs on the `vulkan` driver's first device; on a host without a GPU that is Mesa's
lavapipe, a software Vulkan on the CPU, and the runner names it.

A sample is one call as an application makes it: the NumPy inputs copied to device buffers, the
module's function invoked (it waits for its dispatches), the outputs read back into NumPy arrays.
The call goes through the VM API (`VmContext.invoke`), not `iree.runtime`'s function wrapper: on
Vulkan the wrapper's read-back imports a NumPy buffer that is not page-aligned, which lavapipe
refuses; the outputs are copied through a host staging buffer instead.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

#: the module's function (the farm's compile names the imported graph `main`)
ENTRY = "main"
#: the HAL driver of each backend
DRIVERS = {"cpu": "local-sync", "vulkan": "vulkan"}
#: Mesa's version in a Vulkan device's name (`llvmpipe (...) (llvmpipe Mesa 22.3.6 (LLVM 15.0.6))`)
_MESA = re.compile(r"Mesa [\d.]+")
#: the runtime's status line within its message: `INVALID_ARGUMENT; tensor shape dimension 0 ...`
_STATUS = re.compile(r"\b([A-Z][A-Z_]+; .*?)(?:; while (?:invoking|calling) .*)?$")


def one_line(exc: BaseException) -> str:
    """IREE's message in one line: its status and what it says, without the C source location
    and the VM's stack that follow."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    found = _STATUS.search(first)
    return found.group(1) if found else first


def vulkan_device(rt: Any) -> tuple[Any, str]:
    """The Vulkan driver's first device and its name; a one-line RuntimeError where there is none."""
    try:
        found = rt.get_driver("vulkan").query_available_devices()
    except Exception as exc:  # the loader finds no ICD: UNAVAILABLE, VK_ERROR_INCOMPATIBLE_DRIVER
        found, reason = [], one_line(exc)
    else:
        reason = "the driver lists none"
    if not found:
        raise RuntimeError(
            f"no Vulkan device on this host ({reason}); iree/vulkan needs one: a GPU's Vulkan driver, "
            "or Mesa's lavapipe (software Vulkan: apt-get install mesa-vulkan-drivers)"
        )
    return rt.get_device("vulkan"), str(found[0].get("name", "vulkan"))


def device_label(name: str) -> str:
    """A Vulkan device as the runner names it; lavapipe (its device is `llvmpipe`) said to be
    software, so nobody reads its timings as a GPU's."""
    mesa = _MESA.search(name)
    if "llvmpipe" in name:
        return f"lavapipe{f' ({mesa.group(0)})' if mesa else ''}: software Vulkan on the CPU, not a GPU"
    return name


class IreeSession:
    """The module loaded on the backend's device, its inputs bound."""

    def __init__(self, backend: str, artifact: Path, inputs: Sequence[np.ndarray]) -> None:
        rt = importlib.import_module("iree.runtime")
        interop = importlib.import_module("iree.runtime.array_interop")
        from importlib import metadata

        version = metadata.version("iree-base-runtime")
        if backend == "vulkan":
            self._device, name = vulkan_device(rt)
            self.runner = f"iree-runtime-python {version} on {device_label(name)}"
        else:
            self._device = rt.get_device(DRIVERS[backend])
            self.runner = f"iree-runtime-python {version} {DRIVERS[backend]}, one thread"
        self._rt = rt
        instance = rt.VmInstance()
        module = rt.VmModule.mmap(instance, str(artifact))
        self._context = rt.VmContext(instance, modules=[rt.create_hal_module(instance, self._device), module])
        self._function = module.lookup_function(ENTRY)
        if self._function is None:
            raise RuntimeError(f"the module has no function {ENTRY!r}")
        self._inputs = [np.ascontiguousarray(a) for a in inputs]
        self._element_types = [interop.map_dtype_to_element_type(a.dtype) for a in self._inputs]
        self._staged = backend == "vulkan"

    def _argument(self, array: np.ndarray, element_type: Any) -> Any:
        rt = self._rt
        return self._device.allocator.allocate_buffer_copy(
            memory_type=rt.MemoryType.DEVICE_LOCAL,
            allowed_usage=rt.BufferUsage.DEFAULT,
            device=self._device,
            buffer=array,
            element_type=element_type,
        )

    def _host(self, view: Any) -> np.ndarray:
        """One output as a NumPy array of its own (mapped where the device's memory is the host's,
        else copied through a staging buffer)."""
        rt = self._rt
        dtype = rt.HalElementType.map_to_dtype(view.element_type)
        if not self._staged:
            return np.array(view.map().asarray(view.shape, dtype), copy=True)
        source = view.get_buffer()
        staging = self._device.allocator.allocate_buffer(
            memory_type=rt.MemoryType.HOST_LOCAL | rt.MemoryType.DEVICE_VISIBLE,
            allowed_usage=rt.BufferUsage.TRANSFER_TARGET | rt.BufferUsage.MAPPING_SCOPED,
            allocation_size=source.byte_length(),
        )
        semaphore = self._device.create_semaphore(0)
        self._device.queue_copy(
            source,
            staging,
            wait_semaphores=rt.HalFence.create_at(semaphore, 0),
            signal_semaphores=rt.HalFence.create_at(semaphore, 1),
        )
        rt.HalFence.create_at(semaphore, 1).wait()
        return np.array(staging.map().asarray(view.shape, dtype), copy=True)

    def infer(self) -> list[np.ndarray]:
        rt = self._rt
        arguments = rt.VmVariantList(len(self._inputs))
        for array, element_type in zip(self._inputs, self._element_types, strict=True):
            arguments.push_ref(self._argument(array, element_type).ref)
        results = rt.VmVariantList(1)
        try:
            self._context.invoke(self._function, arguments, results)
        except Exception as exc:  # a shape or dtype the module was not built for: one line
            raise RuntimeError(f"IREE refused the call: {one_line(exc)}") from None
        return [self._host(results.get_as_object(i, rt.HalBufferView)) for i in range(len(results))]


def open_session(
    backend: str,
    artifact: Path,
    inputs: Sequence[np.ndarray],
    threads: int | None,
    etdump: bool = False,
    names: tuple[list[str], list[str]] | None = None,
) -> IreeSession:
    """The module of an `iree/<backend>` target on its driver. It takes its inputs by position in
    the model's order, so `names` is not needed; `threads` does not apply (see the module
    docstring); IREE's per-dispatch profile is taken by its own runner (`profile.py`), so
    `etdump` is never asked for."""
    if backend not in DRIVERS:
        raise RuntimeError(f"IREE has no backend {backend!r} here (known: {', '.join(DRIVERS)})")
    return IreeSession(backend, artifact, inputs)
