"""The kill campaign: never stuck, never twice, while workers die every few seconds.

    flock /tmp/poppy-bench.lock .venv/bin/python bench/kill_campaign.py [--kills 200] [--short]

Production mode on loopback, with no beat and no reaper: a private PostgreSQL database and a
private redis-server (tests/multiprocess/cluster.py), two uvicorn processes and three Celery
workers. A dozen personal agents, each signed in to an account of its own with orders of its
own, converse at once — plain messages, ``#slow`` replies, tool calls (hours, orders) and
actions (``cancel <order>``, each order once) — and each has a reader following its
conversation (half over SSE with ``Last-Event-ID``, half by long-polling with a cursor),
reconnecting to either web process. Meanwhile a killer SIGKILLs a random worker every few
seconds and starts a replacement, now and then SIGKILLs a web process (and starts another),
and once, half-way, restarts Redis (no persistence: its queue is lost).

Clients retry a POST whose answer they did not get with the same message id, and count a
message only once it is acknowledged (201/202). At the end, from the database and from what
the clients saw:

- every acknowledged message was answered (a company message or an authorization event
  after it, and ``answered_seq`` past it);
- no company message id was written twice;
- no action's side effect was done twice: every cancel the agents asked for was told
  ``succeeded`` (a second run would fail: the order is no longer processing), and the
  orders cancelled in the shop's table are exactly the succeeded cancel actions;
- no conversation was left ``working``: after the last kill all are idle within
  ``LEASE_SECONDS`` + ``SWEEP_SECONDS`` + a turn's own time;
- every event a reader was sent is in the log, once and in order, and every event of the
  log reached the reader.

Prints a table and writes var/bench/kill_campaign.json; exits 1 on any violation. SIGINT
or SIGTERM stops the killing early; the checks then run as usual on what was done.
Results: docs/operations.md. ``--short`` (a handful of kills) runs in ``make test``.
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import random
import signal
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from poppy_django.verifier.fake import fake_authorization  # noqa: E402
from tests.multiprocess.cluster import Cluster  # noqa: E402

PATH = "/poppy/conversations"
LEASE_SECONDS = 3.0
SWEEP_SECONDS = 1.0
#: A worker's start and a scripted turn's own time (``#slow`` takes about a second); an
#: LLM-shaped turn adds what its pace says (:meth:`Pace.longest`).
TURN_SLACK_SECONDS = 10.0
#: A long-poll's ``wait``: it answers as soon as an event follows, so a long one costs no
#: latency, only fewer idle polls (hundreds of agents and readers polling every few seconds
#: are most of the web processes' work); under the clients' 20 s read timeout.
LONG_POLL_SECONDS = 15
#: The product's default, which the campaign's settings keep.
TURN_MAX_ATTEMPTS = 3
FAILED_TURN = "Sorry, something went wrong on our side. Please try again."
ORDERS_PER_AGENT = 300


@dataclass(frozen=True)
class Pace:
    """The LLM-shaped model's pace (``--llm``): a "slow" message asks for three times the tokens."""

    ttft: float = 1.0
    tokens: int = 20
    rate: float = 10.0

    def longest(self) -> float:
        """A turn's longest model time: a tool's turn is two model calls (the call, then the
        answer), and a slow answer three times the tokens."""
        return 2 * self.ttft + 3 * self.tokens / self.rate


