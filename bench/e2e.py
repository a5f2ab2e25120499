"""End to end over AMQP 0-9-1: pika publisher and consumer against a three-node cluster.

The other benches time one layer each (actors, fifo, WAL, Ra); this one times what
an application sees: a quorum queue (``x-queue-type=quorum``) on a local three-node
warren cluster (``harness.cluster``: ``warren node start`` processes with a disk data
dir, so every persistent message is fsynced by the WAL), fed and drained by real
pika clients, each an OS process of its own (``bench/e2e_clients.py``):

* publisher: persistent messages (``delivery_mode`` 2), publisher confirms with a
  window of 256 unconfirmed, connected to the node that declared the queue (its
  leader under ``client-local``);
* consumer: prefetch 300, one manual ``basic.ack`` per delivery, connected to
  another node.

Phases, each on a fresh queue, ``--warmup`` seconds then ``--seconds`` measured:
16-byte bodies and 1-KiB bodies at window 256 (confirmed msg/s, consumer msg/s,
confirm latency p50 / p99), then window 1 (confirm latency of a lone publish).
The CPU each process used in the 16-byte phase is printed, in cores.

The reference is RabbitMQ measured in the same run: when a RabbitMQ server is
installed (Debian's ``rabbitmq-server``, 3.10.8 on bookworm: ``apt-get install
rabbitmq-server``; it is no dependency of warren), ``bench/rabbitmq_local.py``
starts three RabbitMQ nodes on loopback after warren's phases, the same pika
clients run the same phases against them, and the ratios printed are warren's
figures over theirs (``--rabbitmq no`` skips it, ``yes`` requires it). Without a
RabbitMQ server the ratios fall back to ``REFERENCE_RABBITMQ_3_10_8``, figures
of three RabbitMQ 3.10.8 nodes measured with this workload on another 2-core
machine, not in this run: the JSON line says which (``reference_measured_in_run``).
``--amqp-url URL`` (repeatable or comma separated) runs the identical workload
against any AMQP 0-9-1 broker instead of starting warren (publisher on the first
URL, consumer on the second). ``--phases w1`` (or ``16b``, ``1k``, comma
separated) runs a subset.

``--profile`` adds a fourth phase (16 bytes, window 256, not counted in the
figures) with ``py-spy record`` attached to the queue leader's node and to the
publisher (``py-spy`` on ``PATH`` or ``--py-spy PATH``; it is no dependency of
warren). Without py-spy it profiles the publisher with cProfile only: the node
has no profiling hook, and the bench does not change how nodes are started.

Usage: ``python bench/e2e.py [--seconds 10] [--warmup 2] [--phases 16b,1k,w1]
[--rabbitmq auto|yes|no] [--amqp-url URL]... [--profile] [--py-spy PATH]
[--ra KEY=VALUE]... [--record K] [--consumer-node other|same]``. ``--ra`` sets a Ra
system key on both sides, warren's nodes (their ``ra`` table) and RabbitMQ's (Ra's
application env in ``advanced.config``), for example ``--ra wal_pre_allocate=true``;
the JSON names them (``ra``).
``--record K`` makes warren's nodes record their history as a scenario run's do (the
trace points of every layer, and a replica state digest every K log indexes), to
measure what recording costs: 16 B phase, 446 msg/s confirmed with K = 1 and 3.4k
with K = 100 against 10.9k / 11.7k unrecorded (``--phases 16b --rabbitmq no``). With
K = 1 every apply encodes the whole queue state, whose backlog grows when the consumer
falls behind. With the view's index sequences encoded as blocks of bytes
(`fifo.replica_trace.replica_view`), two runs each: 922 / 986 msg/s with K = 1,
4,234 / 4,289 with K = 100; then with the recorder's cheaper rows (`analysis.recorder`),
one run each: 1,114 and 4,550 msg/s.
The last line printed is one JSON object.

Where the time goes
-------------------
Two runs today, RabbitMQ measured in the same run on the same 2-core machine (a
slower machine than the one the fixed reference comes from: there RabbitMQ did
9.6k msg/s and 1.2 ms; here 5.2k-7.7k and 2.3-2.4 ms). warren 3,330 / 2,686 msg/s
confirmed at 16 B and 3,368 / 2,683 at 1 KiB against RabbitMQ's 5,185 / 7,655 and
4,319 / 4,470 (0.64 / 0.35 and 0.78 / 0.60 of it); confirm p50 at window 1 6.0 /
6.4 ms against 2.4 / 2.3 ms (2.5 / 2.8 times). On this machine window-1 runs of
the same code spread from 4.2 to 7.7 ms p50 within an hour, and RabbitMQ's 16 B
figure from 5.2k to 7.7k: compare figures of one run. At window 1 RabbitMQ's three
nodes used 1.14 cores for 400 msg/s (2.9 ms of CPU a message, its schedulers'
busy waiting included), warren's 1.48 cores for 150 msg/s (9.9 ms).
At window 1 every stage handles batches of one: per message the leader's node
spends about 4 ms of CPU (3.3 ms of it Python on the hub), the followers 3.2 and
2.5 ms, so at 160 msg/s the three nodes keep 1.5 of the 2 cores busy. A message
costs the leader about 13 inter-node frames (per follower: the AppendEntries of
the enqueue and of the settle, each followed by one that carries the new commit
index, as Ra sends it, and a reply to each, as Ra's followers send them, plus the
settle command and the ``ra_event``s); one frame costs a node process about
80 us of user and 35 us of system CPU on each side here, most of it in the
ZeroMQ send and receive and their thread wake-ups, not in Python.
Since then, two cuts in that CPU, each measured in three alternated pairs of window-1
runs (one publisher, one consumer; CPU per confirmed message read from /proc for
each node): a ``pipeline_rpcs`` event with every peer up to date is no longer handed
to the Ra core (about 9.5 of them a message on the leader, 23 us each): leader
4.96 / 4.10 / 4.45 ms of CPU a message against 5.47 / 4.23 / 4.85 ms, p50 7.8 /
6.3 / 6.9 against 8.6 / 6.4 / 7.1 ms; and the WAL's inline-sync limit went from 1 to
2 ms (under this load a write+sync measures 0.8-1.2 ms, so a fifth of the batches had
gone through the pool): p50 7.3 / 6.4 / 5.8 against 7.5 / 6.5 / 6.3 ms.
A later run with RabbitMQ in the same run: warren 166 msg/s at window 1, p50 5.81 ms,
its nodes 1.50 cores (9.0 ms of CPU a message); RabbitMQ 440 msg/s, 2.05 ms, 1.20
cores (2.7 ms a message): 2.83 times. The same window-1 publisher without a consumer
(two runs): p50 4.08 / 4.19 ms, 5.5 / 5.9 ms of node CPU a message, 2.6 ms of it
the leader's; with the consumer 6.47 / 6.93 ms and 9.9 / 10.3 ms. The consumer's
ack is a Raft command of its own (a settle: its append, two AppendEntries and two
replies per follower, a WAL sync on each node), so it nearly doubles the work per
message. With one message in flight and two cores, the latency cannot be below half
the CPU a message costs: 2 x RabbitMQ's 2.05 ms needs the nodes under about 8 ms a
message with perfect overlap, in practice nearer 6, a third less than now. Under
cProfile the leader makes about 3,200 Python calls a message, and no function holds
more than 3% of its time: pickling a frame with one enqueue AppendEntries takes
12 us and unpickling it 18 us; a ZeroMQ send after an idle moment 14 us, because it
wakes the I/O thread. Cuts in the Ra server's per-event shell and in the socket
reads brought the calls a message from 3,636 to 3,184 on the leader and from 2,068 /
1,547 to 1,899 / 1,388 on the followers; in wall time and /proc CPU the effect is
within this machine's noise (three alternated pairs: p50 6.04 / 6.80 / 6.17 against
6.52 / 5.92 / 5.57 ms, 9.0 / 10.3 / 9.3 against 10.0 / 8.9 / 8.4 ms of CPU a
message).
At window 256 the leader's node is the busiest process (0.73 of a core, 0.29 ms of
CPU a message). Its profile named costs per publish that did no modelling work:
pamqp's generic walk over ``basic.publish``'s fields, the publish's properties decoded
twice (by the channel and again for the queue message), the fifo client's copy of its
session through ``dataclasses.replace``, every effect of every applied command
flattened three times and matched against four patterns, and the aux handler looked
up again for every ``bytes_in``. Without them, four alternated pairs (two in each
order: the second run of a pair is slowed by the first one's disk writeback, so one
order alone favours the first): leader 0.195 / 0.177 / 0.220 / 0.209 against
0.284 / 0.178 / 0.275 / 0.245 ms of CPU a message, 3,761 / 4,073 / 3,315 / 3,546
against 2,695 / 4,304 / 2,756 / 3,126 msg/s confirmed (this machine drifted by half
within the hour); window 1 p50 5.42 / 5.60 / 5.84 / 5.20 against 5.75 / 5.33 / 5.53 /
6.38 ms, within noise. Then, with RabbitMQ in the same runs: 3,171 / 3,474 msg/s at
16 B against 5,010 / 5,459 (0.63 / 0.64), 2,835 / 3,162 at 1 KiB against 4,017 /
4,852 (0.71 / 0.65), window-1 p50 6.11 / 6.16 ms against 2.13 / 2.11 ms (2.9 times).
The consumer is further behind: 1,836 / 1,986 msg/s against 4,378 / 4,235 (0.42 /
0.47). With prefetch 300 it gets new deliveries only as its settles are committed and
applied on its node, so it runs at 300 per settle round: ~2k msg/s means rounds of
about 150 ms, RabbitMQ's 4.3k about 70 ms (inferred from the rates; the stages of a
settle round under this load were not timed).
Pickling was the next item in the profiles (py-spy on the nodes at window 256): 13 %
of the leader's samples went to pickling the same entries three times (one
AppendEntries per follower and its own WAL record) and 10 % of a follower's to
pickling the entries it had just unpickled, for its WAL. With `ra.packed` a run is
pickled once on the leader and its bytes travel into the followers' WAL records:
the leader's share fell to 6 %, and the follower's WAL encoding left its top 25
(each above about 1 %). Two runs
then, RabbitMQ in the same runs: 3,370 / 3,133 msg/s at 16 B against 5,534 / 6,235
(0.61 / 0.50), 3,006 / 3,326 at 1 KiB against 4,303 / 4,320 (0.70 / 0.77), window-1
p50 6.13 / 5.55 ms against 2.17 / 2.05 ms (2.8 / 2.7 times), consumer 1,839 / 1,828
against 3,960 / 4,595 msg/s.
Then the records built or unpickled for every message and Raft event (pids, Raft
RPCs and replies, queue messages, content, confirms, deliveries) lost their frozen
dataclass ``__init__``, which stores each field through ``object.__setattr__``
(`actors.wire.frozen_init`; a ten-field queue message 0.9 us against 1.7-2.9 us, a
log entry unpickled 1.9 against 3.1 us). py-spy at window 256 had put 4 % of the
leader's samples and 11 % of a follower's in those ``__init__``s; with the change,
under 3 % each. Four alternated pairs at window 1 (two in each order), with the fifo
aux's checkpoint no longer copied by ``dataclasses.replace`` on every evaluation:
p50 5.88 / 5.53 / 5.29 / 5.51 against 5.97 / 6.07 / 6.88 / 5.69 ms, node CPU 8.9 /
8.5 / 8.3 / 8.4 against 9.2 / 9.4 / 10.8 / 8.8 ms a message; at window 256 the pairs
were within the drift. Two runs then, RabbitMQ in the same runs: 3,233 / 3,231 msg/s
at 16 B against 6,104 / 5,759 (0.53 / 0.56), 2,784 / 2,904 at 1 KiB against 4,520 /
5,000 (0.62 / 0.58), window-1 p50 5.52 / 4.96 against 2.57 / 2.20 ms (2.15 / 2.26
times), consumer 1,856 / 1,741 against 4,414 / 4,266 msg/s.
A third run, after idle ``pipeline_rpcs`` events were also spared the after-event
work, shows how far one run can swing: RabbitMQ did 8,401 msg/s at 16 B and 1.73 ms
at window 1 (its best figures here), warren 3,675 and 5.14 ms: 0.44 and 2.98 times.
Then the cycle collector. Timing every collection in the node processes at window
256 showed full (third-generation) collections of 120-150 ms, five or six an 8 s run:
17-22 % of a follower's CPU and 7.6 % of the leader's, charged in the profiles to
whatever allocated at that moment. Node processes now collect at (5000, 10, 100)
instead of CPython's (700, 10, 10) (`actors.gc_policy`): no full collection in a run,
and collection in all at 2.3-4.2 % of each node's CPU. Alternated pairs with the same
code and only the thresholds changed, window 256: 3,855 / 3,506 / 3,847 against
3,619 / 3,481 / 3,711 msg/s at (700, 10, 100), and (5000, 10, 100) against that:
3,900 / 3,878 against 3,719 / 3,515; window 1, six pairs, three in each order: p50
6.31 / 5.50 / 6.45 / 6.52 / 6.51 / 6.19 against 6.88 / 6.49 / 6.54 / 6.67 / 6.22 /
6.33 ms. A publish whose raw properties are the previous publish's also reuses their
decoding now (5.8 us a publish). RabbitMQ in the same run, one run before the
collector change and one after: 3,394 / 3,474 msg/s at 16 B (0.55 / 0.62 of
RabbitMQ's), 3,129 / 3,149 at 1 KiB (0.58 / 0.80), window-1 p50 5.39 / 6.77 ms
against 1.90 / 2.73 ms (2.84 / 2.48 times; the machine was slower for both brokers
in the second run), consumer 1,634 / 1,984 against 4,531 / 3,835 msg/s.

Then a faster 2-core machine, where a lone append + fdatasync takes 0.1-0.15 ms. Two
runs, RabbitMQ in the same runs: 11,991 / 12,765 msg/s confirmed at 16 B against
14,875 / 12,682 (0.81 / 1.01 of RabbitMQ's), 10,943 / 11,324 at 1 KiB against
10,608 / 10,525 (1.03 / 1.08), window-1 p50 2.02 / 2.09 ms against 1.03 / 0.95 ms
(1.95 / 2.2 times), consumer 7,364 / 7,682 against 13,062 / 12,290 msg/s. A timeline
of window 1 (every Ra event, WAL batch, frame flush and socket write of the three
nodes, time-stamped): the leader's hub spends 0.42 ms p50 in its inline WAL write and
sync (0.2 ms of it in the kernel, by strace), the followers' 0.2-0.23 ms; a follower
takes up an AppendEntries 0.2-0.4 ms after it was sent, the three nodes and two
clients keeping 1.5 of the 2 cores busy. Syncing every batch on the pool thread, so
the leader's hub takes the followers' replies during its own sync: p50 1.86-1.99
against 2.02-2.16 ms in five of six alternated pairs, but 0.13 of a core more on the
leader and, at window 256, 5-12 % fewer msg/s and p99 55-84 against 32-38 ms; lone
entries only on the pool: 2.08-2.12 against 2.00-2.06 ms. Neither was kept. Two runs
of the same code differ by up to 5 % here.
Three more default runs on that machine: 11,073 / 11,520 / 12,140 msg/s at 16 B
against 12,988 / 12,590 / 13,554, window-1 p50 2.16 / 2.13 / 2.22 ms against 1.06 /
0.97 / 1.12 ms (2.05 / 2.19 / 1.98 times), consumer 6,833 / 7,181 / 7,476 against
11,928 / 10,952 / 11,554 msg/s. With ``--ra wal_pre_allocate=true`` (both brokers):
window-1 p50 2.13 / 2.09 ms against 1.00 / 1.00 ms (2.14 / 2.10 times); warren alone
gained 2.19 / 2.25 / 2.16 -> 1.99 / 2.22 / 2.10 ms in three alternated pairs, but
RabbitMQ gains as much, so Ra's default (off) stays. A node hub that polls for 0.5 or
1 ms after each burst of work instead of sleeping at once (as Erlang's schedulers
busy-wait): window-1 p50 2.28 / 2.38 / 2.21 (0.5 ms) and 2.12 / 2.29 / 2.93 (1 ms)
against 2.11-2.32 ms, 0.05-0.14 of a core more per node: with three nodes and two
clients on two cores the polling takes the core another process needed; not kept.
A consumer on the leader's node instead of a follower's: 9,076 / 9,157 against
7,191 / 7,720 msg/s (two pairs).
``--consumer-node same`` connects the consumer to the publisher's node, where the
queue's leader is, for both brokers (the default, ``other``, to the next node). Window
1, RabbitMQ in the same runs, alternated: ``same`` 1.73 / 1.92 ms against 0.90 /
0.90 ms (1.91 / 2.13 times), ``other`` 2.05 / 2.06 ms against 0.93 / 1.09 ms (2.21 /
1.89 times). With the consumer on a follower's node, warren (as RabbitMQ 4.x) hands
it each message from that node's member once the member has applied it, one commit
notice after the leader; RabbitMQ 3.10.8 delivers from the leader. The consumer's
settle then reaches the leader after the next publish, and its WAL batch is synced
apart: a timeline showed 1.85 WAL syncs a message on each node, two per message
less the few batches that held both, and the leader's hub blocked in an inline sync
(p50 0.40 ms against the followers' 0.23-0.26 ms) while replies for the next
publish waited; a frame from one node reached the other's hub 0.21-0.43 ms (p50)
after its flush. Per window-1 message the leader's main thread used 0.85 ms of user
and 0.21 ms of system CPU, ZeroMQ's I/O thread 0.14 ms (/proc, per thread).
From the leader's ``applied`` event to the confirm on the socket took 0.18 ms (p50):
the Ra server drained its mailbox before the channel ran, and the frames it had
queued went out before the writer did. The server now yields once after sending
``applied`` events (`ra.proc`'s loop; 0.05 ms off window-1 p50 on average over
fourteen alternated pairs). Yielding also after a follower's replies, or after
local deliveries, was slower at window 1 and gave the consumer nothing at window
256 (four and three pairs); a second yield, so that the writer a woken channel
wakes in turn also runs first, was lower in seven of ten pairs but 2.50 against
2.51 ms on average, on a machine swinging between 2.3 and 3.0 ms: not kept. A full
run then: 16 B 12,142 against 11,387 msg/s (1.07), 1 KiB 10,298 against 10,957
(0.94), window-1 p50 2.33 against 1.09 ms (2.13 times), consumer 7,181 against
11,176 msg/s; before it, the same day, 1.01 / 1.03 and 1.97 times, and 0.84 / 1.01
and 1.81 times. Window-1-only runs that day (``--phases w1``, before the change):
2.16 / 2.13 / 2.05 / 2.41 / 2.17 / 2.02 times. Five more after it, the next day:
2.29 / 2.07 / 2.26 / 2.07 / 2.18 ms against 1.03 / 1.01 / 0.96 / 1.21 / 1.00 ms
(2.22 / 2.05 / 2.36 / 1.72 / 2.19 times). RabbitMQ's own Ra counters
(``ra_counters:overview()``, ``ra_log_wal``) over a window-1 run: 1.65-1.79 WAL
batches, each one write and one fdatasync, a message on each node (two entries a
message, the enqueue and the consumer's settle), about warren's 1.85: both brokers
sync the settle apart from the next publish. py-spy on the three nodes over a window-1
run: the leader's main thread is in its inline fdatasync for 27 % of the wall time
(the followers' for 25-27 %); a third of its other samples are in the hub's loop or
in ZeroMQ sends (which wake the I/O thread), half of a follower's, and no Python
function holds more than a few percent. Syncing lone
entries on the pool thread again, eight alternated pairs: 2.32 / 2.29 / 2.41 / 2.41 /
2.40 / 2.30 / 2.36 / 2.25 ms against 2.41 / 2.21 / 2.32 / 2.19 / 2.15 / 2.26 / 2.10 /
2.12 ms inline: not kept.
The same profile showed a tenth of the leader's busy samples in ZeroMQ sends: each
wakes libzmq's I/O thread, which, as a normal thread, preempted the hub on its own
core. With that thread on Linux's batch policy (`transports.zmq_io.IO_THREAD_POLICY`),
window-1 p50 was lower in all ten alternated pairs: 2.13 / 2.19 / 2.02 / 1.95 / 2.12 /
2.18 / 2.15 against 2.33 / 2.43 / 2.10 / 2.06 / 2.40 / 2.26 / 2.32 ms, then, with the
policy in the code and ``WARREN_ZMQ_IO_SCHED=other`` as the reference, 1.88 / 2.30 /
2.34 against 2.35 / 2.55 / 2.56 ms; window 256 10,967 / 10,974 / 12,515 against
10,708 / 11,766 / 11,671 msg/s. Not kept: the idle policy for that thread (1.86 /
1.91 / 1.84 against 1.97 / 1.82 / 1.92 ms), the batch policy for the whole node
process (within the noise) or for the WAL's pool threads (window 256 within the
noise), and no yield after ``applied`` events again (2.05 / 1.96 / 2.09 against
2.10 / 1.93 / 2.04 ms). Window-1-only runs then, RabbitMQ in the same runs: 1.98 /
2.00 / 1.99 / 1.91 / 1.87 / 2.00 / 2.03 / 2.33 / 1.90 / 1.82 / 2.08 / 1.95 / 1.77 /
1.95 times; two full runs: 12,285 / 11,076 msg/s at 16 B (0.96 / 0.76 of RabbitMQ's
12,801 / 14,532), 10,738 / 10,757 at 1 KiB (1.02 / 1.05), window-1 p50 2.10 / 2.01
against 1.02 / 1.01 ms (2.06 / 1.99 times), consumer 7,472 / 6,594 against 11,343 /
12,104 msg/s. Over those sixteen runs the window-1 ratio's median is 1.985.
Earlier figures, from the machine the fixed reference comes from:

* Window 256 is CPU-bound: the leader's node used 0.73 of a core, the followers'
  0.47 (it also serves the consumer) and 0.32, the clients 0.19 -- about 1.7 of the
  2 cores, some 250 us of CPU per message over all processes. With the cores full, a
  confirm waits for the work queued ahead of it (Little's law: 256 in flight / 6.8k/s
  = 38 ms). The consumer (prefetch 300) gets a new delivery only after its ack's
  settle is committed and applied on its node, so it runs at 300 per such round.
* Where a lone publish's time goes (every stage time-stamped in all three nodes, one
  publish every 3 ms, no consumer; p50 1.9 ms from pika's send to its confirm):
  pika to the channel's ``basic.publish`` ~225 us (loopback TCP, reader, frames), on
  to the leader's Ra server ~95 us. Offsets from the leader's core taking the
  command: the AppendEntries leaves on the I/O thread at +117 us (+241 us for the
  second follower: that send waits for the GIL while the hub writes the WAL batch);
  the follower's I/O thread reads it at +284 and its hub dispatches it at +392; its
  WAL batch starts at +496 and is synced at +842 (the three nodes fsync one disk at
  once: ~0.3 ms, twice a lone fsync); its reply leaves at +985 and reaches the
  leader's Ra server at +1193 (commit); the channel has the ``applied`` event at
  +1346 and writes the confirm at +1475; pika sees it ~130 us later. A cross-node hop
  is 200-275 us here against ~64 us for bare pyzmq: with three nodes on two cores,
  a node's threads often wait for a core the other nodes hold. In the bench a
  consumer on another node acks every message, so each publish's round overlaps the
  previous message's settle round on the same hubs and the same disk: +0.35 ms with
  one publish every 3 ms, +1.3 ms back to back (3.3 ms p50). Syncing small WAL
  batches on the pool thread instead of the hub was measured too: 3.63 against
  3.26 ms.
* Since then the nodes do their socket work on the hub (``transports.zmq``,
  ``io="hub"``): no frame crosses between Python threads. Same hour, hub against
  thread: window 1 p50 2.98 against 3.33 ms, 6.3k against 5.9k msg/s at 16 B
  (later runs, with the sugar-free pyzmq calls: 6,970 / 6,591 msg/s and window 1
  2.75 ms; 6,676 / 5,976 and 3.16 ms half an hour later). What is left at window
  1 is CPU: per message, with the consumer, the leader's process uses about
  2 ms of CPU, the followers 1.6 and 1.35 ms, the clients 0.25 ms each, so the
  two cores are ~85 % busy at ~300 messages/s and every stage waits for one.
  The disk matters as much: this machine's fdatasync p50 drifted from 0.14 to
  0.23 ms within one afternoon, and window 1 from 3.0 to 4.5 ms with it.
* Profiles (``--profile``, py-spy on the leader's node, GIL holder): channel 38 %,
  ra 21 %, transports 17 %, fifo 13 %, actors 6 %; the largest single items are
  pamqp's frame and property decoding (~11 %), pickling for the transport (~8 %) and
  the WAL's record encoding (~4 %). Earlier fixes from such profiles: `fifo.mc.is_mc`
  cached per class (a runtime-checkable Protocol check cost 10-18 us a call), Raft
  RPCs and queue messages pickled as constructor calls (`actors.wire`), a leader
  appending a run of waiting commands as one batch, and small WAL batches synced
  on the hub.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import select
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import pika  # noqa: E402
import pika.exceptions  # noqa: E402

from bench import rabbitmq_local  # noqa: E402
from bench.proc_cpu import process_cpu_s  # noqa: E402
from broker.config_schema import check_ra_keys  # noqa: E402
from harness.cluster import Cluster  # noqa: E402

CLIENTS = Path(__file__).resolve().parent / "e2e_clients.py"

#: three RabbitMQ 3.10.8 nodes, this workload, a 2-core machine: measured elsewhere
REFERENCE_RABBITMQ_3_10_8: dict[str, float] = {
    "msgs_s_16b": 9600.0, "msgs_s_1k": 7700.0, "confirm_p50_ms_w1": 1.2}
REFERENCE_NOTE = ("RabbitMQ 3.10.8, three nodes, same workload, 2-core machine; measured "
                  "elsewhere, not in this run (no rabbitmq-server here)")

WINDOW = 256
PREFETCH = 300
READY_TIMEOUT_S = 60.0
RESULT_GRACE_S = 20.0  # past T1: the publisher's confirm grace plus closing
PROFILE_RATE_HZ = 100
PROFILE_TOP = 12


@dataclass(frozen=True)
class Phase:
    name: str
    size: int
    window: int


PHASES = [Phase("16b", 16, WINDOW), Phase("1k", 1024, WINDOW), Phase("w1", 16, 1)]
PROFILE_PHASE = Phase("profile", 16, WINDOW)


def percentile(samples: list[float], q: float) -> float:
    if not samples:
        return float("nan")
    ordered = sorted(samples)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process so far (Linux ``/proc``); 0 if gone."""
    try:
        return process_cpu_s(pid)
    except OSError:
        return 0.0


