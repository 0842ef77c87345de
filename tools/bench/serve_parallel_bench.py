#!/usr/bin/env python3
"""Continuous batching: 1, 2, 4, 8 concurrent streams against one `k3host serve`.

Starts one server (`--parallel` the largest stream count) on the given pipeline and, for
each stream count N, sends N streamed text completions at once: stream i always has the
same prompt (prompt i of a fixed set) and samples with seed i, so every N runs the same
first streams again. Per N it measures, from the client's clock and the server's
/metrics:

  aggregate tokens/s   every stream's generated tokens / wall time from the first request
                       sent to the last stream's end
  bytes per token      bytes the server read from storage (trunk, experts, tables) during
                       the round / tokens generated in it
  TTFT p50/p99         first text chunk of each stream, from its request
  ITL p50/p99          gaps between consecutive text chunks of each stream
  CPU s/token          the server process's CPU time (user + system, /proc) during the
                       round / tokens generated: on a shared machine, where the wall time of
                       a compute-bound run depends on what else runs, the steadier figure

and prints each as a ratio to the 1-stream round of the same run. With --arrival N, one
more measurement: the largest stream count less one streams run, and once each has its
first tokens an N-token prompt arrives (max_tokens 1); it prints the streams' gaps between
tokens before it and while it is prefilled beside them (p50, p99, max), and its own time to
first token: how far serve.prefill_budget bounds the running streams' latency. The rounds run
--reps times in the order 1, 2, 4, 8, 1, 2, ... (a shared machine drifts; interleaving
spreads it over every N); the figures are the medians over the repetitions. A warm-up
round (one stream) runs first. Also checks exactness: stream i's text is the same in
every round that runs it.

  tools/bench/serve_parallel_bench.py [--exe build/bin/k3host] [--config presets/laptop.yaml]
      [--set key=value]... [--streams 1,2,4,8] [--tokens 32] [--reps 2] [--arrival N] [--json OUT]

Not a ctest test. Standard library only.
"""
import argparse
import http.client
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# Eight different prompts, one per stream.
PROMPTS = [
    'The history of the river begins',
    'In the morning the market was',
    'A short note on the theory of',
    'She opened the letter and read',
    'The recipe calls for three',
    'Across the valley the bells',
    'Our results show that the',
    'When the train finally stopped',
]


def start(exe, config, sets, parallel):
    argv = [exe, 'serve', '--config', config, '--port', '0', '--parallel', str(parallel), '--queue', '64']
    for s in sets:
        argv += ['--set', s]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 1800
    lines = []
    while time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            sys.exit('the server exited (%s):\n%s' % (p.wait(), ''.join(lines[-20:])))
        lines.append(line)
        m = re.search(r'listening on http://127\.0\.0\.1:(\d+)', line)
        if m:
            port = int(m.group(1))
        if 'ready on' in line:
            break
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port, ''.join(lines)


def metrics(port):
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=60)
    c.request('GET', '/metrics')
    text = c.getresponse().read().decode()
    c.close()
    def value(pattern):
        m = re.search(r'^' + pattern + r' (\S+)$', text, re.M)
        return float(m.group(1)) if m else 0.0
    read = sum(value('k3_bytes_read_total\\{source="%s"\\}' % s) for s in ('trunk', 'experts', 'tables'))
    return {'read': read, 'generated': value('k3_generated_tokens_total'), 'steps': value('k3_batch_size_count'),
            'in_steps': value('k3_batch_size_sum')}


def cpu_seconds(pid):
    """User + system CPU seconds of process `pid` so far (every thread)."""
    with open('/proc/%d/stat' % pid) as f:
        fields = f.read().rsplit(')', 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def stream(port, prompt, seed, tokens, out, quit=None):
    """One streamed completion; fills out with its send time, chunk times, text, tokens. Set
    `quit` (a threading.Event) to hang up early: the server ends the generation."""
    body = json.dumps({'model': 'm', 'prompt': prompt, 'max_tokens': tokens, 'temperature': 0.8, 'seed': seed,
                       'stream': True, 'stream_options': {'include_usage': True}})
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=3600)
    out['sent'] = time.perf_counter()
    c.request('POST', '/v1/completions', body, {'Content-Type': 'application/json'})
    r = c.getresponse()
    times, text, usage, buf = [], '', None, b''
    out['times'] = times  # filled as the chunks come (--arrival watches it)
    while quit is None or not quit.is_set():
        chunk = r.read1(65536)
        if not chunk:
            break
        buf += chunk
        while b'\n\n' in buf:
            event, buf = buf.split(b'\n\n', 1)
            if not event.startswith(b'data: ') or event == b'data: [DONE]':
                continue
            j = json.loads(event[6:])
            if j.get('usage'):
                usage = j['usage']
            if j.get('choices') and j['choices'][0].get('text'):
                times.append(time.perf_counter())
                text += j['choices'][0]['text']
    c.close()
    out.update(times=times, text=text, tokens=usage['completion_tokens'] if usage else 0, done=time.perf_counter())


