"""The cost line's speed file (``<cache dir>/speed.json``, :mod:`personalign.lm.speed`) and the LM
cache directory are input: a FIFO, a device, absurd numbers, escape codes, a symlink, a pickled
forward-pass row, a group-writable or garbage cache are each a miss, a warning or one ``error:``
line, never a hang, a traceback or code run (attack round 2: ``speed-*``, ``cachedir-*``)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.reliability.hostile import DATA, STAGE, refused_cleanly, run_cli

GOOD = {"seconds_per_call": 2.0, "calls": 5, "source": "run", "measured": "2026-01-01T00:00:00+00:00"}


@pytest.fixture
def speed_path(runs_dir, monkeypatch):
    """``speed.json`` of a fresh cache dir (the one-warning memory reset)."""
    from personalign.lm import speed

    monkeypatch.setattr(speed, "_warned", set())
    path = runs_dir / "cache" / "speed.json"
    path.parent.mkdir(parents=True)
    return path


def _write(path: Path, entry) -> None:
    path.write_text(json.dumps({"mock/x": entry}))


def test_a_valid_entry_is_known_and_drives_the_line(speed_path):
    from personalign._verbs.cost import Cost, StrategyCost
    from personalign.lm.speed import known_speed

    _write(speed_path, {"generation": GOOD})
    speed = known_speed("mock/x")
    assert speed == {"generation": GOOD}
    line = Cost("compare", "mock/x", [StrategyCost("predict", evaluation=100)], speed=speed).line()
    assert "about 3 min at 2 s per call (measured by a run on 2026-01-01)" in line


BAD_ENTRIES = {
    "no source or measured": {"seconds_per_call": 5, "calls": 3},
    "Infinity": {**GOOD, "seconds_per_call": float("inf")},
    "1e308": {**GOOD, "seconds_per_call": 1e308},
    "400-digit integer": {**GOOD, "seconds_per_call": 10**400},
    "negative": {**GOOD, "seconds_per_call": -1},
    "a bool": {**GOOD, "seconds_per_call": True},
    "a string": {**GOOD, "seconds_per_call": "5"},
    "calls zero": {**GOOD, "calls": 0},
    "calls a string": {**GOOD, "calls": "3"},
    "calls huge": {**GOOD, "calls": 10**400},
    "source an escape": {**GOOD, "source": "\x1b]0;pwned\x07\x1b[2J"},
    "source unknown": {**GOOD, "source": "me"},
    "measured an escape": {**GOOD, "measured": "\x1b[31m2026-01-01"},
    "measured not a date": {**GOOD, "measured": "2026-13-45T00:00:00"},
    "measured an object": {**GOOD, "measured": {"a": 1}},
    "measured long": {**GOOD, "measured": "2026-01-01T00:00:00+00:00" + " " * 10_000},
}


@pytest.mark.parametrize("why", list(BAD_ENTRIES))
def test_an_invalid_entry_is_unknown_speed_and_rewritten(speed_path, capsys, why):
    from personalign._verbs.cost import Cost, StrategyCost
    from personalign.lm.speed import known_speed, record_speed

    raw = json.dumps({"mock/x": {"generation": BAD_ENTRIES[why]}, "other/m": {"forward": GOOD}})
    speed_path.write_text(raw)
    assert known_speed("mock/x") is None
    line = Cost("compare", "mock/x", [StrategyCost("predict", evaluation=10)], speed=known_speed("mock/x")).line()
    assert "time unknown" in line and line.isprintable()
    err = capsys.readouterr().err
    assert err.count("warning:") == 1 and err.isascii() and "\x1b" not in err
    record_speed("mock/x", {"forward": (3.0, 3)}, source="run")  # the next save drops the bad kind
    kept = json.loads(speed_path.read_text())
    assert "generation" not in kept["mock/x"] and kept["mock/x"]["forward"]["seconds_per_call"] == 1.0
    assert kept["other/m"] == {"forward": GOOD}


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"mock/x": ' + "{\"a\": " * 50_000 + "1" + "}" * 50_001,
                                  "\x00\xff garbage", "[1, 2]"])
def test_a_file_that_is_no_speed_object_is_empty(speed_path, text):
    from personalign.lm.speed import known_speed

    speed_path.write_bytes(text.encode("utf-8", "surrogateescape") if isinstance(text, str) else text)
    assert known_speed("mock/x") is None


def test_a_file_past_the_bound_is_ignored(speed_path):
    from personalign.lm.speed import MAX_FILE_BYTES, known_speed

    speed_path.write_text(json.dumps({"mock/x": {"generation": GOOD}, "pad": "x" * MAX_FILE_BYTES}))
    assert known_speed("mock/x") is None


@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "/dev/urandom", "directory"])
def test_a_speed_file_that_is_not_a_regular_file_never_blocks(speed_path, capsys, kind):
    import threading

    from personalign.lm.speed import known_speed, record_speed

    if kind == "fifo":
        os.mkfifo(speed_path)
    elif kind == "directory":
        speed_path.mkdir()
    else:
        speed_path.symlink_to(kind)
    out = {}
    t = threading.Thread(target=lambda: out.update(speed=known_speed("mock/x")), daemon=True)
    t.start()
    t.join(10)
    assert not t.is_alive(), "reading speed.json blocked"
    assert out == {"speed": None}
    assert capsys.readouterr().err.count("warning:") == 1
    record_speed("mock/x", {"generation": (1.0, 1)}, source="run")
    if kind == "fifo":  # never written to nor replaced
        assert speed_path.is_fifo()
    elif kind == "directory":
        assert speed_path.is_dir()
    else:  # a symlink is replaced by a regular file, its target untouched
        assert not speed_path.is_symlink() and json.loads(speed_path.read_text())["mock/x"]["generation"]


def test_saving_replaces_a_symlink_never_writes_through_it(speed_path, tmp_path):
    from personalign.lm.speed import known_speed, record_speed

    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    speed_path.symlink_to(victim)
    record_speed("mock/x", {"generation": (4.0, 2)}, source="run")
    assert victim.read_text() == "precious\n"
    assert not speed_path.is_symlink() and known_speed("mock/x")["generation"]["seconds_per_call"] == 2.0


def test_the_line_prints_no_escape_from_a_hand_made_speed():
    from personalign._verbs.cost import Cost, StrategyCost, duration

    speed = {"generation": {**GOOD, "source": "\x1b]0;x\x07", "measured": "\x1b[2J2026"}}
    line = Cost("compare", "mock/x", [StrategyCost("predict", evaluation=10)], speed=speed).line()
    assert "\x1b" not in line and line.isprintable()
    assert duration(float("inf")) == "an unknown time" and duration(float("nan")) == "an unknown time"


def test_a_cli_run_with_a_fifo_speed_file_runs_and_ends(tmp_path):
    """End to end: ``compare`` with the mock LM and a FIFO speed.json ends (it blocked forever)."""
    case = tmp_path / "case"
    (case / "runs" / "cache").mkdir(parents=True)
    os.mkfifo(case / "runs" / "cache" / "speed.json")
    proc, _ = run_cli(case, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority,predict",
                      "--lm", "mock/x", "--n-boot", "10", "--no-track", "--limit", "6", mock=True, timeout=240)
    assert proc.returncode == 0 and "Traceback" not in proc.stderr, proc.stderr[-2000:]
    assert "time unknown" in proc.stderr and proc.stderr.count("warning: speed file") == 1
    assert (case / "runs" / "cache" / "speed.json").is_fifo()


# --- the forward-pass cache never unpickles --------------------------------------------------------
class _Plant:
    """Unpickling it creates ``path`` (a stand-in for any code a tampered row would run)."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


