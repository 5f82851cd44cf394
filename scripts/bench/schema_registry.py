#!/usr/bin/env python3
"""Registrations/s and lookups/s of a schema registry (Sluice's built-in one, or any with
Confluent's REST API), over keep-alive HTTP connections, N threads.

Usage: schema_registry.py URL [--count 2000] [--threads 4]
"""
import argparse
import http.client
import json
import threading
import time
import urllib.parse
import uuid


def connection(url):
    u = urllib.parse.urlparse(url)
    return http.client.HTTPConnection(u.hostname, u.port or 80, timeout=60)


def call(conn, method, path, body=None):
    headers = {"Content-Type": "application/vnd.schemaregistry.v1+json"}
    conn.request(method, path, body=None if body is None else json.dumps(body), headers=headers)
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        raise RuntimeError(f"{method} {path}: {resp.status} {data[:200]!r}")
    return json.loads(data)


def schema(run, i):
    return json.dumps({"type": "record", "name": f"R{i}", "namespace": f"bench{run}",
                       "fields": [{"name": "a", "type": "long"}, {"name": "b", "type": "string"}]})


def timed(threads, count, work):
    per = count // threads
    results = [None] * threads

    def run(t):
        results[t] = work(t, range(t * per, (t + 1) * per))

    ts = [threading.Thread(target=run, args=(t,)) for t in range(threads)]
    start = time.perf_counter()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    elapsed = time.perf_counter() - start
    return per * threads / elapsed, results


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("--count", type=int, default=2000)
    ap.add_argument("--threads", type=int, default=4)
    a = ap.parse_args()
    run = uuid.uuid4().hex[:8]
    ids = {}

    def register(t, rng):
        conn = connection(a.url)
        for i in rng:
            ids[i] = call(conn, "POST", f"/subjects/bench-{run}-{i}/versions",
                          {"schema": schema(run, i)})["id"]

    def by_id(t, rng):
        conn = connection(a.url)
        for i in rng:
            call(conn, "GET", f"/schemas/ids/{ids[i]}")

    def lookup(t, rng):
        conn = connection(a.url)
        for i in rng:
            call(conn, "POST", f"/subjects/bench-{run}-{i}", {"schema": schema(run, i)})

    reg_rate, _ = timed(a.threads, a.count, register)
    assert len(set(ids.values())) == len(ids), "duplicate ids"
    id_rate, _ = timed(a.threads, a.count, by_id)
    lookup_rate, _ = timed(a.threads, a.count, lookup)
    print(f"registrations/s {reg_rate:.0f}  GET /schemas/ids/{{id}}/s {id_rate:.0f}  "
          f"POST /subjects/{{s}} lookups/s {lookup_rate:.0f}  "
          f"({a.count} each, {a.threads} threads)")


if __name__ == "__main__":
    main()
