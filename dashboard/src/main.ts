// The Eddy dashboard: a single page over the coordinator's REST API. Each
// page renders its frame once and refreshes its live sections on a poll
// (see RATIONALE.md, "Dashboard: polling"); forms stay outside what a poll
// replaces, so typing is never lost.

import {
  ApiError, call, CheckpointInfo, ClusterInfo, JobLogs, JobStatus, JobSummary, ModuleInfo, num, q, setToken,
  TaskStatus, token, Unauthorized, WhoAmI,
} from "./api";
import { h, replace, table } from "./dom";
import { bytes, duration, enumName, percent, rate, time, watermark } from "./format";
import { drawGraph, NodeLive } from "./graph";

const pollMs = 1500;
const app = document.getElementById("app")!;

// generation increases on every navigation: a poll of an older page stops.
let generation = 0;
let loginError = "";

function navigate(path: string, push = true): void {
  if (push) history.pushState(null, "", path);
  void route();
}

window.addEventListener("popstate", () => void route());
document.addEventListener("click", (ev) => {
  const a = (ev.target as Element).closest("a[data-nav]");
  if (!a || ev.button !== 0 || ev.metaKey || ev.ctrlKey) return;
  ev.preventDefault();
  navigate(a.getAttribute("href") ?? "/");
});

function link(path: string, ...text: (string | Node)[]): HTMLAnchorElement {
  return h("a", { href: path, "data-nav": true }, ...text);
}

// needLogin shows the login form with the refusal's message.
function needLogin(message: string): void {
  // The token is refused for good (wrong, expired or revoked): drop it.
  setToken(null);
  loginError = message;
  navigate("/login");
}

// failed shows an error in a page's status line; a 401 goes to the login.
function failed(err: unknown, line: Element): void {
  if (err instanceof Unauthorized) {
    needLogin("refused: " + err.message);
    return;
  }
  replace(line, h("span", { class: "error" }, err instanceof Error ? err.message : String(err)));
}

// poll calls refresh now and every pollMs while the page is current.
function poll(refresh: () => Promise<void>): void {
  const mine = ++generation;
  const tick = async () => {
    if (mine !== generation) return;
    await refresh();
    if (mine === generation) setTimeout(tick, pollMs);
  };
  void tick();
}

function frame(title: string, ...body: Node[]): HTMLElement {
  const who = h("span", { id: "whoami" });
  const nav = h("nav", null, h("strong", null, "Eddy"), link("/", "Jobs"), link("/cluster", "Cluster"), who,
    token() ? h("button", { id: "logout", type: "button", onclick: () => { setToken(null); loginError = ""; navigate("/login"); } }, "Log out") : null);
  if (token()) {
    call<WhoAmI>("GET", "/v1/whoami").then((w) => {
      const t = w.token;
      if (t) replace(who, `${t.tenant ?? ""} · ${enumName(t.role, "ROLE_")}`);
    }).catch(() => { /* shown by the page's own calls */ });
  }
  const main = h("main", null, h("h1", null, title), ...body);
  replace(app, nav, main);
  return main;
}

async function route(): Promise<void> {
  generation++;
  const path = location.pathname;
  const m = path.match(/^\/jobs\/([^/]+)$/);
  if (path === "/login") loginPage();
  else if (path === "/cluster") clusterPage();
  else if (m) jobPage(decodeURIComponent(m[1]), new URLSearchParams(location.search).get("tenant") ?? "");
  else jobsPage();
}

// ---- Login ------------------------------------------------------------

function loginPage(): void {
  const input = h("input", { id: "token", type: "password", name: "token", autocomplete: "off", placeholder: "eddy_…", size: 60 });
  const err = h("p", { id: "login-error", class: "error" }, loginError);
  const form = h("form", { id: "login" },
    h("label", { for: "token" }, "Token"), input, h("button", { type: "submit" }, "Log in"), err);
  form.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    // The message of an earlier refusal goes now: what shows next is this
    // attempt's answer.
    loginError = "";
    replace(err);
    setToken(input.value.trim() || null);
    try {
      await call("GET", "/v1/jobs");
      loginError = "";
      navigate("/");
    } catch (e) {
      setToken(null);
      replace(err, e instanceof Unauthorized ? "refused: " + e.message : e instanceof Error ? e.message : String(e));
    }
  });
  replace(app, h("main", { class: "login" }, h("h1", null, "Eddy"),
    h("p", null, "This cluster needs a token (eddy token create). It is kept in this tab's session storage only."), form));
  input.focus();
}

// ---- Jobs -------------------------------------------------------------

function jobLink(j: JobSummary): HTMLAnchorElement {
  return link(`/jobs/${encodeURIComponent(j.jobId ?? "")}${q({ tenant: j.tenant })}`, j.jobId ?? "");
}