def pct(values, q):
    if not values:
        return float('nan')
    v = sorted(values)
    return v[min(len(v) - 1, max(0, int(round(q * len(v) + 0.5)) - 1))]


def round_of(port, n, tokens, pid):
    before = metrics(port)
    cpu0 = cpu_seconds(pid)
    outs = [dict() for _ in range(n)]
    threads = [threading.Thread(target=stream, args=(port, PROMPTS[i], i, tokens, outs[i])) for i in range(n)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = max(o['done'] for o in outs) - t0
    after = metrics(port)
    cpu = cpu_seconds(pid) - cpu0
    generated = sum(o['tokens'] for o in outs)
    ttft = [o['times'][0] - o['sent'] for o in outs if o['times']]
    itl = [b - a for o in outs for a, b in zip(o['times'], o['times'][1:])]
    steps = after['steps'] - before['steps']
    return {'streams': n, 'tokens': generated, 'wall_s': wall, 'tokens_per_s': generated / wall,
            'bytes_per_token': (after['read'] - before['read']) / max(1, generated),
            'ttft_p50': pct(ttft, 0.5), 'ttft_p99': pct(ttft, 0.99), 'itl_p50': pct(itl, 0.5), 'itl_p99': pct(itl, 0.99),
            'sequences_per_step': (after['in_steps'] - before['in_steps']) / max(1, steps),
            'cpu_per_token': cpu / max(1, generated),
            'texts': [o['text'] for o in outs]}


def arrival(port, streams, tokens, length):
    """`streams` running streams, then a `length`-token prompt beside them."""
    quit = threading.Event()
    outs = [dict(times=[]) for _ in range(streams)]
    threads = [threading.Thread(target=stream, args=(port, PROMPTS[i], i, tokens, outs[i], quit)) for i in range(streams)]
    for t in threads:
        t.start()
    deadline = time.time() + 3600
    while time.time() < deadline and any(len(o.get('times', [])) < 3 for o in outs):
        time.sleep(0.01)
    ids = [100 + (i * 7919) % 3000 for i in range(length)]  # within every model's vocabulary here
    body = json.dumps({'model': 'm', 'prompt': ids, 'max_tokens': 1, 'temperature': 0})
    c = http.client.HTTPConnection('127.0.0.1', port, timeout=3600)
    t0 = time.perf_counter()
    c.request('POST', '/v1/completions', body, {'Content-Type': 'application/json'})
    usage = json.loads(c.getresponse().read())['usage']
    t1 = time.perf_counter()
    c.close()
    time.sleep(min(5.0, t1 - t0))  # some gaps after it, for the record
    quit.set()
    for t in threads:
        t.join()
    before, during = [], []
    for o in outs:
        for a, b in zip(o['times'], o['times'][1:]):
            if b <= t0:
                before.append(b - a)
            elif a >= t0 and b <= t1:
                during.append(b - a)
            elif a < t1 and b > t0:
                during.append(b - a)  # a gap the arrival overlaps
    return {'streams': streams, 'prompt_tokens': usage['prompt_tokens'], 'ttft_s': t1 - t0,
            'itl_before': {'p50': pct(before, 0.5), 'p99': pct(before, 0.99), 'max': max(before, default=float('nan'))},
            'itl_during': {'p50': pct(during, 0.5), 'p99': pct(during, 0.99), 'max': max(during, default=float('nan')),
                           'count': len(during)}}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--exe', default=os.path.join(REPO, 'build/bin/k3host'))
    ap.add_argument('--config', default=os.path.join(REPO, 'presets/laptop.yaml'))
    ap.add_argument('--set', dest='sets', action='append', default=[])
    ap.add_argument('--streams', default='1,2,4,8')
    ap.add_argument('--tokens', type=int, default=32, help='max_tokens of every stream')
    ap.add_argument('--reps', type=int, default=2)
    ap.add_argument('--arrival', type=int, default=0, help='prompt tokens of a long prompt arriving beside running streams')
    ap.add_argument('--json', help='write the rounds and the table here')
    a = ap.parse_args()
    counts = [int(x) for x in a.streams.split(',')]
    if max(counts) > len(PROMPTS):
        sys.exit('at most %d streams' % len(PROMPTS))
    server, port, log = start(a.exe, a.config, a.sets, max(counts))
    try:
        round_of(port, 1, a.tokens, server.pid)  # warm-up: the expert cache, the page cache
        rounds = {n: [] for n in counts}
        texts = {}
        for rep in range(a.reps):
            for n in counts:
                r = round_of(port, n, a.tokens, server.pid)
                rounds[n].append(r)
                for i, t in enumerate(r['texts']):
                    if texts.setdefault(i, t) != t:
                        sys.exit('stream %d gave another text with %d streams (exactness broken)' % (i, n))
                print('rep %d, %d streams: %.2f tokens/s, %.0f bytes/token, %.4f CPU s/token, %.2f sequences/step' %
                      (rep + 1, n, r['tokens_per_s'], r['bytes_per_token'], r['cpu_per_token'], r['sequences_per_step']),
                      file=sys.stderr)
        if a.arrival:
            try:
                arrived = arrival(port, max(1, max(counts) - 1), 100000, a.arrival)
            except Exception as e:  # the rounds above still print
                print('the arrival measurement failed: %r' % e, file=sys.stderr)
                a.arrival = 0
    finally:
        server.send_signal(2)
        server.wait(timeout=120)
    keys = ['tokens_per_s', 'bytes_per_token', 'ttft_p50', 'ttft_p99', 'itl_p50', 'itl_p99', 'sequences_per_step',
            'cpu_per_token']
    med = {n: {k: statistics.median(r[k] for r in rounds[n]) for k in keys} for n in counts}
    base = med[counts[0]]
    print('| streams | tokens/s (all) | x | bytes/token | x | TTFT p50 s | x | TTFT p99 s | ITL p50 s | x | ITL p99 s | x | '
          'CPU s/token | x | seq/step |')
    print('|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|')
    for n in counts:
        m = med[n]
        ratio = lambda k: m[k] / base[k] if base[k] else float('nan')
        print('| %d | %.2f | %.2f | %s | %.2f | %.3f | %.2f | %.3f | %.4f | %.2f | %.4f | %.2f | %.4f | %.2f | %.2f |' % (
            n, m['tokens_per_s'], ratio('tokens_per_s'), '{:,.0f}'.format(m['bytes_per_token']), ratio('bytes_per_token'),
            m['ttft_p50'], ratio('ttft_p50'), m['ttft_p99'], m['itl_p50'], ratio('itl_p50'), m['itl_p99'],
            ratio('itl_p99'), m['cpu_per_token'], ratio('cpu_per_token'), m['sequences_per_step']))
    if a.arrival:
        b, d = arrived['itl_before'], arrived['itl_during']
        print('\n%d streams running, a %d-token prompt arrives: its time to first token %.2f s; the streams\' gaps '
              'between tokens before it p50 %.4f s, p99 %.4f s, max %.4f s; while it is prefilled (%d gaps) p50 %.4f s, '
              'p99 %.4f s, max %.4f s' % (arrived['streams'], arrived['prompt_tokens'], arrived['ttft_s'], b['p50'], b['p99'],
                                          b['max'], d['count'], d['p50'], d['p99'], d['max']))
    if a.json:
        with open(a.json, 'w') as f:
            json.dump({'config': a.config, 'sets': a.sets, 'tokens': a.tokens, 'reps': a.reps,
                       'rounds': {str(n): [{k: v for k, v in r.items() if k != 'texts'} for r in rounds[n]] for n in counts},
                       'medians': {str(n): med[n] for n in counts}, 'arrival': arrived if a.arrival else None}, f, indent=2)


if __name__ == '__main__':
    main()
