#!/usr/bin/env python3
"""Running streams' inter-token gaps while a long prompt arrives.

Usage: long-prompt-gap.py BASE_URL [--streams 4] [--stream-prompt 128]
       [--long-prompt 2000] [--count 1] [--vocab 32000] [--seed 1] [--json OUT]

Starts --streams streaming /v1/completions requests (random token-id
prompts, ignore_eos, many tokens), waits until each has 5 tokens, then
sends --count (1) prompts of --long-prompt tokens together (max_tokens 2)
and, once they ended, stops the streams. Prints the streams' inter-token
gaps from the new prompts' arrival until their end (max, p99, p50), the
new requests' first and last time to first token and the prefill rate
(new prompt tokens / last TTFT). Used by
scripts/bench-long-prompt.sh; not part of the test suite.
"""
import argparse, http.client, json, random, sys, threading, time, urllib.parse

ap = argparse.ArgumentParser()
ap.add_argument("base")
ap.add_argument("--streams", type=int, default=4)
ap.add_argument("--stream-prompt", type=int, default=128)
ap.add_argument("--long-prompt", type=int, default=2000)
ap.add_argument("--count", type=int, default=1, help="new prompts sent together (a burst), each --long-prompt tokens")
ap.add_argument("--vocab", type=int, default=32000)
ap.add_argument("--seed", type=int, default=1)
ap.add_argument("--json")
a = ap.parse_args()
u = urllib.parse.urlparse(a.base)
rng = random.Random(a.seed)


def model_name():
    c = http.client.HTTPConnection(u.hostname, u.port, timeout=60)
    c.request("GET", "/v1/models")
    return json.loads(c.getresponse().read())["data"][0]["id"]


MODEL = model_name()


def prompt(n):
    return [rng.randrange(a.vocab // 10, a.vocab - a.vocab // 50) for _ in range(n)]


class Stream(threading.Thread):
    def __init__(self, ids, max_tokens):
        super().__init__(daemon=True)
        self.ids, self.max_tokens = ids, max_tokens
        self.times, self.stop, self.sent = [], False, None

    def run(self):
        c = http.client.HTTPConnection(u.hostname, u.port, timeout=600)
        req = {"model": MODEL, "prompt": self.ids, "stream": True, "ignore_eos": True, "temperature": 0}
        if self.max_tokens:
            req["max_tokens"] = self.max_tokens  # none: up to the model's length
        body = json.dumps(req)
        self.sent = time.monotonic()
        c.request("POST", "/v1/completions", body, {"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            print("HTTP", r.status, r.read()[:300], file=sys.stderr)
            return
        while not self.stop:
            line = r.fp.readline()
            if not line:
                break
            if line.startswith(b"data: [DONE]"):
                break
            if line.startswith(b"data: "):
                self.times.append(time.monotonic())
        c.close()


streams = [Stream(prompt(a.stream_prompt), None) for _ in range(a.streams)]
for s in streams:
    s.start()
while any(len(s.times) < 5 for s in streams):
    time.sleep(0.05)
t0 = time.monotonic()
news = [Stream(prompt(a.long_prompt), 2) for _ in range(a.count)]
for n in news:
    n.start()
for n in news:
    n.join()
t1 = time.monotonic()
for s in streams:
    s.stop = True
ttfts = sorted(n.times[0] - n.sent if n.times else float("nan") for n in news)
ttft = ttfts[0]
gaps = []
for s in streams:
    ts = [t for t in s.times]
    for x, y in zip(ts, ts[1:]):
        if y >= t0 and x <= t1:
            gaps.append(y - x)
gaps.sort()
pct = lambda p: gaps[min(len(gaps) - 1, int(p / 100 * len(gaps)))] if gaps else float("nan")
res = {"streams": a.streams, "long_prompt": a.long_prompt, "count": a.count, "gap_max_s": gaps[-1] if gaps else float("nan"),
       "gap_p99_s": pct(99), "gap_p50_s": pct(50), "gaps": len(gaps), "ttft_first_s": ttft, "ttft_last_s": ttfts[-1],
       "prefill_tok_s": a.count * a.long_prompt / ttfts[-1], "window_s": t1 - t0}
print(f"streams {a.streams}: gaps in the window {len(gaps)}, max {res['gap_max_s']:.2f} s, p99 {res['gap_p99_s']:.2f} s, "
      f"p50 {res['gap_p50_s']:.3f} s; {a.count} x {a.long_prompt}-token prompts: TTFT {ttft:.2f} s (last {ttfts[-1]:.2f} s), "
      f"prefill {res['prefill_tok_s']:.1f} tok/s; window {t1 - t0:.1f} s")
if a.json:
    json.dump(res, open(a.json, "w"))
