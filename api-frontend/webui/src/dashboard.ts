// The dashboard page (/ui/dashboard): polls /ui/api/stats every second and
// charts the last two minutes per frontend and per engine.
import "uplot/dist/uPlot.min.css";
import "./style.css";
import { Chart, el, fmtMs, fmtNum, make } from "./common";
import { errorFromBody } from "./sse";
import { History, rate, windowQuantile, type Sample, type Stats } from "./stats";

const pollMs = 1000;
const spanMs = 120_000; // what the charts show
const windowMs = 10_000; // rates and percentiles are over this window

type Values = Record<string, number | null>;

/** ChartDef describes one chart: how a sample becomes its series' values. */
interface ChartDef {
  id: string;
  title: string;
  unit: string;
  yRange?: [number, number];
  /** integer marks charts of counts: whole-number ticks. */
  integer?: boolean;
  values(s: Sample, h: History): Values;
}

const pct = (v: number) => Math.round(v * 1000) / 10;

const defs: ChartDef[] = [
  {
    id: "requests",
    title: "Requests running / waiting, per engine",
    unit: "requests",
    integer: true,
    values: (s) => {
      const v: Values = {};
      for (const e of s.stats.engines ?? []) {
        v[`engine ${e.id} running`] = e.running;
        v[`engine ${e.id} waiting`] = e.waiting;
      }
      return v;
    },
  },
  {
    id: "kv",
    title: "KV cache usage, per engine",
    unit: "%",
    yRange: [0, 100],
    values: (s) => Object.fromEntries((s.stats.engines ?? []).map((e) => [`engine ${e.id}`, pct(e.kv_usage)])),
  },
  {
    id: "prefix",
    title: "Prefix-cache hit rate, per engine",
    unit: "%",
    yRange: [0, 100],
    values: (s, h) => {
      const old = h.before(s.stats.frontend.id, s.t, windowMs);
      const v: Values = {};
      for (const e of s.stats.engines ?? []) {
        const o = old && old !== s ? old.stats.engines?.find((x) => x.id === e.id) : undefined;
        const dq = e.prefix_queries - (o?.prefix_queries ?? 0);
        const dh = e.prefix_hits - (o?.prefix_hits ?? 0);
        v[`engine ${e.id}`] = dq > 0 && dh >= 0 ? pct(dh / dq) : null;
      }
      return v;
    },
  },
  {
    id: "tokens",
    title: "Generated tokens/s, per engine and per frontend",
    unit: "tokens/s",
    values: (s, h) => {
      const old = h.before(s.stats.frontend.id, s.t, windowMs);
      const v: Values = {};
      if (!old || old === s) return v;
      const dt = (s.t - old.t) / 1000;
      for (const e of s.stats.engines ?? []) {
        const o = old.stats.engines?.find((x) => x.id === e.id);
        if (o && e.generated_tokens > 0) v[`engine ${e.id}`] = rate(o.generated_tokens, e.generated_tokens, dt);
      }
      const f = s.stats.frontend;
      v[`frontend ${f.id} (at finish)`] = rate(old.stats.frontend.generated_tokens, f.generated_tokens, dt);
      return v;
    },
  },
  {
    id: "ttft",
    title: "Time to first token p50 / p90 / p99, per frontend",
    unit: "ms",
    values: (s, h) => latency(s, h, "ttft_seconds"),
  },
  {
    id: "itl",
    title: "Inter-token latency p50 / p90 / p99, per frontend",
    unit: "ms",
    values: (s, h) => latency(s, h, "itl_seconds"),
  },
  {
    id: "streams",
    title: "Streams open and SSE chunks/s, per frontend",
    unit: "",
    values: (s, h) => {
      const f = s.stats.frontend;
      const old = h.before(f.id, s.t, windowMs);
      const v: Values = { [`frontend ${f.id} streams open`]: f.streams_open };
      if (old && old !== s) v[`frontend ${f.id} chunks/s`] = rate(old.stats.frontend.chunks_written, f.chunks_written, (s.t - old.t) / 1000);
      return v;
    },
  },
];

function latency(s: Sample, h: History, key: "ttft_seconds" | "itl_seconds"): Values {
  const f = s.stats.frontend;
  const old = h.before(f.id, s.t, windowMs);
  const older = old && old !== s ? old.stats.frontend[key] : undefined;
  const v: Values = {};
  for (const q of [0.5, 0.9, 0.99]) {
    const x = windowQuantile(f[key], older, q);
    v[`frontend ${f.id} p${Math.round(q * 100)}`] = x === null ? null : x * 1000;
  }
  return v;
}

/** Panel is one chart and its data. */
class Panel {
  private chart: Chart | null = null;
  private keys: string[] = [];
  private cols = new Map<string, (number | null)[]>();
  private readonly fig: HTMLElement;
  private readonly plotBox: HTMLElement;
  private readonly latest: HTMLElement;

  constructor(readonly def: ChartDef, parent: HTMLElement) {
    this.fig = make("figure", "chart");
    this.fig.id = `chart-${def.id}`;
    const cap = make("figcaption", "", def.title + (def.unit ? ` (${def.unit})` : ""));
    cap.id = `chart-${def.id}-caption`;
    this.plotBox = make("div", "plot");
    this.plotBox.setAttribute("role", "img");
    this.plotBox.setAttribute("aria-labelledby", cap.id);
    this.latest = make("p", "latest muted");
    this.latest.setAttribute("aria-live", "off");
    this.fig.append(cap, this.plotBox, this.latest);
    parent.append(this.fig);
  }

