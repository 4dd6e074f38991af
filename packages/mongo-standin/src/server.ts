/**
 * The stand-in server: a TCP listener speaking MongoDB's wire protocol, the
 * logical sessions and multi-document transactions of a replica-set primary
 * (or none, as a standalone), retryable-write deduplication, the TTL monitor,
 * MongoDB's `failCommand` fail point, and a count of the commands it serves
 * (its round trips). It can go down and come back on the same port with its
 * data, as a restarted server.
 */
import { createServer, type Server, type Socket } from 'node:net';
import { setTimeout as sleep } from 'node:timers/promises';
import { Long, ObjectId, Timestamp } from 'bson';
import { type CommandContext, handlers, TRANSACTION_COMMANDS } from './commands.js';
import { CommandError, errors, MAX_DOCUMENT_BYTES } from './errors.js';
import { Engine, type Transaction } from './storage.js';
import { type Doc, isDocument } from './values.js';
import { encodeReply, type Request, readMessages } from './wire.js';

export interface StandInOptions {
  /** The replica-set name the server reports as primary of (default `rs0`); `false` for a standalone server. */
  replicaSet?: string | false;
  /** Default 127.0.0.1. */
  host?: string;
  /** Default 0: a free port. */
  port?: number;
  /** How often the TTL monitor runs, as MongoDB's does every 60 s (default 60 000); 0 runs it only on request. */
  ttlMonitorIntervalMs?: number;
  /** Open transactions older than this are aborted, as MongoDB's `transactionLifetimeLimitSeconds` (default 60). */
  transactionLifetimeLimitSeconds?: number;
  /**
   * The MongoDB version the server reports (default `7.0`). `8.0` reports
   * wire version 25 and has MongoDB 8's multi-collection `bulkWrite`
   * command; `7.0` answers it as a MongoDB 7.0 does, with CommandNotFound.
   */
  serverVersion?: StandInVersion;
}

export type StandInVersion = '7.0' | '8.0';

/** The wire version (`maxWireVersion`) of each MongoDB version the stand-in can report. */
const WIRE_VERSIONS: Record<StandInVersion, number> = { '7.0': 21, '8.0': 25 };

interface LogicalSession {
  txnNumber: number;
  /** The multi-document transaction of `txnNumber`, kept after it ends to answer retries. */
  txn: Transaction | undefined;
  /** The reply of the retryable write numbered `txnNumber`. */
  retryReply: Doc | undefined;
}

/**
 * MongoDB's `failCommand` fail point (a test command of mongod), the part the
 * tests use: fail the named commands with an error code and labels, close the
 * connection instead of answering, or answer only after a delay.
 */
interface FailCommand {
  /** How many more commands it fails; Infinity for `alwaysOn`. */
  remaining: number;
  commands: Set<string>;
  errorCode: number | undefined;
  errorLabels: string[] | undefined;
  closeConnection: boolean;
  blockTimeMS: number;
}

const HANDSHAKE = new Set(['hello', 'isMaster', 'ismaster']);
const CURSOR_TIMEOUT_MS = 10 * 60 * 1000;

export class StandInServer {
  readonly engine = new Engine();
  readonly #options: Required<StandInOptions>;
  readonly #sessions = new Map<string, LogicalSession>();
  readonly #cursors: CommandContext['cursors'] = new Map();
  readonly #sockets = new Set<Socket>();
  readonly #counts = new Map<string, number>();
  readonly #electionId = new ObjectId('7fffffff0000000000000001');
  #server: Server | undefined;
  #failCommand: FailCommand | undefined;
  #timers: NodeJS.Timeout[] = [];
  #nextConnectionId = 1;
  #address = '';

  constructor(options: StandInOptions = {}) {
    this.#options = {
      replicaSet: options.replicaSet === undefined ? 'rs0' : options.replicaSet,
      host: options.host ?? '127.0.0.1',
      port: options.port ?? 0,
      ttlMonitorIntervalMs: options.ttlMonitorIntervalMs ?? 60_000,
      transactionLifetimeLimitSeconds: options.transactionLifetimeLimitSeconds ?? 60,
      serverVersion: options.serverVersion ?? '7.0',
    };
    if (!Object.hasOwn(WIRE_VERSIONS, this.#options.serverVersion)) {
      throw new Error(`the stand-in reports MongoDB 7.0 or 8.0, not ${String(this.#options.serverVersion)}`);
    }
  }

