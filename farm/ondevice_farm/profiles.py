"""Device profiles: one YAML file per device model under `device_profiles/`.

Loaded and validated here; every error names the file and the field.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from ondevice_farm.errors import ProfileError, UsageError
from ondevice_farm.targets import KNOWN_TARGETS, Target

PLATFORMS = ("host", "android", "ios", "simulated")
#: a wheel carries the profiles inside the package (setup.py's build_py copies them there); a
#: source checkout reads the repository's own `device_profiles/`, so an edit there counts at once
PACKAGED_PROFILES_DIR = Path(__file__).resolve().parent / "device_profiles"
CHECKOUT_PROFILES_DIR = Path(__file__).resolve().parents[2] / "device_profiles"
DEFAULT_PROFILES_DIR = PACKAGED_PROFILES_DIR if PACKAGED_PROFILES_DIR.is_dir() else CHECKOUT_PROFILES_DIR
DEFAULT_COOLDOWN_S = 0.0


@dataclass(frozen=True)
class ThermalLimits:
    #: a job starts only below this temperature (where the platform reports one)
    max_start_temperature_c: float | None = None
    #: seconds to wait between two jobs on one unit
    cooldown_s: float = DEFAULT_COOLDOWN_S
    #: give up waiting for the unit to cool after this long
    cooldown_deadline_s: float = 600.0


@dataclass(frozen=True)
class DeviceProfile:
    name: str
    display_name: str
    platform: str
    targets: tuple[Target, ...]
    soc: str = ""
    accelerators: tuple[str, ...] = ()
    #: property -> the values that identify a unit of this model (getprop, ProductType, ...);
    #: one model sold under several numbers (SM-S921U, SM-S921U1, ...) lists them all
    recognise: dict[str, tuple[str, ...]] = field(default_factory=dict)
    runner: dict[str, str] = field(default_factory=dict)
    thermal: ThermalLimits = field(default_factory=ThermalLimits)
    #: the CPU numbers of the SoC's big and prime cores, as the kernel numbers them (cpu4..cpu8):
    #: where a pinned measurement runs (the native Android runner's `--cpus`); () where unknown
    performance_cores: tuple[int, ...] = ()
    #: targets the device runs only when asked for by name (`-t`), never by default: those its
    #: runner needs set up first (a runtime that runs in Python on the unit needs a runner the
    #: stock one is not, docs/android.md), so a plain submit does not plan jobs bound to be refused
    on_request: tuple[Target, ...] = ()
    source: Path | None = None

    def supports(self, target: Target) -> bool:
        return target.on_device in self.targets or target.on_device in self.on_request


def _field(data: dict[str, Any], key: str, kind: type, path: Path, required: bool = True) -> Any:
    if key not in data:
        if required:
            raise ProfileError(f"{path}: missing required field '{key}'")
        return None
    value = data[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or (isinstance(value, bool) and kind is not bool):
        raise ProfileError(f"{path}: field '{key}' must be a {kind.__name__}, got {type(value).__name__}")
    return value


def _string_map(data: dict[str, Any], key: str, path: Path) -> dict[str, str]:
    raw = _field(data, key, dict, path, required=False) or {}
    return {str(k): str(v) for k, v in raw.items()}


def _recognise(data: dict[str, Any], path: Path) -> dict[str, tuple[str, ...]]:
    """`recognise`: each property a value or a list of values (any of them matches)."""
    raw = _field(data, "recognise", dict, path, required=False) or {}
    out = {}
    for key, value in raw.items():
        values = value if isinstance(value, list) else [value]
        if not values or any(isinstance(v, dict | list) for v in values):
            raise ProfileError(f"{path}: recognise.{key} must be a value or a list of values")
        out[str(key)] = tuple(str(v) for v in values)
    return out


def _cores(data: dict[str, Any], path: Path, platform: str) -> tuple[int, ...]:
    """`performance_cores`: a non-empty list of distinct CPU numbers; not on iOS, where no app pins."""
    raw = _field(data, "performance_cores", list, path, required=False)
    if raw is None:
        return ()
    if platform == "ios":
        raise ProfileError(
            f"{path}: field 'performance_cores' is not for ios: iOS lets no app pin itself to cores"
        )
    if not raw or any(isinstance(c, bool) or not isinstance(c, int) or c < 0 for c in raw):
        raise ProfileError(
            f"{path}: field 'performance_cores' must list CPU numbers, e.g. [4, 5, 6, 7], got {raw!r}"
        )
    if len(set(raw)) != len(raw):
        raise ProfileError(f"{path}: field 'performance_cores' lists a CPU twice: {raw!r}")
    return tuple(sorted(raw))


def _targets(raw: list[Any], key: str, path: Path) -> list[Target]:
    targets = []
    for item in raw:
        try:
            targets.append(Target.parse(str(item)))
        except UsageError:
            raise ProfileError(
                f"{path}: field '{key}' has unknown target {item!r} (known: {', '.join(KNOWN_TARGETS)})"
            ) from None
    return targets


def parse_profile(data: object, path: Path) -> DeviceProfile:
    if not isinstance(data, dict):
        raise ProfileError(f"{path}: a profile must be a mapping of fields")
    known = {
        "name",
        "display_name",
        "platform",
        "soc",
        "accelerators",
        "targets",
        "recognise",
        "runner",
        "thermal",
        "performance_cores",
        "on_request",
    }
    unknown = sorted(set(data) - known)
    if unknown:
        raise ProfileError(f"{path}: unknown field '{unknown[0]}' (known: {', '.join(sorted(known))})")
    name = _field(data, "name", str, path)
    if name != path.stem:
        raise ProfileError(f"{path}: field 'name' is {name!r} but the file is named {path.stem!r}")
    platform = _field(data, "platform", str, path)
    if platform not in PLATFORMS:
        raise ProfileError(
            f"{path}: field 'platform' must be one of {', '.join(PLATFORMS)}, got {platform!r}"
        )
    raw_targets = _field(data, "targets", list, path)
    if not raw_targets:
        raise ProfileError(f"{path}: field 'targets' must list at least one target")
    targets = _targets(raw_targets, "targets", path)
    on_request = _targets(_field(data, "on_request", list, path, required=False) or [], "on_request", path)
    both = sorted({t.name for t in targets} & {t.name for t in on_request})
    if both:
        raise ProfileError(f"{path}: {both[0]} is in both 'targets' and 'on_request'; keep it in one")
    accelerators = _field(data, "accelerators", list, path, required=False) or []
    thermal_raw = _field(data, "thermal", dict, path, required=False) or {}
    thermal_path = Path(f"{path}: thermal")
    thermal = ThermalLimits(
        max_start_temperature_c=_field(thermal_raw, "max_start_temperature_c", float, thermal_path, False),
        cooldown_s=_field(thermal_raw, "cooldown_s", float, thermal_path, False) or DEFAULT_COOLDOWN_S,
        cooldown_deadline_s=_field(thermal_raw, "cooldown_deadline_s", float, thermal_path, False) or 600.0,
    )
    return DeviceProfile(
        name=name,
        display_name=_field(data, "display_name", str, path, required=False) or name,
        platform=platform,
        soc=_field(data, "soc", str, path, required=False) or "",
        accelerators=tuple(str(a) for a in accelerators),
        targets=tuple(targets),
        recognise=_recognise(data, path),
        runner=_string_map(data, "runner", path),
        thermal=thermal,
        performance_cores=_cores(data, path, platform),
        on_request=tuple(on_request),
        source=path,
    )


def load_profile(path: Path) -> DeviceProfile:
    try:
        data = yaml.safe_load(path.read_text())
    except OSError as exc:
        raise ProfileError(f"{path}: cannot read ({exc.strerror})") from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" at line {mark.line + 1}" if mark is not None else ""
        raise ProfileError(f"{path}: not valid YAML{where}") from None
    return parse_profile(data, path)


def load_profiles(directory: Path = DEFAULT_PROFILES_DIR) -> dict[str, DeviceProfile]:
    """Every profile in `directory`, by name. One bad file stops the load: it names itself."""
    if not directory.is_dir():
        raise ProfileError(f"{directory}: no such profiles directory")
    profiles = {}
    for path in sorted(directory.glob("*.yaml")):
        profile = load_profile(path)
        profiles[profile.name] = profile
    return profiles


def match_profile(
    properties: dict[str, str], profiles: dict[str, DeviceProfile], platform: str
) -> DeviceProfile | None:
    """The profile whose `recognise` properties all hold one of their listed values, if any."""
    for profile in profiles.values():
        if profile.platform != platform or not profile.recognise:
            continue
        if all(properties.get(k) in values for k, values in profile.recognise.items()):
            return profile
    return None
