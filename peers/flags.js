'use strict'
// The launchers' command line, as `loadgen matrix` writes it: `--flag value` pairs, each
// flag known to the launcher with what its value must be. A flag it does not know, a
// missing value, or a value of the wrong kind stops the launcher with a message naming
// the flag; so does a missing required one.
//
//   const args = parseFlags(process.argv.slice(2), {
//     '--port': { key: 'port', kind: 'port', required: true },
//     '--subgraph': { key: 'subgraphs', kind: 'list' },
//     '--ttl': { key: 'ttl', kind: 'seconds' }
//   })
//
// Kinds: `port` (an integer), `seconds` (a number, 0 or more), `text`, `list` (repeatable;
// the values in order).

function parseFlags (argv, known) {
  const out = {}
  for (const spec of Object.values(known)) {
    if (spec.kind === 'list') out[spec.key] = []
  }
  for (let i = 0; i < argv.length; i += 2) {
    const flag = argv[i]
    const value = argv[i + 1]
    const spec = known[flag]
    if (!spec) throw new Error(`unknown flag ${flag}`)
    if (value === undefined) throw new Error(`${flag} needs a value`)
    if (spec.kind === 'port') {
      out[spec.key] = Number(value)
      if (!Number.isInteger(out[spec.key])) throw new Error(`${flag} must be a port number`)
    } else if (spec.kind === 'seconds') {
      out[spec.key] = Number(value)
      if (!(out[spec.key] >= 0)) throw new Error(`${flag} must be a number of seconds, 0 or more`)
    } else if (spec.kind === 'list') {
      out[spec.key].push(value)
    } else {
      out[spec.key] = value
    }
  }
  for (const [flag, spec] of Object.entries(known)) {
    const missing = spec.kind === 'list' ? out[spec.key].length === 0 : out[spec.key] === undefined
    if (spec.required && missing) throw new Error(`${flag} is required`)
  }
  return out
}

module.exports = { parseFlags }