def _kill(proc: subprocess.Popen[Any] | None) -> None:
    """Kill a child's process group (each child has its own session) and reap it."""
    if proc is None or proc.poll() is not None:
        return
    try:
        os.killpg(proc.pid, 9)
    except ProcessLookupError:
        pass
    try:
        proc.wait(10)
    except subprocess.TimeoutExpired:
        pass


# ------------------------------------------------------------------ targets


@dataclass
class Target:
    """Where the clients connect, and (for warren) which processes are the nodes."""

    label: str
    urls: list[str]
    cluster: Cluster | None = None
    #: node processes of a broker other than warren, by name (no queue roles known)
    other_nodes: dict[str, int] = field(default_factory=dict)
    #: which URL the consumer uses: 1, another node than the publisher's (the
    #: default), or 0, the publisher's node, where the queue's leader is
    consumer_node: int = 1

    @property
    def publisher_url(self) -> str:
        return self.urls[0]

    @property
    def consumer_url(self) -> str:
        return self.urls[self.consumer_node % len(self.urls)]

    def node_pids(self, queue: str) -> dict[str, int]:
        """Node processes by role for `queue` (``leader``, ``follower-1``, ...)."""
        if self.cluster is None:
            return dict(self.other_nodes)
        try:
            leader = self.cluster.leader_of(queue)
        except Exception as exc:  # a bench figure, not a verdict: go on without roles
            print(f"  (leader of {queue} unknown: {exc})", flush=True)
            leader = None
        out: dict[str, int] = {}
        followers = 0
        for n in self.cluster.nodes:
            if n.proc is None:
                continue
            if leader is not None and n.name == leader.name:
                out["leader"] = n.proc.pid
            else:
                followers += 1
                out[f"{'follower' if leader else 'node'}-{followers}"] = n.proc.pid
        return out


