// The job graph: nodes in layers by their longest path from a source,
// coloured by backpressure, with records/s and parallelism.

import { GraphEdge, GraphNode } from "./api";
import { s } from "./dom";
import { pressure, rate, percent } from "./format";

export interface NodeLive { rate?: number; backpressure?: number; running: boolean; }

const W = 190, H = 62, GX = 70, GY = 22, PAD = 12;

export function drawGraph(nodes: GraphNode[], edges: GraphEdge[], live: (n: GraphNode) => NodeLive): SVGElement {
  const layer = new Map<string, number>();
  const inputs = new Map<string, string[]>();
  for (const e of edges) inputs.set(e.to ?? "", [...(inputs.get(e.to ?? "") ?? []), e.from ?? ""]);
  // Bounded: a node's layer is at most the number of nodes (the planner
  // refuses cycles, and the guard keeps a bad answer from looping).
  const depth = (name: string, seen: number): number => {
    const known = layer.get(name);
    if (known !== undefined) return known;
    if (seen > nodes.length) return 0;
    const d = Math.max(-1, ...(inputs.get(name) ?? []).map((i) => depth(i, seen + 1))) + 1;
    layer.set(name, d);
    return d;
  };
  const rows: number[] = [];
  const pos = new Map<string, { x: number; y: number }>();
  for (const n of nodes) {
    const d = depth(n.name ?? "", 0);
    const r = rows[d] ?? 0;
    rows[d] = r + 1;
    pos.set(n.name ?? "", { x: PAD + d * (W + GX), y: PAD + r * (H + GY) });
  }
  const width = PAD * 2 + Math.max(1, rows.length) * (W + GX) - GX;
  const height = PAD * 2 + Math.max(1, ...rows) * (H + GY) - GY;
  const svg = s("svg", { id: "graph", width, height, viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": "job graph" },
    s("defs", null, s("marker", { id: "arrow", viewBox: "0 0 10 10", refX: 10, refY: 5, markerWidth: 7, markerHeight: 7, orient: "auto" },
      s("path", { d: "M0,0 L10,5 L0,10 z", class: "arrowhead" }))));
  for (const e of edges) {
    const a = pos.get(e.from ?? ""), b = pos.get(e.to ?? "");
    if (!a || !b) continue;
    const x1 = a.x + W, y1 = a.y + H / 2, x2 = b.x, y2 = b.y + H / 2;
    const label = e.chained ? "chained" : (e.kind ?? "") + (e.port ? ` (${e.port})` : "");
    svg.append(s("g", { class: `edge ${e.kind ?? ""}${e.chained ? " chained" : ""}`, "data-from": e.from, "data-to": e.to },
      s("path", { d: `M${x1},${y1} C${x1 + GX / 2},${y1} ${x2 - GX / 2},${y2} ${x2},${y2}`, "marker-end": "url(#arrow)" }),
      s("text", { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, "text-anchor": "middle" }, label)));
  }
  for (const n of nodes) {
    const p = pos.get(n.name ?? "")!;
    const l = live(n);
    const cls = l.running ? pressure(l.backpressure) : "idle";
    svg.append(s("g", { class: `node ${cls}`, "data-node": n.name, transform: `translate(${p.x},${p.y})` },
      s("title", null, `${n.name}: ${n.kind}, parallelism ${n.parallelism ?? 1}, backpressure ${percent(l.backpressure)}`),
      s("rect", { width: W, height: H, rx: 6 }),
      s("text", { x: 10, y: 20, class: "name" }, n.name ?? ""),
      s("text", { x: W - 10, y: 20, class: "par", "text-anchor": "end" }, `${n.kind} ×${n.parallelism ?? 1}`),
      s("text", { x: 10, y: 44, class: "metric" }, `${rate(l.rate)} · bp ${percent(l.backpressure)}`)));
  }
  return svg;
}
