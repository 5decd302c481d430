// End-to-end test of the dashboard in a real Chromium (playwright-core,
// Debian's /usr/bin/chromium), against a coordinator's --http address.
// The Go tests TestDashboard* (cmd/eddy) start a real cluster and run it;
// package dashboard's TestBrowserFixture runs it against a fixture server.
//
// Environment:
//   EDDY_URL        the dashboard, e.g. http://127.0.0.1:8080
//   EDDY_TOKEN      a valid token (empty: the cluster has no authentication)
//   EDDY_BAD_TOKEN  a token the cluster refuses (needs EDDY_TOKEN)
//   EDDY_JOB        the id of a running job with checkpoints
//   EDDY_NODES      its node names, comma-separated
//   EDDY_OTHER_TOKEN  optional: another tenant's token, which must see
//                   neither the job in the list nor its page
//   EDDY_CLUSTER    "leader" (default: the cluster page shows the leader)
//                   or "refused" (the token may not read the cluster: the
//                   page shows the refusal and no table)
//   EDDY_SWAP_NODE, EDDY_SWAP_MODULE  optional: a hot swap to make with the
//                   page's form (node, "name@version"); it must end SWAPPED
//   EDDY_ADMIN_TOKEN  optional: an admin token, with which the last step
//                   revokes the token the page is logged in with; the open
//                   page must fall back to the login with the refusal
//   EDDY_STEPS      the steps to run, comma-separated (default all):
//                   login,jobs,graph,checkpoint,savepoint,swap,cluster,other,revoke
//   EDDY_TENANT     the job's tenant, for an admin token (picked in the
//                   jobs page's tenant selector)
//   EDDY_ARTIFACTS  where screenshots go (created)
//   EDDY_TIMEOUT_MS bound of every wait (default 60000)
//   CHROMIUM        the browser (default /usr/bin/chromium)
//
// Prints one line per step; exits 1 with the failing step's message.
import { chromium } from "playwright-core";
import { mkdirSync } from "node:fs";
import { join } from "node:path";

const env = (k, d) => process.env[k] ?? d;
const url = env("EDDY_URL");
const goodToken = env("EDDY_TOKEN", "");
const badToken = env("EDDY_BAD_TOKEN", "");
const job = env("EDDY_JOB");
const nodes = env("EDDY_NODES", "").split(",").filter(Boolean);
const otherToken = env("EDDY_OTHER_TOKEN", "");
const clusterExpect = env("EDDY_CLUSTER", "leader");
const steps = (env("EDDY_STEPS", "") || "login,jobs,graph,checkpoint,savepoint,swap,cluster,other,revoke").split(",");
const want = (name) => steps.includes(name);
const tenant = env("EDDY_TENANT", "");
const adminToken = env("EDDY_ADMIN_TOKEN", "");
const swapNode = env("EDDY_SWAP_NODE", "");
const swapModule = env("EDDY_SWAP_MODULE", "");
const artifacts = env("EDDY_ARTIFACTS", "dashboard-artifacts");
const timeout = Number(env("EDDY_TIMEOUT_MS", "60000"));
if (!url || !job) {
  console.error("e2e.mjs: EDDY_URL and EDDY_JOB are required");
  process.exit(2);
}
mkdirSync(artifacts, { recursive: true });

const browser = await chromium.launch({
  executablePath: env("CHROMIUM", "/usr/bin/chromium"),
  headless: true,
  // CI runs as root, where Chromium's sandbox cannot start.
  args: ["--no-sandbox", "--disable-dev-shm-usage"],
  timeout,
});
const page = await browser.newPage({ viewport: { width: 1400, height: 1000 } });
page.setDefaultTimeout(timeout);
const consoleErrors = [];
page.on("console", (m) => { if (m.type() === "error") consoleErrors.push(m.text()); });
page.on("pageerror", (e) => consoleErrors.push(String(e)));

