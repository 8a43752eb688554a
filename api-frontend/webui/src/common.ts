// Helpers shared by the playground and the dashboard.
import uPlot from "uplot";
import { intIncrs, numLabels, timeIncrs, timeLabels, yRange } from "./axes";

/** el returns the element with that id, or throws (the pages are static). */
export function el<T extends HTMLElement = HTMLElement>(id: string): T {
  const e = document.getElementById(id);
  if (!e) throw new Error(`page is missing #${id}`);
  return e as T;
}

/** make creates an element with a class and text. */
export function make<K extends keyof HTMLElementTagNameMap>(tag: K, cls = "", text = ""): HTMLElementTagNameMap[K] {
  const e = document.createElement(tag);
  if (cls) e.className = cls;
  if (text) e.textContent = text;
  return e;
}

/** UIConfig is /ui/api/config. */
export interface UIConfig {
  api_key_required: boolean;
  built: boolean;
}

/** fmtNum formats a number with at most `digits` decimals, "–" for null. */
export function fmtNum(v: number | null | undefined, digits = 1): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return "–";
  return v.toLocaleString("en-US", { maximumFractionDigits: digits, minimumFractionDigits: 0 });
}

/** fmtMs formats milliseconds. */
export function fmtMs(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return "–";
  return ms >= 1000 ? `${fmtNum(ms / 1000, 2)} s` : `${fmtNum(ms, ms < 10 ? 2 : 0)} ms`;
}

/** palette holds distinguishable line colours (readable on light and dark). */
export const palette = ["#2f7ed8", "#e4572e", "#29a36a", "#a05fd3", "#d9a21b", "#17a2b8", "#c2185b", "#6d7f8c"];

/**
 * Chart wraps a uPlot line chart that fills its container's width and follows
 * its resizes.
 */
export class Chart {
  readonly plot: uPlot;
  private ro: ResizeObserver;

  constructor(
    readonly container: HTMLElement,
    series: { label: string; color?: string; dash?: number[] }[],
    opts: { height?: number; xTime?: boolean; yLabel?: string; yRange?: [number, number]; yInteger?: boolean; legend?: boolean } = {},
  ) {
    const width = Math.max(container.clientWidth, 200);
    const xTime = opts.xTime ?? true;
    const yInteger = opts.yInteger ?? false;
    // The tick labels drawn last, readable by the browser test.
    const record = (axis: "x" | "y", labels: string[]) => {
      container.dataset[axis === "x" ? "xTicks" : "yTicks"] = labels.join("|");
      return labels;
    };
    const o: uPlot.Options = {
      width,
      height: opts.height ?? 180,
      scales: {
        x: { time: xTime },
        y: opts.yRange ? { range: opts.yRange } : { range: (_u, min, max) => yRange(min, max, yInteger) },
      },
      legend: { show: opts.legend ?? true, live: false },
      cursor: { drag: { x: false, y: false } },
      series: [
        {},
        ...series.map((s, i) => ({
          label: s.label,
          stroke: s.color ?? palette[i % palette.length],
          width: 2,
          dash: s.dash,
          spanGaps: true,
          points: { show: false },
        })),
      ],
      axes: [
        {
          stroke: "currentColor",
          grid: { stroke: "rgba(128,128,128,0.2)" },
          ticks: { stroke: "rgba(128,128,128,0.3)" },
          ...(xTime ? { incrs: timeIncrs, space: 70, values: (_u: uPlot, splits: number[]) => record("x", timeLabels(splits)) } : {}),
        },
        {
          stroke: "currentColor",
          label: opts.yLabel,
          grid: { stroke: "rgba(128,128,128,0.2)" },
          ticks: { stroke: "rgba(128,128,128,0.3)" },
          size: 60,
          ...(yInteger ? { incrs: intIncrs } : {}),
          values: (_u: uPlot, splits: number[]) => record("y", numLabels(splits, yInteger)),
        },
      ],
    };
    const empty: uPlot.AlignedData = [[], ...series.map(() => [])] as unknown as uPlot.AlignedData;
    this.plot = new uPlot(o, empty, container);
    this.ro = new ResizeObserver(() => {
      const w = Math.max(container.clientWidth, 200);
      if (Math.abs(w - this.plot.width) > 1) this.plot.setSize({ width: w, height: this.plot.height });
    });
    this.ro.observe(container);
  }

  /** set replaces the data: x then one array per series (null: a gap). */
  set(data: (number | null)[][]): void {
    this.plot.setData(data as unknown as uPlot.AlignedData);
    this.container.dataset.points = String(data[0]?.length ?? 0);
  }

  destroy(): void {
    this.ro.disconnect();
    this.plot.destroy();
  }
}
