"""The two databases the results store runs on, behind one small connection interface.

SQLite (a file: the embedded default) and PostgreSQL (a URL: a fleet's controller). The store
writes its SQL once, in the dialect both accept (`?` placeholders, `CASE`, `COALESCE`); what
differs (placeholders, schema versioning, write locks, column types) lives here.
"""

from __future__ import annotations

import contextlib
import re
import sqlite3
import time
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

#: how the schema version is kept in PostgreSQL (SQLite has `PRAGMA user_version`)
PG_VERSION_TABLE = "farm_schema"
#: the advisory lock that serialises concurrent first opens of one PostgreSQL store
PG_MIGRATION_LOCK = 0x6661726D  # "farm"
POSTGRES_SCHEMES = ("postgresql://", "postgres://")


#: where a store is: a SQLite file, or a `postgresql://` URL
StoreLocation = Path | str


def store_exists(location: StoreLocation) -> bool:
    """False for a SQLite file not made yet (nothing run); a server is asked when opened."""
    return is_postgres_url(location) or Path(location).exists()


def is_postgres_url(location: str | Path) -> bool:
    return isinstance(location, str) and location.startswith(POSTGRES_SCHEMES)


def redacted(location: str | Path) -> str:
    """The store's location for messages: a URL without its password."""
    return re.sub(r"://([^:/@]+):[^@]*@", r"://\1:***@", str(location))


class Database(ABC):
    """One connection, in autocommit mode; the store brackets its own transactions."""

    #: the exceptions of the driver, converted to `StoreError` by the store
    errors: tuple[type[BaseException], ...]

    @abstractmethod
    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        """A cursor (fetchone/fetchall/rowcount) of `sql` written with `?` placeholders."""

    @abstractmethod
    def begin_write(self) -> None:
        """A write transaction that holds the write lock from its start."""

    @abstractmethod
    def begin_read(self) -> None:
        """A read transaction that sees one snapshot throughout."""

    def commit(self) -> None:
        self.execute("COMMIT")

    def rollback(self) -> None:
        self.execute("ROLLBACK")

    @abstractmethod
    def schema_version(self) -> int: ...

    @abstractmethod
    def set_schema_version(self, version: int) -> None: ...

    @abstractmethod
    def ddl(self, script: str) -> str:
        """A migration (written for SQLite) in this database's types."""

    @abstractmethod
    def close(self) -> None: ...

    @abstractmethod
    def is_transient(self, exc: BaseException) -> bool:
        """Whether a failed transaction may succeed if tried again: the database was busy or
        unreachable (not a bad statement, not a constraint)."""

    @abstractmethod
    def reconnect(self) -> None:
        """A new connection where the old one may be broken (before a retry)."""


