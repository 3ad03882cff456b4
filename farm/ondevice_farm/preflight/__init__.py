"""Pre-flight check: which ops will not run on each accelerator, predicted without a device."""

from ondevice_farm.preflight.check import Prediction, Unsupported, predict

__all__ = ["Prediction", "Unsupported", "predict"]