function stateBadge(state: string | undefined, prefix: string): HTMLElement {
  const name = enumName(state, prefix);
  return h("span", { class: `state ${name.replace(/ /g, "-")}` }, name);
}

function jobsPage(): void {
  const tenant = new URLSearchParams(location.search).get("tenant") ?? "";
  const line = h("p", { class: "status" });
  const list = h("div", { id: "jobs" });
  // An admin's calls act on the tenant they name ("default" when none):
  // a selector of every tenant lets the admin pick one.
  const picker = h("p", { id: "tenant-picker" });
  frame("Jobs", picker, line, list);
  if (token()) {
    call<WhoAmI>("GET", "/v1/whoami").then(async (w) => {
      if (w.token?.role !== "ROLE_ADMIN") return;
      const r = await call<{ tenants?: { id?: string }[] }>("GET", "/v1/tenants");
      const sel = h("select", { id: "tenant", onchange: () => navigate("/" + q({ tenant: sel.value })) },
        ...(r.tenants ?? []).map((t) => h("option", { value: t.id ?? "", selected: (t.id ?? "") === (tenant || "default") }, t.id ?? "")));
      replace(picker, h("label", null, "Tenant ", sel));
    }).catch(() => { /* the list's own call shows a refusal */ });
  }
  poll(async () => {
    try {
      const r = await call<{ jobs?: JobSummary[] }>("GET", "/v1/jobs" + q({ tenant }));
      const rows = (r.jobs ?? []).map((j) => [jobLink(j), j.name ?? "", j.tenant ?? "", stateBadge(j.state, "JOB_STATE_"),
        j.attempt ?? 0, time(j.submittedUnixMs), j.message ?? ""]);
      replace(list, table(["Job", "Name", "Tenant", "State", "Attempt", "Submitted", "Message"], rows, "No jobs."));
      replace(line, `updated ${new Date().toLocaleTimeString()}`);
    } catch (e) { failed(e, line); }
  });
}

// ---- Job --------------------------------------------------------------

interface Sample { out: number; at: number; }