let step = "start";
const shot = async (name) => {
  const p = join(artifacts, name + ".png");
  await page.screenshot({ path: p, fullPage: true });
  console.log(`screenshot ${p}`);
};
const ok = (msg) => console.log(`ok ${step}: ${msg}`);

try {
  await page.goto(url + "/");
  if (goodToken) {
    await page.locator("form#login").waitFor();
  }
  if (goodToken && want("login")) {
    step = "login refuses a wrong token";
    await page.fill("#token", badToken);
    await page.click("form#login button[type=submit]");
    // The answer to this attempt: a form shown after the first page's own
    // refusal carries that message until the submit clears it (the real
    // coordinator says "invalid API token" for a wrong token and "needs an
    // API token" for none; the fixture "invalid token" for both).
    await page.locator("#login-error", { hasText: "refused: invalid" }).waitFor();
    const err = (await page.textContent("#login-error")).trim();
    if (await page.locator("#jobs").count() !== 0) throw new Error("the jobs list is shown after a refused login");
    if (await page.evaluate(() => sessionStorage.getItem("eddy.token")) !== null) throw new Error("a refused token was kept");
    await shot("01-login-refused");
    ok(err);
  }
  if (goodToken) {
    step = "login";
    await page.fill("#token", goodToken);
    await page.click("form#login button[type=submit]");
    await page.locator("#jobs table, #jobs p.empty").first().waitFor();
  }

  const jobLink = page.locator(`#jobs a`, { hasText: job });
  if (want("jobs")) {
    step = "jobs list shows the job";
    if (tenant) await page.selectOption("#tenant", tenant);
    await jobLink.first().waitFor();
    await shot("02-jobs");
    ok(job);
  }

  const row = (kind) => page.locator("#checkpoints tbody tr").filter({ has: page.locator("td:nth-child(2)", { hasText: new RegExp(`^${kind}$`) }) })
    .filter({ has: page.locator("td:nth-child(3)", { hasText: "completed" }) });
  if (want("graph")) {
    step = "job graph shows its nodes";
    await jobLink.first().click();
    await page.locator("#graph").waitFor();
    for (const n of nodes) await page.locator(`#graph g.node[data-node="${n}"]`).waitFor();
    const drawn = await page.$$eval("#graph g.node", (gs) => gs.map((g) => g.getAttribute("data-node")));
    const missing = nodes.filter((n) => !drawn.includes(n));
    if (missing.length) throw new Error(`graph lacks ${missing.join(", ")}; has ${drawn.join(", ")}`);
    const edges = await page.locator("#graph g.edge").count();
    if (nodes.length > 1 && edges === 0) throw new Error("graph has no edges");
    ok(`${drawn.length} nodes (${drawn.join(", ")}), ${edges} edges`);
  }

  if (want("checkpoint")) {
    step = "a checkpoint appears in the history";
    await row("checkpoint").first().waitFor();
    ok((await row("checkpoint").first().innerText()).replace(/\s+/g, " "));
    // Live updates: records/s appears once two polls have been compared.
    await page.locator("#tasks tbody td:nth-child(7)", { hasText: "/s" }).first().waitFor();
    await shot("03-job");
  }

  if (want("savepoint")) {
    step = "a savepoint started from the page completes";
    await page.click("#savepoint");
    await page.locator("#savepoint-result", { hasText: "completed" }).waitFor();
    const result = (await page.textContent("#savepoint-result")).trim();
    await row("savepoint").first().waitFor();
    await shot("04-savepoint");
    ok(result);
  }

  if (swapNode && want("swap")) {
    step = "a swap made with the page's form completes";
    await page.selectOption("#swap-node", swapNode);
    await page.fill("#swap-module", swapModule);
    await page.click("form#swap button[type=submit]");
    await page.locator("#swap-result", { hasText: /^swap (swapped|refused|failed|rolled back)/ }).waitFor();
    const result = (await page.textContent("#swap-result")).trim();
    if (!result.startsWith("swap swapped")) throw new Error(result);
    await page.locator("#swaps tbody tr", { hasText: swapModule }).filter({ hasText: "swapped" }).first().waitFor();
    await page.locator("#modules tbody tr", { hasText: swapModule }).first().waitFor();
    await shot("04-swap");
    ok(`${swapNode} → ${swapModule}: ${result}`);
  }

  if (want("cluster")) {
    step = "cluster page";
    await page.click('nav a[href="/cluster"]');
    if (clusterExpect === "refused") {
      await page.locator("p.status .error").waitFor();
      const why = (await page.textContent("p.status")).trim();
      if (await page.locator("#cluster table").count() !== 0) throw new Error("cluster tables shown to a token that may not read them");
      await shot("05-cluster-refused");
      ok(why);
    } else {
      await page.locator("#leader").waitFor();
      const leader = (await page.textContent("#leader")).trim();
      if (!leader || leader.startsWith("none")) throw new Error(`no leader shown: ${leader}`);
      await page.locator("#cluster table").nth(1).waitFor();
      await shot("05-cluster");
      ok(`leader ${leader}`);
    }
  }

  if (otherToken && want("other")) {
    step = "another tenant sees nothing of the job";
    await page.click("#logout");
    await page.locator("form#login").waitFor();
    await page.fill("#token", otherToken);
    await page.click("form#login button[type=submit]");
    // The list has answered (a table, or its empty line) without the job.
    await page.locator("#jobs table, #jobs p.empty").first().waitFor();
    if (await page.locator("#jobs a", { hasText: job }).count() !== 0) throw new Error("the job is listed for another tenant");
    const jobUrl = new URL(await page.evaluate(() => location.href));
    await page.goto(`${jobUrl.origin}/jobs/${encodeURIComponent(job)}`);
    await page.locator("p.status .error").waitFor();
    const why = (await page.textContent("p.status")).trim();
    if (await page.locator("#graph g.node").count() !== 0) throw new Error("the job's graph is shown to another tenant");
    await shot("06-other-tenant");
    ok(why);
  }

  if (adminToken && want("revoke")) {
    step = "a token revoked while the page is open";
    const current = await page.evaluate(() => sessionStorage.getItem("eddy.token"));
    if (!current) throw new Error("the page holds no token");
    // Tokens are "eddy_<id>_<secret>"; a fixture's are their own id.
    const id = (current.match(/^eddy_([0-9a-f]+)_/) ?? [null, current])[1];
    const resp = await fetch(`${url}/v1/tokens/${id}`, { method: "DELETE", headers: { Authorization: `Bearer ${adminToken}` } });
    if (!resp.ok) throw new Error(`revoke: ${resp.status} ${await resp.text()}`);
    // The page's next poll is refused: it shows the login with the line.
    await page.locator("form#login").waitFor();
    await page.locator("#login-error", { hasText: "refused" }).waitFor();
    const why = (await page.textContent("#login-error")).trim();
    if (await page.evaluate(() => sessionStorage.getItem("eddy.token")) !== null) throw new Error("the revoked token was kept");
    await shot("07-revoked");
    ok(why);
  }

  if (consoleErrors.length) {
    step = "no script errors";
    // The refusals the steps provoke (a wrong token, another tenant, a
    // tenant at the cluster page) log their fetch's status; anything else
    // is a bug of the page.
    const unexpected = consoleErrors.filter((e) => !/^Failed to load resource: the server responded with a status of 40[134]/.test(e));
    if (unexpected.length) throw new Error(unexpected.join("; "));
  }
  console.log("PASS");
} catch (e) {
  try { await shot("failed"); } catch { /* the browser may be gone */ }
  console.error(`FAIL ${step}: ${e instanceof Error ? e.message.split("\n")[0] : e}`);
  process.exitCode = 1;
} finally {
  await browser.close();
}
