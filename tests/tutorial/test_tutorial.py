"""docs/tutorial.md, done for real: the wheel, a fresh venv, a new project, both modes.

Every code block the page marks with ``<!-- test: NAME -->`` is read from the page and
applied as it is: a ``# path`` first line writes that file (``(add at the end)``: appends),
an ``sh`` block runs in bash inside the project (after activating its venv), a ``text``
block is output that must appear. Only what a reader's machine decides is substituted:
the server's port, the database's name and the Redis URL (a private Redis and database),
and the wheel's path. The install uses the ``production`` and ``client`` extras only, never
the dev ones (issue 9: a production install from the wheel holds a conversation).
"""

from __future__ import annotations

import os
import queue
import re
import secrets
import shutil
import ssl
import subprocess
import threading
import time
import tomllib
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from tests.device_page import approve_device_code
from tests.multiprocess.cluster import Cluster, free_port
from tests.waiting import eventually

pytestmark = [pytest.mark.tutorial, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "tutorial.md"
BLOCK = re.compile(r"<!-- test: (?P<name>[\w-]+) -->\n```(?P<lang>\w*)\n(?P<body>.*?)\n```", re.S)
#: The version, from its one place (the page names none: it installs from ``dist/``).
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
WHEEL = f"poppy_django-{VERSION}-py3-none-any.whl"
#: A waiting step's bound: generous, a slow machine is not a failure.
PATIENCE = 90.0
#: What uvicorn says of an ASGI application that is not wrapped in PoppyBodyLimit.
LIFESPAN_UNSUPPORTED = "ASGI 'lifespan' protocol appears unsupported"


#: A tool declared wrongly, added to the page's agent (its first parameter is not the context).
BROKEN_TOOL = """

@tool(kind="read", roles=["personal_agent"])
def weather(city: str) -> dict:
    \"\"\"The weather at the bakery.\"\"\"
    return {"summary": f"Sunny in {city}."}


def register_agent() -> None:
    register(CompanyAgent(name="bakery", tools=[opening_hours, reserve_cake, weather]))
"""


def page_blocks() -> dict[str, str]:
    return {found["name"]: found["body"] for found in BLOCK.finditer(PAGE.read_text())}


def checkout_copy(into: Path) -> Path:
    """What the page's ``pip wheel`` builds from: a copy of this checkout's package (the
    checkout stays clean)."""
    source = into / "poppy-django"
    source.mkdir()
    for name in ("pyproject.toml", "README.md", "LICENSE"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(
        ROOT / "poppy_django", source / "poppy_django", ignore=shutil.ignore_patterns("__pycache__")
    )
    return source


class Reader:
    """A project directory on a reader's machine: runs the page's blocks there."""

    def __init__(self, project: Path, port: int, substitutions: dict[str, str]) -> None:
        self.project = project
        self.port = port
        self.substitutions = substitutions
        self.env = {
            key: value
            for key, value in os.environ.items()
            if not key.startswith(("DJANGO_", "POPPY_", "VIRTUAL_ENV", "PYTHON"))
            and key not in {"DATABASE_URL", "REDIS_URL"}
        }
        self.env["PYTHONUNBUFFERED"] = "1"
        self.processes: list[subprocess.Popen[str]] = []
        #: Section 10's https port (``localhost:8443`` on the page).
        self.tls_port = 0
        #: The private Redis (the page's ``redis://127.0.0.1:6379/0``).
        self.redis_url = ""

    def text(self, block: str) -> str:
        for old, new in self.substitutions.items():
            block = block.replace(old, new)
        return block

    def apply_file(self, block: str) -> Path:
        first, _, body = self.text(block).partition("\n")
        match = re.fullmatch(r"# (?P<path>\S+)(?P<append> \(add at the end\))?", first)
        assert match, f"a file block starts with '# path': {first!r}"
        path = self.project / match["path"]
        if match["append"]:
            path.write_text(path.read_text() + "\n\n" + body + "\n")
        else:
            path.write_text(first + "\n" + body + "\n")
        return path

    def shell(self, block: str, *, fails: bool = False) -> str:
        """Run an sh block; ``export`` lines stay set for the later steps. It must succeed,
        or with ``fails``, fail (a mistake made on purpose)."""
        lines = []
        for line in self.text(block).splitlines():
            exported = re.fullmatch(r"export (\w+)=(\S+)", line)
            if exported:
                self.env[exported[1]] = exported[2]
            else:
                lines.append(line)
        script = "set -euo pipefail\n"
        if (self.project / ".venv").exists():
            script += ". .venv/bin/activate\n"
        done = subprocess.run(
            ["bash", "-c", script + "\n".join(lines)],
            cwd=self.project,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        said = f"--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
        assert (done.returncode != 0) == fails, f"{block}\n{said}"
        return done.stdout + done.stderr

    def start(self, command: str, **popen: object) -> subprocess.Popen[str]:
        process = subprocess.Popen(
            ["bash", "-c", f". .venv/bin/activate\nexec {command}"],
            cwd=self.project,
            env=self.env,
            text=True,
            **popen,  # type: ignore[call-overload]
        )
        self.processes.append(process)
        return process

    def serve(self, block: str) -> dict[str, Path]:
        """Each command of the block in the background (its own terminal, on the page)."""
        logs = {}
        for index, command in enumerate(self.text(block).splitlines()):
            log = self.project / f"serve-{index}.log"
            self.start(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
            logs[command.split()[0]] = log
        first = next(iter(logs.values()))
        eventually(
            lambda: http_get(f"http://127.0.0.1:{self.port}/.well-known/poppy.json") == 200,
            timeout=PATIENCE,
            what=lambda: f"the server to answer\n{first.read_text()}",
        )
        if "celery" in logs:  # its banner: the worker has started (it logs at WARNING)
            log = logs["celery"]
            eventually(
                lambda: "[queues]" in log.read_text(),
                timeout=PATIENCE,
                what=lambda: f"the worker's banner\n{log.read_text()}",
            )
        return logs

    def serve_tls(self, block: str) -> dict[str, Path]:
        """Section 10's processes; up once ``poppy.json`` answers over https (the page's CA)."""
        logs = {}
        for index, command in enumerate(self.text(block).splitlines()):
            log = self.project / f"serve-tls-{index}.log"
            self.start(command, stdout=log.open("w"), stderr=subprocess.STDOUT)
            logs[command.split()[0]] = log
        trusted = ssl.create_default_context(cafile=str(self.project / "var" / "ca.pem"))
        url = f"https://localhost:{self.tls_port}/.well-known/poppy.json"
        eventually(
            lambda: http_get(url, trusted) == 200,
            timeout=PATIENCE,
            what=lambda: f"the server over TLS\n{logs['uvicorn'].read_text()}",
        )
        log = logs["celery"]
        eventually(
            lambda: "[queues]" in log.read_text(),
            timeout=PATIENCE,
            what=lambda: f"the worker's banner\n{log.read_text()}",
        )
        return logs

    def stop_all(self) -> None:
        for process in self.processes:
            if process.poll() is None:
                process.terminate()
                try:
                    process.wait(timeout=15)
                except subprocess.TimeoutExpired:
                    process.kill()
        self.processes.clear()


def http_get(url: str, context: ssl.SSLContext | None = None) -> int:
    try:
        with urllib.request.urlopen(url, timeout=5, context=context) as response:  # noqa: S310
            return int(response.status)
    except OSError:
        return 0


def assert_shown(expected: str, output: str) -> None:
    """Each line of a text block appears; ``…`` stands for what differs (ids)."""
    for line in expected.splitlines():
        known = line.split("…")[0]
        assert known in output, f"{known!r} not in:\n{output}"


class Session:
    """``poppy_chat`` interactive, fed line by line, its output read as it comes."""

    def __init__(self, reader: Reader, command: str = "python manage.py poppy_chat") -> None:
        self.process = reader.start(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen = ""
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.put(line)

    def type(self, line: str) -> None:
        assert self.process.stdin is not None
        self.process.stdin.write(line + "\n")
        self.process.stdin.flush()

    def expect(self, line: str) -> None:
        known = line.split("…")[0]
        deadline = time.monotonic() + PATIENCE
        while known not in self.seen:
            remaining = deadline - time.monotonic()
            assert remaining > 0, f"{known!r} never shown; poppy_chat said:\n{self.seen}"
            try:
                self.seen += self.lines.get(timeout=remaining)
            except queue.Empty:
                continue

    def play(self, transcript: str) -> None:
        """A transcript from the page: ``you>`` lines are typed, the others must be shown."""
        for line in transcript.splitlines():
            if line.startswith("you> "):
                self.type(line.removeprefix("you> "))
            else:
                self.expect(line)

    def quit(self) -> None:
        self.type("/quit")
        assert self.process.stdin is not None
        self.process.stdin.close()
        assert self.process.wait(timeout=PATIENCE) == 0, self.seen


def manage_shell(reader: Reader, code: str) -> None:
    """Run a Python block of the page in ``python manage.py shell``."""
    done = subprocess.run(
        ["bash", "-c", ". .venv/bin/activate\npython manage.py shell"],
        input=code,
        cwd=reader.project,
        env=reader.env,
        capture_output=True,
        text=True,
        timeout=PATIENCE,
    )
    assert done.returncode == 0, done.stderr


def run_own_tests(reader: Reader, blocks: dict[str, str]) -> None:
    """Section 5b's tests by both runners: all pass, and nothing of the app's runs beside
    them (an async test of a page started the recovery sweep, whose failure was printed
    once the test database was gone, and whose connection kept PostgreSQL from dropping it)."""
    tests = len(re.findall(r"\n    (?:async )?def test_", blocks["adopter-tests"]))
    django_runner = reader.shell(blocks["adopter-test-run"] + " --noinput")
    assert f"Ran {tests} tests" in django_runner and "\nOK" in django_runner, django_runner
    pytest_runner = reader.shell(blocks["adopter-pytest-run"])
    assert f"{tests} passed" in pytest_runner, pytest_runner
    for output in (django_runner, pytest_runner):
        assert "Traceback" not in output and "recovery sweep" not in output, output


def converse(reader: Reader, blocks: dict[str, str]) -> None:
    """Section 5 and 6 of the page: two tools, the scope refusal, a handoff answered."""
    assert_shown(reader.text(blocks["chat-hours-output"]), reader.shell(blocks["chat-hours"]))
    assert_shown(
        blocks["chat-action-signed-out-output"], reader.shell(blocks["chat-action-signed-out"])
    )
    assert_shown(blocks["chat-action-output"], reader.shell(blocks["chat-action"]))
    assert blocks["chat-interactive"].strip() == "python manage.py poppy_chat"
    reader.shell(blocks["staff"])
    manage_shell(reader, blocks["desk-open"])
    session = Session(reader)
    session.play(reader.text(blocks["chat-interactive-session"]))
    manage_shell(reader, blocks["desk-answer"])
    session.play(blocks["chat-interactive-reply"])
    session.quit()


@pytest.fixture
def reader(tmp_path: Path) -> Iterator[Reader]:
    cluster = Cluster(tmp_path)  # a private Redis and database name
    cluster.start_redis()
    database = f"poppy_tutorial_{secrets.token_hex(4)}"
    port, tls_port = free_port(), free_port()
    project = tmp_path / "project"
    project.mkdir()
    substitutions = {
        "/path/to/poppy-django": str(checkout_copy(tmp_path)),
        "127.0.0.1:8000": f"127.0.0.1:{port}",
        "--port 8000": f"--port {port}",
        "localhost:8443": f"localhost:{tls_port}",
        "--port 8443": f"--port {tls_port}",
        "postgres://postgres@127.0.0.1:5432/mysite": (
            f"postgres://postgres@127.0.0.1:5432/{database}"
        ),
        "-U postgres mysite": f"-U postgres {database}",
        "redis://127.0.0.1:6379/0": f"redis://127.0.0.1:{cluster.redis_port}/0",
    }
    reader = Reader(project, port, substitutions)
    reader.tls_port = tls_port
    reader.redis_url = substitutions["redis://127.0.0.1:6379/0"]
    try:
        yield reader
    finally:
        reader.stop_all()
        cluster.stop_redis()
        subprocess.run(
            ["dropdb", "--if-exists", "--force", "-h", "127.0.0.1", "-U", "postgres", database],
            check=False,
            capture_output=True,
        )


def test_the_tutorial_works_as_written(reader: Reader) -> None:
    blocks = page_blocks()
    port = reader.port

    # 1-4: the wheel built and installed, a new project, the page's files, migrate and check.
    reader.shell(blocks["install"])
    assert [wheel.name for wheel in (reader.project / "dist").glob("*.whl")] == [WHEEL]
    installed = reader.shell("pip list --format=freeze")
    assert f"poppy-django=={VERSION}" in installed and "pytest" not in installed  # no dev extras
    reader.shell(blocks["startproject"])
    for name in ("settings-dev", "models", "agent", "apps"):
        reader.apply_file(blocks[name])
    # Mistakes first: urls.py without the endpoint's include, asgi.py as startproject wrote it.
    urls = reader.apply_file(blocks["urls"])
    urls.write_text(urls.read_text().replace('path("", include("poppy_django.urls")),', ""))
    said = reader.shell("python manage.py check", fails=True)
    assert "poppy_django.E012" in said and 'include("poppy_django.urls")' in said, said
    assert "poppy_django.W009" in said and "PoppyBodyLimit(get_asgi_application())" in said
    for name in ("urls", "asgi"):  # and mended, as the page says
        reader.apply_file(blocks[name])
    reader.shell(blocks["gitignore"])
    assert "var/" in (reader.project / ".gitignore").read_text()
    output = reader.shell(blocks["migrate-dev"])
    assert_shown(blocks["check-output"], output)
    assert "WARNING" not in output

    # 5b: the reader's own tests, with the testing kit, by both runners (SQLite, IMMEDIATE),
    # no extra flags: each runs the page's tests, async ones included, and passes cleanly.
    reader.apply_file(blocks["adopter-tests"])
    reader.shell(blocks["adopter-pytest-install"])
    reader.apply_file(blocks["adopter-pytest-ini"])
    run_own_tests(reader, blocks)

    # 5-6 in development: uvicorn, in-process turns, SQLite; the admin's files are served.
    served = reader.serve(blocks["serve-dev"])
    assert http_get(f"http://127.0.0.1:{port}/static/admin/css/base.css") == 200
    assert http_get(f"http://127.0.0.1:{port}/static/poppy_django/desk/desk.js") == 200
    converse(reader, blocks)
    reader.stop_all()
    assert LIFESPAN_UNSUPPORTED not in served["uvicorn"].read_text()

    # 7: production mode: PostgreSQL, Redis, uvicorn and a Celery worker. A mistake first:
    # the Celery app never imported when Django starts (no mysite/__init__.py import).
    for name in ("settings-production", "celery"):
        reader.apply_file(blocks[name])
    said = reader.shell(f"REDIS_URL={reader.redis_url} python manage.py check", fails=True)
    assert "poppy_django.E011" in said and "from .celery import app as celery_app" in said, said
    assert "in mysite/__init__.py" in said, said
    reader.apply_file(blocks["init"])
    output = reader.shell(blocks["migrate-production"])
    assert_shown(blocks["check-output"], output)
    assert reader.env["DATABASE_URL"].startswith("postgres://")
    # Another: a tool declared wrongly, which the web process and the worker (they run no
    # checks) refuse out loud at start-up, and run on without it.
    agent = reader.project / "bakery" / "agent.py"
    agent.write_text(agent.read_text() + BROKEN_TOOL)
    served = reader.serve(blocks["serve-production"])
    for log in served.values():
        said = log.read_text()
        assert "refuses a tool: Tool 'weather'" in said and "(poppy_django.E401)" in said, said
        assert LIFESPAN_UNSUPPORTED not in said
    reader.apply_file(blocks["agent"])  # mended for poppy_chat, which checks the project
    converse(reader, blocks)  # the servers' other tools work
    # The action ran once, in the worker, on PostgreSQL: the reader's own table has its row.
    with psycopg.connect(reader.env["DATABASE_URL"]) as connection:
        row = connection.execute("SELECT day, account FROM bakery_cakereservation").fetchall()
    assert row == [("friday", "customer-7")]
    reader.stop_all()
    # The reader's own tests on PostgreSQL too (the test database beside theirs), each runner
    # dropping its test database at the end: no connection of the app's left open.
    run_own_tests(reader, blocks)

    # 8: the project's own authorization server; a personal agent signs in through it,
    # with poppy_chat and with raw HTTP.
    reader.shell(blocks["install-authority"])
    for name in ("settings-authority", "urls-authority"):
        reader.apply_file(blocks[name])
    reader.shell(blocks["migrate-authority"])
    reader.serve(blocks["serve-production"])
    signing_in = Session(reader, reader.text(blocks["chat-authority"]).strip())
    signing_in.expect("enter the code ")
    code = re.search(r"enter the code (\S+)\]", signing_in.seen)
    assert code, signing_in.seen
    approve_device_code(
        f"http://127.0.0.1:{port}", code[1], "customer-7", "bake-me-a-cake", "poppy:write"
    )
    signing_in.play(reader.text(blocks["chat-authority-output"]))
    assert signing_in.process.wait(timeout=PATIENCE) == 0, signing_in.seen
    reader.apply_file(blocks["raw-agent"])
    assert_shown(reader.text(blocks["raw-agent-output"]), reader.shell(blocks["raw-agent-run"]))

    # 10: the production settings on this machine, over TLS with a throwaway CA: DEBUG off,
    # the project's own authority and key, the static files served by WhiteNoise.
    reader.stop_all()
    reader.shell(blocks["tls-ca"])
    reader.apply_file(blocks["settings-local-production"])
    output = reader.shell(blocks["local-production-check"])
    assert reader.env["LOCAL_PRODUCTION"] == "1"
    assert "poppy_django." not in output and "poppy_authority." not in output, output
    assert "ERRORS" not in output, output
    logs = reader.serve_tls(blocks["serve-local-production"])
    trusted = ssl.create_default_context(cafile=str(reader.project / "var" / "ca.pem"))
    origin = f"https://localhost:{reader.tls_port}"
    assert http_get(f"{origin}/static/poppy_django/desk/desk.js", trusted) == 200
    assert http_get(f"http://127.0.0.1:{reader.tls_port}/.well-known/poppy.json") == 0
    said = reader.shell(blocks["chat-local-production"])
    assert_shown(blocks["chat-local-production-output"], said)
    assert "Traceback" not in logs["uvicorn"].read_text(), logs["uvicorn"].read_text()
