// Unit tests of the UI's pure logic (SSE parsing, error decoding, windowed
// percentiles), bundled from the TypeScript sources by esbuild. No browser.
import { before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { build } from "esbuild";
import { mkdtempSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join } from "node:path";
import { fileURLToPath, pathToFileURL } from "node:url";

const here = dirname(fileURLToPath(import.meta.url));
let sse;
let stats;
let axes;

before(async () => {
  const out = mkdtempSync(join(tmpdir(), "webui-unit-"));
  writeFileSync(join(out, "package.json"), '{"type":"module"}');
  await build({
    entryPoints: { sse: join(here, "../src/sse.ts"), stats: join(here, "../src/stats.ts"), axes: join(here, "../src/axes.ts") },
    outdir: out,
    bundle: true,
    format: "esm",
    platform: "neutral",
    logLevel: "warning",
  });
  sse = await import(pathToFileURL(join(out, "sse.js")).href);
  stats = await import(pathToFileURL(join(out, "stats.js")).href);
  axes = await import(pathToFileURL(join(out, "axes.js")).href);
});

describe("axes", () => {
  it("never gives a flat y range", () => {
    const cases = [
      // [min, max, integer, want]
      [0, 0, true, [0, 5]],
      [0, 0, false, [0, 1]],
      [null, null, true, [0, 5]],
      [3, 3, true, [0, 5]],
      [0, 40, true, [0, 44]],
      [0, 7, true, [0, 8]],
      [0, 2.5, false, [0, 2.75]],
      [-2, 0, false, [-2, 0]],
      [-0.5, 0, false, [-0.5, 0.5]],
    ];
    for (const [min, max, integer, want] of cases) {
      const got = axes.yRange(min, max, integer).map((v) => Math.round(v * 1000) / 1000);
      assert.deepEqual(got, want, `yRange(${min}, ${max}, ${integer})`);
    }
  });
  it("labels counts as distinct integers and other values distinctly", () => {
    assert.deepEqual(axes.numLabels([0, 1, 2, 3, 4, 5], true), ["0", "1", "2", "3", "4", "5"]);
    assert.deepEqual(axes.numLabels([0, 1000, 2000], true), ["0", "1,000", "2,000"]);
    assert.deepEqual(axes.numLabels([0, 0.2, 0.4, 0.6], false), ["0.0", "0.2", "0.4", "0.6"]);
    assert.deepEqual(axes.numLabels([0, 25, 50, 75, 100], false), ["0", "25", "50", "75", "100"]);
    assert.deepEqual(axes.numLabels([0, 0.0005, 0.001], false), ["0.0000", "0.0005", "0.0010"]);
  });
  it("labels time ticks hh:mm:ss", () => {
    const t0 = new Date(2026, 10, 25, 9, 5, 7).getTime() / 1000;
    assert.deepEqual(axes.timeLabels([t0, t0 + 15, t0 + 60, t0 + 3600]), ["09:05:07", "09:05:22", "09:06:07", "10:05:07"]);
    assert.ok(axes.timeIncrs.every((s) => Number.isInteger(s) && s >= 1), "time ticks are whole seconds");
    assert.ok(axes.intIncrs.every((s) => Number.isInteger(s) && s >= 1), "count ticks are whole numbers");
  });
});

describe("SSEParser", () => {
  const cases = [
    { name: "one event", in: ["data: a\n\n"], want: ["a"] },
    { name: "split anywhere", in: ["da", "ta: {\"x\"", ":1}\n", "\ndata: [DONE]\n\n"], want: ['{"x":1}', "[DONE]"] },
    { name: "CRLF", in: ["data: a\r\n\r\ndata: b\r\n\r\n"], want: ["a", "b"] },
    { name: "CR split from LF", in: ["data: a\r", "\n\r", "\n"], want: ["a"] },
    { name: "lone CR", in: ["data: a\r\rdata: b\r\r"], want: ["a", "b"] },
    { name: "multi-line data", in: ["data: a\ndata: b\n\n"], want: ["a\nb"] },
    { name: "comments and other fields", in: [": ping\nevent: x\nid: 3\ndata:no-space\n\n"], want: ["no-space"] },
    { name: "blank lines without data", in: ["\n\n\n"], want: [] },
  ];
  for (const c of cases) {
    it(c.name, () => {
      const p = new sse.SSEParser();
      const got = c.in.flatMap((s) => p.push(s)).concat(p.end());
      assert.deepEqual(got, c.want);
    });
  }
  it("gives the same events however the stream is split", () => {
    const stream = 'data: {"a":1}\r\n\r\n: keep-alive\n\ndata: {"b":"x\\ny"}\n\ndata: line1\rdata: line2\r\rdata: [DONE]\n\n';
    const want = ['{"a":1}', '{"b":"x\\ny"}', "line1\nline2", "[DONE]"];
    const parse = (parts) => {
      const p = new sse.SSEParser();
      return parts.flatMap((x) => p.push(x)).concat(p.end());
    };
    assert.deepEqual(parse([stream]), want);
    for (let i = 0; i <= stream.length; i++) {
      for (let j = i; j <= stream.length; j += 3) {
        assert.deepEqual(parse([stream.slice(0, i), stream.slice(i, j), stream.slice(j)]), want, `split at ${i}, ${j}`);
      }
    }
    assert.deepEqual(parse([...stream]), want, "one character at a time");
  });
  it("flushes an unterminated event at the end", () => {
    const p = new sse.SSEParser();
    assert.deepEqual(p.push("data: tail"), []);
    assert.deepEqual(p.end(), ["tail"]);
  });
});

describe("SSEParser events", () => {
  it("keeps each event's name with its data, across any split", () => {
    const stream = 'event: response.created\ndata: {"type":"response.created"}\n\nevent: message_start\r\ndata: a\r\ndata: b\r\n\r\ndata: [DONE]\n\n';
    const want = [
      { event: "response.created", data: '{"type":"response.created"}' },
      { event: "message_start", data: "a\nb" },
      { event: "", data: "[DONE]" },
    ];
    for (const size of [1, 2, 3, 7, stream.length]) {
      const p = new sse.SSEParser();
      const got = [];
      for (let i = 0; i < stream.length; i += size) got.push(...p.pushEvents(stream.slice(i, i + size)));
      got.push(...p.endEvents());
      assert.deepEqual(got, want, `fragments of ${size}`);
    }
  });
  it("does not carry an event name into the next event", () => {
    const p = new sse.SSEParser();
    assert.deepEqual(p.pushEvents("event: ping\n\ndata: x\n\n"), [{ event: "", data: "x" }]);
  });
});

describe("streamError", () => {
  const cases = [
    // [name, event JSON, want message or null]
    ["OpenAI chat error", { error: { message: "boom", type: "internal_server_error", code: 500 } }, "boom"],
    ["Anthropic error event", { type: "error", error: { type: "overloaded_error", message: "busy" } }, "busy"],
    ["Responses error event", { type: "error", code: "server_error", message: "engine died", param: null }, "engine died"],
    ["Responses failed", { type: "response.failed", response: { error: { code: "server_error", message: "failed here" } } }, "failed here"],
    ["chat chunk", { choices: [{ delta: { content: "hi" } }] }, null],
    ["Responses delta", { type: "response.output_text.delta", delta: "error" }, null],
    ["Messages delta", { type: "content_block_delta", delta: { type: "text_delta", text: "error" } }, null],
  ];
  for (const [name, j, want] of cases) {
    it(name, () => {
      const e = sse.streamError(200, j, JSON.stringify(j));
      if (want === null) return assert.equal(e, null);
      assert.equal(e.message, want);
      assert.equal(e.midStream, true);
    });
  }
});

describe("errorFromBody", () => {
  it("reads the OpenAI error document", () => {
    const e = sse.errorFromBody(400, '{"error":{"message":"bad temperature","type":"invalid_request_error","param":"temperature","code":400}}', false);
    assert.equal(e.message, "bad temperature");
    assert.equal(e.status, 400);
    assert.equal(e.param, "temperature");
    assert.equal(e.midStream, false);
  });
  it("explains a body that is not JSON", () => {
    const e = sse.errorFromBody(502, "<html>bad gateway</html>", false);
    assert.match(e.message, /^HTTP 502: <html>bad gateway/);
  });
  it("reads a string error", () => {
    assert.equal(sse.errorFromBody(500, '{"error":"boom"}', true).message, "boom");
  });
  it("handles an empty body", () => {
    assert.match(sse.errorFromBody(503, "", false).message, /empty body/);
  });
});

describe("quantiles", () => {
  const upper = [1, 2, 4];
  const cum = [2, 6, 8];
  it("interpolates like webui.Histogram.Quantile", () => {
    const want = [[0.1, 0.5], [0.2, 1], [0.4, 1.5], [0.7, 3], [0.8, 4], [0.95, 4]];
    for (const [q, v] of want) assert.ok(Math.abs(stats.quantile(upper, cum, 10, q) - v) < 1e-12, `q=${q}`);
  });
  it("is null when empty", () => {
    assert.equal(stats.quantile(upper, [0, 0, 0], 0, 0.5), null);
    assert.equal(stats.quantile([], [], 3, 0.5), null);
  });
  it("windows by differencing snapshots", () => {
    const older = { upper, cumulative: [2, 2, 2], count: 2, sum: 1 };
    const newer = { upper, cumulative: [2, 6, 6], count: 6, sum: 7 };
    // The window holds 4 observations, all in (1, 2]: the median is 1.5.
    assert.equal(stats.windowQuantile(newer, older, 0.5), 1.5);
    assert.equal(stats.windowQuantile(newer, newer, 0.5), null, "no observations in the window");
    assert.equal(stats.windowQuantile(older, newer, 0.5), null, "a reset gives no figure");
    assert.equal(stats.windowQuantile(newer, undefined, 0.5), stats.quantile(upper, [2, 6, 6], 6, 0.5));
  });
  it("computes rates, null across resets", () => {
    assert.equal(stats.rate(10, 40, 10), 3);
    assert.equal(stats.rate(40, 10, 10), null);
    assert.equal(stats.rate(1, 2, 0), null);
  });
});

describe("History", () => {
  it("keeps samples per frontend and finds the one a window back", () => {
    const h = new stats.History(30_000);
    const doc = (id) => ({ frontend: { id }, engines: [] });
    for (let t = 0; t <= 20_000; t += 1000) {
      h.add({ t, stats: doc("a") });
      h.add({ t: t + 500, stats: doc("b") });
    }
    assert.equal(h.before("a", 20_000, 10_000).t, 10_000);
    assert.equal(h.before("b", 20_500, 10_000).t, 10_500);
    assert.equal(h.before("a", 3_000, 10_000).t, 0, "the oldest when the window reaches past the start");
    assert.equal(h.before("c", 3_000, 10_000), undefined);
    h.add({ t: 60_000, stats: doc("a") });
    assert.equal(h.before("a", 60_000, 10_000).t, 60_000, "old samples expire");
  });
});