def _amqp_url(host: str, port: int) -> str:
    return f"amqp://guest:guest@{host}:{port}/%2F"


def _where(url: str) -> str:
    """host:port of a URL, without its credentials (for printing)."""
    p = pika.URLParameters(url)
    return f"{p.host}:{p.port}"


@contextmanager
def warren_cluster(root: Path, nodes: int, ra: dict[str, Any] | None = None,
                   record: int | None = None) -> Iterator[Target]:
    """A local warren cluster; with `record` = K its nodes record their history (into
    `root`) with a state digest every K log indexes, as a scenario run does."""
    extra: dict[str, Any] = {"ra": dict(ra or {})}
    if record is not None:
        extra["state_digest_every"] = record
    cluster = Cluster(root / "cluster", nodes, backend="quorum", net_ticktime=15.0,
                      run_id="bench-e2e", extra_config=extra,
                      history_dir=None if record is None else root / "history")
    try:
        started = time.monotonic()
        cluster.start(timeout_s=90.0)
        print(f"warren: {nodes} nodes ready in {time.monotonic() - started:.1f} s "
              f"({', '.join(n.name for n in cluster.nodes)})", flush=True)
        yield Target("warren", [_amqp_url(h, p) for h, p in cluster.amqp_endpoints()], cluster)
    finally:
        cluster.close()


