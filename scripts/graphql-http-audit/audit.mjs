// Runs graphql-http's GraphQL-over-HTTP server audits (its `serverAudits`) against one
// URL, one audit at a time, and writes every result as JSON: id, name, status (ok,
// notice, warn, error; or fatal when the audit itself threw) and, for each one that did
// not pass, the reason and what the server answered (status, content type, body).
//   node audit.mjs MODULES_DIR URL OUT.json
// MODULES_DIR is the folder holding the node_modules that `npm ci` made from this
// folder's package-lock.json (scripts/graphql-http-audit.sh installs it in a scratch
// folder). Prints the counts, then one line per audit (with the reason of each one that
// did not pass). Exit status: 0 when every audit ran (whatever their statuses), 1 when
// one could not run at all.
import { createRequire } from 'node:module';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';

const [modules, url, out] = process.argv.slice(2);
if (!modules || !url || !out) {
  console.error('usage: node audit.mjs MODULES_DIR URL OUT.json');
  process.exit(2);
}
const require = createRequire(join(modules, 'package.json'));
const { serverAudits } = require('graphql-http');
const version = require('graphql-http/package.json').version;

// What the server answered to a failing audit. The audit may have read the body
// already; then only the status and headers are left.
async function answer(response) {
  if (!response) return null;
  const seen = {
    status: response.status,
    contentType: response.headers.get('content-type'),
    headers: Object.fromEntries(response.headers.entries()),
  };
  if (!response.bodyUsed) {
    try {
      seen.body = await response.text();
    } catch (e) {
      seen.body = null;
      seen.bodyError = String(e);
    }
  } else {
    seen.body = null;
    seen.bodyNote = 'read by the audit';
  }
  return seen;
}

const results = [];
for (const audit of serverAudits({ url, fetchFn: fetch })) {
  let result;
  try {
    const r = await audit.fn();
    result = { id: r.id, name: r.name, status: r.status };
    if (r.status !== 'ok') {
      result.reason = r.reason;
      result.response = await answer(r.response);
    }
  } catch (e) {
    result = { id: audit.id, name: audit.name, status: 'fatal', reason: String(e?.stack ?? e) };
  }
  results.push(result);
}
const counts = { ok: 0, notice: 0, warn: 0, error: 0, fatal: 0 };
for (const r of results) counts[r.status] += 1;
writeFileSync(out, JSON.stringify({ package: `graphql-http@${version}`, url, total: results.length, counts, results }, null, 2) + '\n');
console.log(`counts: ok ${counts.ok} / notice ${counts.notice} / warn ${counts.warn} / error ${counts.error}` +
  (counts.fatal ? ` / fatal ${counts.fatal}` : '') + ` of ${results.length} audits`);
console.log();
console.log('id   status name');
for (const r of results) {
  console.log(`${r.id} ${r.status.padEnd(6)} ${r.name}`);
  if (r.reason) {
    const seen = r.response ? `; answered ${r.response.status} ${r.response.contentType ?? '(no content type)'}` : '';
    console.log(`     reason: ${r.reason.split('\n')[0]}${seen}`);
  }
}
process.exit(counts.fatal > 0 ? 1 : 0);
