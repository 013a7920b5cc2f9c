"""The BLAS loader under attack and abuse: another user racing it through TMPDIR, a damaged or
swapped library file, a FIFO, a venv path with glob characters, ``ROPEPOOL_BLAS`` spellings, a
closed stderr, and the start-up hook's cost and silence.

Cases that load a library run in a fresh Python of this venv (which BLAS libmlx binds is fixed
once per process); the rest use a second copy of the hook module, with the dangerous parts
(``ctypes.CDLL``) replaced by a recorder.
"""

import ctypes
import importlib.util
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

import _ropepool_blas

ROOT = Path(__file__).resolve().parent.parent

needs_openblas = pytest.mark.skipif(
    not (_ropepool_blas.applies() and _ropepool_blas._openblas()),
    reason="OpenBLAS is loaded on Linux x86-64 only, from ngsolve-openblas (not installed in this venv: make setup)",
)


def fresh_hook():
    """A second instance of the hook module, so that load() runs again in this process."""
    spec = importlib.util.spec_from_file_location("_ropepool_blas_copy", ROOT / "_ropepool_blas.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def bench_module(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def fake_site(where: Path, library_bytes=None, fifo=False) -> Path:
    """A site folder holding ngsolve_openblas (its library a link to the real one, or the given
    bytes, or a FIFO) and the wheel's real RECORD: a venv whose files were damaged. The loader searches
    the interpreter's own site-packages only, so :func:`run_venv` makes it that venv's (``site=``)."""
    real = Path(_ropepool_blas._openblas())
    site = where / "site"
    (site / "ngsolve_openblas").mkdir(parents=True)
    shutil.copy(real.parent / "__init__.py", site / "ngsolve_openblas" / "__init__.py")
    info = next(real.parent.parent.glob("ngsolve_openblas-*.dist-info"))
    shutil.copytree(info, site / info.name)
    lib = site / "ngsolve_openblas" / real.name
    if fifo:
        os.mkfifo(lib)
    elif library_bytes is not None:
        with open(real, "rb") as src, open(lib, "wb") as dst:
            dst.write(src.read(library_bytes))
    else:
        lib.symlink_to(real)
    return site


CHECK = r"""
import json
import mlx.core as mx
mx.eval(mx.ones((64, 64)) @ mx.ones((64, 64)))
import _ropepool_blas
from ropepool import blas
print(json.dumps({"state": _ropepool_blas.STATE, "describe": blas.describe()}))
"""


def run_venv(code, *, pythonpath, tmpdir, env=None, shell_suffix="", site=None):
    """``code`` in a fresh Python of this venv; with ``site``, the loader takes that folder for the venv's
    first site-packages folder (before anything imports MLX)."""
    if site is not None:
        code = (
            f"import _ropepool_blas\n_dirs = [{str(site)!r}, *_ropepool_blas.site_dirs()]\n"
            f"_ropepool_blas.site_dirs = lambda: _dirs\n{code}"
        )
    full = {k: v for k, v in os.environ.items() if k != "ROPEPOOL_BLAS"}
    full.update(PYTHONPATH=os.pathsep.join(map(str, pythonpath)), TMPDIR=str(tmpdir), **(env or {}))
    cmd = [sys.executable, "-c", code]
    if shell_suffix:
        cmd = ["sh", "-c", f'"$0" -c "$1" {shell_suffix}', sys.executable, code]
    return subprocess.run(cmd, capture_output=True, text=True, env=full, timeout=120, cwd=str(tmpdir))


# 1. The race ---------------------------------------------------------------------------------------


def test_second_user_cannot_win_the_race():
    """A real second user races the loader through a group-writable, non-sticky TMPDIR. A few
    attempts here (time); `benchmarks/blas_race.py` runs 100."""
    race = bench_module("blas_race")
    why = race.cannot_run()
    if why:
        pytest.skip(f"the race needs a second user: {why}")
    tally = race.race(5, ROOT)
    assert tally["wins"] == 0, tally
    assert tally["loads"] + tally["refusals"] == tally["attempts"], tally  # loaded the venv's file, or refused


@needs_openblas
def test_a_perfectly_timed_swap_never_reaches_dlopen(tmp_path, monkeypatch):
    """The attacker at her best, in-process: the moment the loader makes its first link, its
    folder is renamed away and hers put in its place, with her library under every name the loader
    uses. Whatever dlopen is given must still be the wheel's own file."""
    hook = fresh_hook()
    shared = tmp_path / "shared"
    shared.mkdir()
    hers = tmp_path / "hers.so"
    hers.write_bytes(b"her code")
    monkeypatch.setattr(tempfile, "tempdir", str(shared))
    real_symlink, opened, swapped = os.symlink, [], []

    def symlink(src, dst, *args, **kwargs):
        for entry in list(shared.iterdir()):
            if entry.name.startswith("ropepool-blas-") and entry not in swapped:
                entry.rename(shared / f"stolen-{entry.name}")  # hers in its place, empty: the loader's links go in
                entry.mkdir()
                swapped.append(entry)
        real_symlink(src, dst, *args, **kwargs)
        for entry in swapped:  # and the moment its libopenblas.so.0 link is there, hers replaces it
            if os.path.lexists(entry / "libopenblas.so.0") and os.readlink(entry / "libopenblas.so.0") != str(hers):
                real_symlink(hers, entry / ".hers")
                os.replace(entry / ".hers", entry / "libopenblas.so.0")

    def cdll(path, *args, **kwargs):
        st = os.stat(path)
        opened.append((st.st_dev, st.st_ino))
        raise OSError("recorded, not loaded")

    monkeypatch.setattr(os, "symlink", symlink)
    monkeypatch.setattr(ctypes, "CDLL", cdll)
    hook.load()
    wheel, mine = os.stat(_ropepool_blas._openblas()), os.stat(hers)
    assert (mine.st_dev, mine.st_ino) not in opened, "her library reached dlopen"
    assert swapped and opened == [(wheel.st_dev, wheel.st_ino)], (swapped, opened)


# 2. Damaged library, FIFO ---------------------------------------------------------------------------


@needs_openblas
@pytest.mark.parametrize("case", ["1 KiB", "half", "fifo"])
def test_a_damaged_library_or_fifo_falls_back_with_one_line(tmp_path, case):
    size = Path(_ropepool_blas._openblas()).stat().st_size
    site = fake_site(tmp_path, library_bytes={"1 KiB": 1024, "half": size // 2}.get(case), fifo=case == "fifo")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_venv(CHECK, pythonpath=[ROOT], tmpdir=scratch, site=site)
    assert done.returncode == 0, (done.returncode, done.stderr)
    out = json.loads(done.stdout)
    assert out["state"]["status"] == "failed", out
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ropepool: OpenBLAS not loaded, MLX keeps its own BLAS ("), lines
    assert ("not a regular file" if case == "fifo" else "RECORD says") in lines[0], lines[0]
    assert out["describe"].startswith("cblas_sgemm -> libblas"), out["describe"]  # MLX's own, as doctor says
    assert list(scratch.iterdir()) == [], "left behind in TMPDIR"


@needs_openblas
def test_a_fifo_as_the_memo_or_as_record_neither_blocks_nor_loads_unchecked(tmp_path):
    """FIFOs planted where the hook reads (its digest memo in ~/.cache/ropepool, a wheel's RECORD):
    ``import mlx`` goes on at once; a RECORD that is no file vouches for nothing."""
    home = tmp_path / "home"
    (home / ".cache" / "ropepool").mkdir(parents=True, mode=0o700)
    os.mkfifo(home / ".cache" / "ropepool" / "blas-checked.json")
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_venv(CHECK, pythonpath=[ROOT], tmpdir=scratch, env={"HOME": str(home)})
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert json.loads(done.stdout)["state"]["status"] == "loaded", done.stdout  # the digest checked anew

    site = fake_site(tmp_path / "fifo-record")
    record = next(site.glob("ngsolve_openblas-*.dist-info")) / "RECORD"
    record.unlink()
    os.mkfifo(record)
    done = run_venv(CHECK, pythonpath=[ROOT], tmpdir=scratch, env={"HOME": str(home)}, site=site)
    assert done.returncode == 0, (done.returncode, done.stderr)
    assert json.loads(done.stdout)["state"]["status"] == "failed"
    assert "not listed in its wheel's RECORD" in done.stderr, done.stderr


@needs_openblas
def test_a_replaced_library_of_the_right_size_is_refused(tmp_path):
    real = Path(_ropepool_blas._openblas())
    site = fake_site(tmp_path, library_bytes=real.stat().st_size)
    lib = site / "ngsolve_openblas" / real.name
    with open(lib, "r+b") as f:  # one byte changed, deep inside: only the digest can tell
        f.seek(real.stat().st_size // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    hook = fresh_hook()
    hook._package_dirs = lambda name: (
        [str(site / name)] if name == "ngsolve_openblas" else _ropepool_blas._package_dirs(name)
    )
    with pytest.raises(hook.Refused, match="SHA-256"):
        hook._open_checked(str(lib))


# 3. The start-up hook: cheap and silent --------------------------------------------------------------


def pth_site(tmp_path) -> Path:
    site = tmp_path / "pth"
    site.mkdir()
    shutil.copy(ROOT / "ropepool-blas.pth", site / "ropepool-blas.pth")
    return site


def test_the_hook_imports_nothing(tmp_path):
    """What `python -c pass` pays: the .pth defines a small finder and imports no module, not even the loader."""
    code = (
        "import sys, site; before = set(sys.modules); site.addsitedir(sys.argv[1]); "
        "print(sorted(set(sys.modules) - before))"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(pth_site(tmp_path))],
        capture_output=True,
        text=True,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
        timeout=60,
    )
    assert done.stderr == ""
    assert json.loads(done.stdout.replace("'", '"')) == [], done.stdout


def test_an_unimportable_loader_is_skipped_silently(tmp_path):
    """A moved editable checkout: the .pth finds no _ropepool_blas and says nothing at all, at start
    or when mlx is imported."""
    site = pth_site(tmp_path)
    code = (
        "import site, sys; site.addsitedir(sys.argv[1]); import importlib.util; "
        "importlib.util.find_spec('mlx'); print('ok')"
    )
    done = subprocess.run(
        [sys.executable, "-S", "-c", code, str(site)],
        capture_output=True,
        text=True,
        cwd=str(tmp_path),
        env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"},
        timeout=60,
    )
    assert (done.stdout, done.stderr) == ("ok\n", ""), done.stderr


# 4. Settings, paths, stderr, doctor -----------------------------------------------------------------


@pytest.mark.parametrize("word", ["off", "0", "false", "no", " FALSE ", "Off"])
def test_false_words_keep_mlx_blas(monkeypatch, word):
    hook = fresh_hook()
    monkeypatch.setenv("ROPEPOOL_BLAS", word)
    monkeypatch.setattr(hook, "_open", lambda library: pytest.fail("opened a library"))
    assert hook.load()["status"] == "off"


@needs_openblas
def test_a_venv_path_with_glob_characters_loads_and_doctor_agrees(tmp_path):
    where = tmp_path / "proj [copy]*?"
    where.mkdir()
    site = fake_site(where)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    done = run_venv(CHECK, pythonpath=[ROOT], tmpdir=scratch, site=site)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    out = json.loads(done.stdout)
    assert out["state"]["status"] == "loaded" and "[copy]" in out["state"]["library"], out["state"]
    assert "cblas_sgemm -> libopenblas" in out["describe"] and "loaded before MLX" in out["describe"], out


@needs_openblas
def test_with_stderr_closed_nothing_reaches_stdout(tmp_path):
    code = (
        "import _ropepool_blas\n_ropepool_blas._openblas = lambda: '/etc/hostname'\n"
        "import mlx.core\nprint(_ropepool_blas.STATE['status'])"
    )
    done = run_venv(code, pythonpath=[ROOT], tmpdir=tmp_path, shell_suffix="2>&-")
    assert done.stdout == "failed\n", done.stdout


def test_a_library_without_openblas_get_config_is_reported_loaded(monkeypatch):
    """Once mapped RTLD_GLOBAL a library stays: the state says so rather than 'MLX keeps its own BLAS'."""
    hook = fresh_hook()
    monkeypatch.setattr(hook, "applies", lambda: True)
    monkeypatch.setattr(hook, "_openblas", lambda: "/venv/libopenblas.so")
    monkeypatch.setattr(hook, "_open", lambda library: object())
    state = hook.load()
    assert state["status"] == "loaded" and "no openblas_get_config" in state["config"], state
    assert hook.num_threads() is None


@needs_openblas
def test_the_digest_is_remembered_only_for_the_file_as_it_was(tmp_path, monkeypatch):
    """The second check of an unchanged file skips the hash; a file changed since (same size, new
    bytes: a new ctime) is hashed again and refused."""
    import hashlib

    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    real = Path(_ropepool_blas._openblas())
    site = fake_site(tmp_path, library_bytes=real.stat().st_size)
    lib = str(site / "ngsolve_openblas" / real.name)
    hook = fresh_hook()
    os.close(hook._open_checked(lib))
    assert lib in hook._memo()
    monkeypatch.setattr(hashlib, "sha256", lambda: pytest.fail("hashed again"))
    os.close(hook._open_checked(lib))
    monkeypatch.undo()
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with open(lib, "r+b") as f:
        f.seek(1000)
        byte = f.read(1)
        f.seek(1000)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(hook.Refused, match="SHA-256"):
        hook._open_checked(lib)


# 4. Only the venv's own site-packages ---------------------------------------------------------------


def _planted(folder: Path, package: str, wheel: str, sources: list) -> None:
    """``folder/package/`` holding copies of ``sources`` and a ``wheel-9.9.dist-info/RECORD`` whose
    digests match them: whoever plants the library also writes the digest the loader checks."""
    import base64
    import hashlib

    (folder / package).mkdir(parents=True)
    rows = []
    for src in sources:
        dst = folder / package / Path(src).name
        shutil.copy(src, dst)
        digest = base64.urlsafe_b64encode(hashlib.sha256(dst.read_bytes()).digest()).rstrip(b"=").decode()
        rows.append(f"{package}/{dst.name},sha256={digest},{dst.stat().st_size}")
    (folder / f"{wheel}-9.9.dist-info").mkdir()
    (folder / f"{wheel}-9.9.dist-info" / "RECORD").write_text("\n".join(rows) + "\n")


MAPS = r"""
import json
import mlx.core as mx
mx.eval(mx.ones((64, 64)) @ mx.ones((64, 64)))
import _ropepool_blas
maps = open("/proc/self/maps").read()
print(json.dumps({"state": _ropepool_blas.STATE, "maps": maps}))
"""


@needs_openblas
def test_a_library_planted_in_the_working_folder_is_never_loaded(tmp_path):
    """Another user plants ngsolve_openblas/ with a matching RECORD where root runs ``python -c``
    (``sys.path[0]`` is that folder): the venv's own OpenBLAS is loaded, hers never mapped."""
    planted = tmp_path / "shared"
    real = _ropepool_blas._openblas()
    _planted(planted, "ngsolve_openblas", "ngsolve_openblas", [real])
    (planted / "ngsolve_openblas" / "__init__.py").write_text("")
    done = run_venv(MAPS, pythonpath=[ROOT], tmpdir=planted)
    out = json.loads(done.stdout)
    assert out["state"]["status"] == "loaded" and out["state"]["library"] == real, out["state"]
    assert str(planted) not in out["maps"]


@needs_openblas
def test_runtime_libraries_planted_beside_an_empty_mlx_folder_are_never_loaded(tmp_path):
    """The variant: an empty ``mlx/`` (a namespace portion; the real MLX still imports) and
    ``mlx_cpu.libs/`` with her libgfortran and libquadmath, their RECORD matching. None of hers is mapped."""
    planted = tmp_path / "shared"
    (planted / "mlx").mkdir(parents=True)
    _planted(planted, "mlx_cpu.libs", "mlx_cpu", _ropepool_blas._mlx_runtime_libs())
    done = run_venv(MAPS, pythonpath=[ROOT], tmpdir=planted)
    out = json.loads(done.stdout)
    assert out["state"]["status"] == "loaded", out["state"]
    assert str(planted) not in out["maps"]


@needs_openblas
def test_a_memo_nested_too_deep_to_read_is_rewritten_not_a_lasting_fallback(tmp_path):
    """A memo of 100,000 nested lists (json raises RecursionError): OpenBLAS still loads (the digest is
    checked anew) and the memo is written again, readable, so the next start is not hurt either."""
    home = tmp_path / "home"
    memo = home / ".cache" / "ropepool" / "blas-checked.json"
    memo.parent.mkdir(parents=True, mode=0o700)
    memo.write_text("[" * 100_000 + "]" * 100_000)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    for _ in range(2):
        done = run_venv(CHECK, pythonpath=[ROOT], tmpdir=scratch, env={"HOME": str(home)})
        assert json.loads(done.stdout)["state"]["status"] == "loaded", (done.stdout, done.stderr)
    assert isinstance(json.loads(memo.read_text()), dict)


@pytest.mark.skipif(os.geteuid() != 0, reason="making a link owned by another user needs root")
def test_a_cache_reached_through_another_user_s_link_is_not_written(tmp_path):
    """Root runs with a HOME whose ~/.cache is a link another user made into a folder of root's: neither the
    digest memo nor a private cache folder is written through it."""
    from ropepool.cache import private_dir

    target = tmp_path / "roots"
    target.mkdir(mode=0o755)
    home = tmp_path / "home"
    home.mkdir()
    (home / ".cache").symlink_to(target)
    os.lchown(home / ".cache", 1234, 1234)
    hook = fresh_hook()
    old = os.environ.get("HOME")
    os.environ["HOME"] = str(home)
    try:
        hook._remember({}, "/x", [1])
    finally:
        os.environ["HOME"] = old
    assert list(target.iterdir()) == []
    with pytest.raises(RuntimeError, match=r"symbolic link another user made \(uid 1234\)"):
        private_dir(home / ".cache" / "ropepool", "kernel cache")
    assert list(target.iterdir()) == []
