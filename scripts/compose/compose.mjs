// Composes a graph's supergraph from the subgraph SDL files of its folder with
// @theguild/federation-composition, the version package.json beside this script pins.
//
//   node compose.mjs DIR [name=URL ...]          # writes DIR/supergraph.graphql
//   node compose.mjs DIR --check [name=URL ...]  # exits 1 if a file is not what it would be
//
// DIR/<name>.graphql is each subgraph's `_service { sdl }`. Which subgraphs, in which
// order, with which URL in the supergraph:
// - DIR/subgraphs.json names them, each with its URL ({"products":
//   "http://127.0.0.1:3011/graphql", ...}): the commerce graph (commerce-graph/supergraph,
//   by scripts/compose-commerce.sh) and the planner fuzzer's graph
//   (gateway/tests/planner_fuzz/supergraph, by scripts/compose-planner-fuzz.sh);
// - without it, every *.graphql of DIR but supergraph.graphql, in name order, each at
//   http://NAME.invalid/graphql, which never resolves: whoever runs the supergraph gives
//   every subgraph's address (`--subgraph-url NAME=URL`). Then DIR/composed-from.txt is
//   written too: the composer's version and the SHA-256 of every file it read and wrote,
//   by which a test without Node can tell that the files are the ones composed (the
//   federation tests' graphs, gateway/tests/supergraphs/<graph>, by
//   scripts/compose-federation-tests.sh).
//
// Each `name=URL` (e.g. products=http://127.0.0.1:40121/graphql) first reads that running
// service's `_service { sdl }` into DIR/name.graphql (with --check: compares it with the
// file instead).
//
// Composition errors are printed one per line and exit 1; nothing is written then.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "graphql";
import { composeServices, compositionHasErrors } from "@theguild/federation-composition";

const args = process.argv.slice(2);
const dir = args.shift();
if (!dir || dir.startsWith("-") || dir.includes("=")) {
  console.error("usage: node compose.mjs DIR [--check] [name=URL ...]");
  process.exit(2);
}
const listed = existsSync(join(dir, "subgraphs.json"));
let subgraphs;
try {
  subgraphs = listed
    ? Object.entries(JSON.parse(readFileSync(join(dir, "subgraphs.json"), "utf8")))
    : readdirSync(dir)
        .filter((f) => f.endsWith(".graphql") && f !== "supergraph.graphql")
        .sort()
        .map((f) => basename(f, ".graphql"))
        .map((name) => [name, `http://${name}.invalid/graphql`]);
} catch (e) {
  console.error(`compose.mjs: cannot read the subgraphs of ${dir}: ${e.message}`);
  process.exit(1);
}
if (subgraphs.length === 0) {
  console.error(`compose.mjs: no subgraph SDL files (*.graphql) in ${dir}`);
  process.exit(1);
}

const check = args.includes("--check");
let stale = false;
for (const arg of args) {
  if (arg === "--check") continue;
  const [name, url] = arg.split(/=(.*)/s);
  if (!url || !subgraphs.some(([n]) => n === name)) {
    console.error(`compose.mjs: ${arg}: expected name=URL with a name of ${subgraphs.map(([n]) => n).join(", ")}`);
    process.exit(1);
  }
  const sdl = await serviceSdl(name, url);
  const file = join(dir, `${name}.graphql`);
  if (check) {
    if (readOr(file) !== sdl) {
      console.error(`compose.mjs: ${file} is not the SDL ${name} at ${url} serves`);
      stale = true;
    }
  } else {
    writeFileSync(file, sdl);
    console.log(`compose.mjs: wrote ${file} from ${url}`);
  }
}

async function serviceSdl(name, url) {
  try {
    const response = await fetch(url, {
      method: "POST",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ query: "{ _service { sdl } }" }),
    });
    const body = await response.json();
    if (!response.ok || body.errors || typeof body.data?._service?.sdl !== "string") {
      throw new Error(`HTTP ${response.status}: ${JSON.stringify(body).slice(0, 300)}`);
    }
    return body.data._service.sdl;
  } catch (e) {
    console.error(`compose.mjs: reading ${name}'s SDL from ${url}: ${e.message}`);
    process.exit(1);
  }
}

function readOr(file) {
  try {
    return readFileSync(file, "utf8");
  } catch {
    return "";
  }
}

const services = subgraphs.map(([name, url]) => {
  const file = join(dir, `${name}.graphql`);
  let text;
  try {
    text = readFileSync(file, "utf8");
  } catch (e) {
    console.error(`compose.mjs: cannot read ${file}: ${e.message}`);
    process.exit(1);
  }
  return { name, url, typeDefs: parse(text) };
});

const result = composeServices(services);
if (compositionHasErrors(result)) {
  console.error(`compose.mjs: composition failed with ${result.errors.length} error(s):`);
  for (const error of result.errors) {
    const code = error.extensions?.code ? `[${error.extensions.code}] ` : "";
    console.error(`  ${code}${error.message}`);
  }
  process.exit(1);
}

const out = join(dir, "supergraph.graphql");
const sdl = result.supergraphSdl.endsWith("\n") ? result.supergraphSdl : `${result.supergraphSdl}\n`;
// What was composed from what (unlisted folders): the composer, then `sha256  file` per line.
const record = join(dir, "composed-from.txt");
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const here = dirname(fileURLToPath(import.meta.url));
const version = JSON.parse(
  readFileSync(join(here, "node_modules/@theguild/federation-composition/package.json"), "utf8"),
).version;
const recorded =
  `# supergraph.graphql composed by @theguild/federation-composition ${version} (scripts/compose/compose.mjs)\n` +
  subgraphs.map(([name]) => `${sha256(readFileSync(join(dir, `${name}.graphql`)))}  ${name}.graphql\n`).join("") +
  `${sha256(sdl)}  supergraph.graphql\n`;
if (check) {
  if (readOr(out) !== sdl) {
    console.error(`compose.mjs: ${out} is not what the subgraph SDL files compose to`);
    stale = true;
  }
  if (!listed && readOr(record) !== recorded) {
    console.error(`compose.mjs: ${record} does not record these files`);
    stale = true;
  }
  if (stale) {
    console.error(`compose.mjs: ${dir} is out of date; recompose it`);
    process.exit(1);
  }
  console.log(`compose.mjs: the subgraph SDL files and supergraph.graphql of ${dir} are up to date`);
} else {
  writeFileSync(out, sdl);
  if (!listed) writeFileSync(record, recorded);
  console.log(`compose.mjs: wrote ${out} (${sdl.length} bytes) from ${services.length} subgraphs`);
}
