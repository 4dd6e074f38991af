// Preloaded (`node --require`) into every smoke app: a TCP connection, a name lookup or a
// DNS query aimed at anything but this machine is refused and makes the app exit with 1,
// so the smoke test also proves that no adapter (or its client) reaches beyond loopback.
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

// The resolver API (SRV and TXT records, e.g. mongodb+srv or gRPC service configs) asks a
// DNS server directly: every resolve* and reverse, on the module and on Resolver objects.
function guardResolvers(target, promises) {
  for (const name of Object.getOwnPropertyNames(target)) {
    if (!/^(resolve|reverse)/.test(name) || typeof target[name] !== 'function') continue;
    const original = target[name];
    target[name] = function resolveLocally(hostname, ...rest) {
      if (isLocal(hostname)) return original.call(this, hostname, ...rest);
      const error = Object.assign(refuse(`a DNS query (${name}) for ${hostname}`), { code: 'ECONNREFUSED' });
      if (promises) return Promise.reject(error);
      const callback = rest[rest.length - 1];
      if (typeof callback === 'function') process.nextTick(() => callback(error));
      return undefined;
    };
  }
}
guardResolvers(dns, false);
guardResolvers(dns.Resolver.prototype, false);
guardResolvers(dns.promises, true);
guardResolvers(dns.promises.Resolver.prototype, true);

process.on('exit', () => {
  if (refused.length === 0) return;
  process.stderr.write(`smoke loopback guard: this app tried to leave the machine: ${refused.join('; ')}\n`);
  process.exitCode = 1;
});