class Campaign:
    """The processes, and what the killer changes while the agents talk."""

    def __init__(
        self,
        cluster: Cluster,
        *,
        kills: int,
        web_every: int,
        pace: float,
        workers: int = 3,
        llm: str | None = None,
        llm_pace: Pace | None = None,
    ) -> None:
        self.cluster = cluster
        #: The LLM-shaped endpoint's origin when the turns go through it (``--llm``).
        self.llm = llm
        self.llm_pace = llm_pace or Pace()
        self.worker_count = workers
        #: After the last kill, every conversation idle within this many seconds.
        self.bound_seconds = (
            LEASE_SECONDS
            + SWEEP_SECONDS
            + TURN_SLACK_SECONDS
            + (self.llm_pace.longest() if llm else 0.0)
        )
        #: How long an agent waits for its reply before it counts the message unanswered in
        #: time and sends its next one (which, sent while the turn still runs, makes the
        #: conversation one more turn late): a turn's worker may be killed on each of its
        #: ``TURN_MAX_ATTEMPTS`` attempts, each costing up to the bound.
        self.answer_seconds = max(120.0, TURN_MAX_ATTEMPTS * self.bound_seconds)
        self.kills_wanted = kills
        self.web_every = web_every
        self.pace = pace
        self.lock = threading.Lock()
        self.webs: dict[str, str] = {}
        self.workers: list[str] = []
        self.names = itertools.count(1)
        self.kills = 0
        self.web_kills = 0
        self.redis_restarts = 0
        self.last_kill = 0.0
        self.killing_done = threading.Event()
        self.stop_readers = threading.Event()

    def start(self) -> None:
        for _ in range(2):
            self.start_web()
        for _ in range(self.worker_count):
            self.start_worker()

    def start_web(self) -> None:
        while True:
            name = f"web-{next(self.names)}"
            try:
                url = self.cluster.web(name)
            except RuntimeError:  # too slow to start on a loaded machine: another one
                self.cluster.stop(name)
                continue
            with self.lock:
                self.webs[name] = url
            return

    def start_worker(self) -> None:
        while True:
            name = f"worker-{next(self.names)}"
            try:
                self.cluster.worker(name)
            except RuntimeError:
                process = self.cluster.processes.get(name)
                if process is None or process.poll() is not None:
                    self.cluster.processes.pop(name, None)
                    continue
                # Alive but slow to start on a loaded machine: it joins when it is ready.
            self.workers.append(name)
            return

    def wind_down(self, *args: Any) -> None:
        """SIGINT / SIGTERM: stop killing now, then settle and check as usual."""
        self.kills_wanted = self.kills

    def url(self) -> str:
        with self.lock:
            return random.choice(list(self.webs.values()))

    def killer(self) -> None:
        """SIGKILL a random worker every few seconds; now and then a web process; Redis once.

        Agents stop sending once the last worker is killed, so what follows measures how long
        the conversations take to settle after it.
        """
        try:
            while self.kills < self.kills_wanted:
                time.sleep(random.uniform(0.5 * self.pace, 1.5 * self.pace))
                if self.kills >= self.kills_wanted:  # wound down meanwhile
                    break
                if self.redis_restarts == 0 and self.kills >= self.kills_wanted // 2:
                    self.cluster.stop_redis()
                    time.sleep(2)
                    self.cluster.start_redis()
                    self.redis_restarts += 1
                if (self.kills + 1) % self.web_every == 0:
                    with self.lock:
                        name = random.choice(list(self.webs))
                        del self.webs[name]
                    self.cluster.kill(name)
                    self.web_kills += 1
                    self.start_web()
                victim = random.choice(self.workers)
                self.workers.remove(victim)
                self.cluster.kill(victim)
                self.kills += 1
                self.last_kill = time.monotonic()
                if self.kills == self.kills_wanted:
                    self.killing_done.set()
                self.start_worker()
                print(f"  kills: {self.kills} workers, {self.web_kills} web", flush=True)
        finally:
            self.killing_done.set()