  get replicaSet(): string | undefined {
    return this.#options.replicaSet === false ? undefined : this.#options.replicaSet;
  }

  get address(): string {
    return this.#address;
  }

  /** The MongoDB version the server reports. */
  get serverVersion(): StandInVersion {
    return this.#options.serverVersion;
  }

  /** Starts listening: on the configured port the first time, on the same port as before after {@link close}. */
  async listen(): Promise<void> {
    if (this.#server) return;
    const server = createServer((socket) => this.#accept(socket));
    this.#server = server;
    const port =
      this.#address === '' ? this.#options.port : Number(this.#address.slice(this.#address.lastIndexOf(':') + 1));
    try {
      await new Promise<void>((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, this.#options.host, () => resolve());
      });
    } catch (error) {
      this.#server = undefined;
      throw error;
    }
    const address = server.address();
    if (!address || typeof address === 'string') throw new Error('the stand-in has no TCP address');
    this.#address = `${this.#options.host}:${address.port}`;
    if (this.#options.ttlMonitorIntervalMs > 0) {
      this.#timers.push(setInterval(() => this.engine.expire(new Date()), this.#options.ttlMonitorIntervalMs).unref());
    }
    this.#timers.push(setInterval(() => this.#reap(), 1_000).unref());
  }

  /**
   * Goes down as a restarted server would: stops listening, drops every open
   * connection, and loses what lives only in memory on a real server (open
   * transactions, cursors, the fail point). Committed data stays; `listen()`
   * brings the server back on the same port.
   */
  async close(): Promise<void> {
    for (const timer of this.#timers) clearInterval(timer);
    this.#timers = [];
    const server = this.#server;
    this.#server = undefined;
    const closed = server ? new Promise<void>((resolve) => server.close(() => resolve())) : Promise.resolve();
    for (const socket of this.#sockets) socket.destroy();
    this.#sockets.clear();
    await closed;
    for (const session of this.#sessions.values()) {
      if (session.txn?.state === 'active') this.#finish(session.txn, false);
    }
    this.#cursors.clear();
    this.#failCommand = undefined;
  }

  /** Commands served, other than `hello` / `isMaster` (which the driver's handshakes and monitoring send). */
  commandCount(): number {
    let total = 0;
    for (const count of this.#counts.values()) total += count;
    return total;
  }

  commandCounts(): Record<string, number> {
    return Object.fromEntries(this.#counts);
  }

  resetCommandCount(): void {
    this.#counts.clear();
  }

  #accept(socket: Socket): void {
    const connectionId = this.#nextConnectionId++;
    this.#sockets.add(socket);
    socket.setNoDelay(true);
    let pending: Buffer = Buffer.alloc(0);
    let queue = Promise.resolve();
    socket.on('data', (chunk: Buffer) => {
      pending = pending.length === 0 ? chunk : Buffer.concat([pending, chunk]);
      let parsed: ReturnType<typeof readMessages>;
      try {
        parsed = readMessages(pending);
      } catch {
        socket.destroy();
        return;
      }
      pending = parsed.rest;
      for (const message of parsed.messages) queue = queue.then(() => this.#serve(socket, message, connectionId));
    });
    socket.on('error', () => socket.destroy());
    socket.on('close', () => this.#sockets.delete(socket));
  }

  async #serve(socket: Socket, request: Request, connectionId: number): Promise<void> {
    let reply: Doc;
    try {
      const fault = this.#fault(Object.keys(request.body)[0] ?? '');
      if (fault?.blockTimeMS) await sleep(fault.blockTimeMS);
      if (fault?.closeConnection) {
        socket.destroy();
        return;
      }
      if (fault?.errorCode !== undefined) {
        throw new CommandError(
          fault.errorCode,
          'FailPoint',
          'Failing command via failCommand fail point',
          fault.errorLabels,
        );
      }
      reply = await this.dispatch(request.body, connectionId);
    } catch (error) {
      if (error instanceof CommandError) reply = error.toReply();
      else {
        process.stderr.write(`stand-in: internal error: ${error instanceof Error ? error.stack : String(error)}\n`);
        reply = { ok: 0, errmsg: String(error), code: 1, codeName: 'InternalError' };
      }
    }
    if (request.moreToCome || socket.destroyed) return;
    let encoded: Buffer;
    try {
      encoded = encodeReply(request, reply);
    } catch (error) {
      // A reply BSON cannot hold (mongod never builds one): an error reply instead of a thrown error.
      encoded = encodeReply(request, {
        ok: 0,
        errmsg: `the reply cannot be encoded: ${error instanceof Error ? error.message : String(error)}`,
        code: 10334,
        codeName: 'BSONObjectTooLarge',
      });
    }
    socket.write(encoded);
  }

  /** Runs one command document and returns its reply (errors are thrown as {@link CommandError}). */
  async dispatch(body: Doc, connectionId = 0): Promise<Doc> {
    const name = Object.keys(body)[0] ?? '';
    if (HANDSHAKE.has(name)) return this.#hello(connectionId);
    const admin = this.#adminCommand(name, body);
    if (admin) return admin;
    this.#counts.set(name, (this.#counts.get(name) ?? 0) + 1);
    const db = body.$db;
    if (typeof db !== 'string' || db === '') throw errors.invalidNamespace('the command names no $db');
    if (name === 'endSessions') return this.#endSessions(body);
    const ctx: CommandContext = {
      engine: this.engine,
      db,
      txn: undefined,
      cursors: this.#cursors,
      version: `${this.#options.serverVersion}.0`,
    };
    if (typeof body.maxTimeMS === 'number' && body.maxTimeMS > 0) ctx.maxTimeMS = body.maxTimeMS;
    if (body.autocommit !== undefined) return this.#inTransaction(name, body, ctx);
    if (body.txnNumber !== undefined) return this.#retryableWrite(name, body, ctx);
    if (name === 'commitTransaction' || name === 'abortTransaction') {
      throw errors.invalidOptions(`${name} must be run with a session, a txnNumber and autocommit: false`);
    }
    return this.#run(name, body, ctx);
  }

  /** The fail point's action for one command named `name`, when it applies (and is then used up once). */
  #fault(name: string): FailCommand | undefined {
    const point = this.#failCommand;
    if (!point?.commands.has(name)) return undefined;
    point.remaining -= 1;
    if (point.remaining <= 0) this.#failCommand = undefined;
    return point;
  }

  #configureFailPoint(body: Doc): Doc {
    if (body.$db !== 'admin')
      throw errors.unauthorized('configureFailPoint may only be run against the admin database.');
    if (body.configureFailPoint !== 'failCommand') {
      throw errors.badValue(`the stand-in has only the failCommand fail point, not ${String(body.configureFailPoint)}`);
    }
    const mode = body.mode;
    if (mode === 'off') {
      this.#failCommand = undefined;
      return { count: 0, ok: 1 };
    }
    let remaining: number;
    if (mode === 'alwaysOn') remaining = Number.POSITIVE_INFINITY;
    else if (isDocument(mode) && typeof mode.times === 'number' && mode.times > 0) remaining = mode.times;
    else throw errors.badValue("mode must be 'off', 'alwaysOn' or { times: n }");
    const data = isDocument(body.data) ? body.data : {};
    const commands = Array.isArray(data.failCommands) ? data.failCommands.map(String) : [];
    if (commands.length === 0) throw errors.badValue('data.failCommands must name at least one command');
    const known = new Set([
      'failCommands',
      'errorCode',
      'errorLabels',
      'closeConnection',
      'blockConnection',
      'blockTimeMS',
    ]);
    for (const option of Object.keys(data)) {
      if (!known.has(option)) throw errors.badValue(`failCommand option ${option} is not supported by the stand-in`);
    }
    this.#failCommand = {
      remaining,
      commands: new Set(commands),
      errorCode: typeof data.errorCode === 'number' ? data.errorCode : undefined,
      errorLabels: Array.isArray(data.errorLabels) ? data.errorLabels.map(String) : undefined,
      closeConnection: data.closeConnection === true,
      blockTimeMS: data.blockConnection === true && typeof data.blockTimeMS === 'number' ? data.blockTimeMS : 0,
    };
    return { count: 0, ok: 1 };
  }

  async #run(name: string, body: Doc, ctx: CommandContext): Promise<Doc> {
    const handler = handlers[name];
    // MongoDB before 8.0 has no bulkWrite command.
    if (!handler || (name === 'bulkWrite' && this.#options.serverVersion === '7.0')) throw errors.commandNotFound(name);
    return handler(body, ctx);
  }

  #session(body: Doc): LogicalSession {
    const lsid = body.lsid;
    if (!isDocument(lsid) || lsid.id === undefined)
      throw errors.invalidOptions('a transaction number needs a session id (lsid)');
    const id = lsid.id as { toString(encoding?: string): string };
    const key =
      typeof id === 'object' && 'buffer' in id
        ? Buffer.from((id as { buffer: Uint8Array }).buffer).toString('hex')
        : String(id);
    let session = this.#sessions.get(key);
    if (!session) {
      session = { txnNumber: -1, txn: undefined, retryReply: undefined };
      this.#sessions.set(key, session);
    }
    return session;
  }

  #txnNumber(body: Doc): number {
    const raw = body.txnNumber;
    const n = typeof raw === 'number' ? raw : raw instanceof Long ? raw.toNumber() : Number.NaN;
    if (!Number.isInteger(n) || n < 0) throw errors.badValue('txnNumber must be a non-negative integer');
    return n;
  }

  #requireReplicaSet(): void {
    if (this.replicaSet === undefined) {
      throw errors.illegalOperation('Transaction numbers are only allowed on a replica set member or mongos');
    }
  }

  async #inTransaction(name: string, body: Doc, ctx: CommandContext): Promise<Doc> {
    if (body.autocommit !== false) throw errors.badValue("'autocommit' field can only be set to false");
    this.#requireReplicaSet();
    const session = this.#session(body);
    const txnNumber = this.#txnNumber(body);
    if (name === 'commitTransaction' || name === 'abortTransaction')
      return this.#endTransaction(name, session, txnNumber);
    if (!TRANSACTION_COMMANDS.has(name)) throw errors.notSupportedInTransaction(name);
    if (body.writeConcern !== undefined) {
      throw errors.invalidOptions('Cannot set write concern after starting a transaction.');
    }
    if (body.startTransaction === true) {
      if (txnNumber < session.txnNumber) throw errors.transactionTooOld(txnNumber, session.txnNumber);
      if (txnNumber === session.txnNumber) throw errors.noSuchTransaction(txnNumber, 'has already been started');
      const level = isDocument(body.readConcern) ? body.readConcern.level : undefined;
      if (level !== undefined && !['local', 'majority', 'snapshot'].includes(String(level))) {
        throw errors.invalidOptions(
          `The readConcern level must be either 'snapshot', 'majority' or 'local' in a transaction`,
        );
      }
      if (session.txn) this.#finish(session.txn, false);
      session.txnNumber = txnNumber;
      session.retryReply = undefined;
      session.txn = this.engine.begin('multi');
    } else {
      if (body.startTransaction !== undefined) throw errors.badValue("'startTransaction' can only be true");
      if (txnNumber !== session.txnNumber || !session.txn) throw errors.noSuchTransaction(txnNumber, 'not found');
      if (session.txn.state === 'aborted') throw errors.noSuchTransaction(txnNumber);
      if (session.txn.state === 'committed') throw errors.transactionCommitted(txnNumber);
      if (body.readConcern !== undefined) {
        throw errors.invalidOptions('Only the first command in a transaction may specify a readConcern');
      }
    }
    const txn = session.txn;
    ctx.txn = txn;
    try {
      const reply = await this.#run(name, body, ctx);
      if (Array.isArray(reply.writeErrors) && reply.writeErrors.length > 0) this.#finish(txn, false);
      return reply;
    } catch (error) {
      // Any failed statement aborts the whole transaction, as on MongoDB.
      this.#finish(txn, false);
      throw error;
    }
  }

