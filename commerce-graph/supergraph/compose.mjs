// Composes a supergraph from a folder of subgraph SDL files with
// @theguild/federation-composition, the version package.json pins.
//
//   node compose.mjs [--check] [name=URL ...]             # the commerce graph (this folder)
//   node compose.mjs [--check] --dir DIR [name=URL ...]   # any folder of subgraph SDL files
//
// Without --dir it composes the commerce graph beside this script: products.graphql,
// inventory.graphql, reviews.graphql and accounts.graphql (each service's
// `_service { sdl }`, as scripts/compose-commerce.sh dumps them), each subgraph's URL in
// the supergraph its default address (commerce-service --subgraph NAME without
// --listen); a gateway started on other ports is told them.
//
// With --dir DIR the subgraphs are DIR's *.graphql files but supergraph.graphql, named
// after their files, in name order (gateway/tests/supergraphs/<graph>/, written by
// scripts/compose-federation-tests.sh). Their URLs in the supergraph are
// http://NAME.invalid/graphql, which never resolves: whoever runs the supergraph gives
// every subgraph's address (`--subgraph-url NAME=URL`). Beside supergraph.graphql it
// writes composed-from.txt: the composer's version and the SHA-256 of every file it read
// and wrote, by which a test without Node can tell that the files are the ones composed.
//
// It writes DIR/supergraph.graphql (and, with --dir, DIR/composed-from.txt); --check
// changes nothing and exits 1 if a file is not what it would be.
//
// Each `name=URL` (e.g. products=http://127.0.0.1:40121/graphql) first reads that running
// service's `_service { sdl }` into name.graphql (with --check: compares it with the
// file instead).
//
// Composition errors are printed one per line and exit 1; nothing is written then.
import { createHash } from "node:crypto";
import { existsSync, readdirSync, readFileSync, writeFileSync } from "node:fs";
import { basename, dirname, join, resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { parse } from "graphql";
import { composeServices, compositionHasErrors } from "@theguild/federation-composition";

const here = dirname(fileURLToPath(import.meta.url));
const commerce = [
  ["products", 3011],
  ["inventory", 3012],
  ["reviews", 3013],
  ["accounts", 3014],
];

const args = process.argv.slice(2);
const check = args.includes("--check");
const dirAt = args.indexOf("--dir");
if (dirAt >= 0 && !args[dirAt + 1]) {
  console.error("compose.mjs: --dir needs a folder");
  process.exit(1);
}
const folder = dirAt >= 0 ? resolve(args[dirAt + 1]) : null;
if (folder !== null && !existsSync(folder)) {
  console.error(`compose.mjs: --dir ${folder}: no such folder`);
  process.exit(1);
}
const dir = folder ?? here;
const pairs = args.filter((a, i) => a !== "--check" && a !== "--dir" && i !== dirAt + 1);
let stale = false;
for (const arg of pairs) {
  const [name, url] = arg.split(/=(.*)/s);
  const known = folder === null ? commerce.some(([n]) => n === name) : /^[A-Za-z0-9_-]+$/.test(name ?? "");
  if (!url || !known || name === "supergraph") {
    const names = folder === null ? ` with a name of ${commerce.map(([n]) => n).join(", ")}` : "";
    console.error(`compose.mjs: ${arg}: expected name=URL${names}`);
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

const subgraphs =
  folder === null
    ? commerce.map(([name, port]) => [name, `http://127.0.0.1:${port}/graphql`])
    : readdirSync(dir)
        .filter((f) => f.endsWith(".graphql") && f !== "supergraph.graphql")
        .sort()
        .map((f) => basename(f, ".graphql"))
        .map((name) => [name, `http://${name}.invalid/graphql`]);
if (subgraphs.length === 0) {
  console.error(`compose.mjs: no subgraph SDL files (*.graphql) in ${dir}`);
  process.exit(1);
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
// What was composed from what (--dir only): the composer, then `sha256  file` per line.
const record = join(dir, "composed-from.txt");
const sha256 = (text) => createHash("sha256").update(text).digest("hex");
const version = JSON.parse(
  readFileSync(join(here, "node_modules/@theguild/federation-composition/package.json"), "utf8"),
).version;
const recorded =
  `# supergraph.graphql composed by @theguild/federation-composition ${version} (commerce-graph/supergraph/compose.mjs --dir)\n` +
  subgraphs.map(([name]) => `${sha256(readFileSync(join(dir, `${name}.graphql`)))}  ${name}.graphql\n`).join("") +
  `${sha256(sdl)}  supergraph.graphql\n`;
if (check) {
  if (readOr(out) !== sdl) {
    console.error(`compose.mjs: ${out} is not what the subgraph SDL files compose to`);
    stale = true;
  }
  if (folder !== null && readOr(record) !== recorded) {
    console.error(`compose.mjs: ${record} does not record these files`);
    stale = true;
  }
  if (stale) {
    const script = folder === null ? "scripts/compose-commerce.sh" : "scripts/compose-federation-tests.sh";
    console.error(`compose.mjs: out of date; run ${script}`);
    process.exit(1);
  }
  console.log(`compose.mjs: the subgraph SDL files and ${out} are up to date`);
} else {
  writeFileSync(out, sdl);
  if (folder !== null) writeFileSync(record, recorded);
  console.log(`compose.mjs: wrote ${out} (${sdl.length} bytes) from ${services.length} subgraphs`);
}
