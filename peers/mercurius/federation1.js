'use strict'
// Mercurius's gateway speaks Federation 1: every subgraph's root types are extensions
// (`extend type Query`), an entity is owned by one subgraph and extended by the others,
// whose key fields are `@external`. The lab's subgraphs (async-graphql) publish Federation
// 2 SDL: `extend schema @link(...)`, plain `type Query`, and an entity defined alike in
// every subgraph that has it. This rewrites the second into the first, for subgraphs
// given in the graph's order: an entity's owner is the first subgraph that defines it.
// A subgraph that uses a directive only Federation 2 has (@shareable, @override, …)
// cannot be rewritten faithfully, and is refused by name: Mercurius cannot run that graph.
const { parse, print, visit, Kind } = require('graphql')

const ROOT_TYPES = new Set(['Query', 'Mutation', 'Subscription'])
// Definitions Mercurius brings itself, or graphql-js has built in.
const DROPPED_DEFINITIONS = new Set([
  'include', 'skip', 'deprecated', 'specifiedBy', 'oneOf',
  'key', 'external', 'requires', 'provides', 'extends', 'link', 'tag'
])
const FEDERATION_2_ONLY = new Set([
  'shareable', 'inaccessible', 'override', 'interfaceObject', 'composeDirective',
  'authenticated', 'requiresScopes', 'policy', 'cost', 'listSize', 'context', 'fromContext'
])

function directiveNames (node) {
  return (node.directives || []).map((d) => d.name.value)
}

// The top-level field names of a @key's `fields` selection.
function keyFields (typeNode) {
  const names = new Set()
  for (const d of typeNode.directives || []) {
    if (d.name.value !== 'key') continue
    const fields = d.arguments.find((a) => a.name.value === 'fields')
    if (!fields || fields.value.kind !== Kind.STRING) continue
    let depth = 0
    for (const token of fields.value.value.split(/(\{|\}|\s+)/)) {
      if (token === '{') depth++
      else if (token === '}') depth--
      else if (depth === 0 && token.trim() !== '') names.add(token.trim())
    }
  }
  return names
}

// subgraphs: [{ name, sdl }] in the graph's order; returns [{ name, sdl }] in Federation 1.
function toFederation1 (subgraphs) {
  const parsed = subgraphs.map(({ name, sdl }) => {
    const doc = parse(sdl)
    visit(doc, {
      Directive (node) {
        if (FEDERATION_2_ONLY.has(node.name.value)) {
          throw new Error(`subgraph ${name} uses @${node.name.value}, a Federation 2 directive that Mercurius's gateway (Federation 1) does not support`)
        }
      }
    })
    return { name, doc }
  })
  const owner = new Map()
  for (const { name, doc } of parsed) {
    for (const def of doc.definitions) {
      if (def.kind === Kind.OBJECT_TYPE_DEFINITION && directiveNames(def).includes('key') && !owner.has(def.name.value)) {
        owner.set(def.name.value, name)
      }
    }
  }
  return parsed.map(({ name, doc }) => {
    const definitions = []
    for (const def of doc.definitions) {
      if (def.kind === Kind.SCHEMA_DEFINITION || def.kind === Kind.SCHEMA_EXTENSION) continue
      if (def.kind === Kind.DIRECTIVE_DEFINITION && DROPPED_DEFINITIONS.has(def.name.value)) continue
      if (def.kind !== Kind.OBJECT_TYPE_DEFINITION) {
        definitions.push(def)
        continue
      }
      const type = def.name.value
      if (ROOT_TYPES.has(type)) {
        definitions.push({ ...def, kind: Kind.OBJECT_TYPE_EXTENSION, description: undefined })
      } else if (owner.has(type) && owner.get(type) !== name) {
        const keys = keyFields(def)
        const fields = def.fields.map((f) => keys.has(f.name.value) && !directiveNames(f).includes('external')
          ? { ...f, directives: [...(f.directives || []), { kind: Kind.DIRECTIVE, name: { kind: Kind.NAME, value: 'external' }, arguments: [] }] }
          : f)
        definitions.push({ ...def, kind: Kind.OBJECT_TYPE_EXTENSION, description: undefined, fields })
      } else {
        definitions.push(def)
      }
    }
    return { name, sdl: print({ ...doc, definitions }) }
  })
}

module.exports = { toFederation1 }
