/**
 * MongoDB's wire protocol, the part a modern driver speaks: OP_MSG for every
 * command, and OP_QUERY / OP_REPLY for the legacy `isMaster` of the first
 * handshake on a new connection.
 */
import { BSON } from 'bson';
import type { Doc } from './values.js';

export const OP_REPLY = 1;
export const OP_QUERY = 2004;
export const OP_MSG = 2013;
export const OP_COMPRESSED = 2012;

const DESERIALIZE: BSON.DeserializeOptions = { promoteLongs: true, promoteValues: true, promoteBuffers: false };

export interface Request {
  requestId: number;
  opCode: number;
  /** The command document, with OP_MSG document sequences merged in as arrays. */
  body: Doc;
  /** OP_MSG flag bit 1: the client expects no reply. */
  moreToCome: boolean;
}

/** Splits complete messages off the front of `buffer`; returns them and the unread rest. */
export function readMessages(buffer: Buffer): { messages: Request[]; rest: Buffer } {
  const messages: Request[] = [];
  let offset = 0;
  while (buffer.length - offset >= 16) {
    const length = buffer.readInt32LE(offset);
    if (length < 16 || length > 48_000_000) throw new Error(`invalid message length ${length}`);
    if (buffer.length - offset < length) break;
    messages.push(parseMessage(buffer.subarray(offset, offset + length)));
    offset += length;
  }
  return { messages, rest: buffer.subarray(offset) };
}

function parseMessage(message: Buffer): Request {
  const requestId = message.readInt32LE(4);
  const opCode = message.readInt32LE(12);
  if (opCode === OP_MSG) return parseOpMsg(message, requestId);
  if (opCode === OP_QUERY) return parseOpQuery(message, requestId);
  throw new Error(`unsupported opCode ${opCode}`);
}

function parseOpMsg(message: Buffer, requestId: number): Request {
  const flags = message.readUInt32LE(16);
  const checksumPresent = (flags & 1) !== 0;
  const end = message.length - (checksumPresent ? 4 : 0);
  let offset = 20;
  let body: Doc | undefined;
  const sequences: Array<[string, Doc[]]> = [];
  while (offset < end) {
    const kind = message.readUInt8(offset);
    offset += 1;
    if (kind === 0) {
      const size = message.readInt32LE(offset);
      body = BSON.deserialize(message.subarray(offset, offset + size), DESERIALIZE) as Doc;
      offset += size;
    } else if (kind === 1) {
      const size = message.readInt32LE(offset);
      const sectionEnd = offset + size;
      let cursor = offset + 4;
      const nameEnd = message.indexOf(0, cursor);
      const identifier = message.toString('utf8', cursor, nameEnd);
      cursor = nameEnd + 1;
      const docs: Doc[] = [];
      while (cursor < sectionEnd) {
        const docSize = message.readInt32LE(cursor);
        docs.push(BSON.deserialize(message.subarray(cursor, cursor + docSize), DESERIALIZE) as Doc);
        cursor += docSize;
      }
      sequences.push([identifier, docs]);
      offset = sectionEnd;
    } else {
      throw new Error(`unsupported OP_MSG section kind ${kind}`);
    }
  }
  if (!body) throw new Error('OP_MSG without a body section');
  for (const [identifier, docs] of sequences) body[identifier] = docs;
  return { requestId, opCode: OP_MSG, body, moreToCome: (flags & 2) !== 0 };
}

function parseOpQuery(message: Buffer, requestId: number): Request {
  let offset = 20;
  const nameEnd = message.indexOf(0, offset);
  const collection = message.toString('utf8', offset, nameEnd);
  offset = nameEnd + 1 + 8; // numberToSkip, numberToReturn
  const size = message.readInt32LE(offset);
  let query = BSON.deserialize(message.subarray(offset, offset + size), DESERIALIZE) as Doc;
  if (query.$query && typeof query.$query === 'object') query = query.$query as Doc;
  const db = collection.endsWith('.$cmd') ? collection.slice(0, -'.$cmd'.length) : collection;
  return { requestId, opCode: OP_QUERY, body: { ...query, $db: db }, moreToCome: false };
}

let nextResponseId = 1;

/** The reply to `request`, in the opcode the request used. */
export function encodeReply(request: Request, reply: Doc): Buffer {
  const payload = Buffer.from(BSON.serialize(reply));
  const responseId = nextResponseId++;
  if (request.opCode === OP_QUERY) {
    const header = Buffer.alloc(36);
    header.writeInt32LE(36 + payload.length, 0);
    header.writeInt32LE(responseId, 4);
    header.writeInt32LE(request.requestId, 8);
    header.writeInt32LE(OP_REPLY, 12);
    header.writeInt32LE(0, 16); // responseFlags
    header.writeBigInt64LE(0n, 20); // cursorID
    header.writeInt32LE(0, 28); // startingFrom
    header.writeInt32LE(1, 32); // numberReturned
    return Buffer.concat([header, payload]);
  }
  const header = Buffer.alloc(21);
  header.writeInt32LE(21 + payload.length, 0);
  header.writeInt32LE(responseId, 4);
  header.writeInt32LE(request.requestId, 8);
  header.writeInt32LE(OP_MSG, 12);
  header.writeUInt32LE(0, 16); // flagBits
  header.writeUInt8(0, 20); // section kind 0
  return Buffer.concat([header, payload]);
}
