"""Every pymobiledevice3 call the iOS agent makes exists in the installed pymobiledevice3, as called.

The real provider (agents/ondevice_farm_agents/ios/provider.py) imports its services lazily, inside the calls
that need them, and every other iOS test runs on the fakes (agents/ondevice_farm_agents/ios/fakes.py), which
copy the services' methods: a module pymobiledevice3 renames, or a method whose arguments change, would pass
every test here and fail on the first real phone. This module imports each of them plainly (a rename
fails the run, it is not skipped) and checks three things agree, method by method: the protocol
the agent codes against, pymobiledevice3's own method (a coroutine, accepting the protocol's
arguments with the same defaults), and the fake that stands in for it. Then each call the
provider makes to open a service is bound to the real signature.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import pytest
from pymobiledevice3 import usbmux
from pymobiledevice3.exceptions import NotPairedError, TunneldConnectionError
from pymobiledevice3.lockdown import LockdownClient, create_using_usbmux
from pymobiledevice3.remote.remote_service_discovery import RemoteServiceDiscoveryService
from pymobiledevice3.services.diagnostics import DiagnosticsService
from pymobiledevice3.services.dvt.instruments.dvt_provider import DvtProvider
from pymobiledevice3.services.dvt.instruments.process_control import ProcessControl as DvtProcessControl
from pymobiledevice3.services.house_arrest import HouseArrestService
from pymobiledevice3.services.installation_proxy import InstallationProxyService
from pymobiledevice3.tunneld.api import get_tunneld_device_by_udid

from ondevice_farm_agents.ios import fakes, provider

#: the agent's protocol -> (pymobiledevice3's class, the fake that copies it)
SERVICES: dict[type, tuple[type, type]] = {
    provider.Lockdown: (LockdownClient, fakes.FakeLockdown),
    provider.InstallationProxy: (InstallationProxyService, fakes.FakeInstallationProxy),
    provider.ContainerFiles: (HouseArrestService, fakes.FakeHouseArrest),
    provider.ProcessControl: (DvtProcessControl, fakes.FakeProcessControl),
    provider.Diagnostics: (DiagnosticsService, fakes.FakeDiagnostics),
}
CASES = [
    pytest.param(protocol, name, id=f"{protocol.__name__}.{name}")
    for protocol in SERVICES
    for name, member in vars(protocol).items()
    if inspect.isfunction(member) and not name.startswith("_")
]
_EMPTY = inspect.Parameter.empty


def _parameters(function: Callable[..., Any]) -> dict[str, inspect.Parameter]:
    """Its parameters but `self`; through decorators (pymobiledevice3 wraps its AFC methods)."""
    parameters = dict(inspect.signature(inspect.unwrap(function)).parameters)
    parameters.pop("self", None)
    return parameters


def _accepts(real: dict[str, inspect.Parameter], wanted: dict[str, inspect.Parameter]) -> list[str]:
    """What in `wanted` (the protocol's parameters) `real` does not take the same way."""
    problems = []
    for position, (name, parameter) in enumerate(wanted.items()):
        theirs = real.get(name)
        if theirs is None:
            problems.append(f"no parameter {name!r}")
            continue
        if list(real).index(name) != position:
            problems.append(f"{name!r} is at position {list(real).index(name)}, not {position}")
        if theirs.kind in (inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.VAR_POSITIONAL):
            problems.append(f"{name!r} is {theirs.kind.description}")
        if parameter.default is not _EMPTY and theirs.default != parameter.default:
            problems.append(f"{name!r} defaults to {theirs.default!r}, not {parameter.default!r}")
    required = [
        name
        for name, p in real.items()
        if name not in wanted and p.default is _EMPTY and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
    ]
    problems += [f"requires {name!r}, which the agent never passes" for name in required]
    return problems


@pytest.mark.parametrize(("protocol", "name"), CASES)
def test_each_method_the_agent_calls_is_pymobiledevices_own_and_its_fake_copies_it(
    protocol: type, name: str
) -> None:
    real_class, fake_class = SERVICES[protocol]
    wanted = _parameters(getattr(protocol, name))
    real = getattr(real_class, name, None)
    assert real is not None, f"{real_class.__module__}.{real_class.__qualname__} has no {name}"
    assert inspect.iscoroutinefunction(inspect.unwrap(real)), f"{real_class.__qualname__}.{name} is not async"
    assert _accepts(_parameters(real), wanted) == [], f"{real_class.__qualname__}.{name}"
    fake = getattr(fake_class, name)
    assert inspect.iscoroutinefunction(fake), f"{fake_class.__qualname__}.{name} is not async"
    assert list(_parameters(fake)) == list(wanted), f"{fake_class.__qualname__}.{name}"
    assert [p.default for p in _parameters(fake).values()] == [p.default for p in wanted.values()]


def test_every_method_of_the_fakes_services_is_in_the_protocol() -> None:
    """A fake method the protocol lacks would be a call the agent makes unchecked."""
    for protocol, (_, fake_class) in SERVICES.items():
        copied = {n for n, m in vars(fake_class).items() if inspect.iscoroutinefunction(m)}
        declared = {n for n, m in vars(protocol).items() if inspect.isfunction(m)}
        assert copied <= declared, f"{fake_class.__name__}: {sorted(copied - declared)}"


def _binds(function: Callable[..., Any], *args: object, **kwargs: object) -> None:
    inspect.signature(inspect.unwrap(function)).bind(*args, **kwargs)


def test_the_calls_that_open_the_services_bind_to_pymobiledevice3s_signatures() -> None:
    """What `UsbmuxProvider` calls, with the arguments it passes
    (agents/ondevice_farm_agents/ios/provider.py)."""
    anything = object()
    assert inspect.iscoroutinefunction(usbmux.list_devices)
    _binds(usbmux.list_devices, usbmux_address=None)
    assert {"serial", "connection_type"} <= set(inspect.signature(usbmux.MuxDevice).parameters)
    assert inspect.iscoroutinefunction(create_using_usbmux)
    _binds(create_using_usbmux, serial="x", autopair=False, connection_type="USB", usbmux_address=None)
    # `client.paired`: set on every LockdownClient as it is made
    assert "self.paired" in inspect.getsource(LockdownClient.__init__)
    assert inspect.iscoroutinefunction(LockdownClient.close)
    for service in (InstallationProxyService, DiagnosticsService):
        _binds(service, lockdown=anything)
    assert inspect.iscoroutinefunction(HouseArrestService.create)
    _binds(HouseArrestService.create, anything, "com.example.app")
    _binds(DvtProvider, anything)
    _binds(DvtProcessControl, anything)
    for opened in (
        InstallationProxyService,
        HouseArrestService,
        DiagnosticsService,
        DvtProvider,
        DvtProcessControl,
    ):
        assert hasattr(opened, "__aenter__") and hasattr(opened, "__aexit__"), opened.__name__
    assert inspect.iscoroutinefunction(get_tunneld_device_by_udid)
    _binds(get_tunneld_device_by_udid, "udid", tunneld_address=provider.DEFAULT_TUNNELD_ADDRESS)
    assert inspect.iscoroutinefunction(RemoteServiceDiscoveryService.close)
    assert issubclass(NotPairedError, Exception) and issubclass(TunneldConnectionError, Exception)
