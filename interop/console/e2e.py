#!/usr/bin/env python3
"""End-to-end tests of the Sluice web console in headless Chromium (Selenium with Debian's
chromium and chromium-driver), with confluent-kafka as the real client beside it.

    e2e.py <scenario> <console-url> <bootstrap> <screenshot-dir> [<schema-registry-url>]

Scenarios:
  flow      create a topic, produce from the page, browse it, start a consumer group from a
            real client, see its lag, stop it, preview and reset its offsets, see the lag change
  readonly  admin.http.console.read.only=true: no form that changes anything, POSTs refused
  sasl      a SASL cluster: sign-in (wrong password refused), ACLs filter what a user sees
            and does (topics, groups, the schema registry's subjects), sign-out, CSRF;
            <bootstrap> is the PLAINTEXT listener for the setup

Each step saves a screenshot (NN-name.png) in <screenshot-dir>. Exit 0 when every check
holds; a failed check prints what the page showed and exits 1.
"""
import os
import re
import sys
import tempfile
import time

from confluent_kafka import Consumer, Producer, TopicPartition
from confluent_kafka.admin import (AclBinding, AclOperation, AclPermissionType, AdminClient,
                                   NewTopic, ResourcePatternType, ResourceType)
from selenium import webdriver
from selenium.common.exceptions import (NoSuchElementException, StaleElementReferenceException,
                                        TimeoutException)
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.common.keys import Keys
from selenium.webdriver.support.ui import Select, WebDriverWait

WAIT = 30


class Browser:
    def __init__(self, base, shots):
        self.base = base.rstrip("/")
        self.shots = shots
        self.n = 0
        os.makedirs(shots, exist_ok=True)
        opts = webdriver.ChromeOptions()
        opts.binary_location = os.environ.get("CHROMIUM", "/usr/bin/chromium")
        self.profile = tempfile.mkdtemp(prefix="sluice-console-")
        for a in ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                  "--disable-quic", "--no-first-run", "--disable-background-networking",
                  "--disable-component-update", "--disable-sync", "--window-size=1366,900",
                  f"--user-data-dir={self.profile}"]:
            opts.add_argument(a)
        service = Service(os.environ.get("CHROMEDRIVER", "/usr/bin/chromedriver"))
        self.d = webdriver.Chrome(service=service, options=opts)
        self.d.set_page_load_timeout(WAIT)

    def open(self, path):
        self.d.get(self.base + path)

    def shot(self, name):
        self.n += 1
        self.d.save_screenshot(os.path.join(self.shots, f"{self.n:02d}-{name}.png"))

    def h1(self):
        return self.d.find_element(By.TAG_NAME, "h1").text

    def text(self):
        # Read in one script: between finding <body> and reading its text, a page being
        # replaced makes chromedriver fail with "Node with given id does not belong to the
        # document" (not a stale-element error the waits could ignore).
        return self.d.execute_script("return document.body ? document.body.innerText : ''")

    def wait(self, what, cond):
        try:
            # A page replaced while being read (a form's answer arriving) is read again.
            WebDriverWait(self.d, WAIT, ignored_exceptions=(
                NoSuchElementException, StaleElementReferenceException)).until(lambda d: cond())
        except TimeoutException:
            self.shot("FAILED")
            fail(f"{what}: not seen within {WAIT}s. The page ({self.d.current_url}) shows:\n{self.text()}")

    def wait_h1(self, title):
        self.wait(f"page '{title}'", lambda: self.h1() == title)

    def wait_text(self, text):
        self.wait(f"text '{text}'", lambda: text in self.text())

    def field(self, name, form=None):
        scope = self.form(form) if form else self.d
        return scope.find_element(By.NAME, name)

    def fill(self, name, value, form=None):
        f = self.field(name, form)
        f.clear()
        f.send_keys(value)

    def choose(self, name, value, form=None):
        Select(self.field(name, form)).select_by_value(value)

    def form(self, action):
        return self.d.find_element(By.CSS_SELECTOR, f"form[method='post'][action='{action}']")

    def press(self, label, form=None):
        scope = self.form(form) if form else self.d
        scope.find_element(By.XPATH, f".//button[normalize-space()='{label}']").click()

    def post(self, path, body):
        """A POST from the page's own origin (fetch), as a forged or scripted form would be."""
        return self.d.execute_async_script(
            "const done = arguments[2];"
            "fetch(arguments[0], {method: 'POST', body: arguments[1],"
            " headers: {'Content-Type': 'application/x-www-form-urlencoded'}})"
            ".then(r => r.text().then(t => done([r.status, t])));",
            path, body)

    def close(self):
        self.d.quit()