def _with_channel(url: str, action: Any, attempts: int = 20) -> Any:
    """Run ``action(channel)`` on a fresh blocking connection, retried while a cluster settles."""
    last: Exception | None = None
    for _ in range(attempts):
        try:
            conn = pika.BlockingConnection(pika.URLParameters(url))
        except pika.exceptions.AMQPError as exc:
            last = exc
            time.sleep(0.5)
            continue
        try:
            return action(conn.channel())
        except pika.exceptions.AMQPError as exc:
            last = exc
            time.sleep(0.5)
        finally:
            if conn.is_open:
                conn.close()
    raise RuntimeError(f"AMQP on {_where(url)} failed: {last!r}")


def declare(url: str, queue: str) -> None:
    _with_channel(url, lambda ch: ch.queue_declare(
        queue, durable=True, arguments={"x-queue-type": "quorum"}))


def delete(url: str, queue: str) -> None:
    try:
        _with_channel(url, lambda ch: ch.queue_delete(queue), attempts=3)
    except RuntimeError as exc:
        print(f"  (could not delete {queue}: {exc})", flush=True)


# ------------------------------------------------------------------ clients


class ClientProc:
    """One ``e2e_clients.py`` process: its lines on stdout, the ``run`` line on stdin."""

    def __init__(self, argv: list[str], log: Path) -> None:
        self.log = log
        self._err = open(log, "wb")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=self._err, start_new_session=True)
        self._buf = b""
        self.done = False  # its result is in: it exits by itself (cProfile writes then)

    def line(self, prefix: str, timeout_s: float) -> str:
        """The next stdout line starting with `prefix` (its rest), or raise."""
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        deadline = time.monotonic() + timeout_s
        while True:
            while b"\n" in self._buf:
                raw, self._buf = self._buf.split(b"\n", 1)
                text = raw.decode(errors="replace")
                if text.startswith(prefix):
                    self.done = prefix.startswith("result")
                    return text[len(prefix):].strip()
            left = deadline - time.monotonic()
            if left <= 0:
                raise RuntimeError(f"no {prefix.strip()!r} from a client; see {self.log}:\n"
                                   f"{self.tail()}")
            ready, _, _ = select.select([fd], [], [], min(left, 1.0))
            if ready:
                chunk = os.read(fd, 65536)
                if not chunk:
                    self.proc.wait(5)
                    raise RuntimeError(f"client exited ({self.proc.returncode}) before "
                                       f"{prefix.strip()!r}:\n{self.tail()}")
                self._buf += chunk

    def send(self, text: str) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.write(text.encode())
        self.proc.stdin.flush()

    def tail(self) -> str:
        self._err.flush()
        return self.log.read_bytes()[-3000:].decode(errors="replace")

    def close(self) -> None:
        if self.done:
            try:
                self.proc.wait(5)
            except subprocess.TimeoutExpired:
                pass
        _kill(self.proc)
        for f in (self.proc.stdin, self.proc.stdout):
            if f is not None:
                f.close()
        self._err.close()


