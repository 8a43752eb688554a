// Turning the cumulative figures of /ui/api/stats into what the dashboard
// charts: rates and windowed percentiles. Mirrors webui.Histogram.Quantile.

/** Histogram is webui.Histogram's JSON. */
export interface Histogram {
  upper: number[] | null;
  cumulative: number[] | null;
  count: number;
  sum: number;
}

/** FrontendStats is webui.FrontendStats's JSON. */
export interface FrontendStats {
  id: string;
  pid: number;
  streams_open: number;
  requests_finished: number;
  chunks_written: number;
  bytes_written: number;
  coalesced_tokens: number;
  prompt_tokens: number;
  generated_tokens: number;
  ttft_seconds: Histogram;
  itl_seconds: Histogram;
  e2e_seconds: Histogram;
}

/** EngineStats is webui.EngineStats's JSON. */
export interface EngineStats {
  id: string;
  up: boolean;
  running: number;
  waiting: number;
  kv_usage: number;
  prefix_queries: number;
  prefix_hits: number;
  preemptions: number;
  generated_tokens: number;
  prompt_tokens: number;
  step_time_us: number;
}

/** Stats is webui.Stats's JSON. */
export interface Stats {
  model?: string;
  frontend: FrontendStats;
  engines: EngineStats[] | null;
}

/**
 * quantile estimates the q-quantile of a cumulative histogram by linear
 * interpolation inside its bucket (Prometheus's rule); null when empty.
 */
export function quantile(upper: number[], cumulative: number[], count: number, q: number): number | null {
  if (count <= 0 || upper.length === 0 || upper.length !== cumulative.length) return null;
  const rank = Math.min(Math.max(q, 0), 1) * count;
  let lower = 0;
  let below = 0;
  for (let i = 0; i < upper.length; i++) {
    const c = cumulative[i];
    if (c >= rank && c > below) return lower + ((upper[i] - lower) * (rank - below)) / (c - below);
    lower = upper[i];
    below = c;
  }
  return upper[upper.length - 1];
}

/**
 * windowQuantile is the q-quantile of the observations between two snapshots
 * of the same histogram (older may be undefined: since the start); null when
 * there were none or the histogram was reset.
 */
export function windowQuantile(newer: Histogram, older: Histogram | undefined, q: number): number | null {
  const up = newer.upper ?? [];
  const cum = newer.cumulative ?? [];
  if (!older) return quantile(up, cum, newer.count, q);
  const oc = older.cumulative ?? [];
  if (oc.length !== cum.length || older.count > newer.count) return null;
  const d = cum.map((c, i) => c - oc[i]);
  return quantile(up, d, newer.count - older.count, q);
}

/** rate is (b - a) / seconds, or null across a reset or an empty interval. */
export function rate(a: number, b: number, seconds: number): number | null {
  if (seconds <= 0 || b < a) return null;
  return (b - a) / seconds;
}

/** Sample is one poll's document and when it arrived (ms since the epoch). */
export interface Sample {
  t: number;
  stats: Stats;
}

/**
 * History keeps the recent documents of each frontend (polls behind one port
 * may reach different frontends) for windowed figures.
 */
export class History {
  private byFrontend = new Map<string, Sample[]>();
  constructor(private keepMs: number) {}

  add(s: Sample): void {
    const id = s.stats.frontend?.id ?? "";
    const list = this.byFrontend.get(id) ?? [];
    list.push(s);
    while (list.length > 0 && s.t - list[0].t > this.keepMs) list.shift();
    this.byFrontend.set(id, list);
  }

  /** before returns the newest sample of that frontend at least windowMs older than t. */
  before(frontend: string, t: number, windowMs: number): Sample | undefined {
    const list = this.byFrontend.get(frontend) ?? [];
    let found: Sample | undefined;
    for (const s of list) {
      if (t - s.t >= windowMs) found = s;
      else break;
    }
    return found ?? list[0];
  }
}