REGISTRY = None


def fail(msg):
    print(f"FAILED: {msg}", flush=True)
    sys.exit(1)


def check(cond, msg):
    if not cond:
        fail(msg)


def sign_in(b, user, password, mechanism="PLAIN", enter=False):
    """Fill the sign-in form and send it (with Enter in the password field, or the button)."""
    b.fill("username", user)
    b.fill("password", password)
    b.choose("mechanism", mechanism)
    if enter:
        b.field("password").send_keys(Keys.ENTER)
    else:
        b.press("Sign in")


def sign_out(b):
    b.press("Sign out")
    b.wait_h1("Sign in")


def total_lag(b):
    return int(b.d.find_element(By.ID, "total-lag").text.replace(",", ""))


def wait_lag(b, expected, what):
    """Await the group page showing `expected` total lag. A form's answer replaces the page
    while it is read, and the page before may carry the same message (two resets in a row),
    so the new value is awaited rather than read once."""
    b.wait(f"lag {expected} {what}", lambda: total_lag(b) == expected)


def flow(b, bootstrap):
    topic = "console-e2e"
    b.open("/")
    b.wait_h1("Overview")
    check("alive" in b.text(), "the overview lists a live broker")
    b.shot("overview")

    # Create a topic, with the keyboard only: type, then Enter submits the form.
    b.open("/topics")
    b.wait_h1("Topics")
    b.fill("name", topic, "/topics")
    b.fill("partitions", "3", "/topics")
    b.fill("configs", "retention.ms=86400000", "/topics")
    b.field("name", "/topics").send_keys(Keys.ENTER)
    b.wait_h1(f"Topic {topic}")
    b.wait_text(f"Topic {topic} created.")
    check("retention.ms" in b.text() and "topic override" in b.text(),
          "the topic's override is listed with its source")
    b.shot("topic-created")

    # A config Kafka refuses: the broker's message is shown beside the form.
    b.fill("key", "retention.ms", f"/topics/{topic}/configs")
    b.fill("value", "soon", f"/topics/{topic}/configs")
    b.press("Set", f"/topics/{topic}/configs")
    b.wait(f"the config error", lambda: b.d.find_elements(By.ID, "config-error"))
    err = b.d.find_element(By.ID, "config-error").text
    check("InvalidConfig" in err or "retention.ms" in err, f"Kafka's validation error is shown: {err}")
    b.shot("config-refused")

    # Produce from the page.
    for i in range(5):
        b.choose("partition", "0", f"/topics/{topic}/produce")
        b.fill("key", f"page-key-{i}", f"/topics/{topic}/produce")
        b.fill("value", '{"from": "console", "n": %d}' % i, f"/topics/{topic}/produce")
        b.fill("headers", "trace: t-%d" % i, f"/topics/{topic}/produce")
        b.press("Produce", f"/topics/{topic}/produce")
        b.wait_text(f"Produced to partition 0 at offset {i}.")
    b.shot("produced")

    # And from a real client: 100 more records, spread over the partitions.
    p = Producer({"bootstrap.servers": bootstrap})
    for i in range(100):
        p.produce(topic, key=f"k{i}", value=f"bulk value {i} " + "x" * (1500 if i == 7 else 0))
    check(p.flush(30) == 0, "the producer delivered every record")

    # Browse: partition 0, newest first, as JSON.
    b.open(f"/topics/{topic}/messages?partition=0&from=earliest&order=oldest&format=json&limit=50")
    b.wait_h1(f"Messages of {topic}")
    body = b.text()
    check('"from": "console"' in body and "page-key-0" in body and "trace" in body and "t-0" in body,
          "the page's records are shown with key, JSON value and header")
    b.shot("browse-json")
    # From a time (UTC, as the form writes it): an hour ago is before every record.
    hour_ago = time.strftime("%Y-%m-%dT%H:%M", time.gmtime(time.time() - 3600))
    b.open(f"/topics/{topic}/messages?partition=0&from=timestamp&timestamp={hour_ago}&order=oldest&limit=1")
    b.wait_text("page-key-0")
    check("page-key-1" not in b.text(), "one record per page from the time")
    # A long value is cut, the rest behind "Show all".
    for part in range(3):
        b.open(f"/topics/{topic}/messages?partition={part}&from=earliest&limit=200&filter=bulk+value+7+")
        if "Show all" in b.text():
            break
    long_value = len("bulk value 7 ") + 1500
    b.wait_text(f"Show all ({long_value:,} bytes)")
    b.d.find_element(By.XPATH, "//summary[starts-with(normalize-space(), 'Show all')]").click()
    b.shot("show-all")
    b.open(f"/topics/{topic}/messages?partition=0&filter=page-key-3")
    b.wait_text("1 matching")
    check("page-key-3" in b.text() and "page-key-2" not in b.text(), "the filter keeps the match only")
    ends = {}
    for part in range(3):
        b.open(f"/topics/{topic}/messages?partition={part}&from=latest&format=hex")
        m = re.search(r"holds offsets (\d+) to ([\d,]+)", b.text())
        check(m, "the partition's offsets are shown")
        ends[part] = int(m.group(2).replace(",", "")) + 1
    check(sum(ends.values()) == 105, f"105 records in all: {ends}")
    b.shot("browse-hex")

    # A consumer group from a real client: it reads, commits partition 0 at 2 and stays.
    group = "console-e2e-group"
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": group,
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe([topic])
    deadline = time.time() + WAIT
    got = 0
    while got < 10 and time.time() < deadline:
        m = c.poll(1.0)
        if m is not None and m.error() is None:
            got += 1
    check(got >= 10, "the consumer reads")
    c.commit(offsets=[TopicPartition(topic, 0, 2), TopicPartition(topic, 1, 0),
                      TopicPartition(topic, 2, 0)], asynchronous=False)
    expected = sum(ends.values()) - 2
    b.open("/groups")
    b.wait_h1("Consumer groups")
    b.wait_text(group)
    b.shot("groups")
    b.open(f"/groups/{group}")
    b.wait_h1(f"Group {group}")
    check("Stable" in b.text(), "the group is Stable while its consumer runs")
    check(total_lag(b) == expected, f"lag {total_lag(b)} == {expected}")
    check("only while the group has no members" in b.text(), "no reset while members are in")
    b.shot("group-with-lag")

    # Stop it; reset: preview first (nothing changes), then execute.
    c.close()
    b.open(f"/groups/{group}")
    b.wait(f"the reset form", lambda: b.d.find_elements(By.CSS_SELECTOR, f"form[action='/groups/{group}/reset']"))
    check("Empty" in b.text(), "the group is Empty once its consumer left")
    b.choose("topic", topic, f"/groups/{group}/reset")
    b.d.find_element(By.CSS_SELECTOR, "input[name='to'][value='latest']").click()
    b.press("Preview", f"/groups/{group}/reset")
    b.wait("the preview", lambda: b.d.find_elements(By.ID, "preview"))
    rows = b.d.find_elements(By.CSS_SELECTOR, "#preview tbody tr")
    check(len(rows) == 3, "one preview row per partition")
    check(total_lag(b) == expected, "a preview changes nothing")
    b.shot("reset-preview")
    b.choose("topic", topic, f"/groups/{group}/reset")
    b.d.find_element(By.CSS_SELECTOR, "input[name='to'][value='latest']").click()
    b.press("Reset offsets", f"/groups/{group}/reset")
    b.wait_text("Offsets of 3 partition(s) reset.")
    wait_lag(b, 0, "after a reset to latest")
    b.shot("reset-latest")
    b.choose("topic", topic, f"/groups/{group}/reset")
    b.d.find_element(By.CSS_SELECTOR, "input[name='to'][value='offset']").click()
    b.fill("value", "1", f"/groups/{group}/reset")
    b.press("Reset offsets", f"/groups/{group}/reset")
    wait_lag(b, sum(ends.values()) - 3, "after a reset to offset 1")
    b.wait_text("Offsets of 3 partition(s) reset.")
    b.shot("reset-offset")

    # The overview's disk use and the topic list's counts.
    b.open("/topics")
    row = b.d.find_element(By.XPATH, f"//tr[td/a[normalize-space()='{topic}']]").text
    check("105" in row, f"the list counts 105 records: {row}")

    # Delete: a wrong confirmation is refused, the right one deletes.
    b.open(f"/topics/{topic}")
    b.fill("confirm", "not-it", f"/topics/{topic}/delete")
    b.press("Delete topic", f"/topics/{topic}/delete")
    b.wait_text("Not deleted")
    b.fill("confirm", topic, f"/topics/{topic}/delete")
    b.press("Delete topic", f"/topics/{topic}/delete")
    b.wait_text(f"Topic {topic} deleted.")
    b.shot("deleted")

    # By now the node has sampled its traffic at least twice: the overview charts it.
    def charted():
        b.open("/")
        return b.d.find_elements(By.CSS_SELECTOR, "figure.chart svg polyline.in")
    b.wait("the traffic chart", charted)
    check("peak" in b.text(), "the chart says its peak")
    b.shot("overview-traffic")


