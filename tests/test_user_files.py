"""Files written for a user (the inspector's page, kept track parts, the benchmark's results) are written
as the caches are: never through a symbolic link, never onto a FIFO or device, never into another
user's file, never in a folder others can swap entries of; checked before the work and again at the write."""

from __future__ import annotations

import os
import subprocess
import sys
from types import SimpleNamespace

import pytest

from ropepool import cache, track
from ropepool.cache import UnsafeFile, write_file, writable_file
from ropepool.cli import bench
from ropepool.cli import inspect as inspect_cli
from ropepool.teaching.inspector import scenarios

PAGE = "<html>page</html>"


@pytest.fixture
def victim(tmp_path):
    """A file elsewhere that a planted link points to: it must keep its bytes."""
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    path = folder / "precious.txt"
    path.write_text("root's file\n")
    return path


def _inspect(out, timeout=60):
    return subprocess.run(
        [sys.executable, "-m", "ropepool", "inspect", "--scenario", "window", "--out", str(out)],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def test_inspect_refuses_a_link_at_its_out_path_before_the_run(tmp_path, victim):
    out = tmp_path / "run.html"
    out.symlink_to(victim)
    done = _inspect(out)
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "symbolic link" in done.stderr and "step 1" not in done.stderr  # refused before serving
    assert victim.read_text() == "root's file\n" and out.is_symlink()


def test_inspect_refuses_a_fifo_at_its_out_path_without_hanging(tmp_path):
    out = tmp_path / "run.html"
    os.mkfifo(out)
    done = _inspect(out, timeout=60)  # a plain open() for writing would wait forever for a reader
    assert done.returncode == 2 and "not a regular file" in done.stderr, done.stderr
    assert len(done.stderr.strip().splitlines()) == 1


def test_inspect_never_writes_through_a_link_planted_during_the_run(tmp_path, victim, monkeypatch, capsys):
    out = tmp_path / "run.html"
    real_run = scenarios.run

    def run_then_plant(*args, **kwargs):  # another user plants the link after the check, while serving
        done = real_run(*args, **kwargs)
        out.symlink_to(victim)
        return done

    monkeypatch.setattr(scenarios, "run", run_then_plant)
    code = inspect_cli.main(SimpleNamespace(out=str(out), scenario="window", model="tiny"))
    err = capsys.readouterr().err
    assert code == 2 and "symbolic link" in err.splitlines()[-1]
    assert victim.read_text() == "root's file\n" and out.is_symlink()
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary file left


def test_a_link_planted_after_the_last_check_is_replaced_not_written_through(tmp_path, victim, monkeypatch):
    out, checks = tmp_path / "run.html", []
    real_check = cache.writable_file

    def check_then_plant(path, what):  # the link lands between the last check and the move
        target = real_check(path, what)
        checks.append(target)
        if len(checks) == 2:
            out.symlink_to(victim)
        return target

    monkeypatch.setattr(cache, "writable_file", check_then_plant)
    write_file(out, PAGE, "--out")
    assert len(checks) == 2 and victim.read_text() == "root's file\n"
    assert not out.is_symlink() and out.read_text() == PAGE


def test_a_file_of_another_user_is_never_written(tmp_path):
    if os.geteuid() != 0:
        pytest.skip("giving a file to another user needs root")
    out = tmp_path / "run.html"
    out.write_text("theirs")
    os.chown(out, 65534, 65534)
    with pytest.raises(UnsafeFile, match="belongs to uid 65534"):
        write_file(out, PAGE, "--out")
    assert out.read_text() == "theirs"
    done = _inspect(out)
    assert done.returncode == 2 and "belongs to uid 65534" in done.stderr and "step 1" not in done.stderr


def test_a_folder_others_can_write_is_refused_unless_sticky(tmp_path):
    shared = tmp_path / "workshop"
    shared.mkdir()
    shared.chmod(0o777)
    with pytest.raises(UnsafeFile, match="can be written by others .*not sticky"):
        writable_file(shared / "run.html", "--out")
    shared.chmod(0o1777)  # like /tmp: nobody renames what another made
    assert write_file(shared / "run.html", PAGE, "--out").read_text() == PAGE


def test_a_written_file_is_whole_and_keeps_the_mode_of_the_one_it_replaces(tmp_path):
    out = tmp_path / "run.html"
    out.write_text("old")
    out.chmod(0o640)
    write_file(out, b"new bytes", "--out")
    assert out.read_bytes() == b"new bytes" and out.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.html"]


@pytest.fixture
def track_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("ROPEPOOL_TRACK_DIR", str(tmp_path / "track"))
    monkeypatch.delenv("ROPEPOOL_TRACK", raising=False)
    track.demo(False)
    return tmp_path / "track"


def test_a_kept_part_is_never_written_through_a_link(track_dir, victim, capsys):
    track_dir.mkdir(mode=0o700)
    (track_dir / "part1.py").symlink_to(victim)
    track.check(1, track.solutions.rotate, keep=True)
    out = capsys.readouterr().out.strip().splitlines()
    assert out[-1].startswith("part 1 could not be kept") and "symbolic link" in out[-1]
    assert victim.read_text() == "root's file\n"


def test_kept_falls_back_in_one_line_when_the_folder_is_refused(track_dir, capsys):
    track_dir.mkdir()
    track_dir.chmod(0o777)  # open to everyone: not a folder whose code is run
    assert track.kept(1) is track.solutions.rotate
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and "track workspace" in said[0] and "the reference rotate stands in" in said[0]
    track.check(1, track.solutions.rotate, keep=True)
    said = capsys.readouterr().out.strip().splitlines()
    assert len(said) == 1 and said[0].startswith("part 1 could not be kept")


def test_bench_refuses_a_link_in_its_out_folder_before_timing(tmp_path, victim):
    (tmp_path / "bench.json").symlink_to(victim)
    problem = bench.bad_arguments(1, tmp_path)
    assert problem is not None and "symbolic link" in problem
    with pytest.raises(UnsafeFile):
        write_file(tmp_path / "bench.json", "{}", "bench --out")
    assert victim.read_text() == "root's file\n"
