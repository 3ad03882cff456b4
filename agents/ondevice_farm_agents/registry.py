"""Platform name -> agent class, imported only when that platform is asked for.

Keeping the imports lazy means `farm` runs without the android/ios extras installed,
and the controller never imports adb_shell or pymobiledevice3 itself.
"""

from __future__ import annotations

import importlib

from ondevice_farm.errors import DISTRIBUTION, UsageError, install_hint
from ondevice_farm_agents.base import DeviceAgent

#: platform -> (module, class, the pip extra that provides its dependencies)
AGENTS: dict[str, tuple[str, str, str]] = {
    "host": ("ondevice_farm_agents.host.agent", "HostAgent", ""),
    "ios": ("ondevice_farm_agents.ios.agent", "IosAgent", "ios"),
    "android": ("ondevice_farm_agents.android.agent", "AndroidAgent", "android"),
    "simulated": ("ondevice_farm_agents.simulated.agent", "SimulatedAgent", ""),
}


def agent_class(platform: str) -> type[DeviceAgent]:
    try:
        module_name, class_name, extra = AGENTS[platform]
    except KeyError:
        raise UsageError(f"no agent for platform {platform!r}; known: {', '.join(AGENTS)}") from None
    try:
        module = importlib.import_module(module_name)
    except ImportError as exc:
        hint = install_hint(extra) if extra else f"reinstall {DISTRIBUTION}"
        raise UsageError(f"the {platform} agent cannot be loaded ({exc})", hint=hint) from None
    cls: type[DeviceAgent] = getattr(module, class_name)
    return cls