function jobPage(jobId: string, tenant: string): void {
  const path = `/v1/jobs/${encodeURIComponent(jobId)}`;
  const tq = q({ tenant });
  const line = h("p", { class: "status" });
  const summary = h("div", { id: "summary" });
  const graph = h("div", { id: "graph-box", class: "graph" });
  const tasks = h("div", { id: "tasks" });
  const checkpoints = h("div", { id: "checkpoints" });
  const failures = h("div", { id: "failures" });
  const modules = h("div", { id: "modules" });
  const swaps = h("div", { id: "swaps" });
  const logs = h("pre", { id: "logs", class: "logs" });

  const spResult = h("span", { id: "savepoint-result" });
  const spButton = h("button", { id: "savepoint", type: "button" }, "Savepoint");
  spButton.addEventListener("click", async () => {
    spButton.disabled = true;
    replace(spResult, "savepoint in progress…");
    try {
      const r = await call<{ path?: string; checkpointId?: string }>("POST", `${path}/savepoints`, { tenant });
      replace(spResult, h("span", { class: "ok" }, `savepoint ${r.checkpointId ?? ""} completed: ${r.path ?? ""}`));
    } catch (e) { failed(e, spResult); } finally { spButton.disabled = false; }
  });

  const swapNode = h("select", { id: "swap-node", name: "node" });
  const swapModule = h("input", { id: "swap-module", name: "module", placeholder: "name@version (empty: keep, change the config only)", list: "module-versions", size: 36 });
  const versions = h("datalist", { id: "module-versions" });
  const swapConfig = h("textarea", { id: "swap-config", name: "config", rows: 2, cols: 50, placeholder: "configuration as a JSON object (empty: keep it)" });
  const swapResult = h("span", { id: "swap-result" });
  const swapForm = h("form", { id: "swap" }, h("label", null, "Node ", swapNode), h("label", null, " Module ", swapModule), versions,
    h("label", null, " Config ", swapConfig), h("button", { type: "submit" }, "Swap"), " ", swapResult);
  swapForm.addEventListener("submit", async (ev) => {
    ev.preventDefault();
    const config = swapConfig.value.trim();
    if (config) {
      try { if (typeof JSON.parse(config) !== "object") throw new Error(); } catch {
        replace(swapResult, h("span", { class: "error" }, "config: not a JSON object"));
        return;
      }
    }
    replace(swapResult, "swap in progress…");
    try {
      const r = await call<{ swap?: { state?: string; reason?: string; toModule?: string } }>("POST", `${path}/swaps`,
        { tenant, node: swapNode.value, module: swapModule.value.trim(), configJson: config, setConfig: config !== "" });
      const st = enumName(r.swap?.state, "SWAP_STATE_");
      replace(swapResult, h("span", { class: st === "swapped" ? "ok" : "error" }, `swap ${st}${r.swap?.reason ? ": " + r.swap.reason : ""}`));
    } catch (e) { failed(e, swapResult); }
  });

  frame(`Job ${jobId}`, line, summary,
    h("section", null, h("h2", null, "Graph"), h("p", { class: "legend" },
      h("span", { class: "swatch ok" }), " backpressure < 10 % ", h("span", { class: "swatch low" }), " < 50 % ",
      h("span", { class: "swatch high" }), " ≥ 50 % ", h("span", { class: "swatch idle" }), " not running"), graph),
    h("section", null, h("h2", null, "Tasks"), tasks),
    h("section", null, h("h2", null, "Checkpoints"), h("p", null, spButton, " ", spResult), checkpoints),
    h("section", null, h("h2", null, "Failures"), failures),
    h("section", null, h("h2", null, "Modules"), modules, h("h3", null, "Swap"), swapForm, h("h3", null, "Swap history"), swaps),
    h("section", null, h("h2", null, "Log tail"), logs));

  const samples = new Map<string, Sample>();
  const rates = new Map<string, number>();
  let logSeq = "0", logEpoch = "0", logLast = 0;
  const logLines: string[] = [];
  let nodesKnown = "";

  call<{ modules?: ModuleInfo[] }>("GET", "/v1/modules" + tq).then((r) => {
    replace(versions, ...(r.modules ?? []).map((m) => h("option", { value: `${m.name}@${m.version}` })));
  }).catch(() => { /* the datalist only helps typing */ });

  poll(async () => {
    let st: JobStatus;
    try { st = await call<JobStatus>("GET", path + tq); } catch (e) { failed(e, line); return; }
    const now = performance.now();
    // records/s of a task: its recordsOut difference between two polls.
    for (const t of st.tasks ?? []) {
      const id = t.taskId ?? "", out = num(t.metrics?.recordsOut);
      const prev = samples.get(id);
      if (prev && now > prev.at && out >= prev.out) rates.set(id, ((out - prev.out) * 1000) / (now - prev.at));
      samples.set(id, { out, at: now });
    }
    const j = st.job ?? {};
    replace(summary, h("dl", null,
      h("dt", null, "Name"), h("dd", null, j.name ?? ""), h("dt", null, "Tenant"), h("dd", null, j.tenant ?? ""),
      h("dt", null, "State"), h("dd", { id: "job-state" }, stateBadge(j.state, "JOB_STATE_")),
      h("dt", null, "Attempt"), h("dd", null, j.attempt ?? 0), h("dt", null, "Submitted"), h("dd", null, time(j.submittedUnixMs)),
      j.message ? h("dt", null, "Message") : null, j.message ? h("dd", null, j.message) : null));

    const gnodes = st.graph?.nodes ?? [];
    const live = (n: { chainHead?: string }): NodeLive => {
      const mine = (st.tasks ?? []).filter((t) => (t.taskId ?? "").startsWith(`${n.chainHead}[`));
      return {
        running: mine.some((t) => t.state === "TASK_STATE_RUNNING"),
        rate: mine.some((t) => rates.has(t.taskId ?? "")) ? mine.reduce((a, t) => a + (rates.get(t.taskId ?? "") ?? 0), 0) : undefined,
        backpressure: Math.max(0, ...mine.map((t) => t.metrics?.backpressureRatio ?? 0)),
      };
    };
    replace(graph, gnodes.length ? drawGraph(gnodes, st.graph?.edges ?? [], live) : h("p", { class: "empty" }, "No graph."));

    // A task runs the chain of nodes whose chain head starts its id.
    const chainOf = (t: TaskStatus): string => t.chain ||
      gnodes.filter((n) => (t.taskId ?? "").startsWith(`${n.chainHead}[`)).map((n) => n.name).join(" → ");
    replace(tasks, table(["Task", "Chain", "State", "Worker", "Records in", "Records out", "Throughput", "Backpressure", "Watermark"],
      (st.tasks ?? []).map((t: TaskStatus) => [t.taskId ?? "", chainOf(t), stateBadge(t.state, "TASK_STATE_"), t.workerId ?? "–",
        num(t.metrics?.recordsIn), num(t.metrics?.recordsOut), rate(rates.get(t.taskId ?? "")),
        percent(t.metrics?.backpressureRatio), watermark(t.metrics?.watermarkMs)]), "No tasks."));

    replace(checkpoints, table(["Id", "Kind", "State", "Triggered", "Duration", "Full size", "Incremental", "Path"],
      (st.checkpoints ?? []).map((c: CheckpointInfo) => [num(c.checkpointId), enumName(c.kind, "CHECKPOINT_KIND_"),
        stateBadge(c.state, "CHECKPOINT_STATE_"), time(c.triggeredUnixMs), duration(num(c.durationMs)),
        bytes(c.fullSizeBytes), bytes(c.incrementalSizeBytes), c.path ?? ""]), "No checkpoints yet."));

    const causes: HTMLElement[][] = [];
    if (j.state === "JOB_STATE_FAILED" || j.state === "JOB_STATE_RESTARTING") causes.push([h("span", null, "job"), h("span", null, j.message ?? "")]);
    for (const t of st.tasks ?? []) if (t.error) causes.push([h("span", null, `task ${t.taskId}`), h("span", null, t.error)]);
    for (const c of st.checkpoints ?? []) if (c.error) causes.push([h("span", null, `checkpoint ${num(c.checkpointId)}`), h("span", null, c.error)]);
    for (const w of st.swaps ?? []) if (w.reason) causes.push([h("span", null, `swap ${num(w.swapId)} (${enumName(w.state, "SWAP_STATE_")})`), h("span", null, w.reason)]);
    replace(failures, table(["Where", "Cause"], causes, "No failures."));

    replace(modules, table(["Node", "Module", "sha256", "Config"], (st.nodes ?? []).map((n) =>
      [n.name ?? "", n.module ?? "", (n.sha256 ?? "").slice(0, 12), n.configJson ?? ""]), "No Wasm nodes."));
    const names = (st.nodes ?? []).map((n) => n.name ?? "").join("\n");
    if (names !== nodesKnown) {
      nodesKnown = names;
      replace(swapNode, ...(st.nodes ?? []).map((n) => h("option", { value: n.name ?? "" }, n.name ?? "")));
    }
    replace(swaps, table(["Id", "Node", "From", "To", "Config changed", "State", "Began", "Pause", "Reason"],
      (st.swaps ?? []).map((w) => [num(w.swapId), w.node ?? "", w.fromModule ?? "", w.toModule ?? "", w.configChanged ? "yes" : "no",
        stateBadge(w.state, "SWAP_STATE_"), time(w.beganUnixMs), duration(num(w.pauseUs) / 1000), w.reason ?? ""]), "No swaps."));

    try {
      const r = await call<JobLogs>("GET", `${path}/logs${q({ tenant, after_seq: logSeq, epoch: logEpoch, limit: 200 })}`);
      // A new epoch (another leader) numbers lines afresh; within one, a
      // line at or below the last seq shown is one already shown.
      if (String(r.epoch ?? "0") !== logEpoch) logLast = 0;
      for (const l of r.lines ?? []) {
        if (num(l.seq) <= logLast) continue;
        logLast = num(l.seq);
        const e = l.entry ?? {};
        logLines.push(`${time(e.timeUnixMs)} ${e.level ?? ""} ${e.task || "job"}${e.stream ? " " + e.stream : ""}: ${e.message ?? ""}`);
      }
      logLines.splice(0, Math.max(0, logLines.length - 200));
      if (r.nextSeq !== undefined) logSeq = String(r.nextSeq);
      if (r.epoch !== undefined) logEpoch = String(r.epoch);
      logs.textContent = logLines.length ? logLines.join("\n") : "No log lines.";
      replace(line, `updated ${new Date().toLocaleTimeString()}`);
    } catch (e) {
      if (e instanceof ApiError || e instanceof Unauthorized) failed(e, line); else throw e;
    }
  });
}