# ------------------------------------------------------------------ profiles


@dataclass
class Profiler:
    """py-spy on chosen pids during a phase, or cProfile of the publisher without it."""

    py_spy: str | None
    root: Path
    procs: list[tuple[str, subprocess.Popen[bytes], Path]] = field(default_factory=list)

    def client_prefix(self, role: str) -> list[str]:
        """Argv prefix of a client: cProfile around the publisher when py-spy is absent."""
        if self.py_spy is None and role == "publisher":
            return ["-m", "cProfile", "-o", str(self.root / "publisher.pstats")]
        return []

    def attach(self, name: str, pid: int, seconds: float, gil: bool = False) -> None:
        """Sample `pid`: every running thread, or (`gil`) only the one holding the GIL."""
        if self.py_spy is None:
            return
        stem = re.sub(r"[^A-Za-z0-9]+", "-", name)
        out = self.root / f"{stem}.pyspy.txt"
        argv = [self.py_spy, "record", "--pid", str(pid), "--duration", str(int(seconds)),
                "--rate", str(PROFILE_RATE_HZ), "--format", "raw", "--nonblocking",
                *(["--gil"] if gil else []), "--output", str(out)]
        log = open(self.root / f"{stem}.pyspy.log", "wb")  # noqa: SIM115
        try:
            proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        finally:
            log.close()
        self.procs.append((name, proc, out))

    def collect(self, timeout_s: float) -> dict[str, Profile]:
        """Per profiled process: its top functions and its shares per package."""
        out: dict[str, Profile] = {}
        deadline = time.monotonic() + timeout_s
        for name, proc, path in self.procs:
            try:
                proc.wait(max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _kill(proc)
            if path.exists():
                out[name] = top_of_collapsed(path.read_text())
            else:
                log = path.with_suffix(".log").read_text(errors="replace")
                print(f"  py-spy gave no profile of {name}: {log.strip()[-500:]}", flush=True)
        pstats_file = self.root / "publisher.pstats"
        if self.py_spy is None and pstats_file.exists():
            out["publisher (cProfile)"] = top_of_pstats(pstats_file)
        return out

    def close(self) -> None:
        for _, proc, _ in self.procs:
            _kill(proc)


@dataclass
class Profile:
    """Top functions (name, self %, inclusive %), shares per warren package, samples."""

    rows: list[tuple[str, float, float]]
    packages: list[tuple[str, float]]
    samples: int


_FRAME = re.compile(r"^(?P<func>.*) \((?P<file>.*?)(?::\d+)?\)$")


def _short(path: str) -> str:
    """A frame's file without the machine's directories."""
    for marker in ("site-packages/", "lib/python3"):
        if marker in path:
            return path.split(marker, 1)[1]
    try:
        return str(Path(path).resolve().relative_to(ROOT))
    except ValueError:
        return Path(path).name


def _frame_key(frame: str) -> str:
    m = _FRAME.match(frame.strip())
    if m is None:
        return frame.strip()
    return f"{m['func']} ({_short(m['file'])})"


def _package(frame: str) -> str | None:
    """The warren package of a frame key (``ra``, ``channel``...), None outside the repo."""
    m = re.search(r"\(([^()]*)\)$", frame)
    if m is None or "/" not in m[1]:
        return None
    top = m[1].split("/", 1)[0]
    if top in ("bench", "tests"):
        return None
    return top if (ROOT / top / "__init__.py").exists() else None


def top_of_collapsed(text: str, top: int = PROFILE_TOP) -> Profile:
    """Self and inclusive shares from py-spy's collapsed stacks (``a;b;c COUNT``).

    Each sample is also charged to the warren package of its innermost warren frame
    (time in a library called from ``ra`` counts for ``ra``), or to ``(outside
    warren)`` when no frame of the stack is warren's (pika, a pool thread).
    """
    own: Counter[str] = Counter()
    incl: Counter[str] = Counter()
    packages: Counter[str] = Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = [_frame_key(f) for f in stack.split(";")]
        frames = [f for f in frames if not f.startswith(("process ", "thread "))]
        if not frames:
            continue
        total += n
        own[frames[-1]] += n
        for key in set(frames):
            incl[key] += n
        pkg = next((p for p in map(_package, reversed(frames)) if p), "(outside warren)")
        packages[pkg] += n
    if total == 0:
        return Profile([], [], 0)
    return Profile([(k, round(100.0 * v / total, 1), round(100.0 * incl[k] / total, 1))
                    for k, v in own.most_common(top)],
                   [(k, round(100.0 * v / total, 1)) for k, v in packages.most_common()],
                   total)


def top_of_pstats(path: Path, top: int = PROFILE_TOP) -> Profile:
    import pstats

    stats = pstats.Stats(str(path)).stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in stats.values()) or 1.0
    rows = sorted(stats.items(), key=lambda kv: kv[1][2], reverse=True)[:top]
    return Profile([(f"{func} ({_short(file)})", round(100.0 * v[2] / total, 1),
                     round(100.0 * v[3] / total, 1)) for (file, _line, func), v in rows],
                   [], sum(v[1] for v in stats.values()))