class Agent(threading.Thread):
    """One personal agent: its own account and orders, one conversation, a reader of it."""

    def __init__(self, index: int, campaign: Campaign) -> None:
        super().__init__(name=f"agent-{index}", daemon=True)
        self.index = index
        self.campaign = campaign
        self.account = f"kc-{index}"
        self.orders = [f"K-{index * 1000 + j}" for j in range(ORDERS_PER_AGENT)]
        self.headers = {
            "Authorization": fake_authorization(
                "https://pa.example/kill-campaign",
                f"kc-user-{index}",
                account_id=self.account,
                scopes=("poppy:read", "poppy:write"),
            )
        }
        self.http = httpx.Client(timeout=httpx.Timeout(20, connect=2), headers=self.headers)
        self.conversation_id: str | None = None
        #: Acknowledged messages: (message id, text).
        self.acked: list[tuple[str, str]] = []
        self.cancelled: list[str] = []
        self.unanswered_in_time: list[str] = []
        #: The longest an acknowledged message of this agent waited for its reply.
        self.longest_wait = 0.0
        self.reader: Reader | None = None
        #: Where this agent's own reads resume (the last event it has looked at).
        self.cursor: str | None = None
        self.sequence = itertools.count(1)

    def post(self, path: str, body: dict[str, Any]) -> httpx.Response:
        """POST until answered (the same body, so the same message id): 2xx or a 4xx."""
        while True:
            try:
                response = self.http.post(f"{self.campaign.url()}{PATH}{path}", json=body)
            except httpx.HTTPError:
                time.sleep(0.2)
                continue
            if response.status_code < 500:
                return response
            time.sleep(0.2)

    def read(self, **params: Any) -> dict[str, Any]:
        while True:
            try:
                response = self.http.get(
                    f"{self.campaign.url()}{PATH}/{self.conversation_id}/events", params=params
                )
                if response.status_code == 200:
                    return response.json()
            except httpx.HTTPError:
                pass
            time.sleep(0.2)

    def next_text(self, n: int) -> str:
        kind = random.choice(("plain", "slow", "hours", "orders", "cancel"))
        if kind == "cancel" and self.orders:
            order = self.orders.pop(0)
            return f"cancel_order {order}" if self.campaign.llm else f"cancel {order}"
        if self.campaign.llm:  # the LLM-shaped endpoint calls a tool the message names
            return {
                "plain": f"hello number {n}",
                "slow": f"hello number {n} #tokens={3 * self.campaign.llm_pace.tokens}",
                "hours": f"store_hours please ({n})",
                # One order, not the list: the endpoint streams a tool's summary word by word,
                # and the list of 300 orders would outlast the turn's time limit.
                "orders": f"order_status {self.orders[-1]} please ({n})",
            }.get(kind, f"hello number {n}")
        return {
            "plain": f"hello number {n}",
            "slow": f"#slow {n}",
            "hours": f"what are your hours? ({n})",
            "orders": f"my orders please ({n})",
        }.get(kind, f"hello number {n}")

    def acknowledged(self, body: dict[str, Any]) -> None:
        """Note a message the company acknowledged, and the order it cancels, if it does
        (an order counted when its message was acknowledged, not when its text was chosen)."""
        text = body["message"]["text"]
        self.acked.append((body["message"]["id"], text))
        if text.startswith("cancel"):
            self.cancelled.append(text.split()[1])

    def message(self, text: str) -> dict[str, Any]:
        message_id = f"kc-{self.index}-{next(self.sequence)}"
        return {"message": {"id": message_id, "sender": "agent", "text": text}}

    def run(self) -> None:
        n = 1
        body = self.message(self.next_text(n))
        started = self.post("", body)
        assert started.status_code == 201, started.text
        self.conversation_id = started.json()["conversation_id"]
        self.acknowledged(body)
        self.reader = Reader(self)
        self.reader.start()
        self.wait_answered(body["message"]["id"])
        while not self.campaign.killing_done.is_set():
            n += 1
            body = self.message(self.next_text(n))
            answer = self.post(f"/{self.conversation_id}/messages", body)
            assert answer.status_code == 202, answer.text
            self.acknowledged(body)
            self.wait_answered(body["message"]["id"])

    def wait_answered(self, message_id: str) -> None:
        """Until a company message or an authorization event follows the message."""
        acknowledged = time.monotonic()
        deadline = acknowledged + self.campaign.answer_seconds
        seen = False
        while time.monotonic() < deadline:
            # A long-poll from the last event looked at: it answers as soon as one follows.
            page = self.read(
                wait=LONG_POLL_SECONDS, **({"cursor": self.cursor} if self.cursor else {})
            )
            for event in page["events"]:
                if event["type"] == "message" and event["message"]["id"] == message_id:
                    seen = True
                elif seen and (
                    event["type"] == "authorization"
                    or (event["type"] == "message" and event["message"]["role"] == "company")
                ):
                    self.cursor = event["id"]
                    self.longest_wait = max(self.longest_wait, time.monotonic() - acknowledged)
                    return
            if page["events"]:
                self.cursor = page["cursor"]
        self.unanswered_in_time.append(message_id)
        print(
            f"  {self.name}: {message_id} not answered within {self.campaign.answer_seconds:.0f} s",
            flush=True,
        )