  /** push adds one sample's values at position n of the timeline (length n+1 after). */
  push(v: Values, n: number): void {
    let added = false;
    for (const k of Object.keys(v)) {
      if (!this.cols.has(k)) {
        this.cols.set(k, new Array(n).fill(null));
        this.keys.push(k);
        added = true;
      }
    }
    for (const k of this.keys) this.cols.get(k)!.push(k in v ? v[k] : null);
    if (added || !this.chart) {
      this.chart?.destroy();
      this.keys.sort();
      this.chart = new Chart(
        this.plotBox,
        this.keys.map((k) => ({ label: k, dash: /waiting|p90|chunks\/s|at finish/.test(k) ? [6, 4] : /p99/.test(k) ? [2, 3] : undefined })),
        { yRange: this.def.yRange, yLabel: this.def.unit, yInteger: this.def.integer },
      );
    }
    this.latest.textContent = this.keys
      .map((k) => `${k}: ${fmtNum(v[k] ?? null, 1)}`)
      .join(" · ");
  }

  /** trim drops the first n points. */
  trim(n: number): void {
    for (const c of this.cols.values()) c.splice(0, n);
  }

  draw(x: number[]): void {
    this.chart?.set([x, ...this.keys.map((k) => this.cols.get(k)!)]);
  }
}

class Dashboard {
  private history = new History(spanMs + windowMs);
  private x: number[] = [];
  private times: number[] = [];
  private panels: Panel[];
  private frontends = new Map<string, { t: number; s: Stats; chunksPerSec: number | null }>();
  private engines = new Map<string, { t: number; e: NonNullable<Stats["engines"]>[number] }>();
  private updates = 0;

  constructor() {
    const box = el("charts");
    this.panels = defs.map((d) => new Panel(d, box));
  }

  start(): void {
    void this.poll();
  }

  private async poll(): Promise<void> {
    const started = Date.now();
    try {
      const r = await fetch("api/stats", { cache: "no-store" });
      const body = await r.text();
      if (!r.ok) throw errorFromBody(r.status, body, false);
      this.add({ t: Date.now(), stats: JSON.parse(body) as Stats });
      el("dash-error").hidden = true;
    } catch (e) {
      const err = el("dash-error");
      err.textContent = `Cannot read /ui/api/stats: ${(e as Error).message ?? String(e)}`;
      err.hidden = false;
      el("dash-status").textContent = "disconnected, retrying…";
    }
    window.setTimeout(() => void this.poll(), Math.max(0, pollMs - (Date.now() - started)));
  }

  private add(s: Sample): void {
    if (!s.stats.frontend) throw new Error("the stats document has no frontend");
    this.history.add(s);
    const n = this.x.length;
    this.x.push(s.t / 1000);
    this.times.push(s.t);
    for (const p of this.panels) p.push(p.def.values(s, this.history), n);
    let drop = 0;
    while (drop < this.times.length && s.t - this.times[drop] > spanMs) drop++;
    if (drop > 0) {
      this.x.splice(0, drop);
      this.times.splice(0, drop);
      for (const p of this.panels) p.trim(drop);
    }
    for (const p of this.panels) p.draw(this.x);
    this.updates++;
    document.body.dataset.updates = String(this.updates);

    const f = s.stats.frontend;
    const old = this.history.before(f.id, s.t, windowMs);
    const cps = old && old !== s ? rate(old.stats.frontend.chunks_written, f.chunks_written, (s.t - old.t) / 1000) : null;
    this.frontends.set(f.id, { t: s.t, s: s.stats, chunksPerSec: cps });
    for (const e of s.stats.engines ?? []) this.engines.set(e.id, { t: s.t, e });
    this.tables(s.t);
    el("dash-status").textContent = `${s.stats.model ? `model ${s.stats.model} · ` : ""}updated ${new Date(s.t).toLocaleTimeString()}`;
  }

  private tables(now: number): void {
    const stale = (t: number) => now - t > 10_000;
    const frows = [...this.frontends.entries()].sort().map(([id, { t, s, chunksPerSec }]) => {
      const f = s.frontend;
      return row([id + (stale(t) ? " (stale)" : ""), f.pid > 0 ? String(f.pid) : "–", String(f.streams_open), String(f.requests_finished), fmtNum(chunksPerSec)]);
    });
    el("frontends").querySelector("tbody")!.replaceChildren(...frows);
    const erows = [...this.engines.entries()].sort().map(([id, { t, e }]) =>
      row([
        id + (stale(t) ? " (stale)" : ""),
        e.up ? "yes" : "no",
        String(e.running),
        String(e.waiting),
        `${fmtNum(pct(e.kv_usage))} %`,
        e.step_time_us > 0 ? fmtMs(e.step_time_us / 1000) : "–",
      ]),
    );
    el("engines").querySelector("tbody")!.replaceChildren(...erows);
  }
}

function row(cells: string[]): HTMLTableRowElement {
  const tr = document.createElement("tr");
  for (const c of cells) tr.append(make("td", "", c));
  return tr;
}

new Dashboard().start();
