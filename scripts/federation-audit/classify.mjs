// Replays the federation audit against the lab's gateway and classifies every case, because
// the audit's runner compares `data` only and ignores `errors` unless a case expects them:
// a wrong answer that carried an error and one that did not are very different defects.
// For each suite, in the audit's order: starts the gateway with the same run script the
// runner used (scripts/federation-audit/run-gateway.sh, so the same mode and arguments),
// waits for it as the runner does (GET health, then `{ __typename }`), sends each case's
// query once, in order (as the runner does: state-changing suites such as `mutations` see
// the same sequence), compares as the runner does (node's deep strict equality of
// { data, errors? }), and stops the gateway. Each case gets one outcome:
//   passed       the answer equals the expected one
//   startup      the gateway did not come up for the suite (refused it, or exited)
//   error        a wrong answer that carried GraphQL `errors`
//   wrong-data   a wrong answer with no `errors` at all: the worst defect
//   no-answer    no GraphQL JSON came back (transport error, timeout, non-JSON body)
// It records no query or expected data (they are the audit's), only outcomes, the paths
// where the data differed, the first error messages and the gateway's start-up error.
// Usage: node classify.mjs --server URL --graphql URL --health URL --run-script FILE
//          --work DIR --logs DIR --out FILE [--startup-timeout-ms N] [--suite ID ...]
// The caller (scripts/federation-audit.sh) starts the audit's server; the environment it
// passes carries the run script's FEDERATION_AUDIT_* settings.
import { spawn } from "node:child_process";
import { mkdirSync, openSync, closeSync, readFileSync, writeFileSync, existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { parseArgs, isDeepStrictEqual } from "node:util";
import { setTimeout as sleep } from "node:timers/promises";

const fail = (message) => {
  process.stderr.write(`classify.mjs: ${message}\n`);
  process.exit(1);
};

const { values } = parseArgs({
  options: {
    server: { type: "string" },
    graphql: { type: "string" },
    health: { type: "string" },
    "run-script": { type: "string" },
    work: { type: "string" },
    logs: { type: "string" },
    out: { type: "string" },
    "startup-timeout-ms": { type: "string", default: "10000" },
    suite: { type: "string", multiple: true },
  },
});
for (const name of ["server", "graphql", "health", "run-script", "work", "logs", "out"]) {
  if (!values[name]) fail(`--${name} is required`);
}
const startupTimeoutMs = Number(values["startup-timeout-ms"]);
if (!Number.isFinite(startupTimeoutMs) || startupTimeoutMs <= 0) {
  fail("--startup-timeout-ms must be a positive number of milliseconds");
}
mkdirSync(values.work, { recursive: true });
mkdirSync(values.logs, { recursive: true });

const known = await getJson(`${values.server}/ids`);
const unknown = (values.suite ?? []).filter((id) => !known.includes(id));
if (unknown.length) fail(`no suite ${unknown.join(", ")} in this audit; it has: ${known.join(", ")}`);
const ids = values.suite?.length ? values.suite : known;
const suites = [];
for (const id of ids) {
  const tests = await getJson(`${values.server}/${encodeURIComponent(id)}/tests`);
  const suite = await replaySuite(id, tests);
  process.stdout.write(`${id}: ${suite.cases.map((c) => mark(c.outcome)).join("")}\n`);
  suites.push(suite);
}
writeFileSync(values.out, JSON.stringify({ schema: "federation-audit.cases/1", suites }, null, 2) + "\n");

/** One suite: start the gateway, send every case, stop the gateway. */
async function replaySuite(id, tests) {
  const logFile = join(values.logs, `${id}-gateway.log`);
  const exitFile = join(values.work, `${id}.exit`);
  const log = openSync(logFile, "w");
  const runScript = values["run-script"];
  const child = spawn("sh", [runScript, id], {
    cwd: dirname(runScript),
    env: { ...process.env, FEDERATION_AUDIT_WORK: values.work },
    stdio: ["ignore", log, log],
  });
  closeSync(log);
  const exited = new Promise((resolve) => child.once("exit", resolve));
  let up = false;
  try {
    up = await waitUp(exited);
    const cases = [];
    for (const [index, test] of tests.entries()) {
      const name = `${id}_${index}`;
      cases.push(up ? { name, ...(await runCase(test)) } : { name, outcome: "startup" });
    }
    return {
      id,
      cases,
      startup_error: up ? null : startupError(logFile),
    };
  } finally {
    await stop(child, exited, id);
    if (!up && existsSync(exitFile)) {
      // keep the run script's own record of how the gateway ended beside the log
      writeFileSync(`${logFile}.exit`, readFileSync(exitFile));
    }
  }
}

/** Up as the audit's runner sees it: health answers 2xx, then `{ __typename }` is "Query". */
async function waitUp(exited) {
  let gone = false;
  exited.then(() => (gone = true));
  const deadline = Date.now() + startupTimeoutMs;
  while (!gone && Date.now() < deadline) {
    try {
      const health = await fetch(values.health, { signal: AbortSignal.timeout(500) });
      if (health.ok) {
        const answer = await postQuery("query ping { __typename }", 2_000);
        if (answer.json?.data?.__typename === "Query") return true;
      }
    } catch {
      // not listening yet
    }
    await sleep(100);
  }
  return false;
}

/** One case, compared exactly as the audit's test.ts compares it. */
async function runCase({ query, expected }) {
  const answer = await postQuery(query, 10_000);
  if (answer.json === undefined) return { outcome: "no-answer", detail: answer.problem };
  const response = answer.json ?? {};
  const errorsOptional = typeof expected.errors !== "boolean";
  const received = {
    data: response.data ?? null,
    errors: errorsOptional ? null : Boolean(response.errors?.length),
  };
  const wanted = {
    data: expected.data ?? null,
    errors: errorsOptional ? null : (expected.errors ?? false),
  };
  const errors = Array.isArray(response.errors) ? response.errors : [];
  const result = {};
  if (isDeepStrictEqual(received, wanted)) {
    result.outcome = "passed";
  } else {
    result.outcome = errors.length ? "error" : "wrong-data";
    result.differs_at = differences(wanted.data, received.data, "data").slice(0, 5);
    if (!errorsOptional && received.errors !== wanted.errors) {
      result.expected_errors = wanted.errors;
    }
  }
  if (errors.length) {
    result.errors = errors.slice(0, 3).map((e) => {
      const text = typeof e?.message === "string" ? e.message : JSON.stringify(e);
      const at = Array.isArray(e?.path) ? ` (at ${e.path.join(".")})` : "";
      return clip(text, 300) + at;
    });
  }
  return result;
}

/** Paths (not values) where `got` differs from `want`. */
function differences(want, got, path) {
  if (isDeepStrictEqual(want, got)) return [];
  const isObject = (v) => v !== null && typeof v === "object";
  if (Array.isArray(want) && Array.isArray(got)) {
    if (want.length !== got.length) return [`${path} (length ${got.length}, expected ${want.length})`];
    return want.flatMap((w, i) => differences(w, got[i], `${path}[${i}]`));
  }
  if (isObject(want) && isObject(got) && !Array.isArray(want) && !Array.isArray(got)) {
    const keys = [...new Set([...Object.keys(want), ...Object.keys(got)])];
    return keys.flatMap((k) => {
      if (!(k in got)) return [`${path}.${k} (missing)`];
      if (!(k in want)) return [`${path}.${k} (unexpected)`];
      return differences(want[k], got[k], `${path}.${k}`);
    });
  }
  if (got === null && want !== null) return [`${path} (null)`];
  return [path];
}

/** POST a query as the runner does; json is undefined when no GraphQL JSON came back. */
async function postQuery(query, timeoutMs) {
  try {
    const response = await fetch(values.graphql, {
      method: "POST",
      headers: { accept: "application/json", "content-type": "application/json" },
      body: JSON.stringify({ query }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    const text = await response.text();
    try {
      return { json: JSON.parse(text) };
    } catch {
      return { problem: `HTTP ${response.status}, not JSON: ${clip(text, 200)}` };
    }
  } catch (error) {
    return { problem: clip(String(error.cause?.message ?? error.message), 200) };
  }
}

/** The gateway's reason for not starting: its output after the run script's command line. */
function startupError(logFile) {
  const lines = readFileSync(logFile, "utf8").split("\n").filter((l) => l.trim());
  const own = lines.filter((l) => !l.startsWith("run-gateway.sh: "));
  return clip((own.length ? own : lines.slice(-3)).join("\n"), 1500);
}

async function stop(child, exited, id) {
  if (child.exitCode === null && child.signalCode === null) child.kill("SIGTERM");
  const done = await Promise.race([exited.then(() => true), sleep(15_000).then(() => false)]);
  if (!done) {
    // the run script did not stop: end the gateway it recorded, then the script
    const pidFile = join(values.work, `${id}.pid`);
    if (existsSync(pidFile)) {
      try {
        process.kill(Number(readFileSync(pidFile, "utf8")), "SIGKILL");
      } catch {
        // already gone
      }
    }
    child.kill("SIGKILL");
    await exited;
  }
}

async function getJson(url) {
  const response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
  if (!response.ok) fail(`GET ${url}: HTTP ${response.status}`);
  return response.json();
}

function clip(text, n) {
  return text.length > n ? `${text.slice(0, n)}…` : text;
}

function mark(outcome) {
  return { passed: ".", startup: "S", error: "E", "wrong-data": "W", "no-answer": "N" }[outcome];
}
