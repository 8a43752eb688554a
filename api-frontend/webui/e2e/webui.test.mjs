// Browser test of the web UI: Playwright (playwright-core) drives Debian's
// Chromium, headless, against either the scripted fake server (default: built
// and started here) or a running Sluice server (SLUICE_UI_BASE_URL).
//
// Environment:
//   SLUICE_UI_BASE_URL   target server, e.g. http://127.0.0.1:8000 (default: start the fake)
//   SLUICE_UI_API_KEY    API key to type into the playground and send to /metrics and stats
//   SLUICE_UI_SKIP       comma-separated checks to skip against a server that cannot
//                        produce them: tools, reasoning, midstream-error
//   SLUICE_UI_LONG_PROMPT  prompt for the abort check (default: a long story request)
//   SLUICE_UI_LONG_MAX_TOKENS  max_tokens for the abort check (default 1500; must fit the context)
//   SLUICE_UI_UPDATE_DOCS=1  also write the screenshots to docs/webui/
//   CHROMIUM             browser binary (default /usr/bin/chromium)
// Screenshots go to test-artifacts/webui/ at the repository root.
import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { spawn, execFileSync } from "node:child_process";
import { existsSync, mkdirSync, copyFileSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { createInterface } from "node:readline";

const here = dirname(fileURLToPath(import.meta.url));
const repo = resolve(here, "../../..");
const artifacts = join(repo, "test-artifacts", "webui");
const docsDir = join(repo, "docs", "webui");
const chromiumPath = process.env.CHROMIUM || "/usr/bin/chromium";
const apiKey = process.env.SLUICE_UI_API_KEY || "";
const skip = new Set((process.env.SLUICE_UI_SKIP || "").split(",").map((s) => s.trim()).filter(Boolean));
const updateDocs = process.env.SLUICE_UI_UPDATE_DOCS === "1";

let chromium;
let skipAll = "";
try {
  ({ chromium } = await import("playwright-core"));
} catch (e) {
  skipAll = `playwright-core is not installed (run npm ci in api-frontend/webui): ${e.message}`;
}
if (!skipAll && !existsSync(chromiumPath)) {
  skipAll = `no Chromium at ${chromiumPath}: install Debian's chromium (apt-get install -y chromium) or set CHROMIUM`;
}
if (skipAll) console.log(`# SKIP web UI browser test: ${skipAll}`);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

/** waitFor polls fn until it returns a truthy value or the time runs out. */
async function waitFor(what, fn, timeoutMs = 15000, everyMs = 100) {
  const end = Date.now() + timeoutMs;
  let last;
  for (;;) {
    try {
      last = await fn();
      if (last) return last;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`timed out waiting for ${what} (last: ${last instanceof Error ? last.message : JSON.stringify(last)})`);
    await sleep(everyMs);
  }
}

/** startFake builds and starts the fake server; it resolves to its base URL. */
async function startFake(key = apiKey) {
  const bin = join(mkdtempSync(join(tmpdir(), "webui-dev-")), "webui-dev");
  execFileSync("go", ["build", "-o", bin, "./api-frontend/webui/cmd/webui-dev"], { cwd: repo, stdio: "inherit" });
  const args = ["-addr", "127.0.0.1:0", "-token-ms", "40", "-first-token-ms", "150"];
  if (key) args.push("-api-key", key);
  const proc = spawn(bin, args, { stdio: ["ignore", "pipe", "inherit"] });
  const rl = createInterface({ input: proc.stdout });
  const url = await new Promise((res, rej) => {
    const t = setTimeout(() => rej(new Error("the fake server did not start in 30 s")), 30000);
    rl.on("line", (line) => {
      const m = /^listening on (http:\/\/\S+)/.exec(line);
      if (m) {
        clearTimeout(t);
        res(m[1]);
      }
    });
    proc.on("exit", (code) => rej(new Error(`the fake server exited (${code})`)));
  });
  return { url, stop: () => proc.kill("SIGTERM") };
}

function authHeaders() {
  return apiKey ? { Authorization: `Bearer ${apiKey}` } : {};
}

/** running returns the engines' running requests, from the stats endpoint or /metrics. */
async function running(base) {
  const r = await fetch(`${base}/ui/api/stats`, { headers: authHeaders() });
  if (r.ok) {
    const s = await r.json();
    return (s.engines ?? []).reduce((n, e) => n + e.running, 0);
  }
  const m = await (await fetch(`${base}/metrics`, { headers: authHeaders() })).text();
  let n = 0;
  for (const line of m.split("\n")) {
    const x = /^vllm:num_requests_running(?:\{[^}]*\})? (\S+)/.exec(line);
    if (x) n += Number(x[1]);
  }
  return n;
}

