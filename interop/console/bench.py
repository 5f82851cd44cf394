#!/usr/bin/env python3
"""How fast the web console's pages load on a cluster with many partitions.

    bench.py <console-url> <bootstrap> [topics] [partitions-per-topic] [runs]

Creates <topics> topics of <partitions-per-topic> partitions (default 200 x 50 = 10,000
partitions; existing ones are kept), writes a record to each partition, then loads the
topic list (first page and a search), a topic's page and the overview <runs> times each
(default 5): once over HTTP (the node rendering the page) and once in headless Chromium
(navigation until the load event). Prints every run and the median.
"""
import os
import statistics
import sys
import tempfile
import time
import urllib.request

from confluent_kafka import Producer
from confluent_kafka.admin import AdminClient, NewTopic
from selenium import webdriver
from selenium.webdriver.chrome.service import Service


def setup(bootstrap, topics, partitions):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    existing = set(admin.list_topics(timeout=30).topics)
    wanted = [f"bench-{i:04d}" for i in range(topics)]
    new = [NewTopic(t, partitions, 1) for t in wanted if t not in existing]
    for start in range(0, len(new), 50):
        for f in admin.create_topics(new[start:start + 50], operation_timeout=60).values():
            f.result(120)
    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": 20})
    for t in wanted:
        for part in range(partitions):
            p.produce(t, value=b"x" * 100, partition=part)
        p.poll(0)
    p.flush(120)
    return wanted


def http_ms(url):
    start = time.perf_counter()
    with urllib.request.urlopen(url, timeout=120) as r:
        body = r.read()
        assert r.status == 200, r.status
    return (time.perf_counter() - start) * 1000, len(body)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        sys.exit(2)
    base, bootstrap = sys.argv[1].rstrip("/"), sys.argv[2]
    topics = int(sys.argv[3]) if len(sys.argv) > 3 else 200
    partitions = int(sys.argv[4]) if len(sys.argv) > 4 else 50
    runs = int(sys.argv[5]) if len(sys.argv) > 5 else 5
    t0 = time.time()
    names = setup(bootstrap, topics, partitions)
    print(f"{topics} topics x {partitions} partitions = {topics * partitions} partitions "
          f"(setup {time.time() - t0:.0f} s)")
    pages = [("topic list, page 1 (50 topics)", "/topics"),
             ("topic list, search 'bench-01'", "/topics?q=bench-01"),
             (f"topic page ({partitions} partitions)", f"/topics/{names[len(names) // 2]}"),
             ("overview", "/")]
    opts = webdriver.ChromeOptions()
    opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
    for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
              "--disable-background-networking", "--disable-component-update", "--no-first-run",
              f"--user-data-dir={tempfile.mkdtemp()}"]:
        opts.add_argument(a)
    d = webdriver.Chrome(service=Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver")),
                         options=opts)
    try:
        d.get(base + "/")
        for label, path in pages:
            server = [http_ms(base + path) for _ in range(runs)]
            browser = []
            for _ in range(runs):
                d.get(base + path)
                browser.append(d.execute_script(
                    "const n = performance.getEntriesByType('navigation')[0];"
                    "return n.loadEventEnd - n.startTime;"))
            ms = [s[0] for s in server]
            print(f"{label}: {server[0][1] // 1024} KiB; HTTP ms "
                  f"{' '.join(f'{x:.0f}' for x in ms)} (median {statistics.median(ms):.0f}); "
                  f"browser load ms {' '.join(f'{x:.0f}' for x in browser)} "
                  f"(median {statistics.median(browser):.0f})")
    finally:
        d.quit()


if __name__ == "__main__":
    main()
