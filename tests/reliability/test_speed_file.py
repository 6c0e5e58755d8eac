"""The cost line's speed file (``<cache dir>/speed.json``, :mod:`personalign.lm.speed`) and the LM
cache directory are input: a FIFO, a device, absurd numbers, escape codes, a symlink, a pickled
forward-pass row, a group-writable or garbage cache are each a miss, a warning or one ``error:``
line, never a hang, a traceback or code run (attack round 2: ``speed-*``, ``cachedir-*``; round 3:
loose ``-wal``/nested folders/parents, a shard symlink out, a hostile diskcache setting)."""

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
    line = Cost("compare", "mock/x", [StrategyCost("predict", evaluation=100)], speed=speed, in_flight=1).line()
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


def test_a_pickled_forward_pass_key_runs_no_code_when_the_cache_is_iterated(fresh_cache, tmp_path):
    """Keys are read back only when the cache is iterated (``list(cache)``): a key planted as a
    pickle is refused there, never unpickled (the re-attack: a latent path)."""
    import diskcache

    from personalign.lm import forward

    planted = tmp_path / "PWNED-KEY"
    with diskcache.Cache(str(fresh_cache / forward.SUBDIR)) as evil:  # the default Disk pickles a non-str key
        evil.set(_Plant(str(planted)), b"x")
        list(evil)  # the default Disk unpickles the key when iterating: the plant works
    assert planted.exists()
    planted.unlink()
    store = forward.store()
    with pytest.raises(ValueError, match="pickled key"):
        list(store)
    assert not planted.exists()
    with pytest.raises(TypeError, match="keys are text or bytes"):
        store.set(("a", 1), b"x")


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


# attack round 3 (``cache-loose-wal``, ``-nested-subdir``, ``-parent-world-writable``, ``-shard-symlink-*``,
# ``cache-garbage-settings-pragma``): the whole tree, the folders above it, and diskcache's settings
@pytest.mark.parametrize("side", ["cache.db-wal", "cache.db-shm"])
def test_a_loose_wal_or_shm_file_is_refused_by_the_cli(tmp_path, side):  # both ran a planted pickle before
    import diskcache

    case = tmp_path / "case"
    cache = _cache_with_shard(case / "runs")
    with diskcache.Cache(str(cache / "000")) as open_shard:  # WAL mode: -wal and -shm exist while it is open
        open_shard.set("k", "v")
        (cache / "000" / side).chmod(0o666)
        line, _ = refused_cleanly(case, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority,predict",
                                  "--lm", "mock/x", "--n-boot", "10", "--no-track", "--limit", "6",
                                  "--cache-dir", str(cache), mock=True, needles=(f"000/{side}",))
        assert f"chmod go-w {cache / '000' / side}" in line


def test_a_loose_nested_value_folder_is_refused(tmp_path):
    import diskcache

    from personalign.lm import CacheDirError, check_cache_dir

    cache = _cache_with_shard(tmp_path)
    with diskcache.Cache(str(cache / "000")) as shard:
        shard.set("big", os.urandom(1 << 16))  # past disk_min_file_size: a file in 000/xx/yy/
    [value] = [p for p in (cache / "000").rglob("*.val")]
    nested = value.parent.parent
    assert nested.parent == cache / "000"
    for target in (nested, value):
        target.chmod(target.stat().st_mode | 0o002)
        with pytest.raises(CacheDirError, match=f"{target.relative_to(cache)} is writable by group or others"):
            check_cache_dir(cache)
        target.chmod(target.stat().st_mode & ~0o002)
    assert check_cache_dir(cache) == cache


def test_a_world_writable_parent_is_refused_unless_sticky(tmp_path):
    from personalign.lm import CacheDirError, check_cache_dir

    parent = tmp_path / "shared"
    cache = _cache_with_shard(parent)
    parent.chmod(0o777)
    with pytest.raises(CacheDirError, match=f"the folder above it, {parent}, is writable by others.*chmod go-w {parent}"):
        check_cache_dir(cache)
    parent.chmod(0o1777)  # sticky, like /tmp: others cannot rename the cache dir
    assert check_cache_dir(cache) == cache
    parent.chmod(0o755)


def test_a_shard_symlink_out_of_the_cache_is_refused_and_one_inside_passes(tmp_path):
    from personalign.lm import CacheDirError, check_cache_dir

    cache = _cache_with_shard(tmp_path)
    loose = tmp_path / "loose"
    (cache / "000").rename(loose)
    loose.chmod(0o777)
    (cache / "000").symlink_to(loose)
    with pytest.raises(CacheDirError, match="000 is a symlink out of the cache dir"):
        check_cache_dir(cache)
    (cache / "000").unlink()
    (cache / "kept").mkdir(mode=0o755)
    loose.rename(cache / "kept" / "000")
    (cache / "000").symlink_to(cache / "kept" / "000")
    with pytest.raises(CacheDirError, match="kept/000 is writable by group or others"):  # the target is walked too
        check_cache_dir(cache)
    (cache / "kept" / "000").chmod(0o755)
    assert check_cache_dir(cache) == cache


def _plant_setting(cache: Path, key: str, value) -> None:
    import sqlite3

    con = sqlite3.connect(cache / "001" / "cache.db")
    with con:
        con.execute("insert or replace into Settings values (?, ?)", (key, value))
    con.close()


def test_a_hostile_pragma_setting_is_one_line_from_the_cli(tmp_path):
    case = tmp_path / "case"
    cache = _cache_with_shard(case / "runs")
    _plant_setting(cache, "sqlite_mmap_size", "1; select 1")  # DSPy's open: sqlite3.ProgrammingError traceback
    line, _ = refused_cleanly(case, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority,predict",
                              "--lm", "mock/x", "--n-boot", "10", "--no-track", "--limit", "6",
                              "--cache-dir", str(cache), mock=True, needles=("001/cache.db", "sqlite_mmap_size"))
    assert "is not a number" in line


@pytest.mark.parametrize(("key", "value", "why"), [
    ("sqlite_journal_mode", "wal; x", "is not one of"), ("sqlite_temp_store", 2, "is not a setting diskcache defines"),
    ("disk_unknown", 1, "is not a setting diskcache defines"), ("eviction_policy", "evil", "is not one of"),
    ("size_limit", "1e999", "is not a number"), ("count", b"x", "is not a number")])
def test_a_hostile_diskcache_setting_is_refused_and_the_default_ones_pass(tmp_path, key, value, why):
    from personalign.lm import CacheDirError, check_cache_dir

    cache = _cache_with_shard(tmp_path)
    assert check_cache_dir(cache) == cache  # diskcache's own settings (a float size_limit per shard) pass
    _plant_setting(cache, key, value)
    with pytest.raises(CacheDirError, match=f"001/cache.db: diskcache setting '{key}' {why}"):
        check_cache_dir(cache)
