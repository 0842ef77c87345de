#!/usr/bin/env python3
"""Time to first token of a conversation's second turn: prefix reuse vs a cold prefill.

Starts two `k3host serve` processes on the same pipeline: one with prefix reuse (the
default) and one with --no-prefix-reuse. For each turn-1 length, a fresh conversation:
turn 1 on the warm server, then turn 2 (turn 1, its reply, a short new user message) on
both servers with max_tokens=1, timed by the client; a one-token reply is the prefill plus
one sampled token, i.e. the time to first token. Warm and cold are measured alternately in
the same run (the machine is noisy and shared), and the ratio cold/warm is printed per row.
Turn 2 on both servers must produce the same reply (exactness); the script checks it.

  tools/bench/serve_ttft.py [--exe build/bin/k3host] [--config configs/default.yaml]
      [--set key=value]... [--lengths 64,256,1024,2048] [--reps 3] [--threads 2]

Not a ctest test. Standard library only.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import threading
import time
import urllib.request

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def start(exe, config, sets, extra, name):
    argv = [exe, 'serve', '--config', config, '--port', '0'] + extra
    for s in sets:
        argv += ['--set', s]
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    port = None
    deadline = time.time() + 600
    while port is None and time.time() < deadline:
        line = p.stderr.readline()
        if not line:
            sys.exit(f'{name}: the server exited ({p.wait()})')
        m = re.search(r'listening on http://127\.0\.0\.1:(\d+)', line)
        if m:
            port = int(m.group(1))
    while time.time() < deadline:
        line = p.stderr.readline()
        if 'ready on' in line:
            break
        if not line:
            sys.exit(f'{name}: the server exited while loading ({p.wait()})')
    # Keep draining stderr so the server never blocks on a full pipe.
    threading.Thread(target=lambda: [None for _ in p.stderr], daemon=True).start()
    return p, port


def post(port, path, body):
    req = urllib.request.Request(f'http://127.0.0.1:{port}{path}', data=json.dumps(body).encode(),
                                 headers={'Content-Type': 'application/json'})
    t0 = time.perf_counter()
    with urllib.request.urlopen(req, timeout=3600) as r:
        out = json.loads(r.read())
    return out, time.perf_counter() - t0


def user_text(n_sentences, tag):
    s = []
    for i in range(n_sentences):
        s.append(f'Sentence {i} of conversation {tag}: the river carries stones down to the sea, and nobody counts them. ')
    return ''.join(s) + 'What is the point of this story?'


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument('--exe', default=os.path.join(REPO, 'build/bin/k3host'))
    ap.add_argument('--config', default=os.path.join(REPO, 'configs/default.yaml'))
    ap.add_argument('--set', dest='sets', action='append', default=[])
    ap.add_argument('--lengths', default='64,256,1024,2048', help='turn-1 prompt sizes (tokens, approximate)')
    ap.add_argument('--reps', type=int, default=3)
    ap.add_argument('--threads', type=int, default=2)
    ap.add_argument('--reply-tokens', type=int, default=8, help='max_tokens of turn 1')
    a = ap.parse_args()
    sets = a.sets + [f'threads={a.threads}']
    warm, wport = start(a.exe, a.config, sets, [], 'warm')
    cold, cport = start(a.exe, a.config, sets, ['--no-prefix-reuse'], 'cold')
    rows = []
    try:
        # The tokens one sentence takes, from the server's own count.
        probe, _ = post(wport, '/v1/chat/completions', {'messages': [{'role': 'user', 'content': user_text(10, 'probe')}],
                                                         'max_tokens': 1, 'temperature': 0})
        base, _ = post(wport, '/v1/chat/completions', {'messages': [{'role': 'user', 'content': user_text(0, 'probe')}],
                                                        'max_tokens': 1, 'temperature': 0})
        per_sentence = (probe['usage']['prompt_tokens'] - base['usage']['prompt_tokens']) / 10
        for length in [int(x) for x in a.lengths.split(',')]:
            sentences = max(0, round((length - base['usage']['prompt_tokens']) / per_sentence))
            warm_t, cold_t, t1_tokens, t2_tokens, cached = [], [], [], [], []
            for rep in range(a.reps):
                tag = f'{length}-{rep}-{time.time_ns()}'
                msgs = [{'role': 'user', 'content': user_text(sentences, tag)}]
                t1, _ = post(wport, '/v1/chat/completions', {'messages': msgs, 'max_tokens': a.reply_tokens, 'temperature': 0})
                t1_tokens.append(t1['usage']['prompt_tokens'])
                msgs2 = msgs + [{'role': 'assistant', 'content': t1['choices'][0]['message']['content']},
                                {'role': 'user', 'content': 'And then what happened?'}]
                body = {'messages': msgs2, 'max_tokens': 1, 'temperature': 0}
                # Alternate which goes first, so drift in the machine's load hits both.
                order = [('warm', wport), ('cold', cport)] if rep % 2 == 0 else [('cold', cport), ('warm', wport)]
                got = {}
                for name, port in order:
                    out, dt = post(port, '/v1/chat/completions', body)
                    got[name] = out
                    (warm_t if name == 'warm' else cold_t).append(dt)
                if got['warm']['choices'][0]['message'] != got['cold']['choices'][0]['message']:
                    sys.exit(f'exactness: warm and cold turn 2 differ at length {length}: '
                             f'{got["warm"]["choices"][0]["message"]} vs {got["cold"]["choices"][0]["message"]}')
                t2_tokens.append(got['warm']['usage']['prompt_tokens'])
                cached.append(got['warm']['usage']['prompt_tokens_details']['cached_tokens'])
                if cached[-1] < t1_tokens[-1]:
                    sys.exit(f'turn 2 reused {cached[-1]} tokens, fewer than turn 1\'s prompt of {t1_tokens[-1]}')
                assert got['cold']['usage']['prompt_tokens_details']['cached_tokens'] == 0
            w, c = statistics.median(warm_t), statistics.median(cold_t)
            t1m, t2m, cm = (int(statistics.median(x)) for x in (t1_tokens, t2_tokens, cached))
            rows.append((t1m, t2m, cm, w, c, c / w))
            print(f'turn-1 prompt {t1m:5d}  turn-2 prompt {t2m:5d}  reused {cm:5d}  '
                  f'TTFT warm {w:7.3f} s  cold {c:7.3f} s  cold/warm {c / w:6.1f}x', flush=True)
    finally:
        for p in (warm, cold):
            p.send_signal(2)
        for p in (warm, cold):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    print('\n| turn-1 prompt tokens | turn-2 prompt tokens | reused | TTFT turn 2, reuse (s) | TTFT turn 2, cold (s) | cold / reuse |')
    print('|---:|---:|---:|---:|---:|---:|')
    for r in rows:
        print(f'| {r[0]} | {r[1]} | {r[2]} | {r[3]:.3f} | {r[4]:.3f} | {r[5]:.1f}x |')


if __name__ == '__main__':
    main()