def test_a_pickled_forward_pass_row_is_a_miss_and_runs_no_code(fresh_cache, tmp_path):
    import diskcache

    from personalign.lm import forward

    planted = tmp_path / "PWNED"
    with diskcache.Cache(str(fresh_cache / forward.SUBDIR)) as evil:  # diskcache's default Disk: MODE_PICKLE
        evil.set("k" * 64, _Plant(str(planted)))
        evil.set("t" * 64, "text, not bytes")
    with diskcache.Cache(str(fresh_cache / forward.SUBDIR)) as plain:  # the attack is real: the default Disk runs it
        plain.get("k" * 64)
    assert planted.exists()
    planted.unlink()
    store = forward.store()
    assert isinstance(store.disk, forward.BytesDisk)
    assert store.get("k" * 64) is None and store.get("t" * 64) is None
    assert not planted.exists()
    value = forward.encode(0.5, [1.0, 2.0])
    store.set("k" * 64, value)  # a miss is computed and overwritten
    assert forward.decode(store.get("k" * 64), 2)[0] == 0.5
    with pytest.raises(TypeError, match="keeps bytes"):
        store.set("x", {"a": 1})


# --- the LM cache dir: trusted like the user's own files ----------------------------------------------
def _cache_with_shard(tmp_path: Path) -> Path:
    import diskcache

    cache = tmp_path / "cache"
    diskcache.FanoutCache(str(cache), shards=2).close()
    return cache


@pytest.mark.parametrize("where", [".", "000", "000/cache.db", "forward-pass"])
def test_a_cache_writable_by_others_is_refused(tmp_path, where):
    from personalign.lm import CacheDirError, check_cache_dir

    cache = _cache_with_shard(tmp_path)
    (cache / "forward-pass").mkdir(mode=0o755)
    target = cache / where
    target.chmod(target.stat().st_mode | 0o022)
    with pytest.raises(CacheDirError, match="writable by group or others.*chmod go-w") as exc:
        check_cache_dir(cache)
    assert "\n" not in str(exc.value)
    target.chmod(target.stat().st_mode & ~0o022)
    assert check_cache_dir(cache) == cache


def test_a_cache_of_another_user_is_refused(tmp_path, monkeypatch):
    from personalign.lm import CacheDirError, check_cache_dir

    cache = _cache_with_shard(tmp_path)
    if os.geteuid() == 0:  # root (a container): the cache really handed to another user
        os.chown(cache / "000", 4242, -1)
    else:
        monkeypatch.setattr(os, "geteuid", lambda: os.stat(cache).st_uid + 4242)
    with pytest.raises(CacheDirError, match="owned by another user"):
        check_cache_dir(cache)


def test_a_fresh_cache_dir_is_not_group_writable_under_a_loose_umask(tmp_path):
    from personalign.lm import check_cache_dir

    old = os.umask(0o002)
    try:
        path = check_cache_dir(tmp_path / "fresh")
    finally:
        os.umask(old)
    assert path.stat().st_mode & 0o022 == 0


@pytest.mark.parametrize("shard", ["001", "forward-pass"])
def test_a_garbage_cache_db_is_one_line_naming_it(tmp_path, shard):
    case = tmp_path / "case"
    cache = _cache_with_shard(case / "runs")
    (cache / shard).mkdir(exist_ok=True)
    (cache / shard / "cache.db").write_bytes(b"SQLite format 3\x00" + os.urandom(4096))
    line, _ = refused_cleanly(case, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority,predict",
                              "--lm", "mock/x", "--n-boot", "10", "--no-track", "--limit", "6",
                              "--cache-dir", str(cache), mock=True, needles=(f"{shard}/cache.db", "SQLite"))
    assert "cannot be read as an SQLite database (file is not a database)" in line