# ------------------------------------------------------------------ phases


def run_phase(target: Target, phase: Phase, args: argparse.Namespace, root: Path,
              profiler: Profiler | None = None) -> dict[str, Any]:
    """One phase on a fresh queue: clients start, warm up, are measured, are killed."""
    queue = f"bench-e2e-{phase.name}-{os.getpid()}"
    declare(target.publisher_url, queue)
    nodes = target.node_pids(queue)
    prefix = profiler.client_prefix("publisher") if profiler else []
    consumer = publisher = None
    try:
        consumer = ClientProc([sys.executable, str(CLIENTS), "consumer", target.consumer_url,
                               queue, "--prefetch", str(PREFETCH)],
                              root / f"{phase.name}-consumer.log")
        consumer.line("ready", READY_TIMEOUT_S)
        publisher = ClientProc([sys.executable, *prefix, str(CLIENTS), "publisher",
                                target.publisher_url, queue, "--size", str(phase.size),
                                "--window", str(phase.window)],
                               root / f"{phase.name}-publisher.log")
        publisher.line("ready", READY_TIMEOUT_S)
        t0 = time.monotonic() + args.warmup
        t1 = t0 + args.seconds
        for c in (consumer, publisher):
            c.send(f"run {t0!r} {t1!r}\n")
        pids = {**nodes, "publisher": publisher.proc.pid, "consumer": consumer.proc.pid}
        time.sleep(max(0.0, t0 - time.monotonic()))
        if profiler is not None:
            if "leader" in nodes:
                profiler.attach("leader", nodes["leader"], args.seconds)
                profiler.attach("leader (GIL holder)", nodes["leader"], args.seconds, gil=True)
            profiler.attach("publisher", publisher.proc.pid, args.seconds)
        cpu0 = {k: _cpu_s(p) for k, p in pids.items()}
        time.sleep(max(0.0, t1 - time.monotonic()))
        cpu = {k: round((_cpu_s(p) - cpu0[k]) / args.seconds, 2) for k, p in pids.items()}
        pub = json.loads(publisher.line("result ", args.seconds + RESULT_GRACE_S))
        con = json.loads(consumer.line("result ", RESULT_GRACE_S))
    finally:
        for c in (publisher, consumer):
            if c is not None:
                c.close()
    delete(target.publisher_url, queue)
    lat = pub["latencies_ms"]
    return {
        "msgs_s": round(pub["confirmed"] / pub["seconds"], 1),
        "consumer_msgs_s": round(con["received"] / con["seconds"], 1),
        "confirm_p50_ms": round(percentile(lat, 0.50), 3),
        "confirm_p99_ms": round(percentile(lat, 0.99), 3),
        "nacked": pub["nacked"], "unconfirmed_at_end": pub["unconfirmed_at_end"],
        "redelivered": con["redelivered"], "cpu_cores": cpu,
    }


