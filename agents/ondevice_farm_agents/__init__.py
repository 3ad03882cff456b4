"""Device agents: one `DeviceAgent` per platform (host, android, ios).

Only code under `agents/` imports the platform libraries (adb_shell, pymobiledevice3);
the controller talks to agents through `ondevice_farm_agents.base` and `ondevice_farm_agents.registry`.
"""
