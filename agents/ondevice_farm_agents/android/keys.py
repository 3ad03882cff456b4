"""The host's ADB key: the one adb itself uses (`~/.android/adbkey`), made on first use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ondevice_farm.errors import DeviceAuthError


def default_key_path() -> Path:
    return Path.home() / ".android" / "adbkey"


def load_signer(key_path: Path | None = None) -> Any:
    """An adb_shell signer for `key_path` (default: adb's own key), generating the pair if missing."""
    from adb_shell.auth.keygen import keygen
    from adb_shell.auth.sign_pythonrsa import PythonRSASigner

    path = key_path or default_key_path()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        keygen(str(path))
        path.chmod(0o600)
    if not Path(f"{path}.pub").exists():
        raise DeviceAuthError(
            f"{path}.pub is missing next to the private key",
            hint=f"regenerate it with `adb keygen {path}` or remove {path} to start afresh",
        )
    try:
        return PythonRSASigner.FromRSAKeyPath(str(path))
    except (OSError, ValueError) as exc:
        raise DeviceAuthError(f"cannot read the ADB key {path}: {exc}") from None