class Reader(threading.Thread):
    """Follows the conversation across reconnections: SSE (even agents) or long-polls (odd)."""

    def __init__(self, agent: Agent) -> None:
        super().__init__(name=f"reader-{agent.index}", daemon=True)
        self.agent = agent
        self.sse = agent.index % 2 == 0
        self.seen: list[str] = []
        self.reconnections = 0

    @property
    def last(self) -> str | None:
        return self.seen[-1] if self.seen else None

    def run(self) -> None:
        while not self.agent.campaign.stop_readers.is_set():
            try:
                if self.sse:
                    self.stream()
                else:
                    page = self.agent.read(
                        wait=LONG_POLL_SECONDS, **({"cursor": self.last} if self.last else {})
                    )
                    self.seen += [event["id"] for event in page["events"]]
                    continue
            except (httpx.HTTPError, ValueError):
                pass
            self.reconnections += 1
            time.sleep(0.2)

    def stream(self) -> None:
        headers = {"Accept": "text/event-stream"}
        if self.last:
            headers["Last-Event-ID"] = self.last
        url = f"{self.agent.campaign.url()}{PATH}/{self.agent.conversation_id}/events"
        timeout = httpx.Timeout(30, connect=2)
        with self.agent.http.stream("GET", url, headers=headers, timeout=timeout) as response:
            if response.status_code != 200:
                return
            for line in response.iter_lines():
                if self.agent.campaign.stop_readers.is_set():
                    return
                if line.startswith("id: "):
                    self.seen.append(line[4:])


def _db(cluster: Cluster) -> psycopg.Connection[Any]:
    return psycopg.connect(cluster.env["DATABASE_URL"].replace("postgres://", "postgresql://"))


def seed_orders(cluster: Cluster, agents: list[Agent]) -> None:
    with _db(cluster) as conn:
        rows = [(order, a.account, "Kit", "processing") for a in agents for order in a.orders]
        with conn.cursor() as cursor:
            cursor.executemany(
                "INSERT INTO shop_order (id, account_id, item, status) VALUES (%s, %s, %s, %s)",
                rows,
            )


#: How long past the bound the campaign still waits for every conversation to be idle: a
#: conversation late past the bound is a violation of its own, and telling it from one that
#: is never answered (lost) needs the wait.
LATE_GRACE_SECONDS = 300.0


def settle(cluster: Cluster, campaign: Campaign) -> float:
    """Seconds from the last kill until no conversation is working (inf: not even
    ``LATE_GRACE_SECONDS`` past the bound)."""
    deadline = campaign.last_kill + campaign.bound_seconds + LATE_GRACE_SECONDS
    with _db(cluster) as conn:
        while True:
            conn.commit()
            working = conn.execute(
                "SELECT count(*) FROM poppy_django_conversation WHERE status = 'working'"
            ).fetchone()
            if working is not None and working[0] == 0:
                return time.monotonic() - campaign.last_kill
            if time.monotonic() > deadline:
                return float("inf")
            time.sleep(0.2)