def _describe(phase: Phase, r: dict[str, Any]) -> str:
    size = "16 B" if phase.size == 16 else f"{phase.size // 1024} KiB"
    extra = ""
    if r["nacked"] or r["unconfirmed_at_end"]:
        extra = f", {r['nacked']} nacked, {r['unconfirmed_at_end']} unconfirmed at the end"
    return (f"{size:>5} window {phase.window:>3}: {r['msgs_s']:8.0f} msg/s confirmed, "
            f"consumer {r['consumer_msgs_s']:8.0f} msg/s, confirm p50 "
            f"{r['confirm_p50_ms']:.2f} ms p99 {r['confirm_p99_ms']:.2f} ms{extra}")


def measure(target: Target, phases: list[Phase], args: argparse.Namespace,
            root: Path) -> dict[str, dict[str, Any]]:
    """Every phase against one target, each printed as it ends."""
    target.consumer_node = 0 if args.consumer_node == "same" else 1
    print(f"{target.label}: publisher on {_where(target.publisher_url)}, consumer "
          f"on {_where(target.consumer_url)}; {args.warmup:g} s warm-up + "
          f"{args.seconds:g} s per phase", flush=True)
    results: dict[str, dict[str, Any]] = {}
    for phase in phases:
        results[phase.name] = r = run_phase(target, phase, args, root)
        print(f"  {_describe(phase, r)}", flush=True)
        if r["cpu_cores"]:
            print("        cpu (cores): " + ", ".join(
                f"{k} {v:.2f}" for k, v in r["cpu_cores"].items()), flush=True)
    return results


def profile_phase(target: Target, args: argparse.Namespace, root: Path,
                  py_spy: str | None) -> dict[str, Profile]:
    profiler = Profiler(py_spy, root)
    tool = "py-spy" if py_spy else "cProfile (publisher only: no py-spy)"
    print(f"profile phase (16 B, window 256) under {tool}:", flush=True)
    try:
        r = run_phase(target, PROFILE_PHASE, args, root, profiler)
        print("  " + _describe(PROFILE_PHASE, r), flush=True)
        profile = profiler.collect(RESULT_GRACE_S)
    finally:
        profiler.close()
    for name, prof in profile.items():
        print(f"  {name} ({prof.samples} samples): self% incl% function", flush=True)
        for func, own, incl in prof.rows:
            print(f"    {own:5.1f} {incl:5.1f}  {func}", flush=True)
        if prof.packages:
            print("    by package: " + ", ".join(
                f"{k} {v}%" for k, v in prof.packages), flush=True)
    return profile


#: figure name in the JSON line -> (phase, field of that phase's result)
FIGURES: dict[str, tuple[str, str]] = {
    "msgs_s_16b": ("16b", "msgs_s"), "msgs_s_1k": ("1k", "msgs_s"),
    "consumer_msgs_s_16b": ("16b", "consumer_msgs_s"),
    "consumer_msgs_s_1k": ("1k", "consumer_msgs_s"),
    "confirm_p50_ms_w256": ("16b", "confirm_p50_ms"),
    "confirm_p99_ms_w256": ("16b", "confirm_p99_ms"),
    "confirm_p50_ms_w256_1k": ("1k", "confirm_p50_ms"),
    "confirm_p99_ms_w256_1k": ("1k", "confirm_p99_ms"),
    "confirm_p50_ms_w1": ("w1", "confirm_p50_ms"), "confirm_p99_ms_w1": ("w1", "confirm_p99_ms"),
    "msgs_s_w1": ("w1", "msgs_s"), "cpu_cores_16b": ("16b", "cpu_cores"),
    "cpu_cores_w1": ("w1", "cpu_cores"),
}


def figures(results: dict[str, dict[str, Any]]) -> dict[str, Any]:
    return {name: results[phase][key] for name, (phase, key) in FIGURES.items()
            if phase in results}


