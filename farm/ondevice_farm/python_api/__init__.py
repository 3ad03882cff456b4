"""The Python API's implementation. Its public names are re-exported by `ondevice_farm` itself
(`ondevice_farm.submit`, `ondevice_farm.Run`, ...); what is only in here may change."""
