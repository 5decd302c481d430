// Display formats of the API's values.

import { Int, num } from "./api";

// enumName turns "JOB_STATE_RUNNING" into "running" for the given prefix.
export function enumName(v: string | undefined, prefix: string): string {
  if (!v) return "unspecified";
  return (v.startsWith(prefix) ? v.slice(prefix.length) : v).toLowerCase().replace(/_/g, " ");
}

export function bytes(v: Int | undefined): string {
  let n = num(v);
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let i = 0;
  while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
  return i === 0 ? `${n} B` : `${n.toFixed(1)} ${units[i]}`;
}

export function duration(ms: number): string {
  if (ms < 1000) return `${Math.round(ms)} ms`;
  if (ms < 60_000) return `${(ms / 1000).toFixed(1)} s`;
  const m = Math.floor(ms / 60_000);
  return `${m} min ${Math.round((ms % 60_000) / 1000)} s`;
}

export function rate(perSecond: number | undefined): string {
  if (perSecond === undefined) return "–";
  if (perSecond >= 1e6) return `${(perSecond / 1e6).toFixed(1)}M/s`;
  if (perSecond >= 1e3) return `${(perSecond / 1e3).toFixed(1)}k/s`;
  return `${perSecond.toFixed(perSecond < 10 ? 1 : 0)}/s`;
}

export function time(ms: Int | undefined): string {
  const n = num(ms);
  if (!n) return "–";
  return new Date(n).toISOString().replace("T", " ").replace(/\.\d+Z$/, "Z");
}

// The API's watermark before the first one is math.MinInt64.
export function watermark(ms: Int | undefined): string {
  const n = num(ms);
  if (!n || n < -8e18) return "none yet";
  return time(n);
}

export function percent(r: number | undefined): string {
  return `${Math.round((r ?? 0) * 100)}%`;
}

// pressure is the colour class of a backpressure ratio: Flink's thresholds
// (OK below 10 %, LOW below 50 %, HIGH above).
export function pressure(r: number | undefined): "ok" | "low" | "high" {
  const v = r ?? 0;
  return v < 0.1 ? "ok" : v < 0.5 ? "low" : "high";
}
