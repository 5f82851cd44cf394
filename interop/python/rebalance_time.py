# Time until every member is assigned after an 11th member joins a group of 10 consuming 100
# partitions (classic protocol; GROUP_PROTOCOL=consumer for KIP-848). A benchmark, not a test:
#   python3 interop/python/rebalance_time.py BOOTSTRAP GROUP
import sys, time, threading, os
from confluent_kafka import Consumer
from confluent_kafka.admin import AdminClient, NewTopic
bs, group = sys.argv[1], sys.argv[2]
a = AdminClient({'bootstrap.servers': bs})
try: a.create_topics([NewTopic('rb', 100, 1)])['rb'].result()
except Exception: pass
assigned = {}
lock = threading.Lock()
stop = threading.Event()
def run(i):
    conf = {'bootstrap.servers': bs, 'group.id': group, 'client.id': f'm{i}', 'auto.offset.reset': 'latest'}
    if os.environ.get('GROUP_PROTOCOL'): conf['group.protocol'] = os.environ['GROUP_PROTOCOL']
    c = Consumer(conf)
    def on_assign(c, parts):
        with lock: assigned[i] = set(p.partition for p in parts) if not conf.get('group.protocol') else assigned.get(i, set()) | set(p.partition for p in parts)
    def on_revoke(c, parts):
        with lock: assigned[i] = set() if not conf.get('group.protocol') else assigned.get(i, set()) - set(p.partition for p in parts)
    c.subscribe(['rb'], on_assign=on_assign, on_revoke=on_revoke)
    while not stop.is_set(): c.poll(0.05)
    c.close()
def complete(n):
    with lock:
        if len(assigned) < n: return False
        parts = [p for s in assigned.values() for p in s]
        return all(len(s) > 0 for s in assigned.values()) and len(parts) == 100 and len(set(parts)) == 100
ts = []
for i in range(10):
    t = threading.Thread(target=run, args=(i,)); t.start(); ts.append(t)
deadline = time.time() + 120
while not complete(10):
    if time.time() > deadline: print('10 never assigned', {k: len(v) for k, v in assigned.items()}); stop.set(); sys.exit(1)
    time.sleep(0.01)
time.sleep(2)
t0 = time.time()
t = threading.Thread(target=run, args=(10,)); t.start(); ts.append(t)
while not complete(11):
    if time.time() > t0 + 120: print('11 never assigned'); stop.set(); sys.exit(1)
    time.sleep(0.005)
print(f'{time.time() - t0:.2f}')
stop.set()
for t in ts: t.join()
