#!/usr/bin/env python3
"""Give the project names no other project on PyPI holds, keeping the repository's layout.

    scripts/rename_packages.py [--check] [ROOT]

`farm` on PyPI is deepset's FARM (import name `farm` too) and `agents` is what openai-agents
installs. After this script:

    distribution      ondevice-farm          (pip install 'ondevice-farm[coreml]')
    import names      ondevice_farm          -> the directory farm/
                      ondevice_farm_agents   -> the directory agents/
    command           farm                   (unchanged)
    directories       farm/, agents/         (unchanged: every path in docs stays true)

The import names are symlinks at the repository root (`ondevice_farm -> farm`,
`ondevice_farm_agents -> agents`), so everything that puts the root on sys.path finds them with no
import hook: `PYTHONPATH=$PWD`, `python -m ondevice_farm`, pytest, Ray's workers, and mypy, which
cannot follow setuptools' editable import hooks but reads the symlinked directories as the
packages they name. The wheel is built from them too (setuptools follows the links).

It rewrites, in Python, Markdown, TOML and shell files: imports (`from farm.x import`, `import
agents.y`), dotted module names in strings and prose (`"farm.reports.static"`, `agents.ios.agent`)
-- only where the name after the dot is a real module of farm/ or agents/, so a schema id such as
`farm.ios.job/1` or a file name such as `farm.env` stays --, `python -m farm`, the install hints
(`'farm[coreml]'` -> `'ondevice-farm[coreml]'`), and pyproject's name, entry point, package list,
package data and mypy files. It is idempotent: run it again after merging more work and it
rewrites only what is new. `--check` rewrites nothing and exits 1 if anything would change.
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

DISTRIBUTION = "ondevice-farm"
#: import name -> the repository directory it names
IMPORT_NAMES = {"farm": "ondevice_farm", "agents": "ondevice_farm_agents"}

#: files whose text is rewritten (JSON, YAML, Swift, fixtures hold protocol ids and recorded data)
SUFFIXES = {".py", ".md", ".toml", ".sh", ".cfg", ".ini"}
EXTENSIONLESS = {"scripts/test", ".ci/run"}
SKIP_DIRS = {".git", ".venv", "build", "dist", "__pycache__", "node_modules", "test-artifacts", "fixtures"}
SKIP_FILES = {"scripts/rename_packages.py"}
#: a name not preceded by a word character, a dot or a hyphen: `farm` but not `ondevice_farm`,
#: `x.farm`, `ondevice-farm` (this is what makes a second run rewrite nothing)
NOT_AFTER = r"(?<![\w.\-/])"


def submodules(package_dir: Path) -> list[str]:
    """The modules and subpackages of a package directory, by name."""
    names = set()
    for entry in package_dir.iterdir():
        if entry.name.startswith((".", "__pycache__")):
            continue
        if entry.suffix == ".py" and entry.stem != "__init__":
            names.add(entry.stem)
        elif entry.is_dir() and (entry / "__init__.py").exists():
            names.add(entry.name)
    return sorted(names, key=lambda n: (-len(n), n))


def python_rules(root: Path) -> list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]]:
    rules: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]] = []
    for old, new in IMPORT_NAMES.items():
        modules = "|".join(re.escape(m) for m in submodules(root / old))
        # `from farm.x import`, `from farm import`, `import farm.x`, `import farm`
        rules.append((re.compile(rf"{NOT_AFTER}\bfrom {old}(?=[.\s])"), f"from {new}"))
        # (a statement of its own: `from .conftest import farm` imports a helper, not the package)
        rules.append((re.compile(rf"(^\s*|;\s*)import {old}(?=[.\s,]|$)", re.M), rf"\g<1>import {new}"))
        # dotted module names anywhere: strings, docstrings, comments, prose
        rules.append((re.compile(rf"{NOT_AFTER}\b{old}\.(?=(?:{modules})\b)"), f"{new}."))
        # `python -m farm`, and the `"-m", "farm"` of a subprocess argument list
        rules.append((re.compile(rf"(-m\s+){old}(?=[\s'\"`)]|$)", re.M), rf"\g<1>{new}"))
        rules.append((re.compile(rf"([\"']-m[\"'],\s*[\"']){old}(?=[\"'])"), rf"\g<1>{new}"))
    # install hints and extras: 'farm[coreml]' -> 'ondevice-farm[coreml]'
    rules.append((re.compile(rf"{NOT_AFTER}\bfarm\[(?=[\w,\-{{}}]+\])"), f"{DISTRIBUTION}["))
    rules.append((re.compile(r"\breinstall farm\b"), f"reinstall {DISTRIBUTION}"))
    rules.append((re.compile(r"package_name=\"farm\""), f'package_name="{DISTRIBUTION}"'))
    # the one constant every install hint is built from (farm/errors.py)
    rules.append((re.compile(r'(?m)^DISTRIBUTION = "farm"$'), f'DISTRIBUTION = "{DISTRIBUTION}"'))
    return rules


def rewrite_pyproject(text: str) -> str:
    """The distribution's name, entry point target, packages, package data and mypy files."""
    farm, agents = IMPORT_NAMES["farm"], IMPORT_NAMES["agents"]
    text = re.sub(r'(?m)^name = "farm"$', f'name = "{DISTRIBUTION}"', text)
    text = re.sub(r'(?m)^include = \["farm\*", "agents\*"\]$', f'include = ["{farm}*", "{agents}*"]', text)
    section = re.search(r"(?ms)^\[tool\.setuptools\.package-data\]\n(.*?)(?=^\[|\Z)", text)
    if section:
        body = re.sub(r"(?m)^farm = ", f"{farm} = ", section.group(1))
        body = re.sub(r"(?m)^agents = ", f"{agents} = ", body)
        text = text[: section.start(1)] + body + text[section.end(1) :]
    text = re.sub(r'(?m)^files = \["farm", "agents"\]$', f'files = ["{farm}", "{agents}"]', text)
    return text