  #endTransaction(name: string, session: LogicalSession, txnNumber: number): Doc {
    const txn = session.txnNumber === txnNumber ? session.txn : undefined;
    if (!txn) throw errors.noSuchTransaction(txnNumber, 'not found');
    if (name === 'commitTransaction') {
      if (txn.state === 'aborted') throw errors.noSuchTransaction(txnNumber);
      if (txn.state === 'active') this.#finish(txn, true);
      return { ok: 1 };
    }
    if (txn.state === 'committed') throw errors.transactionCommitted(txnNumber);
    if (txn.state === 'aborted') throw errors.noSuchTransaction(txnNumber);
    this.#finish(txn, false);
    return { ok: 1 };
  }

  #finish(txn: Transaction, commit: boolean): void {
    if (commit) this.engine.commit(txn);
    else this.engine.abort(txn);
    for (const [id, cursor] of this.#cursors) if (cursor.txn === txn) this.#cursors.delete(id);
  }

  async #retryableWrite(name: string, body: Doc, ctx: CommandContext): Promise<Doc> {
    this.#requireReplicaSet();
    const session = this.#session(body);
    const txnNumber = this.#txnNumber(body);
    if (txnNumber < session.txnNumber) throw errors.transactionTooOld(txnNumber, session.txnNumber);
    if (txnNumber === session.txnNumber && session.retryReply) return session.retryReply;
    if (session.txn?.state === 'active') this.#finish(session.txn, false);
    session.txnNumber = txnNumber;
    session.txn = undefined;
    const reply = await this.#run(name, body, ctx);
    session.retryReply = reply;
    return reply;
  }

  #endSessions(body: Doc): Doc {
    const ids = Array.isArray(body.endSessions) ? body.endSessions : [];
    for (const lsid of ids) {
      const session = this.#session({ lsid });
      if (session.txn?.state === 'active') this.#finish(session.txn, false);
      for (const [key, value] of this.#sessions) if (value === session) this.#sessions.delete(key);
    }
    return { ok: 1 };
  }

  /** Aborts transactions past their lifetime and closes cursors idle for 10 minutes, as MongoDB does. */
  #reap(): void {
    const limit = this.#options.transactionLifetimeLimitSeconds * 1000;
    for (const txn of [...this.engine.active]) {
      if (txn.kind === 'multi' && Date.now() - txn.startedAt > limit) this.#finish(txn, false);
    }
    for (const [id, cursor] of this.#cursors) {
      if (Date.now() - cursor.lastUsed > CURSOR_TIMEOUT_MS) this.#cursors.delete(id);
    }
  }

  #adminCommand(name: string, body: Doc): Doc | undefined {
    switch (name) {
      case 'standInStats':
        return { commands: this.commandCount(), byName: this.commandCounts(), ok: 1 };
      case 'standInResetStats':
        this.resetCommandCount();
        return { ok: 1 };
      case 'configureFailPoint':
        return this.#configureFailPoint(body);
      case 'standInRunTtlMonitor': {
        const now = body.now instanceof Date ? body.now : new Date();
        return { deleted: this.engine.expire(now), ok: 1 };
      }
      default:
        return undefined;
    }
  }

  #hello(connectionId: number): Doc {
    const now = new Date();
    const reply: Doc = {
      helloOk: true,
      isWritablePrimary: true,
      ismaster: true,
      maxBsonObjectSize: MAX_DOCUMENT_BYTES,
      maxMessageSizeBytes: 48_000_000,
      maxWriteBatchSize: 100_000,
      localTime: now,
      logicalSessionTimeoutMinutes: 30,
      connectionId,
      minWireVersion: 0,
      maxWireVersion: WIRE_VERSIONS[this.#options.serverVersion],
      readOnly: false,
    };
    const setName = this.replicaSet;
    if (setName !== undefined) {
      const opTime = {
        ts: new Timestamp({ t: Math.floor(now.getTime() / 1000), i: this.engine.clock + 1 }),
        t: Long.fromNumber(1),
      };
      Object.assign(reply, {
        setName,
        setVersion: 1,
        hosts: [this.#address],
        primary: this.#address,
        me: this.#address,
        secondary: false,
        electionId: this.#electionId,
        lastWrite: { opTime, lastWriteDate: now, majorityOpTime: opTime, majorityWriteDate: now },
      });
    }
    reply.ok = 1;
    return reply;
  }
}