// ---- Cluster ----------------------------------------------------------

function clusterPage(): void {
  const line = h("p", { class: "status" });
  const body = h("div", { id: "cluster" });
  frame("Cluster", line, body);
  poll(async () => {
    try {
      const c = await call<ClusterInfo>("GET", "/v1/cluster");
      const workers = c.workers ?? [];
      const total = workers.reduce((a, w) => a + (w.slotsTotal ?? 0), 0);
      const used = workers.reduce((a, w) => a + (w.slotsUsed ?? 0), 0);
      replace(body,
        h("p", null, "Leader: ", h("strong", { id: "leader" }, c.leaderId || "none (election under way)"),
          ` · slots ${used} used of ${total}`),
        h("h2", null, "Coordinators"),
        table(["Id", "Role", "Voter", "API", "Raft"], (c.coordinators ?? []).map((k) =>
          [k.nodeId ?? "", enumName(k.role, "COORDINATOR_ROLE_"), k.voter ? "yes" : "no", k.apiAddress ?? "", k.raftAddress ?? ""]), "No coordinators."),
        h("h2", null, "Workers"),
        table(["Id", "State", "Slots used", "Slots", "Data address", "Last heartbeat"], workers.map((w) =>
          [w.workerId ?? "", stateBadge(w.state, "WORKER_STATE_"), w.slotsUsed ?? 0, w.slotsTotal ?? 0, w.dataAddress ?? "",
            time(w.lastHeartbeatUnixMs)]), "No workers."));
      replace(line, `updated ${new Date().toLocaleTimeString()}`);
    } catch (e) { failed(e, line); }
  });
}

void route();
