// The summary of one federation-audit run: summary.json and summary.md in the run folder.
// Counts come from the audit's own verdicts (results.txt: one line per suite id, then one
// `.` or `X` per case); each case the audit failed is split by what the replay
// (classify.mjs, cases.json) saw the gateway answer:
//   startup     the gateway did not start for the suite (refused it at composition)
//   error       wrong answer, with GraphQL errors
//   wrong-data  wrong answer with no error: the worst defect
//   no-answer   no GraphQL JSON came back
//   flaky       failed in the audit's run, passed on the replay
// A case the audit passed and the replay failed is listed under "disagreements", and so is
// a suite whose gateway failed its health check in the audit's run (its test log says so)
// but started on the replay, or the other way round.
// With --replay-only (a partial run of chosen suites, no results.txt) the replay's own
// verdicts stand in for the audit's, and the summary says so.
// Usage: node summary.mjs --run-dir DIR [--replay-only]
//   reads DIR/manifest.json, DIR/cases.json, DIR/results.txt; writes DIR/summary.{json,md}
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { parseArgs } from "node:util";

const { values } = parseArgs({
  options: { "run-dir": { type: "string" }, "replay-only": { type: "boolean", default: false } },
});
const dir = values["run-dir"];
if (!dir) {
  process.stderr.write("summary.mjs: --run-dir is required\n");
  process.exit(1);
}
const replayOnly = values["replay-only"];
const manifest = JSON.parse(readFileSync(join(dir, "manifest.json"), "utf8"));
const replay = JSON.parse(readFileSync(join(dir, "cases.json"), "utf8"));
const audit = replayOnly ? null : readResults(join(dir, "results.txt"));

const CATEGORIES = ["startup", "error", "wrong-data", "no-answer", "flaky"];
const suites = replay.suites.map((suite) => {
  const marks = audit ? (audit.suites.get(suite.id) ?? "") : null;
  const counts = Object.fromEntries(["passed", "failed", ...CATEGORIES].map((c) => [c, 0]));
  const failing = [];
  const disagreements = [];
  suite.cases.forEach((c, i) => {
    const auditPassed = marks ? marks[i] === "." : c.outcome === "passed";
    if (marks && marks[i] === undefined) disagreements.push({ case: c.name, note: "not reported by the audit" });
    if (auditPassed) {
      counts.passed++;
      if (c.outcome !== "passed") disagreements.push({ case: c.name, note: `passed in the audit, ${c.outcome} on the replay` });
      return;
    }
    counts.failed++;
    const category = c.outcome === "passed" ? "flaky" : c.outcome;
    counts[category]++;
    const entry = { case: c.name, category };
    for (const key of ["errors", "differs_at", "expected_errors", "detail"]) {
      if (c[key] !== undefined) entry[key] = c[key];
    }
    failing.push(entry);
  });
  // the audit's runner notes in the suite's test log when the gateway never became healthy
  const testsLog = join(dir, "logs", `${suite.id}-tests.log`);
  if (marks && existsSync(testsLog)) {
    const refusedInAudit = readFileSync(testsLog, "utf8").includes("Health check failed");
    const refusedOnReplay = suite.startup_error != null;
    if (refusedInAudit !== refusedOnReplay) {
      disagreements.push({
        case: suite.id,
        note: refusedInAudit ? "the gateway never became healthy in the audit's run, but started on the replay" : "the gateway started in the audit's run, but not on the replay",
      });
    }
  }
  if (marks && marks.length > suite.cases.length) {
    disagreements.push({ case: suite.id, note: `the audit reported ${marks.length} cases, the replay has ${suite.cases.length}` });
  }
  return {
    id: suite.id,
    cases: suite.cases.length,
    ...counts,
    whole: counts.failed === 0 && suite.cases.length > 0,
    startup_error: suite.startup_error ?? null,
    failing,
    disagreements,
  };
});

const sum = (key) => suites.reduce((n, s) => n + s[key], 0);
const totals = Object.fromEntries(["cases", "passed", "failed", ...CATEGORIES].map((k) => [k, sum(k)]));
const whole = suites.filter((s) => s.whole).map((s) => s.id);
const summary = {
  schema: "federation-audit.summary/1",
  run_id: manifest.run_id,
  verdicts: replayOnly ? "replay (no audit runner: a partial run)" : "the audit's results.txt",
  audit_reported: audit?.totals ?? null,
  totals: { ...totals, suites: suites.length, suites_whole: whole.length },
  suites_whole: whole,
  suites,
};
writeFileSync(join(dir, "summary.json"), JSON.stringify(summary, null, 2) + "\n");
writeFileSync(join(dir, "summary.md"), markdown(summary));
process.stdout.write(
  `${totals.passed} of ${totals.cases} cases passed, ${whole.length} of ${suites.length} suites whole; ` +
    `failed: ${totals.startup} at start-up, ${totals.error} with an error, ` +
    `${totals["wrong-data"]} wrong data with no error, ${totals["no-answer"]} no answer, ${totals.flaky} flaky\n`,
);

/** results.txt: id, marks, id, marks, ..., "", "---", "Total: N", "Passed: N", "Failed: N". */
function readResults(file) {
  const lines = readFileSync(file, "utf8").split("\n");
  const end = lines.indexOf("---");
  if (end < 0) throw new Error(`${file}: no "---" line: not the audit's results.txt`);
  const body = lines.slice(0, lines[end - 1] === "" ? end - 1 : end);
  const suites = new Map();
  for (let i = 0; i < body.length; i += 2) {
    if (!body[i]) continue;
    const marks = body[i + 1] ?? "";
    if (!/^[.X]*$/.test(marks)) throw new Error(`${file}: line ${i + 2} is not a row of . and X`);
    suites.set(body[i], marks);
  }
  const number = (label) => Number(/\d+/.exec(lines.find((l) => l.startsWith(label)) ?? "")?.[0]);
  return { suites, totals: { total: number("Total:"), passed: number("Passed:"), failed: number("Failed:") } };
}

