"""A fresh install prints no packaging warnings (setup.py; issue: "Setup prints setuptools warnings").

Installs into a throw-away virtual environment as a new user's ``scripts/setup.sh`` does (pip
upgraded, then an editable install), without dependencies (they are not what is tested) and never
touching ``.venv``. ``pip wheel`` printed no warning before the fix either; it is checked by hand
(CHANGELOG) to keep this test under 30 s.
"""
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
# pip's own notes about this machine's configured package indexes, not about the project
_MACHINE_NOISE = re.compile(r"^WARNING: Location '.*' is ignored: it is neither a file nor a directory\.$")


def _warnings(output: str) -> list[str]:
    lines = [ln for ln in output.splitlines() if not _MACHINE_NOISE.match(ln.strip())]
    return [ln for ln in lines if re.search(r"warning|!!|deprecat", ln, re.I)]


def test_fresh_editable_install_prints_no_warnings(tmp_path):
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    # this environment's recent pip (scripts/setup.sh upgrades pip; recent versions show the build
    # backend's warnings) installing into the throw-away one
    pip = [sys.executable, "-m", "pip", "--python", str(venv / "bin" / "python")]
    editable = subprocess.run([*pip, "install", "--no-deps", "-e", str(ROOT)], capture_output=True, text=True,
                              timeout=300)
    assert editable.returncode == 0, editable.stderr
    assert _warnings(editable.stdout + editable.stderr) == []
    mapped = subprocess.run([str(venv / "bin" / "python"), "-c",
                             "import importlib.util as u; print(u.find_spec('fragrelease.jobs').origin)"],
                            capture_output=True, text=True, timeout=120)
    assert mapped.stdout.strip() == str(ROOT / "jobs" / "__init__.py"), mapped.stderr