/**
 * background keeps n streaming chat requests going (each of up to maxTokens
 * tokens, started again when it ends) and returns a function that stops them.
 */
function background(base, model, n, maxTokens) {
  const ctl = new AbortController();
  const one = async (i) => {
    while (!ctl.signal.aborted) {
      try {
        const r = await fetch(`${base}/v1/chat/completions`, {
          method: "POST",
          headers: { "Content-Type": "application/json", ...authHeaders() },
          body: JSON.stringify({ model, stream: true, max_tokens: maxTokens, messages: [{ role: "user", content: `background load ${i}` }] }),
          signal: ctl.signal,
        });
        for await (const _ of r.body) {
          // drain
        }
      } catch {
        await sleep(200);
      }
    }
  };
  for (let i = 0; i < n; i++) one(i);
  return () => ctl.abort();
}

describe("web UI", { skip: skipAll || false }, () => {
  let base;
  let stopFake = () => {};
  let browser;
  let page;
  let model = "";
  const violations = [];
  const external = [];
  const consoleErrors = [];

  async function shot(name) {
    const file = join(artifacts, `${name}.png`);
    await page.screenshot({ path: file, fullPage: true });
    if (updateDocs) copyFileSync(file, join(docsDir, `${name}.png`));
  }

  /** send types text into the composer and submits with Ctrl+Enter. */
  async function send(text) {
    await page.fill("#input", text);
    await page.focus("#input");
    await page.keyboard.press("Control+Enter");
  }

  /** watchGrowth records the text lengths of the last match of selector as it changes. */
  async function watchGrowth(selector) {
    await page.evaluate((sel) => {
      window.__growth = [];
      const obs = new MutationObserver(() => {
        const all = document.querySelectorAll(sel);
        const e = all[all.length - 1];
        if (e) window.__growth.push(e.textContent.length);
      });
      obs.observe(document.getElementById("transcript"), { subtree: true, childList: true, characterData: true });
      window.__growthObs = obs;
    }, selector);
  }

  async function growth() {
    return page.evaluate(() => {
      window.__growthObs?.disconnect();
      return [...new Set(window.__growth)];
    });
  }

  async function lastState() {
    return page.evaluate(() => {
      const all = document.querySelectorAll("#transcript .msg.assistant");
      return all.length ? all[all.length - 1].dataset.state : "";
    });
  }

  async function setNumber(id, value) {
    await page.fill(`#${id}`, value === "" ? "" : String(value));
  }

  before(async () => {
    mkdirSync(artifacts, { recursive: true });
    if (updateDocs) mkdirSync(docsDir, { recursive: true });
    if (process.env.SLUICE_UI_BASE_URL) {
      base = process.env.SLUICE_UI_BASE_URL.replace(/\/+$/, "");
    } else {
      const f = await startFake();
      base = f.url;
      stopFake = f.stop;
    }
    const cfg = await (await fetch(`${base}/ui/api/config`)).json().catch(() => ({}));
    assert.equal(cfg.built, true, `${base}/ui/ serves no bundle: run go tool task webui:build, then rebuild the server`);
    browser = await chromium.launch({
      executablePath: chromiumPath,
      headless: true,
      args: ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync"],
    });
    const ctx = await browser.newContext({ viewport: { width: 1400, height: 900 } });
    page = await ctx.newPage();
    page.setDefaultTimeout(20000);
    const origin = new URL(base).origin;
    page.on("request", (r) => {
      const u = new URL(r.url());
      if (u.protocol !== "data:" && u.origin !== origin) external.push(r.url());
    });
    page.on("console", (m) => {
      if (m.type() === "error") consoleErrors.push(m.text());
    });
    await page.addInitScript(() => {
      document.addEventListener("securitypolicyviolation", (e) => {
        (window.__csp ??= []).push(`${e.violatedDirective} ${e.blockedURI}`);
      });
    });
    page.on("framenavigated", () => {});
    await page.goto(`${base}/ui/`);
    model = await waitFor("the model list", () => page.$eval("#model", (s) => s.value));
    if (apiKey && (await page.isVisible("#apikey"))) {
      await page.fill("#apikey", apiKey);
      await page.dispatchEvent("#apikey", "change");
    }
  });

  after(async () => {
    if (page) violations.push(...(await page.evaluate(() => window.__csp ?? []).catch(() => [])));
    await browser?.close();
    stopFake();
  });

  it("streams a chat reply progressively and shows the request's figures", async () => {
    await page.goto(`${base}/ui/`);
    await waitFor("the model list", () => page.$eval("#model", (s) => s.value));
    if (apiKey && (await page.isVisible("#apikey"))) await page.fill("#apikey", apiKey);
    await setNumber("max_tokens", 48);
    await setNumber("temperature", 0);
    await setNumber("stream_interval", 1);
    await watchGrowth("#transcript .msg.assistant .text");
    await send("Hello! Tell me about streaming.");
    await waitFor("the reply to finish", async () => (await lastState()) === "done", 30000);
    const lengths = await growth();
    assert.ok(lengths.filter((n) => n > 0).length >= 3, `tokens should arrive progressively; text lengths seen: ${lengths}`);
    const text = await page.textContent("#transcript .msg.assistant:last-child .text");
    assert.ok(text.length > 0, "the reply is empty");
    assert.match(await page.textContent("#m-ttft"), /\d+(\.\d+)? m?s/);
    const chunks = Number(await page.textContent("#m-chunks"));
    assert.ok(chunks >= 3, `chunks received: ${chunks}`);
    const tokens = Number(await page.textContent("#m-tokens"));
    assert.ok(tokens >= 1, `completion tokens: ${await page.textContent("#m-tokens")}`);
    assert.match(await page.textContent("#m-tps"), /\d/);
    assert.match(await page.textContent("#m-finish"), /stop|length/);
    assert.equal(await page.textContent("#m-status"), "done");
    assert.equal(await page.isVisible("#error"), false, `unexpected error: ${await page.textContent("#error")}`);
    await shot("playground-chat");
  });

  it("groups tokens into chunks at a larger stream interval", async () => {
    await page.click("#clear");
    await setNumber("stream_interval", 4);
    await send("Hello again, in bigger chunks.");
    await waitFor("the reply to finish", async () => (await lastState()) === "done", 30000);
    const tpc = Number(await page.textContent("#m-tpc"));
    const tokens = Number(await page.textContent("#m-tokens"));
    // The first token goes alone and the last chunk may be short; the rest carry 4.
    if (tokens >= 10) assert.ok(tpc >= 2, `tokens per chunk at stream_interval 4: ${tpc} (${tokens} tokens)`);
    assert.ok(Number(await page.textContent("#m-chunks")) <= Math.ceil((tokens - 1) / 4) + 2, "more chunks than stream_interval allows");
    await shot("playground-stream-interval");
    await setNumber("stream_interval", 1);
  });

  it("streams a raw completion", async () => {
    await page.check('input[name="mode"][value="completion"]');
    assert.equal(await page.textContent("#input-label"), "Prompt");
    assert.equal(await page.isVisible("#chat-only"), false, "chat-only settings shown in completion mode");
    await setNumber("max_tokens", 24);
    await watchGrowth("#transcript .msg.assistant .text");
    await send("Once upon a time");
    await waitFor("the completion to finish", async () => (await lastState()) === "done", 30000);
    const lengths = await growth();
    assert.ok(lengths.filter((n) => n > 0).length >= 3, `completion text should arrive progressively; lengths seen: ${lengths}`);
    assert.equal(await page.textContent("#transcript .msg.assistant .prompt"), "Once upon a time");
    const tokens = Number(await page.textContent("#m-tokens"));
    assert.ok(tokens >= 3 && tokens <= 24, `completion tokens: ${tokens}`);
    await shot("playground-completion");
    await page.check('input[name="mode"][value="chat"]');
    await setNumber("max_tokens", 48);
  });

  it("renders a streamed tool call as its arguments assemble", { skip: skip.has("tools") && "SLUICE_UI_SKIP has tools" }, async () => {
    await page.click("#clear");
    await page.click("#tools-box summary");
    await page.fill("#tools", "[{");
    await waitFor("the tools JSON error", () => page.isVisible("#tools-error"));
    assert.match(await page.textContent("#tools-error"), /not valid JSON/);
    await page.click("#tools-example");
    await waitFor("the tools error to clear", async () => !(await page.isVisible("#tools-error")));
    await watchGrowth("#transcript .tool-call .tool-args");
    await setNumber("max_tokens", 200); // room for the whole call with a small real vocabulary
    await send("What's the weather in Paris? Use the tool.");
    await waitFor("the tool call to finish", async () => (await lastState()) === "done", 30000);
    const lengths = await growth();
    assert.ok(lengths.length >= 3, `tool-call arguments should assemble progressively; lengths seen: ${lengths}`);
    assert.equal(await page.textContent("#transcript .tool-call .tool-name"), "get_weather");
    const call = await page.$("#transcript .tool-call");
    assert.equal(await call.getAttribute("data-valid"), "true", "the assembled arguments are not valid JSON");
    assert.ok(Number(await call.getAttribute("data-fragments")) >= 2, "arguments came in one fragment");
    assert.match(await page.textContent("#transcript .tool-call .tool-args"), /"city"/);
    assert.equal(await page.textContent("#m-finish"), "tool_calls");
    await shot("playground-tool-call");
    await page.fill("#tools", "");
    await setNumber("max_tokens", 48);
  });

  it("shows reasoning in a collapsible block", { skip: skip.has("reasoning") && "SLUICE_UI_SKIP has reasoning" }, async () => {
    await page.click("#clear");
    await setNumber("max_tokens", 64);
    await send("Please think before you answer.");
    await waitFor("the reply to finish", async () => (await lastState()) === "done", 30000);
    const details = await page.$("#transcript .msg.assistant .reasoning");
    assert.ok(await details.isVisible(), "the reasoning block is hidden");
    assert.ok((await page.textContent("#transcript .msg.assistant .reasoning-text")).length > 10);
    // Open while the reasoning streams, collapsed once the answer is there; a click opens it.
    assert.equal(await details.getAttribute("open"), null, "the reasoning block stayed open after the answer");
    await page.click("#transcript .msg.assistant .reasoning summary");
    assert.notEqual(await details.getAttribute("open"), null, "the reasoning block did not open on click");
    await shot("playground-reasoning");
  });

  /** rawNames returns the raw events panel's event names, consecutive repeats collapsed. */
  async function rawNames() {
    const names = await page.$$eval("#raw-events .ev-name", (es) => es.map((e) => e.textContent));
    return names.filter((n, i) => i === 0 || names[i - 1] !== n);
  }

  /** selectAPI picks the playground's API. */
  async function selectAPI(api) {
    await page.selectOption("#api", api);
  }

  // The event names each API streams for a plain text reply, in order (repeats collapsed).
  const textEvents = {
    chat: [/^\(data\)$/],
    responses: [/^response\.created$/, /^response\.in_progress$/, /^response\.output_item\.added$/, /^response\.content_part\.added$/,
      /^response\.output_text\.delta$/, /^response\.output_text\.done$/, /^response\.content_part\.done$/, /^response\.output_item\.done$/,
      /^response\.(completed|incomplete)$/],
    messages: [/^message_start$/, /^content_block_start$/, /^content_block_delta$/, /^content_block_stop$/, /^message_delta$/, /^message_stop$/],
  };

  for (const api of ["chat", "responses", "messages"]) {
    it(`sends a conversation through the ${api} API and shows its raw events`, async () => {
      await page.goto(`${base}/ui/`);
      await waitFor("the model list", () => page.$eval("#model", (s) => s.value));
      if (apiKey && (await page.isVisible("#apikey"))) await page.fill("#apikey", apiKey);
      await selectAPI(api);
      await setNumber("max_tokens", 12);
      await setNumber("temperature", 0);
      await page.fill("#system", "You are brief.");
      await watchGrowth("#transcript .msg.assistant .text");
      await send("Hello there.");
      await waitFor(`the ${api} reply to finish`, async () => (await lastState()) === "done", 30000);
      assert.equal(await page.isVisible("#error"), false, `unexpected error: ${await page.textContent("#error")}`);
      const text = await page.textContent("#transcript .msg.assistant:last-child .text");
      assert.ok(text.length > 0, "the reply is empty");
      if (!process.env.SLUICE_UI_BASE_URL) assert.match(text, /^Sluice streams tokens from the engine/);
      const lengths = await growth();
      assert.ok(lengths.filter((n) => n > 0).length >= 3, `text should arrive progressively; lengths seen: ${lengths}`);
      assert.equal(await page.$eval("#raw-events", (e) => e.dataset.api), api);
      const names = await rawNames();
      const want = textEvents[api];
      assert.equal(names.length, want.length, `raw event names: ${names.join(", ")}`);
      names.forEach((n, i) => assert.match(n, want[i], `raw event ${i}: ${names.join(", ")}`));
      const datas = await page.$$eval("#raw-events .ev-data", (es) => es.map((e) => e.textContent));
      if (api === "chat") {
        assert.equal(datas[datas.length - 1], "[DONE]");
      } else {
        // Each named event's data is JSON whose type is the event's name.
        const all = await page.$$eval("#raw-events .ev-name", (es) => es.map((e) => e.textContent));
        datas.forEach((d, i) => assert.equal(JSON.parse(d).type, all[i]));
      }
      assert.match(await page.textContent("#raw-count"), new RegExp(`\\(${datas.length} events\\)`));
      const tokens = Number(await page.textContent("#m-tokens"));
      assert.ok(tokens >= 1 && tokens <= 12, `completion tokens: ${await page.textContent("#m-tokens")}`);
      assert.notEqual(await page.textContent("#m-finish"), "–");
      // A second turn goes through the same API with the history.
      await send("And again.");
      await waitFor(`the second ${api} reply`, async () => (await page.$$eval("#transcript .msg.assistant", (m) => m.length)) === 2 && (await lastState()) === "done", 30000);
      assert.equal(await page.isVisible("#error"), false, `unexpected error: ${await page.textContent("#error")}`);
      await shot(`playground-api-${api}`);
      await page.fill("#system", "");
      // Switching the API starts a new conversation.
      await selectAPI(api === "chat" ? "responses" : "chat");
      assert.equal(await page.$$eval("#transcript .msg", (m) => m.length), 0, "switching the API kept the conversation");
      assert.equal(await page.$$eval("#raw-events li", (m) => m.length), 0, "switching the API kept the raw events");
      await selectAPI("chat");
    });
  }

  for (const api of ["responses", "messages"]) {
    it(`renders ${api} reasoning and a tool call, and its mid-stream error`, { skip: (skip.has("tools") || skip.has("reasoning")) && "SLUICE_UI_SKIP has tools or reasoning" }, async () => {
      await selectAPI(api);
      await page.$eval("#tools-box", (d) => (d.open = true));
      await page.click("#tools-example");
      await setNumber("max_tokens", 200);
      await send("Think, then tell me the weather in Paris.");
      await waitFor(`the ${api} tool call to finish`, async () => (await lastState()) === "done", 30000);
      assert.equal(await page.isVisible("#error"), false, `unexpected error: ${await page.textContent("#error")}`);
      assert.ok((await page.textContent("#transcript .msg.assistant .reasoning-text")).length > 10, "no reasoning shown");
      assert.equal(await page.textContent("#transcript .tool-call .tool-name"), "get_weather");
      const call = await page.$("#transcript .tool-call");
      assert.equal(await call.getAttribute("data-valid"), "true", "the assembled arguments are not valid JSON");
      assert.ok(Number(await call.getAttribute("data-fragments")) >= 2, "arguments came in one fragment");
      assert.match(await page.textContent("#m-finish"), api === "messages" ? /^tool_use$/ : /^completed$/);
      const names = await rawNames();
      if (api === "responses") {
        assert.ok(names.includes("response.reasoning_text.delta") && names.includes("response.function_call_arguments.delta"), names.join(", "));
      } else {
        const deltas = await page.$$eval("#raw-events .ev-data", (es) => es.map((e) => JSON.parse(e.textContent).delta?.type).filter(Boolean));
        assert.ok(deltas.includes("thinking_delta") && deltas.includes("input_json_delta"), deltas.join(", "));
      }
      await shot(`playground-api-${api}-tools`);
      await page.fill("#tools", "");
      if (!skip.has("midstream-error")) {
        await page.click("#clear");
        await setNumber("max_tokens", 48);
        await send("Please fail in the middle.");
        await waitFor("the stream error", async () => (await lastState()) === "error", 30000);
        assert.match(await page.textContent("#error"), /Error during the stream: /);
        assert.equal((await rawNames()).at(-1), api === "messages" ? "error" : "response.failed");
      }
      await setNumber("max_tokens", 48);
      await selectAPI("chat");
    });
  }

  it("shows HTTP errors and mid-stream error events", async () => {
    await page.click("#clear");
    await setNumber("temperature", -1);
    await send("This request has a bad temperature.");
    await waitFor("the error", () => page.isVisible("#error"));
    assert.match(await page.textContent("#error"), /HTTP 4\d\d: .*temperature/i);
    await setNumber("temperature", 0);
    if (!skip.has("midstream-error")) {
      await page.click("#clear");
      await send("Please fail in the middle.");
      await waitFor("the stream error", async () => (await lastState()) === "error", 30000);
      assert.match(await page.textContent("#error"), /Error during the stream: /);
      assert.ok((await page.textContent("#transcript .msg.assistant .text")).length > 0, "the text before the error was lost");
      await shot("playground-error");
    }
  });

  it("aborts a long generation and the engine's running count drops", async () => {
    await page.click("#clear");
    await setNumber("max_tokens", Number(process.env.SLUICE_UI_LONG_MAX_TOKENS || 1500));
    await send(process.env.SLUICE_UI_LONG_PROMPT || "Write a very long story about a river.");
    await waitFor("streaming", async () => (await page.textContent("#m-status")) === "streaming", 30000);
    const during = await waitFor("the engine to report the request running", async () => {
      const n = await running(base);
      return n > 0 ? n : 0;
    }, 10000, 200);
    await page.click("#abort");
    await waitFor("the aborted state", async () => (await lastState()) === "aborted");
    assert.equal(await page.textContent("#m-status"), "aborted");
    await waitFor(`the running count to drop below ${during}`, async () => (await running(base)) < during, 10000, 200);
    await setNumber("max_tokens", 48);
  });

  it("works with a narrow window and makes no external requests", async () => {
    await page.setViewportSize({ width: 400, height: 800 });
    await page.goto(`${base}/ui/`);
    await waitFor("the model list", () => page.$eval("#model", (s) => s.value));
    const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
    assert.ok(overflow <= 1, `the page scrolls sideways by ${overflow}px at 400px`);
    await shot("playground-narrow");
    await page.setViewportSize({ width: 1400, height: 900 });
    assert.deepEqual(external, [], "requests left the server's origin");
  });

  /** ticks reads the tick labels a chart's axis drew last. */
  async function ticks(chart, axis) {
    const v = await page.getAttribute(`#chart-${chart} .plot`, `data-${axis}-ticks`);
    return v ? v.split("|") : [];
  }

  /** checkAxes asserts readable, distinct tick labels on every chart. */
  async function checkAxes(when) {
    for (const chart of ["requests", "kv", "prefix", "tokens", "ttft", "itl", "streams"]) {
      const x = await ticks(chart, "x");
      const y = await ticks(chart, "y");
      assert.ok(x.length >= 2, `${when}: ${chart}: fewer than two x ticks: ${JSON.stringify(x)}`);
      assert.ok(y.length >= 2, `${when}: ${chart}: fewer than two y ticks: ${JSON.stringify(y)}`);
      for (const t of x) assert.match(t, /^\d\d:\d\d:\d\d$/, `${when}: ${chart}: x tick ${JSON.stringify(t)} is not hh:mm:ss (all: ${x})`);
      assert.equal(new Set(x).size, x.length, `${when}: ${chart}: repeated x ticks ${x}`);
      assert.equal(new Set(y).size, y.length, `${when}: ${chart}: repeated y ticks ${y}`);
      if (chart === "requests") for (const t of y) assert.match(t, /^-?\d[\d,]*$/, `${when}: requests: y tick ${JSON.stringify(t)} is not an integer (all: ${y})`);
    }
  }

  it("labels the dashboard's axes readably, flat series too", async () => {
    await page.goto(`${base}/ui/dashboard`);
    const first = await waitFor("the first update", async () => Number(await page.getAttribute("body", "data-updates")));
    // No traffic: the request counts are flat (zero unless a server has
    // other clients), and the time axis spans a few seconds.
    await waitFor("five updates", async () => Number(await page.getAttribute("body", "data-updates")) >= first + 5, 15000);
    const idle = await page.textContent("#chart-requests .latest");
    await checkAxes(`idle (${idle})`);
    if (!process.env.SLUICE_UI_BASE_URL) {
      assert.match(idle, /running: 0\b/, "the fake server should be idle");
      const y = await ticks("requests", "y");
      assert.ok(y[0] === "0" && y.length >= 3, `flat zero request counts: y ticks ${y}, want 0 and at least two more integers`);
    }
    await shot("dashboard-idle");
  });

  it("updates the dashboard's charts every second", async () => {
    const stop = background(base, model, 3, 60);
    try {
      await page.goto(`${base}/ui/dashboard`);
      const first = await waitFor("the first update", async () => Number(await page.getAttribute("body", "data-updates")));
      const points0 = Number(await page.getAttribute("#chart-requests .plot", "data-points"));
      await waitFor("three more updates", async () => Number(await page.getAttribute("body", "data-updates")) >= first + 3, 10000);
      const points1 = Number(await page.getAttribute("#chart-requests .plot", "data-points"));
      assert.ok(points1 > points0, `the requests chart did not grow (${points0} → ${points1})`);
      assert.equal(await page.locator("#charts canvas").count(), 7, "expected seven charts");
      assert.ok((await page.locator("#engines tbody tr").count()) >= 1, "no engine rows");
      assert.ok((await page.locator("#frontends tbody tr").count()) >= 1, "no frontend rows");
      await waitFor("a running request on the chart", async () => /running: [1-9]/.test(await page.textContent("#chart-requests .latest")), 10000);
      await sleep(8000); // let the windowed figures fill in for the screenshot
      assert.equal(await page.isVisible("#dash-error"), false, `dashboard error: ${await page.textContent("#dash-error")}`);
      await checkAxes("under load");
      await shot("dashboard");
      await page.setViewportSize({ width: 400, height: 900 });
      await sleep(300);
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `the dashboard scrolls sideways by ${overflow}px at 400px`);
      await shot("dashboard-narrow");
      await page.setViewportSize({ width: 1400, height: 900 });
    } finally {
      stop();
    }
  });

  it("asks for the API key when the server requires one", { skip: !!process.env.SLUICE_UI_BASE_URL && "needs the fake server" }, async () => {
    const f = await startFake("sekret-key");
    try {
      const p = await browser.newPage();
      let auth = "";
      p.on("request", (r) => {
        if (r.url().endsWith("/v1/chat/completions")) auth = r.headers()["authorization"] ?? "";
      });
      await p.goto(`${f.url}/ui/`);
      await waitFor("the key field", () => p.isVisible("#apikey"));
      await waitFor("the 401 error", async () => /listing models: .*API key/i.test((await p.textContent("#error")) ?? ""));
      await p.fill("#apikey", "sekret-key");
      await p.dispatchEvent("#apikey", "change");
      await waitFor("the model list", () => p.$eval("#model", (s) => s.value));
      assert.equal(await p.isVisible("#error"), false);
      await p.fill("#max_tokens", "5");
      await p.fill("#input", "hello with a key");
      await p.click("#send");
      await waitFor("the reply", async () => (await p.getAttribute("#transcript .msg.assistant", "data-state")) === "done", 30000);
      assert.equal(auth, "Bearer sekret-key");
      await p.close();
    } finally {
      f.stop();
    }
  });

  it("keeps to the Content-Security-Policy", async () => {
    violations.push(...(await page.evaluate(() => window.__csp ?? [])));
    assert.deepEqual(violations, [], "CSP violations");
    assert.deepEqual(consoleErrors.filter((m) => /Content.Security.Policy|Refused to/i.test(m)), []);
  });
});
