"""A bounded load test of the real server: 200 requests at once on 127.0.0.1, no failure, no process
left behind (the server fixture checks that at the end of the session)."""

from __future__ import annotations

import asyncio
import time

N = 200
TIME_LIMIT_S = 60.0
BODY = {"model": "llama3-70b", "system": "hgx-h100", "gpus": 64, "tp": 4, "pp": 8, "global_batch": 256}


def test_200_concurrent_requests(server):
    import httpx

    async def one(c: httpx.AsyncClient, i: int) -> tuple[int, float]:
        t0 = time.perf_counter()
        if i % 4 == 0:
            r = await c.post("/api/estimate", json=BODY)
        elif i % 4 == 1:
            r = await c.get("/plan")
        elif i % 4 == 2:
            r = await c.post("/api/estimate", json={**BODY, "tp": 3})  # a bad input: must answer 400 quickly
            return (200 if r.status_code == 400 else r.status_code), time.perf_counter() - t0
        else:
            r = await c.get("/healthz")
        return r.status_code, time.perf_counter() - t0

    async def main() -> list[tuple[int, float]]:
        limits = httpx.Limits(max_connections=N, max_keepalive_connections=N)
        async with httpx.AsyncClient(base_url=server["url"], limits=limits, timeout=TIME_LIMIT_S) as c:
            return await asyncio.wait_for(asyncio.gather(*(one(c, i) for i in range(N))), TIME_LIMIT_S)

    from concurrent.futures import ThreadPoolExecutor

    t0 = time.perf_counter()
    with ThreadPoolExecutor(1) as ex:  # its own event loop (Playwright's sync API may hold this thread's)
        res = ex.submit(lambda: asyncio.run(main())).result()
    wall = time.perf_counter() - t0
    codes = [c for c, _ in res]
    lat = sorted(t for _, t in res)
    p50, p99 = lat[len(lat) // 2], lat[min(len(lat) - 1, int(0.99 * len(lat)))]
    print(f"\nload: {N} concurrent requests in {wall:.2f} s, p50 {1e3 * p50:.0f} ms, p99 {1e3 * p99:.0f} ms, "
          f"errors {sum(c != 200 for c in codes)}")
    assert codes == [200] * N
    assert server["proc"].poll() is None  # still serving
