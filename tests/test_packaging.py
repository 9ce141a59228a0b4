"""A fresh install prints no packaging warnings (setup.py; issue: "Setup prints setuptools warnings").

Installs into a throw-away virtual environment as a new user's ``scripts/setup.sh`` does (pip
upgraded, then a strict editable install), without dependencies (they are not what is tested) and
never touching ``.venv`` or this checkout's ``build/`` (the install is made from a copy of the
package folders, since a strict install rebuilds ``build/__editable__.*``, which ``.venv`` reads). ``pip wheel`` printed no warning before the fix either; it is checked by hand
(CHANGELOG) to keep this test under 30 s.
"""
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pip's own notes about this machine's configured package indexes, not about the project
_MACHINE_NOISE = re.compile(r"^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$")


def _warnings(output: str) -> list[str]:
    lines = [ln for ln in output.splitlines() if not _MACHINE_NOISE.match(ln.strip())]
    return [ln for ln in lines if re.search(r"warning|!!|deprecat", ln, re.I)]


def _copy_sources(dest: Path) -> Path:
    dest.mkdir()
    for name in ("setup.py", "README.md"):
        shutil.copy2(ROOT / name, dest / name)
    for folder in ("fragrelease", "jobs", "udfs", "schemas", "experiments", "data"):
        shutil.copytree(ROOT / folder, dest / folder, ignore=shutil.ignore_patterns("__pycache__"))
    return dest


def test_fresh_editable_install_prints_no_warnings(tmp_path):
    src = _copy_sources(tmp_path / "src")
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # this environment's recent pip (scripts/setup.sh upgrades pip; recent versions show the build
    # backend's warnings) installing into the throw-away one
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    editable = subprocess.run([*pip, "install", "--no-deps", "-e", str(src), "--config-settings", "editable_mode=strict"],
                              capture_output=True, text=True, timeout=300)
    assert editable.returncode == 0, editable.stderr
    assert _warnings(editable.stdout + editable.stderr) == []
    probe = "import importlib.util as u; print(u.find_spec('fragrelease.jobs').origin)"
    # from elsewhere, and from the checkout itself, whose own fragrelease/ folder comes first on the path
    for cwd in (tmp_path, src):
        mapped = subprocess.run([str(venv / "bin" / "python"), "-c", probe], capture_output=True, text=True,
                                timeout=120, cwd=cwd)
        origin = Path(mapped.stdout.strip())
        # the tree of links laid out as the wheel is, each link pointing at the repository folder
        assert origin.parts[-3:] == ("fragrelease", "jobs", "__init__.py"), mapped.stderr
        assert origin.resolve() == src / "jobs" / "__init__.py", mapped.stderr