def check(cluster: Cluster, campaign: Campaign, agents: list[Agent]) -> dict[str, Any]:
    violations: dict[str, list[Any]] = {
        "unanswered": [],
        "company_id_twice": [],
        "action_twice": [],
        "working_past_bound": [],
        "reader_mismatch": [],
    }
    with _db(cluster) as conn:
        for agent in agents:
            cid = agent.conversation_id
            answered_seq = conn.execute(
                "SELECT answered_seq FROM poppy_django_conversation WHERE id = %s", (cid,)
            ).fetchone()[0]
            log = conn.execute(
                "SELECT seq, type, role, message_id FROM poppy_django_event "
                "WHERE conversation_id = %s ORDER BY seq",
                (cid,),
            ).fetchall()
            for message_id, _ in agent.acked:
                at = next((seq for seq, _, role, mid in log if mid == message_id), None)
                told = at is not None and any(
                    seq > at and (type_ == "authorization" or role == "company")
                    for seq, type_, role, _ in log
                )
                if at is None or not told or answered_seq < at:
                    violations["unanswered"].append(message_id)
            # Every event the reader was sent is in the log, and every log event reached it.
            expected = [f"evt_{cid.removeprefix('cnv_')}_{seq}" for seq, *_ in log]
            assert agent.reader is not None
            if agent.reader.seen != expected:
                violations["reader_mismatch"].append(
                    {"conversation": cid, "seen": len(agent.reader.seen), "log": len(expected)}
                )
        twice = conn.execute(
            "SELECT conversation_id, message_id, count(*) FROM poppy_django_event "
            "WHERE role = 'company' GROUP BY conversation_id, message_id HAVING count(*) > 1"
        ).fetchall()
        violations["company_id_twice"] = [list(row) for row in twice]
        cancelled = {
            row[0]
            for row in conn.execute(
                "SELECT id FROM shop_order WHERE id LIKE 'K-%%' AND status = 'cancelled'"
            )
        }
        succeeded = [
            row[0]["order_id"]
            for row in conn.execute(
                "SELECT arguments FROM poppy_django_actionrecord "
                "WHERE tool = 'cancel_order' AND status = 'succeeded'"
            )
        ]
        not_succeeded = conn.execute(
            "SELECT arguments, status, error FROM poppy_django_actionrecord "
            "WHERE tool = 'cancel_order' AND status <> 'succeeded'"
        ).fetchall()
        replies = conn.execute(
            "SELECT count(*) FROM poppy_django_event WHERE role = 'company'"
        ).fetchone()[0]
        failed_turns = conn.execute(
            "SELECT count(*) FROM poppy_django_event WHERE role = 'company' "
            "AND payload->'message'->>'text' = %s",
            (FAILED_TURN,),
        ).fetchone()[0]
    asked = [order for agent in agents for order in agent.cancelled]
    if sorted(succeeded) != sorted(set(succeeded)) or set(succeeded) != cancelled:
        violations["action_twice"].append(
            {"succeeded": len(succeeded), "cancelled": len(cancelled)}
        )
    violations["action_twice"] += [
        list(row) for row in not_succeeded if "is cancelled" in (row[2] or "")
    ]
    return {
        "violations": violations,
        "messages_acked": sum(len(agent.acked) for agent in agents),
        "replies": replies,
        "failed_turn_replies": failed_turns,
        "cancels_asked": len(asked),
        "actions_succeeded": len(succeeded),
        # Each cancel_order action that did not succeed: its arguments, status and error.
        "actions_not_succeeded": [list(row) for row in not_succeeded],
        "orders_cancelled": len(cancelled),
        "unanswered_in_time_on_the_client": sum(len(a.unanswered_in_time) for a in agents),
        "reader_reconnections": sum(a.reader.reconnections for a in agents if a.reader),
    }