class SqliteDatabase(Database):
    errors = (sqlite3.Error,)

    def __init__(self, path: Path, busy_timeout_s: float) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        self._db = sqlite3.connect(
            path, timeout=busy_timeout_s, isolation_level=None, check_same_thread=False
        )
        self._db.execute("PRAGMA foreign_keys=ON")
        # Switching to WAL takes an exclusive lock that SQLite does not wait for through its busy
        # handler: two first opens at once see "database is locked". Retry within the timeout.
        deadline = time.monotonic() + busy_timeout_s
        while True:
            try:
                self._db.execute("PRAGMA journal_mode=WAL")
                break
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        return self._db.execute(sql, tuple(args))

    def begin_write(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def begin_read(self) -> None:
        self._db.execute("BEGIN DEFERRED")

    def schema_version(self) -> int:
        return int(self._db.execute("PRAGMA user_version").fetchone()[0])

    def set_schema_version(self, version: int) -> None:
        self._db.execute(f"PRAGMA user_version = {int(version)}")

    def ddl(self, script: str) -> str:
        return script

    def close(self) -> None:
        self._db.close()

    def reconnect(self) -> None:
        """Nothing to do: a file's connection does not break; a busy database is waited for."""

    def is_transient(self, exc: BaseException) -> bool:
        message = str(exc).lower()
        return isinstance(exc, sqlite3.OperationalError) and ("locked" in message or "busy" in message)


class PostgresDatabase(Database):
    def __init__(self, url: str, busy_timeout_s: float) -> None:
        import psycopg

        self.errors = (psycopg.Error,)
        self._url = url
        self._busy_timeout_s = busy_timeout_s
        #: inside a transaction a lost connection is the transaction's failure, never hidden
        self._in_transaction = False
        self._db = self._connect()

    def _connect(self) -> Any:
        import psycopg

        db = psycopg.connect(self._url, autocommit=True, connect_timeout=max(1, int(self._busy_timeout_s)))
        db.execute(f"SET lock_timeout = '{int(self._busy_timeout_s * 1000)}ms'")
        return db

    def reconnect(self) -> None:
        with contextlib.suppress(Exception):
            self._db.close()
        self._in_transaction = False
        self._db = self._connect()

    def is_transient(self, exc: BaseException) -> bool:
        import psycopg

        # OperationalError: the server went away, refused, shut down (AdminShutdown), a lock wait
        # timed out (LockNotAvailable), a serialization failure or a deadlock; InterfaceError: a
        # connection already closed
        return isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError)

    def execute(self, sql: str, args: Sequence[Any] = ()) -> Any:
        import psycopg

        # `?` -> `%s`; the store's SQL has no literal `%` or `?` of its own
        statement, values = sql.replace("?", "%s"), tuple(args)
        if self._in_transaction:
            return self._db.execute(statement, values)
        if self._db.closed or self._db.broken:
            self.reconnect()  # the server came back: connect again rather than fail until a restart
        try:
            return self._db.execute(statement, values)
        except (psycopg.OperationalError, psycopg.InterfaceError):
            if not (self._db.closed or self._db.broken):
                raise
        # the connection was dropped under a statement outside any transaction (a read, or a
        # transaction's BEGIN): nothing was done, so it is done again on a new connection
        self.reconnect()
        return self._db.execute(statement, values)

    def begin_write(self) -> None:
        self.execute("BEGIN")
        self._in_transaction = True

    def begin_read(self) -> None:
        self.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        self._in_transaction = True

    def commit(self) -> None:
        try:
            self._db.execute("COMMIT")
        finally:
            self._in_transaction = False

    def rollback(self) -> None:
        try:
            if not (self._db.closed or self._db.broken):
                self._db.execute("ROLLBACK")
        finally:
            self._in_transaction = False

    def lock_for_migration(self) -> None:
        """Inside the migration transaction: one first open migrates, the others wait for it."""
        self._db.execute("SELECT pg_advisory_xact_lock(%s)", (PG_MIGRATION_LOCK,))
        self._db.execute(f"CREATE TABLE IF NOT EXISTS {PG_VERSION_TABLE} (version INTEGER NOT NULL)")

    def schema_version(self) -> int:
        exists = self._db.execute("SELECT to_regclass(%s)", (PG_VERSION_TABLE,)).fetchone()
        if exists is None or exists[0] is None:
            return 0
        row = self._db.execute(f"SELECT MAX(version) FROM {PG_VERSION_TABLE}").fetchone()
        return int(row[0]) if row and row[0] is not None else 0

    def set_schema_version(self, version: int) -> None:
        self._db.execute(f"DELETE FROM {PG_VERSION_TABLE}")
        self._db.execute(f"INSERT INTO {PG_VERSION_TABLE}(version) VALUES (%s)", (version,))

    def ddl(self, script: str) -> str:
        # SQLite's REAL is 8 bytes, PostgreSQL's 4: a Unix time would lose its seconds
        return re.sub(r"\bREAL\b", "DOUBLE PRECISION", script)

    def close(self) -> None:
        self._db.close()
