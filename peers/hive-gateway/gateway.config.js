'use strict'
// Hive Gateway's configuration for the lab (read by its CLI, see gateway.js): logging at
// "error", and the response cache when gateway.js set a TTL. The cache's session is the
// caller's `authorization` header, so that an answer with credentials is never served to
// another caller; without one, answers are shared.
const ttl = process.env.LAB_RESPONSE_TTL_MS

module.exports.gatewayConfig = {
  logging: 'error',
  ...(ttl === undefined
    ? {}
    : {
        responseCaching: {
          ttl: Number(ttl),
          session: (request) => request.headers.get('authorization') || null
        }
      })
}