def table(result: dict[str, Any]) -> str:
    total = sum(len(v) for v in result["violations"].values())
    rows = [
        ("worker SIGKILLs", result["kills"]),
        ("web process SIGKILLs", result["web_kills"]),
        ("Redis restarts", result["redis_restarts"]),
        ("personal agents (each with a reader)", result["agents"]),
        ("messages acknowledged", result["messages_acked"]),
        ("company replies", result["replies"]),
        ("of which failed-turn messages", result["failed_turn_replies"]),
        (
            "cancels asked / succeeded / orders cancelled",
            "{} / {} / {}".format(
                result["cancels_asked"], result["actions_succeeded"], result["orders_cancelled"]
            ),
        ),
        ("all idle after the last kill (s)", f"{result['settled_seconds']:.1f}"),
        ("longest a message waited for its reply (s)", f"{result['longest_wait']:.1f}"),
        ("bound (LEASE + SWEEP + turn slack, s)", f"{result['bound_seconds']:.0f}"),
        ("duration (s)", f"{result['duration_seconds']:.0f}"),
    ]
    if "most_model_calls" in result:  # --llm
        rows += [
            ("LLM-shaped model calls", result["model_calls"]),
            ("most model calls in flight at once", result["most_model_calls"]),
        ]
    rows += [(f"violations: {name}", len(found)) for name, found in result["violations"].items()]
    rows += [
        (f"metrics: {name}", f"{value:g}") for name, value in result.get("metrics", {}).items()
    ]
    rows.append(("**violations**", f"**{total}**"))
    width = max(len(name) for name, _ in rows)
    lines = [f"| {'':<{width}} | value |", f"|{'-' * (width + 2)}|-------|"]
    lines += [f"| {name:<{width}} | {value} |" for name, value in rows]
    return "\n".join(lines)


