// Preloaded into every Node process of a federation-audit run (scripts/federation-audit.sh
// puts `--import` of this file into NODE_OPTIONS, which the audit's test workers inherit).
// Two things, nothing else:
// 1. `Promise.withResolvers` for Node 20: the audit calls it, and it arrived in Node 22.
// 2. Loopback only: a server that would listen on every interface (the audit's
//    `server.listen(port)`, and detect-port's probes of 0.0.0.0 and the machine's
//    address) listens on 127.0.0.1 instead, so nothing of the run is reachable from
//    outside this machine.
import net from "node:net";

if (typeof Promise.withResolvers !== "function") {
  Promise.withResolvers = function withResolvers() {
    let resolve;
    let reject;
    const promise = new this((yes, no) => {
      resolve = yes;
      reject = no;
    });
    return { promise, resolve, reject };
  };
}

const LOOPBACK = "127.0.0.1";
const isLoopback = (host) =>
  host === "localhost" || host === "::1" || /^127\./.test(host);

const listen = net.Server.prototype.listen;
net.Server.prototype.listen = function listenOnLoopback(...args) {
  const [first, second] = args;
  if (first !== null && typeof first === "object" && "port" in first) {
    // listen({ port, host, ... }[, callback])
    if (typeof first.host !== "string" || !isLoopback(first.host)) {
      args[0] = { ...first, host: LOOPBACK };
    }
  } else if (typeof first === "number" || /^\d+$/.test(String(first ?? ""))) {
    // listen(port[, host][, backlog][, callback])
    if (typeof second === "string") {
      if (!isLoopback(second)) args[1] = LOOPBACK;
    } else if (second === undefined || second === null) {
      args[1] = LOOPBACK;
    } else {
      args.splice(1, 0, LOOPBACK);
    }
  }
  return listen.apply(this, args);
};