def readonly(b, bootstrap):
    admin = AdminClient({"bootstrap.servers": bootstrap})
    admin.create_topics([NewTopic("ro-topic", 2, 1)])["ro-topic"].result(30)
    b.open("/topics")
    b.wait_h1("Topics")
    check("read-only" in b.text(), "the header says read-only")
    check(not b.d.find_elements(By.TAG_NAME, "textarea") and "Create a topic" not in b.text(),
          "no create form")
    b.wait_text("ro-topic")
    b.shot("topics-read-only")
    b.open("/topics/ro-topic")
    b.wait_h1("Topic ro-topic")
    check(not b.d.find_elements(By.CSS_SELECTOR, "form[method='post']"),
          "no form that changes anything on a topic's page")
    b.shot("topic-read-only")
    for path, body in [("/topics", "name=x&partitions=1"), ("/topics/ro-topic/delete", "confirm=ro-topic"),
                       ("/topics/ro-topic/produce", "value=v")]:
        status, text = b.post(path, body)
        check(status == 403 and "read-only" in text, f"POST {path} refused: {status}")
    topics = admin.list_topics(timeout=10).topics
    check("x" not in topics and "ro-topic" in topics, "nothing changed")


def sasl(b, bootstrap):
    # Schemas of two topics, registered as admin (HTTP basic with a SASL user).
    from confluent_kafka.schema_registry import Schema, SchemaRegistryClient
    registry = SchemaRegistryClient({"url": REGISTRY, "basic.auth.user.info": "admin:admin-pw"})
    for subject, name in [("alice-orders-value", "Order"), ("bob-secret-value", "Secret")]:
        registry.register_schema(subject, Schema(
            '{"type":"record","name":"%s","fields":[{"name":"id","type":"long"}]}' % name, "AVRO"))
    admin = AdminClient({"bootstrap.servers": bootstrap})
    for f in admin.create_topics([NewTopic("alice-orders", 1, 1), NewTopic("bob-secret", 1, 1)]).values():
        f.result(30)
    acl = AclBinding(ResourceType.TOPIC, "alice-", ResourcePatternType.PREFIXED, "User:alice", "*",
                     AclOperation.ALL, AclPermissionType.ALLOW)
    for f in admin.create_acls([acl]).values():
        f.result(30)

    # Offsets of a group alice may not describe (committed by the PLAINTEXT super user).
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "bob-group"})
    c.commit(offsets=[TopicPartition("bob-secret", 0, 0)], asynchronous=False)
    c.close()

    b.open("/")
    b.wait_h1("Sign in")
    b.shot("sign-in")
    sign_in(b, "alice", "wrong")
    b.wait_text("Sign-in failed")
    b.shot("sign-in-refused")
    sign_in(b, "alice", "alice-pw", enter=True)
    b.wait_h1("Overview")
    check("User:alice" in b.text(), "the header names the user")

    b.open("/topics")
    b.wait_h1("Topics")
    b.wait_text("alice-orders")
    check("bob-secret" not in b.text(), "a topic alice may not describe is not listed")
    b.shot("alice-topics")
    b.open("/groups")
    b.wait_h1("Consumer groups")
    check("bob-group" not in b.text(), "a group alice may not describe is not listed")
    # The schema registry's page: alice's ACLs decide which subjects she sees.
    b.open("/schemas")
    b.wait_h1("Schemas")
    b.wait_text("alice-orders-value")
    check("bob-secret-value" not in b.text(), "a subject of a topic alice may not describe is not listed")
    b.d.find_element(By.LINK_TEXT, "alice-orders-value").click()
    b.wait_h1("Subject alice-orders-value")
    check('"name": "Order"' in b.text() and "BACKWARD" in b.text(), f"the schema is shown: {b.text()}")
    b.shot("alice-schemas")
    b.open("/topics/bob-secret")
    check("may not describe" in b.text() or "not allowed" in b.text(),
          f"bob-secret's page is refused: {b.text()}")
    b.open("/topics")
    b.fill("name", "carol-new", "/topics")
    b.press("Create topic", "/topics")
    b.wait_text("not allowed")
    b.shot("alice-refused")
    # A form without the session's token (a forged cross-site form) is refused.
    status, text = b.post("/topics", "name=alice-forged&partitions=1")
    check(status == 403 and "came from another site" in text, f"a POST without the token is refused: {status}")
    b.open("/topics")
    sign_out(b)
    b.open("/topics")
    b.wait_h1("Sign in")

    sign_in(b, "admin", "admin-pw")
    b.wait_h1("Overview")
    b.open("/topics")
    b.wait_text("bob-secret")
    check("alice-orders" in b.text(), "admin sees every topic")
    b.open("/groups")
    b.wait_text("bob-group")
    b.shot("admin-topics")
    b.open("/schemas")
    b.wait_text("bob-secret-value")
    check("alice-orders-value" in b.text(), "admin sees every subject")
    b.open("/security")
    b.wait_h1("Security")
    check("User:alice" in b.text() and "PREFIXED" in b.text(), "admin sees alice's ACL")
    check("alice-pw" not in b.d.page_source and "admin-pw" not in b.d.page_source, "no secret rendered")

    # Every security form: a SCRAM user, a quota, an ACL, each added and removed.
    b.fill("user", "carol", "/security/users")
    b.fill("password", "carol-secret", "/security/users")
    b.choose("mechanism", "SCRAM-SHA-512", "/security/users")
    b.press("Save user", "/security/users")
    b.wait_text("User carol saved.")
    check("SCRAM-SHA-512" in b.text() and "carol-secret" not in b.d.page_source, "carol listed, no password")
    b.fill("user", "alice", "/security/quotas")
    b.choose("key", "producer_byte_rate", "/security/quotas")
    b.fill("value", "1048576", "/security/quotas")
    b.press("Set quota", "/security/quotas")
    b.wait_text("producer_byte_rate of user-principal 'alice' set to 1048576.")
    b.fill("principal", "User:carol", "/security/acls")
    b.choose("resource_type", "3", "/security/acls")
    b.fill("resource_name", "carol-app", "/security/acls")
    b.choose("operation", "3", "/security/acls")
    b.press("Add ACL", "/security/acls")
    b.wait_text("ACL added for User:carol.")
    check("carol-app" in b.text(), "the new ACL is listed")
    b.shot("security")

    # carol signs in with the SCRAM credential just made.
    sign_out(b)
    sign_in(b, "carol", "carol-secret", "SCRAM-SHA-512")
    b.wait_h1("Overview")
    check("User:carol" in b.text(), "carol is signed in over SCRAM-SHA-512")
    b.shot("carol-scram")
    sign_out(b)
    sign_in(b, "admin", "admin-pw")
    b.wait_h1("Overview")
    b.open("/security")
    b.wait_h1("Security")
    b.d.find_element(By.XPATH, "//tr[td[normalize-space()='carol-app']]//button[starts-with(normalize-space(), 'Remove')]").click()
    b.wait_text("1 ACL(s) of User:carol removed.")
    b.d.find_element(By.XPATH, "//tr[td[normalize-space()='carol']]//button[starts-with(normalize-space(), 'Remove')]").click()
    b.wait_text("SCRAM-SHA-512 credential of carol removed.")
    b.d.find_element(By.XPATH, "//tr[td[code[normalize-space()='producer_byte_rate']]]//button[starts-with(normalize-space(), 'Remove')]").click()
    b.wait_text("producer_byte_rate of user-principal 'alice' removed.")
    check("carol-app" not in b.text() and "No client quotas." in b.text(), "all removed")
    b.shot("security-removed")


def main():
    if len(sys.argv) not in (5, 6):
        fail(__doc__)
    scenario, url, bootstrap, shots = sys.argv[1:5]
    global REGISTRY
    REGISTRY = sys.argv[5] if len(sys.argv) == 6 else None
    b = Browser(url, shots)
    try:
        {"flow": flow, "readonly": readonly, "sasl": sasl}[scenario](b, bootstrap)
    finally:
        b.close()
    print(f"console {scenario} OK ({b.n} screenshots in {shots})", flush=True)


if __name__ == "__main__":
    main()
