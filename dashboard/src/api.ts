// The REST API of the coordinator (grpc-gateway, protojson): the types hold
// only the fields the dashboard reads. protojson leaves out zero values and
// writes 64-bit integers as strings, so every field is optional and numbers
// go through num().

export type Int = string | number;

export interface JobSummary {
  jobId?: string; tenant?: string; name?: string; state?: string; message?: string;
  attempt?: number; submittedUnixMs?: Int; endedUnixMs?: Int;
}
export interface TaskMetrics {
  recordsIn?: Int; recordsOut?: Int; bytesIn?: Int; bytesOut?: Int;
  backpressureRatio?: number; watermarkMs?: Int; pendingRecords?: Int;
}
export interface TaskStatus {
  taskId?: string; chain?: string; subtask?: number; state?: string; workerId?: string;
  metrics?: TaskMetrics; error?: string;
}
export interface CheckpointInfo {
  checkpointId?: Int; kind?: string; state?: string; triggeredUnixMs?: Int; durationMs?: Int;
  fullSizeBytes?: Int; incrementalSizeBytes?: Int; path?: string; error?: string;
}
export interface NodeInfo { name?: string; module?: string; sha256?: string; configJson?: string; }
export interface SwapRecord {
  swapId?: Int; node?: string; fromModule?: string; toModule?: string; configChanged?: boolean;
  state?: string; beganUnixMs?: Int; endedUnixMs?: Int; savepointId?: Int; pauseUs?: Int; reason?: string;
}
export interface GraphNode { name?: string; kind?: string; parallelism?: number; chainHead?: string; }
export interface GraphEdge { from?: string; to?: string; kind?: string; chained?: boolean; port?: string; }
export interface JobStatus {
  job?: JobSummary; tasks?: TaskStatus[]; checkpoints?: CheckpointInfo[]; nodes?: NodeInfo[];
  swaps?: SwapRecord[]; graph?: { nodes?: GraphNode[]; edges?: GraphEdge[] };
}
export interface ModuleInfo { tenant?: string; name?: string; version?: number; sha256?: string; size?: Int; }
export interface CoordinatorInfo { nodeId?: string; raftAddress?: string; apiAddress?: string; role?: string; voter?: boolean; }
export interface WorkerInfo {
  workerId?: string; dataAddress?: string; slotsTotal?: number; slotsUsed?: number; state?: string; lastHeartbeatUnixMs?: Int;
}
export interface ClusterInfo { leaderId?: string; coordinators?: CoordinatorInfo[]; workers?: WorkerInfo[]; }
export interface LogLine { seq?: Int; entry?: { timeUnixMs?: Int; task?: string; level?: string; stream?: string; message?: string } }
export interface JobLogs { lines?: LogLine[]; nextSeq?: Int; epoch?: Int; state?: string; }
export interface WhoAmI { token?: { id?: string; tenant?: string; role?: string } }

export function num(v: Int | undefined): number {
  if (v === undefined || v === "") return 0;
  return typeof v === "number" ? v : Number(v);
}

const tokenKey = "eddy.token";

export function token(): string | null { return sessionStorage.getItem(tokenKey); }
export function setToken(t: string | null): void {
  if (t === null) sessionStorage.removeItem(tokenKey); else sessionStorage.setItem(tokenKey, t);
}

// Unauthorized is a 401: the token is missing, wrong or revoked. The page
// shows the login form with its message.
export class Unauthorized extends Error {}

// ApiError is any other refusal, with the server's one-line message.
export class ApiError extends Error {
  constructor(readonly status: number, message: string) { super(message); }
}

export async function call<T>(method: "GET" | "POST", path: string, body?: unknown): Promise<T> {
  const headers: Record<string, string> = { Accept: "application/json" };
  const t = token();
  if (t) headers.Authorization = "Bearer " + t;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const resp = await fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body) });
  const text = await resp.text();
  let data: unknown = undefined;
  try { data = text ? JSON.parse(text) : {}; } catch { /* not JSON: an error page of a proxy */ }
  if (!resp.ok) {
    const msg = (data as { message?: string } | undefined)?.message || text.trim() || resp.statusText;
    if (resp.status === 401) throw new Unauthorized(msg);
    throw new ApiError(resp.status, `${resp.status}: ${msg}`);
  }
  return data as T;
}

// q builds a query string of the set values.
export function q(params: Record<string, string | number | undefined>): string {
  const s = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== "") s.set(k, String(v));
  const str = s.toString();
  return str ? "?" + str : "";
}