def ratios(ours: dict[str, Any], ref: dict[str, Any]) -> dict[str, float]:
    """Throughput as a fraction of the reference's; latency as a multiple of it."""
    out: dict[str, float] = {}
    for key in ("msgs_s_16b", "msgs_s_1k"):
        if key in ours and ref.get(key):
            out[f"ratio_{key}_vs_reference"] = round(ours[key] / ref[key], 3)
    key = "confirm_p50_ms_w1"
    if key in ours and ref.get(key):
        out["ratio_confirm_p50_w1_vs_reference"] = round(ours[key] / ref[key], 2)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured, per phase")
    parser.add_argument("--warmup", type=float, default=2.0, help="before each phase")
    parser.add_argument("--nodes", type=int, default=3, help="warren nodes to start")
    parser.add_argument("--phases", default=",".join(p.name for p in PHASES),
                        help="comma-separated subset of " + ",".join(p.name for p in PHASES))
    parser.add_argument("--amqp-url", action="append", default=[],
                        help="an AMQP 0-9-1 broker to measure instead of warren "
                             "(repeatable or comma separated: one URL per node)")
    parser.add_argument("--rabbitmq", choices=("auto", "yes", "no"), default="auto",
                        help="also measure a local RabbitMQ cluster in this run as the "
                             "reference (auto: when rabbitmq-server is installed)")
    parser.add_argument("--profile", action="store_true",
                        help="a further phase under py-spy (leader node and publisher)")
    parser.add_argument("--py-spy", default=None, help="py-spy executable (default: PATH)")
    parser.add_argument("--dir", default=None, help="where data dirs and logs go")
    parser.add_argument("--ra", action="append", default=[], metavar="KEY=VALUE",
                        help="a Ra system setting for warren's nodes and RabbitMQ's alike "
                             "(repeatable), such as wal_pre_allocate=true")
    parser.add_argument("--record", type=int, default=None, metavar="K",
                        help="warren's nodes record their history, with a state digest "
                             "every K log indexes (what recording costs a run)")
    parser.add_argument("--consumer-node", choices=("other", "same"), default="other",
                        help="the consumer connects to another node than the publisher "
                             "(default) or to the publisher's, where the queue's leader is")
    args = parser.parse_args()
    if args.record is not None and args.record < 1:
        parser.error("--record: K must be at least 1")
    try:
        ra = ra_settings(args.ra)
    except ValueError as exc:
        parser.error(f"--ra: {exc}")
    urls = [u for arg in args.amqp_url for u in arg.split(",") if u]
    by_name = {p.name: p for p in PHASES}
    try:
        phases = [by_name[n] for n in args.phases.split(",") if n]
    except KeyError as exc:
        parser.error(f"unknown phase {exc}; known: {', '.join(by_name)}")
    want_rabbit = args.rabbitmq == "yes" or (args.rabbitmq == "auto" and not urls
                                             and rabbitmq_local.available())
    if args.rabbitmq == "yes" and not rabbitmq_local.available():
        parser.error("--rabbitmq yes: rabbitmq-server is not installed "
                     "(Debian: apt-get install rabbitmq-server)")
    py_spy = args.py_spy or shutil.which("py-spy")
    root = Path(tempfile.mkdtemp(prefix="warren-bench-e2e-", dir=args.dir))
    profile: dict[str, Profile] = {}
    reference: dict[str, Any] | None = None
    try:
        with (warren_cluster(root, args.nodes, ra, args.record) if not urls
              else _external(urls)) as target:
            results = measure(target, phases, args, root)
            if args.profile:
                profile = profile_phase(target, args, root, py_spy)
        if want_rabbit:
            try:
                with rabbit_target(root / "rabbitmq", args.nodes, ra) as rabbit:
                    reference = {**figures(measure(rabbit, phases, args, root)),
                                 "note": rabbit.label + ", measured in this run"}
            except (RuntimeError, OSError, subprocess.SubprocessError) as exc:
                if args.rabbitmq == "yes":
                    raise
                # auto: warren's figures stand; the fixed reference is used instead
                print(f"RabbitMQ reference not measured: {exc}", flush=True)
                want_rabbit = False
    finally:
        shutil.rmtree(root, ignore_errors=True)
    if reference is None:
        reference = {**REFERENCE_RABBITMQ_3_10_8, "note": REFERENCE_NOTE}
    ours = figures(results)
    out: dict[str, Any] = {
        "broker": target.label, **ours,
        "reference": reference,
        "reference_measured_in_run": want_rabbit,
        **ratios(ours, reference),
        "window": WINDOW, "prefetch": PREFETCH, "seconds": args.seconds,
        "warmup": args.warmup, "nodes": len(urls) or args.nodes, "ra": ra,
        "record_state_digest_every": args.record, "consumer_node": args.consumer_node,
    }
    if profile:
        out["profile_top_self"] = {k: [f"{f} {s}%" for f, s, _ in v.rows[:5]]
                                   for k, v in profile.items()}
        out["profile_by_package"] = {k: dict(v.packages) for k, v in profile.items()
                                     if v.packages}
    shown = ", ".join(f"{k} {reference[k]}" for k in ("msgs_s_16b", "msgs_s_1k",
                                                      "confirm_p50_ms_w1") if k in reference)
    print(f"reference ({reference['note']}): {shown}", flush=True)
    print(f"{target.label} / reference: " + ", ".join(
        f"{k.removeprefix('ratio_').removesuffix('_vs_reference')} x{v}"
        for k, v in ratios(ours, reference).items()), flush=True)
    print(json.dumps(out))
    return 0


def ra_settings(pairs: list[str]) -> dict[str, Any]:
    """``KEY=VALUE`` Ra system settings: ``true`` / ``false`` are booleans, digits are
    integers, anything else a name; checked as a warren node checks its ``ra`` table."""
    out: dict[str, Any] = {}
    for pair in pairs:
        key, eq, text = pair.partition("=")
        if not eq:
            raise ValueError(f"{pair!r} is not KEY=VALUE")
        value: Any = {"true": True, "false": False}.get(text, text)
        if isinstance(value, str) and value.isdigit():
            value = int(value)
        out[key.strip()] = value
    return check_ra_keys(out)


@contextmanager
def rabbit_target(root: Path, nodes: int,
                  ra: dict[str, Any] | None = None) -> Iterator[Target]:
    """A RabbitMQ cluster of `nodes` on loopback, as a target like warren's."""
    started = time.monotonic()
    with rabbitmq_local.rabbitmq_cluster(root, nodes, ra) as rabbit:
        version = rabbit.version()
        print(f"RabbitMQ {version}: {nodes} nodes ready in "
              f"{time.monotonic() - started:.1f} s", flush=True)
        yield Target(f"RabbitMQ {version} ({nodes} nodes, local)", [n.url for n in rabbit.nodes],
                     other_nodes={f"node-{i}": pid for i, pid in
                                  enumerate(rabbit.vm_pids(), start=1)})


@contextmanager
def _external(urls: list[str]) -> Iterator[Target]:
    yield Target("amqp-url", urls)


if __name__ == "__main__":
    sys.exit(main())
