// A tiny DOM builder: elements are made with textContent and attributes,
// never from HTML strings, so nothing the API returns can inject markup.

type Child = Node | string | number | null | undefined | false;
type Attrs = Record<string, string | number | boolean | EventListener | undefined>;

function build<E extends Element>(el: E, attrs: Attrs | null, children: Child[]): E {
  if (attrs) {
    for (const [k, v] of Object.entries(attrs)) {
      if (v === undefined || v === false) continue;
      if (typeof v === "function") el.addEventListener(k.replace(/^on/, ""), v);
      else el.setAttribute(k, v === true ? "" : String(v));
    }
  }
  for (const c of children) {
    if (c === null || c === undefined || c === false) continue;
    el.append(typeof c === "object" ? c : String(c));
  }
  return el;
}

export function h<K extends keyof HTMLElementTagNameMap>(tag: K, attrs?: Attrs | null, ...children: Child[]): HTMLElementTagNameMap[K] {
  return build(document.createElement(tag), attrs ?? null, children);
}

const svgNS = "http://www.w3.org/2000/svg";
export function s(tag: string, attrs?: Attrs | null, ...children: Child[]): SVGElement {
  return build(document.createElementNS(svgNS, tag) as SVGElement, attrs ?? null, children);
}

// table renders rows under a header; an empty list shows `empty`.
export function table(head: string[], rows: Child[][], empty: string, attrs?: Attrs): HTMLElement {
  if (rows.length === 0) return h("p", { class: "empty" }, empty);
  return h("table", attrs ?? null,
    h("thead", null, h("tr", null, ...head.map((c) => h("th", null, c)))),
    h("tbody", null, ...rows.map((r) => h("tr", null, ...r.map((c) => h("td", null, c))))));
}

// replace puts the children in place of el's content.
export function replace(el: Element, ...children: Child[]): void {
  el.replaceChildren();
  build(el, null, children);
}
