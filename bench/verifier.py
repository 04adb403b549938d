"""What DPoP verification costs: the verifier per request, and the endpoint with and without it.

    .venv/bin/python bench/verifier.py [--n 2000] [--requests 1000]

1. The verifier alone (``DPoPVerifier.__call__``: proof + token signatures, claims, replay
   cache in LocMemCache) per token algorithm, with the verified-token cache (one token, its
   signature checked once) and without it (``VERIFIED_TOKEN_CACHE_SIZE: 0``): median and p95
   µs over ``--n`` calls. Proofs are signed beforehand, so only the server's work is timed.
2. The endpoint: ``GET {endpoint}/{id}/events`` (a JSON read, no wait) through Django's full
   stack in this process (test client, SQLite in a temporary directory), with the fake
   verifier (no cryptography) and with the DPoP verifier: requests per second, one thread.

Results are published in docs/benchmarks.md by hand, with the machine line printed first.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))


def machine() -> str:
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"nproc={os.cpu_count()} cpu={model!r} python={platform.python_version()}"


def setup_django(var_dir: str) -> None:
    os.environ["DJANGO_SETTINGS_MODULE"] = "example_project.settings"
    os.environ["POPPY_VAR_DIR"] = var_dir
    os.environ.pop("DATABASE_URL", None)
    os.environ.pop("REDIS_URL", None)
    os.environ["POPPY_LOG_LEVEL"] = "WARNING"
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def bench_verifier(n: int) -> None:
    from django.test import override_settings

    from poppy_django.client import DPoPKey
    from poppy_django.verifier import dpop
    from tests.auth.support import BASE_URL, ENDPOINT_URL, ISSUER, Issuer

    print(f"\n1. verifier alone, n={n} (median / p95 µs per request)")
    for alg, cache in [(alg, cache) for alg in ("ES256", "RS256", "EdDSA") for cache in (1024, 0)]:
        issuer = Issuer(alg=alg)
        poppy = {
            "AUTHENTICATE": "poppy_django.verifier.dpop.verify",
            "ISSUER": ISSUER,
            "BASE_URL": BASE_URL,
            "TOKENS": {"JWKS": issuer.jwks, "VERIFIED_TOKEN_CACHE_SIZE": cache},
        }
        with override_settings(POPPY=poppy):
            verify = dpop.build_verifier()
            key = DPoPKey()
            token = issuer.token(jkt=key.thumbprint, now=time.time(), ttl=3600)
            requests = [
                {
                    "method": "POST",
                    "url": ENDPOINT_URL,
                    "headers": {
                        "authorization": f"DPoP {token}",
                        "dpop": key.proof("POST", ENDPOINT_URL, access_token=token),
                    },
                }
                for _ in range(n)
            ]
            timings = []
            for info in requests:
                start = time.perf_counter_ns()
                verify(info)  # type: ignore[arg-type]
                timings.append((time.perf_counter_ns() - start) / 1000)
        print(
            f"   token {alg:5} + proof ES256, token cache {'on ' if cache else 'off'}:"
            f" median {statistics.median(timings):7.1f} µs"
            f"   p95 {percentile(timings, 0.95):7.1f} µs"
        )


def bench_endpoint(requests: int) -> None:
    from django.conf import settings
    from django.test import Client, override_settings

    from poppy_django.authority.tokens import mint_development_token
    from poppy_django.client import DPoPKey
    from poppy_django.engine.executors import ThreadExecutor
    from poppy_django.verifier import dpop
    from poppy_django.verifier.fake import fake_authorization

    base = "http://testserver"
    path = "/poppy/conversations"
    print(f"\n2. endpoint GET .../events (JSON read), {requests} requests, one thread, in-process")
    results: dict[str, float] = {}
    for name in ("fake verifier", "DPoP verifier"):
        poppy = {**settings.POPPY, "BASE_URL": base, "ISSUER": None}
        if name == "fake verifier":
            poppy["AUTHENTICATE"] = "poppy_django.verifier.fake.verify"
        else:
            poppy["AUTHENTICATE"] = "poppy_django.verifier.dpop.verify"
        with override_settings(POPPY=poppy):
            dpop.reset()
            client = Client()
            key = DPoPKey()
            token = mint_development_token(user="bench", jkt=key.thumbprint, ttl=3600)

            def headers(method: str, url: str, token: str = token, key: DPoPKey = key) -> Any:
                if name == "fake verifier":
                    return {"HTTP_AUTHORIZATION": fake_authorization(user_id="bench")}
                return {
                    "HTTP_AUTHORIZATION": f"DPoP {token}",
                    "HTTP_DPOP": key.proof(method, base + url, access_token=token),
                }

            body = json.dumps({"message": {"id": "bench-1", "sender": "agent", "text": "hi"}})
            started = client.post(
                path, data=body, content_type="application/json", **headers("POST", path)
            )
            assert started.status_code == 201, started.content
            ThreadExecutor.shutdown(wait=True)
            events_path = f"{path}/{started.json()['conversation_id']}/events"
            prepared = [headers("GET", events_path) for _ in range(requests)]
            start = time.perf_counter()
            for extra in prepared:
                response = client.get(events_path, **extra)
                assert response.status_code == 200, response.content
            elapsed = time.perf_counter() - start
            results[name] = requests / elapsed
            each = elapsed / requests * 1e6
            print(f"   {name:14}: {results[name]:7.0f} req/s ({each:6.0f} µs each)")
    slowdown = results["fake verifier"] / results["DPoP verifier"]
    print(f"   verification costs x{slowdown:.2f} on this route")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, default=2000)
    parser.add_argument("--requests", type=int, default=1000)
    args = parser.parse_args()
    print(machine())
    with tempfile.TemporaryDirectory() as var_dir:
        setup_django(var_dir)
        bench_verifier(args.n)
        bench_endpoint(args.requests)


if __name__ == "__main__":
    main()
