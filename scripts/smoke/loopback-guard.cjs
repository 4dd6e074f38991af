// Preloaded (`node --require`) into every smoke app: a TCP connection or a name lookup
// aimed at anything but this machine is refused and makes the app exit with 1, so the
// smoke test also proves that no adapter (or its client) reaches beyond loopback.
const dns = require('node:dns');
const net = require('node:net');

const LOCAL = new Set(['127.0.0.1', '::1', '::ffff:127.0.0.1', 'localhost']);
const refused = [];

const isLocal = (host) =>
  LOCAL.has(
    String(host)
      .replace(/^\[(.*)\]$/, '$1')
      .toLowerCase(),
  );

function refuse(what) {
  refused.push(what);
  return new Error(`smoke loopback guard: refused ${what}`);
}

const connect = net.Socket.prototype.connect;
net.Socket.prototype.connect = function connectLocally(...args) {
  const first = Array.isArray(args[0]) ? args[0][0] : args[0];
  const options = typeof first === 'object' && first !== null ? first : { port: first, host: args[1] };
  const unixSocket = options.path !== undefined || (typeof first === 'string' && !/^\d+$/.test(first));
  const host = typeof options.host === 'string' ? options.host : 'localhost';
  if (unixSocket || isLocal(host)) return connect.apply(this, args);
  const error = refuse(`a connection to ${host}:${options.port}`);
  process.nextTick(() => this.destroy(error));
  return this;
};

const lookup = dns.lookup;
dns.lookup = function lookupLocally(hostname, ...rest) {
  if (isLocal(hostname)) return lookup.call(this, hostname, ...rest);
  const error = Object.assign(refuse(`a lookup of ${hostname}`), { code: 'ENOTFOUND' });
  process.nextTick(() => rest[rest.length - 1](error));
};
const lookupPromise = dns.promises.lookup;
dns.promises.lookup = async function lookupLocallyPromise(hostname, ...rest) {
  if (isLocal(hostname)) return lookupPromise.call(this, hostname, ...rest);
  throw Object.assign(refuse(`a lookup of ${hostname}`), { code: 'ENOTFOUND' });
};

process.on('exit', () => {
  if (refused.length === 0) return;
  process.stderr.write(`smoke loopback guard: this app tried to leave the machine: ${refused.join('; ')}\n`);
  process.exitCode = 1;
});