def wanted_files(root: Path) -> list[Path]:
    found = []
    for dirpath, dirnames, filenames in os.walk(root):
        dirnames[:] = [d for d in dirnames if d not in SKIP_DIRS and not d.endswith(".egg-info")]
        # the import-name symlinks are the same files as farm/ and agents/: visit those once
        dirnames[:] = [d for d in dirnames if not (Path(dirpath) / d).is_symlink()]
        for name in filenames:
            path = Path(dirpath) / name
            relative = path.relative_to(root).as_posix()
            if relative in SKIP_FILES or path.is_symlink():
                continue
            if path.suffix in SUFFIXES or relative in EXTENSIONLESS:
                found.append(path)
    return sorted(found)


def rewrite_text(text: str, rules: list[tuple[re.Pattern[str], str | Callable[[re.Match[str]], str]]]) -> str:
    for pattern, replacement in rules:
        text = pattern.sub(replacement, text)
    return text


def ensure_links(root: Path, check: bool) -> list[str]:
    """The import-name symlinks at the root; a path there that is not that link is an error."""
    changed = []
    for directory, name in IMPORT_NAMES.items():
        link = root / name
        if link.is_symlink() and os.readlink(link) == directory:
            continue
        if link.exists() or link.is_symlink():
            sys.exit(f"rename_packages: {link} exists and is not a link to {directory}/: move it first")
        changed.append(f"{name} -> {directory}")
        if not check:
            link.symlink_to(directory, target_is_directory=True)
    return changed


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("root", nargs="?", type=Path, default=Path(__file__).resolve().parents[1])
    parser.add_argument("--check", action="store_true", help="change nothing; exit 1 if anything would")
    args = parser.parse_args()
    root: Path = args.root.resolve()
    for directory in IMPORT_NAMES:
        if not (root / directory / "__init__.py").is_file():
            sys.exit(f"rename_packages: {root} has no {directory}/__init__.py: not this repository's root")
    rules = python_rules(root)
    changed = ensure_links(root, args.check)
    for path in wanted_files(root):
        text = path.read_text(encoding="utf-8")
        new = rewrite_text(text, rules)
        if path.relative_to(root).as_posix() == "pyproject.toml":
            new = rewrite_pyproject(new)
        if new != text:
            changed.append(path.relative_to(root).as_posix())
            if not args.check:
                path.write_text(new, encoding="utf-8")
    verb = "would change" if args.check else "changed"
    print(f"rename_packages: {verb} {len(changed)} path(s)")
    for item in changed:
        print(f"  {item}")
    if args.check:
        return 1 if changed else 0
    rewritten = [p for p in changed if p.endswith(".py")]
    return tidy(root, rewritten)


def tidy(root: Path, rewritten: list[str]) -> int:
    """Longer names make import blocks re-sort and lines wrap: ruff's import sorting and formatter
    on the rewritten files, then the project's own lint, whose findings (a string literal now
    past the line length) are left to a person."""
    ruff = shutil.which("ruff") or str(Path(sys.executable).parent / "ruff")
    if not Path(ruff).exists():
        print("rename_packages: ruff not found: run `ruff check --fix --select I` and `ruff format`")
        return 0
    if rewritten:
        sort_imports = [ruff, "check", "--fix", "--select", "I", "--quiet", *rewritten]
        subprocess.run(sort_imports, cwd=root, check=False)
        subprocess.run([ruff, "format", "--quiet", *rewritten], cwd=root, check=False)
    lint = subprocess.run([ruff, "check", "--quiet", "."], cwd=root, check=False)
    if lint.returncode != 0:
        print("rename_packages: renamed; fix the lint findings above by hand", file=sys.stderr)
    return lint.returncode


if __name__ == "__main__":
    sys.exit(main())
