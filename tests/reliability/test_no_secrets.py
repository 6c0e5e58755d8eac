"""No secret ever stored on disk or printed (issue 38 item 1).

An API key and an ``Authorization`` header in ``--lm-kwargs``, a password in ``--api-base``, and
the same secrets in the environment (``PERSONALIGN_LM_KWARGS``, ``PERSONALIGN_API_BASE``,
``OPENAI_API_KEY``) go through real ``compare``, ``compile`` and ``sweep`` runs (LM-free
strategies, tracked in an SQLite MLflow store); then every byte each run wrote -- the runs folder
(``runs/compare/*.json``, saved programs, MLflow artifacts), the MLflow and Optuna databases, the
``--results`` file -- and everything it printed is searched for the secrets. The error paths (bad
``--lm-kwargs`` JSON, a database URL with a password and no driver) print one line without them.

The commands run in this process (``personalign.cli.main`` with ``sys.argv`` set to the same
command line, as the console script does) on one shared store: the whole file takes seconds.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import ROOT, TEST_MODELS_DIR, cli_env

KEY = "sk-NOSECRET-kwarg-7f3a9c51"
TOKEN = "tok-NOSECRET-header-41b2e8"
PASSWORD = "NOSECRETpw93d1e0"
ENV_KEY = "sk-NOSECRET-env-0c5d7a19"
STAGE = ROOT / "examples" / "own_task" / "stage.toml"
DATA = ROOT / "examples" / "own_task" / "data.jsonl"


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """One folder for the module: runs/, the MLflow store (created once) and the results."""
    return tmp_path_factory.mktemp("no-secrets")


class Secrets:
    """This test's secrets (a tag of its own: a leak fails the test that made it, not the next one
    on the shared store) and the flag values carrying them."""

    def __init__(self, tag: str):
        self.key, self.token, self.password, self.env_key = (f"{s}{tag}" for s in (KEY, TOKEN, PASSWORD, ENV_KEY))
        self.all = (self.key, self.token, self.password, self.env_key)
        self.lm_kwargs = json.dumps({"api_key": self.key, "extra_headers": {"Authorization": f"Bearer {self.token}"},
                                     "max_tokens": 64})
        self.api_base = f"http://user:{self.password}@127.0.0.1:9/v1"


@pytest.fixture
def secrets(request) -> Secrets:
    return Secrets("-" + request.node.name.removeprefix("test_")[:20])


@pytest.fixture
def cli(work, monkeypatch, capfd):
    """Run ``personalign ARGS`` in this process; returns ``(exit code, stdout, stderr)``."""
    monkeypatch.setenv("PERSONALIGN_RUNS_DIR", str(work / "runs"))
    monkeypatch.setenv("PERSONALIGN_MODELS_DIR", str(TEST_MODELS_DIR))
    for var in ("PERSONALIGN_API_BASE", "PERSONALIGN_LM_KWARGS"):  # the CLI exports them: removed after the test
        monkeypatch.setenv(var, "")
        monkeypatch.delenv(var)

    def run(*args: str) -> tuple[int, str, str]:
        from personalign.cli import main

        monkeypatch.setattr(sys, "argv", ["personalign", *args])
        capfd.readouterr()
        with pytest.raises(SystemExit) as stop:
            main(list(args))
        out, err = capfd.readouterr()
        return stop.value.code or 0, out, err

    return run


def _run(tmp_path: Path, *args: str):
    """``personalign ARGS`` in a subprocess (an error path: exit 2 before any work)."""
    return subprocess.run([sys.executable, "-m", "personalign", *args], capture_output=True, text=True, cwd=tmp_path,
                          env=cli_env(tmp_path / "runs"), timeout=120, stdin=subprocess.DEVNULL)


def _one_line(proc, *needles: str, secrets: tuple[str, ...] = (KEY, PASSWORD)) -> str:
    """The one ``error:`` line of a refused command (exit 2), holding ``needles`` and no secret."""
    lines = [x for x in proc.stderr.splitlines() if x.strip()]
    assert proc.returncode == 2 and len(lines) == 1 and lines[0].startswith("error: "), proc.stderr[-1500:]
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])
    for secret in secrets:
        assert secret not in proc.stderr + proc.stdout, lines[0]
    return lines[0]


def _assert_clean(secrets: Secrets, folder: Path, *texts: str) -> list[Path]:
    """No secret in any file under ``folder`` nor in ``texts``; returns the files searched."""
    files = [p for p in folder.rglob("*") if p.is_file()]
    for path in files:
        body = path.read_bytes()
        for secret in secrets.all:
            assert secret.encode() not in body, (secret, path)
    for text in texts:
        for secret in secrets.all:
            assert secret not in text, (secret, text[-2000:])
    return files


def _tags(work: Path, command: str) -> list[dict[str, str]]:
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{work / 'mlflow.db'}")
    exp = client.get_experiment_by_name("personalign")
    runs = client.search_runs([exp.experiment_id], filter_string=f"tags.command = '{command}'")
    return [r.data.tags for r in runs]


def test_compare_stores_and_prints_no_secret(work, cli, secrets):
    results = work / "compare-record.json"
    code, out, err = cli("compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--n-boot", "20",
                         "--lm-kwargs", secrets.lm_kwargs, "--api-base", secrets.api_base, "--results", str(results),
                         "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}")
    assert code == 0, err[-2000:]
    files = _assert_clean(secrets, work, out, err)
    names = {p.name for p in files}
    assert "mlflow.db" in names and results.exists()
    assert any(p.parent.name == "compare" and p.suffix == ".json" for p in files)
    assert any("mlartifacts" in p.parts for p in files)  # the result file logged as an artifact
    # the command line is recorded, its secrets masked: results file, runs/compare JSON, MLflow tag
    command = json.loads(results.read_text())["command"]
    assert "--lm-kwargs" in command and '"api_key": "***"' in command and '"Authorization": "***"' in command
    assert '"max_tokens": 64' in command and "http://user:***@127.0.0.1:9/v1" in command
    stored = json.loads(next(p for p in files if p.parent.name == "compare" and p.suffix == ".json").read_text())
    assert stored["run_record"]["command"] == command
    tags = _tags(work, "compare")
    assert tags and tags[0]["personalign.command"] == command


def test_compare_no_track_result_file_has_no_secret(work, cli, secrets):
    code, out, err = cli("compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--n-boot", "20",
                         "--lm-kwargs", secrets.lm_kwargs, "--api-base", secrets.api_base, "--no-track", "--json")
    assert code == 0, err[-2000:]
    _assert_clean(secrets, work, out, err)
    assert '"api_key": "***"' in json.loads(out)["run_record"]["command"]


def test_compile_stores_and_prints_no_secret(work, cli, secrets):
    out_dir = work / "program"
    code, out, err = cli("compile", str(STAGE), "--strategy", "majority", "--data", str(DATA), "--out", str(out_dir),
                         "--lm-kwargs", secrets.lm_kwargs, "--api-base", secrets.api_base,
                         "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}")
    assert code == 0, err[-2000:]
    assert (out_dir / "program.json").exists() and _tags(work, "compile")
    _assert_clean(secrets, work, out, err)


def test_sweep_stores_and_prints_no_secret(work, cli, secrets, monkeypatch):
    """The sweep records its command line (MLflow tags) and reads the endpoint settings from the
    environment: none of the secrets there reaches a file or the terminal."""
    monkeypatch.setenv("OPENAI_API_KEY", secrets.env_key)
    monkeypatch.setenv("PERSONALIGN_LM_KWARGS", secrets.lm_kwargs)
    monkeypatch.setenv("PERSONALIGN_API_BASE", secrets.api_base)
    space = work / "space.toml"
    space.write_text('strategies = ["majority"]\n[pruner]\nkind = "none"\n')
    code, out, err = cli("sweep", str(STAGE), "--data", str(DATA), "--space", str(space), "--n-trials", "1",
                         "--n-boot", "10", "--storage", f"sqlite:///{work / 'optuna.db'}",
                         "--tracking-uri", f"sqlite:///{work / 'mlflow.db'}")
    assert code == 0, err[-2000:]
    assert (work / "optuna.db").exists()
    tags = _tags(work, "sweep")
    assert tags and tags[0]["personalign.command"].startswith("personalign sweep ")
    _assert_clean(secrets, work, out, err)


def test_bad_lm_kwargs_json_is_not_echoed(tmp_path):
    bad = '{"api_key": "%s" "extra_headers": {}}' % KEY  # a missing comma
    proc = _run(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--no-track",
                "--lm-kwargs", bad)
    _one_line(proc, "--lm-kwargs", "is not JSON", "line 1 column")
    proc = _run(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--no-track", "--lm-kwargs", json.dumps([KEY]))
    _one_line(proc, "must be a JSON object", "not an array")
    assert not (tmp_path / "runs").exists()  # refused before anything was written


def test_database_url_password_is_not_printed(tmp_path):
    """A PostgreSQL URL whose driver is not installed (pg8000: personalign's extra ships psycopg,
    which may be installed -- then the URL would be tried), as the tracking store of ``compare``
    and the Optuna storage of ``sweep``: the error names the URL with the password as ***."""
    url = f"postgresql+pg8000://u:{PASSWORD}@127.0.0.1/db"
    proc = _run(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--strategies", "majority",
                "--tracking-uri", url)
    _one_line(proc, "postgresql+pg8000://u:***@127.0.0.1/db")
    proc = _run(tmp_path, "sweep", str(STAGE), "--data", str(DATA), "--no-track", "--storage", url)
    _one_line(proc, "--storage postgresql+pg8000://u:***@127.0.0.1/db")
    proc = _run(tmp_path, "compare", str(STAGE), "--data", str(DATA), "--no-track", "--api-base",
                f"ftp://u:{PASSWORD}@127.0.0.1/v1")
    _one_line(proc, "--api-base", "ftp://u:***@127.0.0.1/v1")


def test_equals_form_flags_are_redacted_too(work, cli, secrets):
    """``--lm-kwargs={...}`` and ``--api-base=URL`` (one argv item each) are masked like the
    two-item form (the fresh attack: the ``=`` form of ``--lm-kwargs`` was stored in clear)."""
    code, out, err = cli("compare", str(STAGE), "--data", str(DATA), "--strategies", "majority", "--n-boot", "20",
                         f"--lm-kwargs={secrets.lm_kwargs}", f"--api-base={secrets.api_base}", "--no-track", "--json")
    assert code == 0, err[-2000:]
    _assert_clean(secrets, work, out, err)
    command = json.loads(out)["run_record"]["command"]
    assert '"api_key": "***"' in command and '"max_tokens": 64' in command and "user:***@" in command


def test_a_secret_in_the_api_base_query_is_refused_and_never_shown():
    """A key in the endpoint's query (``?key=``) cannot be moved to a header the way a password is
    (the server reads it there) and would be stored with every cached response: refused in one
    line that does not show it. In anything recorded or printed it is masked."""
    from personalign.errors import ConfigurationError
    from personalign.lm import _userinfo_to_header
    from personalign.redaction import redact

    for url in (f"http://127.0.0.1:9/v1?key={KEY}", f"http://127.0.0.1:9/v1?a=1&api_key={KEY}",
                f"https://h/v1?sig={KEY}", f"https://h/v1?X-Amz-Signature={KEY}", f"http://h/v1;key={KEY}",
                f"http://h/v1?%6Bey={KEY}"):
        with pytest.raises(ConfigurationError) as refused:
            _userinfo_to_header(url, {})
        assert KEY not in str(refused.value) and "header" in str(refused.value)
        assert KEY not in redact(url) and KEY not in redact(f"endpoint at {url}: refused")
    assert _userinfo_to_header("http://127.0.0.1:9/v1?model=x", {}) == "http://127.0.0.1:9/v1?model=x"


def test_an_api_base_that_is_not_a_url_is_not_echoed(tmp_path):
    env = cli_env(tmp_path / "runs") | {"PERSONALIGN_API_BASE": f"not a url {KEY}"}
    proc = subprocess.run([sys.executable, "-m", "personalign", "compare", str(STAGE), "--data", str(DATA),
                           "--strategies", "majority", "--no-track"], capture_output=True, text=True, cwd=tmp_path,
                          env=env, timeout=120, stdin=subprocess.DEVNULL)
    _one_line(proc, "--api-base must be an http(s):// URL", "not shown")
