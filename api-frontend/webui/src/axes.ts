// Axis scales and tick labels of the charts: pure functions, unit-tested
// without a browser (test/unit.test.mjs).

/** timeIncrs are the x-axis tick steps in seconds: whole seconds and up. */
export const timeIncrs = [1, 2, 5, 10, 15, 30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 43200, 86400];

/** intIncrs are tick steps for counts: whole numbers only. */
export const intIncrs = [1, 2, 5, 10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10_000, 20_000, 50_000, 100_000, 1e6, 1e7, 1e8, 1e9];

const pad2 = (n: number) => String(n).padStart(2, "0");

/** hms formats a time in seconds since the epoch as local hh:mm:ss. */
export function hms(sec: number): string {
  const d = new Date(sec * 1000);
  return `${pad2(d.getHours())}:${pad2(d.getMinutes())}:${pad2(d.getSeconds())}`;
}

/** timeLabels labels x-axis ticks (seconds since the epoch) hh:mm:ss. */
export function timeLabels(splits: number[]): string[] {
  return splits.map(hms);
}

/**
 * yRange returns the y scale's [min, max] for data spanning [min, max]
 * (null: no data): from 0 (or below, for negative data) to 10 % above the
 * largest value, and never flat, so that flat series still get distinct
 * ticks: at least [0, 1], or [0, 5] for counts.
 */
export function yRange(min: number | null, max: number | null, integer: boolean): [number, number] {
  const lo = Math.min(0, min ?? 0);
  let hi = Math.max(max ?? 0, lo);
  hi = hi > 0 ? hi * 1.1 : hi;
  if (integer) hi = Math.ceil(hi);
  const minSpan = integer ? 5 : 1;
  if (hi - lo < minSpan) hi = lo + minSpan;
  return [lo, hi];
}

/**
 * numLabels labels y-axis ticks: integers for counts; otherwise with as
 * few decimals as keep neighbouring labels distinct (at most 6).
 */
export function numLabels(splits: number[], integer: boolean): string[] {
  if (integer) return splits.map((v) => Math.round(v).toLocaleString("en-US"));
  for (let d = 0; d <= 6; d++) {
    const out = splits.map((v) => v.toLocaleString("en-US", { minimumFractionDigits: d, maximumFractionDigits: d }));
    if (new Set(out).size === out.length) return out;
  }
  return splits.map((v) => String(v));
}
