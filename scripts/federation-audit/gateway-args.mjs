// The lab gateway's arguments for one suite of the federation audit: fetches the suite's
// composed supergraph from the audit's server (GET {server}/{suite}/supergraph), keeps it
// in --out, and prints the arguments one per line for scripts/federation-audit/run-gateway.sh:
//   --mode supergraph   --supergraph FILE   (the gateway reads the composed file)
//   --mode compose      --subgraph NAME=URL for each value of the supergraph's join__Graph
//                       enum, `NAME @join__graph(name: "name", url: "http://...")` (the
//                       gateway composes the subgraphs' SDL itself)
// Usage: node gateway-args.mjs --server URL --suite ID --mode supergraph|compose --out FILE
// Exit status 1 with a message on stderr when the supergraph cannot be had or names no subgraph.
import { writeFileSync } from "node:fs";
import { parseArgs } from "node:util";

const fail = (message) => {
  process.stderr.write(`gateway-args.mjs: ${message}\n`);
  process.exit(1);
};

const { values } = parseArgs({
  options: {
    server: { type: "string" },
    suite: { type: "string" },
    mode: { type: "string" },
    out: { type: "string" },
  },
});
for (const name of ["server", "suite", "mode", "out"]) {
  if (!values[name]) fail(`--${name} is required`);
}
if (values.mode !== "supergraph" && values.mode !== "compose") {
  fail(`--mode must be supergraph or compose, got ${JSON.stringify(values.mode)}`);
}

const url = `${values.server}/${encodeURIComponent(values.suite)}/supergraph`;
let response;
try {
  response = await fetch(url, { signal: AbortSignal.timeout(30_000) });
} catch (error) {
  fail(`GET ${url}: ${error.cause?.message ?? error.message}`);
}
const sdl = await response.text();
if (!response.ok) fail(`GET ${url}: HTTP ${response.status}: ${sdl.slice(0, 200)}`);
writeFileSync(values.out, sdl);

if (values.mode === "supergraph") {
  process.stdout.write(`--supergraph\n${values.out}\n`);
} else {
  const subgraphs = joinGraphs(sdl);
  if (subgraphs.length === 0) fail(`${url} has no join__Graph enum with @join__graph values`);
  for (const { name, url: subgraphUrl } of subgraphs) {
    process.stdout.write(`--subgraph\n${name}=${subgraphUrl}\n`);
  }
}

/** The subgraphs a supergraph names: `@join__graph(name:, url:)` inside `enum join__Graph`. */
function joinGraphs(text) {
  const block = /enum\s+join__Graph\s*\{([^}]*)\}/.exec(text);
  if (!block) return [];
  const found = [];
  for (const [, args] of block[1].matchAll(/@join__graph\(([^)]*)\)/g)) {
    const name = /\bname:\s*"([^"]*)"/.exec(args)?.[1];
    const graphUrl = /\burl:\s*"([^"]*)"/.exec(args)?.[1];
    if (!name || !graphUrl) fail(`cannot read @join__graph(${args})`);
    found.push({ name, url: graphUrl });
  }
  return found;
}