function markdown(s) {
  const m = manifest;
  const t = s.totals;
  const out = [];
  out.push(`# Federation audit — run ${s.run_id}`, "");
  out.push(
    `graphql-hive/federation-gateway-audit at \`${m.audit.commit.slice(0, 7)}\`${m.audit.dirty ? " (dirty)" : ""}, ` +
      `against the lab's gateway at \`${m.lab.commit.slice(0, 12)}\`${m.lab.dirty ? " (dirty)" : ""} ` +
      `in **${m.mode}** mode${m.gateway_args.length ? ` with \`${m.gateway_args.join(" ")}\`` : ""}. ` +
      `${m.machine.cpu_model} (${m.machine.cores} cores), node ${m.node.version}, ${m.timestamp}.`,
    "",
  );
  out.push(`Verdicts: ${s.verdicts}.`, "");
  if (s.audit_reported && s.audit_reported.passed !== t.passed) {
    out.push(`**The audit reported ${s.audit_reported.passed} passed; the per-suite rows add up to ${t.passed}.**`, "");
  }
  out.push("| | cases |", "|---|---:|");
  out.push(`| passed | **${t.passed}** of ${t.cases} |`);
  out.push(`| failed at start-up (gateway refused the suite) | ${t.startup} |`);
  out.push(`| failed with an error | ${t.error} |`);
  out.push(`| **failed with wrong data and no error** | **${t["wrong-data"]}** |`);
  out.push(`| failed with no answer | ${t["no-answer"]} |`);
  out.push(`| failed in the audit, passed on the replay (flaky) | ${t.flaky} |`);
  out.push(`| suites whole | ${t.suites_whole} of ${t.suites} |`, "");
  out.push(`Suites whole: ${s.suites_whole.length ? s.suites_whole.map((id) => `\`${id}\``).join(", ") : "none"}.`, "");
  out.push(
    "| suite | cases | passed | start-up | error | wrong data, no error | no answer | flaky |",
    "|---|---:|---:|---:|---:|---:|---:|---:|",
  );
  for (const x of s.suites) {
    const cell = (n) => (n ? String(n) : "");
    out.push(
      `| ${x.whole ? "✓ " : ""}${x.id} | ${x.cases} | ${x.passed} | ${cell(x.startup)} | ${cell(x.error)} | ` +
        `${x["wrong-data"] ? `**${x["wrong-data"]}**` : ""} | ${cell(x["no-answer"])} | ${cell(x.flaky)} |`,
    );
  }
  out.push("");
  const failing = (category) => s.suites.flatMap((x) => x.failing.filter((f) => f.category === category));
  const describe = (f) => {
    const parts = [];
    if (f.differs_at?.length) parts.push(`differs at ${f.differs_at.map((p) => `\`${p}\``).join(", ")}`);
    if (f.expected_errors !== undefined) parts.push(f.expected_errors ? "an error was expected" : "no error was expected");
    if (f.errors?.length) parts.push(`errors: ${f.errors.map((e) => `\`${e.replace(/`/g, "'").replace(/\n/g, " ")}\``).join("; ")}`);
    if (f.detail) parts.push(f.detail);
    return `- \`${f.case}\`: ${parts.join("; ") || "—"}`;
  };
  out.push("## Wrong data with no error", "");
  const wrong = failing("wrong-data");
  out.push(...(wrong.length ? wrong.map(describe) : ["None."]), "");
  out.push("## Wrong answer with an error", "");
  const withError = failing("error");
  out.push(...(withError.length ? withError.map(describe) : ["None."]), "");
  for (const [category, title] of [["no-answer", "No answer"], ["flaky", "Flaky (failed in the audit, passed on the replay)"]]) {
    const list = failing(category);
    if (list.length) out.push(`## ${title}`, "", ...list.map(describe), "");
  }
  out.push("## Refused at start-up", "");
  const refused = s.suites.filter((x) => x.startup);
  if (!refused.length) out.push("None.");
  for (const x of refused) {
    const reason = (x.startup_error ?? "no message").replace(/`/g, "'").replace(/\n\s*/g, " ");
    const clipped = reason.length > 400 ? `${reason.slice(0, 400)}…` : reason;
    out.push(`- \`${x.id}\` (${x.startup} case${x.startup === 1 ? "" : "s"}): \`${clipped}\``);
  }
  out.push("");
  const dis = s.suites.flatMap((x) => x.disagreements);
  if (dis.length) out.push("## Disagreements between the audit's run and the replay", "", ...dis.map((d) => `- \`${d.case}\`: ${d.note}`), "");
  out.push(
    "Columns: *passed* is the audit's own verdict (results.txt). A case the audit failed is classified by the replay",
    "(scripts/federation-audit/classify.mjs), which restarts the gateway per suite and sends the same queries in the same",
    "order: *start-up* the gateway did not come up for the suite; *error* the answer was wrong and carried GraphQL `errors`;",
    "*wrong data, no error* the answer was wrong and carried no error; *no answer* no GraphQL JSON came back. See",
    "docs/federation-audit.md.",
    "",
  );
  return out.join("\n");
}