def scraped(campaign: Campaign) -> dict[str, float]:
    """The campaign as a live web process's /metrics adds up every process's counts (a
    process killed within its last export interval took its last second's counts along)."""
    from prometheus_client.parser import text_string_to_metric_families

    time.sleep(2)  # the survivors' next export (OTEL_METRIC_EXPORT_INTERVAL=1000)
    with campaign.lock:
        url = next(iter(campaign.webs.values()))
    text = httpx.get(f"{url}/metrics", timeout=30).text
    totals: dict[str, float] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            key = sample.name
            if "outcome" in sample.labels and sample.name == "poppy_turns_total":
                key = f"poppy_turns_total{{outcome={sample.labels['outcome']}}}"
            totals[key] = totals.get(key, 0.0) + sample.value
    return {
        name: value
        for name, value in totals.items()
        if name.startswith(("poppy_turns_total", "poppy_leases_taken_up", "poppy_turns_in"))
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kills", type=int, default=200, help="worker SIGKILLs (default 200)")
    parser.add_argument("--agents", type=int, default=12)
    parser.add_argument("--pace", type=float, default=2.0, help="mean seconds between kills")
    parser.add_argument("--short", action="store_true", help="a handful of kills (make test)")
    parser.add_argument("--out", type=Path, default=ROOT / "var" / "bench" / "kill_campaign.json")
    parser.add_argument("--logs", type=Path, help="keep the processes' logs in this directory")
    parser.add_argument(
        "--llm",
        action="store_true",
        help="LLM-shaped turns: the workers' model is the local OpenAI-compatible endpoint "
        "(by default 1 s to the first token, 20 tokens at 10/s), so many turns are in flight "
        "per worker",
    )
    parser.add_argument("--llm-ttft", type=float, default=1.0, help="--llm: s to first token")
    parser.add_argument("--llm-tokens", type=int, default=20, help="--llm: tokens an answer")
    parser.add_argument("--llm-rate", type=float, default=10.0, help="--llm: tokens per second")
    parser.add_argument("--workers", type=int, default=3, help="Celery workers at any time")
    parser.add_argument("--web-every", type=int, default=25, help="a web SIGKILL every N kills")
    parser.add_argument(
        "--turns-in-flight",
        type=int,
        help='each worker\'s POPPY["TURNS_IN_FLIGHT"] (POPPY_TURNS_IN_FLIGHT; default: the '
        "example project's)",
    )
    parser.add_argument(
        "--turn-timeout", type=float, default=30.0, help="TURN_TIMEOUT_SECONDS (default 30)"
    )
    parser.add_argument(
        "--metrics",
        action="store_true",
        help="the SDK on (prometheus_multiprocess): the take-ups and turns as /metrics counts them",
    )
    args = parser.parse_args()
    kills, web_every = (args.kills, args.web_every) if not args.short else (6, 3)
    llm_pace = Pace(args.llm_ttft, args.llm_tokens, args.llm_rate)

    with tempfile.TemporaryDirectory(prefix="poppy-kill-") as tmp:
        logs = args.logs or Path(tmp)
        logs.mkdir(parents=True, exist_ok=True)
        cluster = Cluster(logs)
        cluster.env.update(
            {
                "POPPY_LEASE_SECONDS": str(LEASE_SECONDS),
                "POPPY_HEARTBEAT_SECONDS": "1",
                "POPPY_SWEEP_SECONDS": str(SWEEP_SECONDS),
                "POPPY_TURN_TIMEOUT_SECONDS": str(args.turn_timeout),
                "POPPY_LOG_LEVEL": "WARNING" if not args.logs else "INFO",
            }
        )
        if args.turns_in_flight is not None:
            cluster.env["POPPY_TURNS_IN_FLIGHT"] = str(args.turns_in_flight)
        if args.metrics:
            cluster.env.update(
                OTEL_METRICS_EXPORTER="prometheus_multiprocess",
                OTEL_METRIC_EXPORT_INTERVAL="1000",
                PROMETHEUS_MULTIPROC_DIR=str(logs / "metrics"),
            )
        cluster.create()
        llm = (
            cluster.llm(ttft=llm_pace.ttft, tokens=llm_pace.tokens, rate=llm_pace.rate)
            if args.llm
            else None
        )
        campaign = Campaign(
            cluster,
            kills=kills,
            web_every=web_every,
            pace=args.pace,
            workers=args.workers,
            llm=llm,
            llm_pace=llm_pace,
        )
        try:
            signal.signal(signal.SIGINT, campaign.wind_down)
            signal.signal(signal.SIGTERM, campaign.wind_down)
            campaign.start()
            agents = [Agent(index, campaign) for index in range(1, args.agents + 1)]
            seed_orders(cluster, agents)
            began = time.monotonic()
            for agent in agents:
                agent.start()
            print(f"kill campaign: {kills} kills, {len(agents)} agents", flush=True)
            campaign.killer()
            for agent in agents:
                agent.join(timeout=campaign.answer_seconds + 60)
            settled = settle(cluster, campaign)
            # Let every reader catch up with its conversation's log, then stop them.
            deadline = time.monotonic() + 60
            with _db(cluster) as conn:
                for agent in agents:
                    last = conn.execute(
                        "SELECT last_seq FROM poppy_django_conversation WHERE id = %s",
                        (agent.conversation_id,),
                    ).fetchone()[0]
                    want = f"evt_{(agent.conversation_id or '').removeprefix('cnv_')}_{last}"
                    while agent.reader and agent.reader.last != want:
                        if time.monotonic() > deadline:
                            break
                        time.sleep(0.2)
            campaign.stop_readers.set()
            result = check(cluster, campaign, agents)
            if args.metrics:
                result["metrics"] = scraped(campaign)
            if llm is not None:
                served = httpx.get(f"{llm}/stats").json()
                result.update(model_calls=served["requests"], most_model_calls=served["max_open"])
        finally:
            campaign.stop_readers.set()
            with contextlib.suppress(Exception):
                cluster.destroy()
    result.update(
        kills=campaign.kills,
        web_kills=campaign.web_kills,
        redis_restarts=campaign.redis_restarts,
        agents=len(agents),
        settled_seconds=settled,
        longest_wait=max(agent.longest_wait for agent in agents),
        duration_seconds=time.monotonic() - began,
        bound_seconds=campaign.bound_seconds,
    )
    if settled > campaign.bound_seconds:
        result["violations"]["working_past_bound"].append(settled)
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(result, indent=2, default=str))
    print(table(result))
    print(f"written: {args.out}")
    return 1 if any(result["violations"].values()) else 0


if __name__ == "__main__":
    sys.exit(main())
