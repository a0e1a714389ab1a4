"""Fetch Debian packages with ``apt-get download`` and unpack them without installing.

Only the package *files* are used as text sources; nothing is installed.
"""
import io
import os
import shutil
import subprocess
import tarfile
import tempfile
from pathlib import Path
from typing import Callable, Dict, Iterable, Optional

from .errors import CorpusError

Log = Callable[[str], None]


def find_deb(package: str, directory: Optional[Path]) -> Optional[Path]:
    """Newest-named ``<package>_*.deb`` in ``directory``, or None."""
    if directory is None or not Path(directory).is_dir():
        return None
    hits = sorted(Path(directory).glob(f"{package}_*.deb"))
    return hits[-1] if hits else None


def _apt_download(packages: Iterable[str], target: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["apt-get", "download", *packages], cwd=str(target),
                          capture_output=True, text=True, check=False)


def download_debs(packages: Iterable[str], target: Path, log: Log = print) -> None:
    """``apt-get download`` into ``target``; runs ``apt-get update`` once if lists are missing."""
    packages = list(packages)
    target.mkdir(parents=True, exist_ok=True)
    if shutil.which("apt-get") is None:
        raise CorpusError(f"apt-get not found; put {', '.join(packages)} .debs into {target} by hand")
    result = _apt_download(packages, target)
    if result.returncode != 0:
        log(f"apt-get download failed ({result.stderr.strip()[:200]}); running apt-get update once")
        subprocess.run(["apt-get", "update"], capture_output=True, text=True, check=False)
        result = _apt_download(packages, target)
    if result.returncode != 0:
        raise CorpusError(
            f"apt-get download {' '.join(packages)} failed in {target}: {result.stderr.strip()[:500]}")


def locate_debs(packages: Iterable[str], data_dir: Path, debs_dir: Optional[Path],
                log: Log = print) -> Dict[str, Path]:
    """Map package -> .deb path, preferring ``debs_dir``, then ``data_dir/debs``, then downloading."""
    packages = list(packages)
    cache = data_dir / "debs"
    found = {p: find_deb(p, debs_dir) or find_deb(p, cache) for p in packages}
    missing = [p for p, path in found.items() if path is None]
    if missing:
        log(f"downloading {len(missing)} package(s) into {cache}: {' '.join(missing)}")
        download_debs(missing, cache, log=log)
        for p in missing:
            found[p] = find_deb(p, cache)
            if found[p] is None:
                raise CorpusError(f"apt-get download produced no {p}_*.deb in {cache}")
    return found


def _extract_with_python(deb: Path, target: Path) -> None:
    """Fallback for hosts without dpkg-deb: read the ar archive and its data.tar.*."""
    with open(deb, "rb") as handle:
        if handle.read(8) != b"!<arch>\n":
            raise CorpusError(f"{deb}: not a Debian archive")
        while True:
            header = handle.read(60)
            if len(header) < 60:
                break
            name = header[:16].decode().strip().rstrip("/")
            size = int(header[48:58].decode().strip())
            body = handle.read(size)
            handle.read(size % 2)
            if name.startswith("data.tar"):
                with tarfile.open(fileobj=io.BytesIO(body)) as tar:
                    tar.extractall(target, filter="data")
                return
    raise CorpusError(f"{deb}: no data.tar member")


def unpack_deb(deb: Path, target: Path) -> Path:
    """Unpack ``deb`` into ``target`` once (marker file); returns ``target``."""
    marker = target / ".unpacked"
    if marker.exists():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{target.name}.", dir=target.parent))
    try:
        if shutil.which("dpkg-deb"):
            result = subprocess.run(["dpkg-deb", "-x", str(deb), str(tmp)],
                                    capture_output=True, text=True, check=False)
            if result.returncode != 0:
                raise CorpusError(f"dpkg-deb -x {deb} failed: {result.stderr.strip()[:300]}")
        else:
            _extract_with_python(deb, tmp)
        (tmp / ".unpacked").write_text(deb.name + "\n", encoding="utf-8")
        if target.exists():
            shutil.rmtree(target)
        os.replace(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target
