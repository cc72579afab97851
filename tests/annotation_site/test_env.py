import pytest

from annotation_site.env import EnvError, database_config, envbool, envint, envlist


def test_envbool_reads_true_and_false_words(monkeypatch):
    monkeypatch.setenv("FLAG", "Yes")
    assert envbool("FLAG", False) is True
    monkeypatch.setenv("FLAG", "off")
    assert envbool("FLAG", True) is False


def test_envbool_uses_default_when_unset_or_blank(monkeypatch):
    monkeypatch.delenv("FLAG", raising=False)
    assert envbool("FLAG", True) is True
    monkeypatch.setenv("FLAG", "  ")
    assert envbool("FLAG", False) is False


def test_envbool_rejects_a_typo(monkeypatch):
    monkeypatch.setenv("FLAG", "ture")
    with pytest.raises(EnvError, match="FLAG='ture' is not a boolean"):
        envbool("FLAG", False)


def test_envint_rejects_non_numbers_and_values_below_minimum(monkeypatch):
    monkeypatch.setenv("N", "12a")
    with pytest.raises(EnvError, match="not an integer"):
        envint("N", 1)
    monkeypatch.setenv("N", "0")
    with pytest.raises(EnvError, match="below the minimum 1"):
        envint("N", 5, minimum=1)
    monkeypatch.setenv("N", "7")
    assert envint("N", 5, minimum=1) == 7


def test_envlist_splits_on_commas_and_drops_blanks(monkeypatch):
    monkeypatch.setenv("HOSTS", "a.example, b.example,,")
    assert envlist("HOSTS", []) == ["a.example", "b.example"]


def test_database_config_defaults_to_sqlite_file():
    config = database_config(None, default_sqlite_path="/tmp/x.sqlite3")
    assert config == {"ENGINE": "django.db.backends.sqlite3", "NAME": "/tmp/x.sqlite3"}


def test_database_config_reads_postgres_urls():
    config = database_config("postgres://postgres@127.0.0.1:5432/annotation", default_sqlite_path="unused")
    assert config["ENGINE"] == "django.db.backends.postgresql"
    assert config["NAME"] == "annotation"
    assert config["HOST"] == "127.0.0.1"


def test_database_config_rejects_unsupported_schemes_and_missing_names():
    with pytest.raises(EnvError, match="scheme 'mysql' is not supported"):
        database_config("mysql://root@localhost/db", default_sqlite_path="unused")
    with pytest.raises(EnvError, match="must name a database"):
        database_config("postgres://postgres@127.0.0.1:5432", default_sqlite_path="unused")


def test_settings_refuse_to_start_without_secret_key_when_debug_is_off(monkeypatch):
    import subprocess
    import sys

    env = {"DEBUG": "false", "PATH": "/usr/bin:/bin"}
    result = subprocess.run(
        [sys.executable, "-c", "import annotation_site.settings"], env=env, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "SECRET_KEY must be set when DEBUG is off" in result.stderr


def test_settings_refuse_a_malformed_debug_value():
    import subprocess
    import sys

    result = subprocess.run(
        [sys.executable, "-c", "import annotation_site.settings"], env={"DEBUG": "maybe"}, capture_output=True, text=True
    )
    assert result.returncode != 0
    assert "DEBUG='maybe' is not a boolean" in result.stderr


def test_postgres_binds_on_the_server_and_prepares_repeated_statements():
    config = database_config("postgres://postgres@127.0.0.1:5432/annotation", default_sqlite_path="unused")
    assert config["OPTIONS"] == {"server_side_binding": True, "prepare_threshold": 5}
    assert database_config("postgres://h/db", default_sqlite_path="unused", prepare_threshold="0")["OPTIONS"][
        "prepare_threshold"] == 0
    off = database_config("postgres://h/db", default_sqlite_path="unused", prepare_threshold="off")
    assert "server_side_binding" not in off.get("OPTIONS", {})  # e.g. behind a transaction-mode PgBouncer
    assert "OPTIONS" not in database_config(None, default_sqlite_path="/tmp/x.sqlite3")
    with pytest.raises(EnvError, match="DATABASE_PREPARE_THRESHOLD"):
        database_config("postgres://h/db", default_sqlite_path="unused", prepare_threshold="soon")
