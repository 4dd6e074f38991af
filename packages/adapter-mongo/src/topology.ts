/**
 * The store needs multi-document transactions, which MongoDB offers on a
 * replica set or a sharded cluster and never on a standalone server. The
 * first use asks the server what it is and refuses a standalone with a
 * typed error that says how to fix it, before anything is written.
 */
import { AdkStateError } from '@adk-state/core';
import type { Db, Document, MongoClient } from 'mongodb';

/** The server is a standalone mongod, which has no transactions. */
export class StandaloneServerError extends AdkStateError {
  readonly address: string;

  constructor(address: string) {
    super(
      'BACKEND_ERROR',
      `MongoDB at ${address} is a standalone server, but @adk-state/adapter-mongo writes every append in a multi-document transaction, which MongoDB offers only on a replica set or a sharded cluster. Run mongod as a replica set (one member is enough: start it with --replSet rs0 and run rs.initiate() once) and connect with ?replicaSet=rs0. Nothing was written.`,
    );
    this.address = address;
  }
}

/**
 * Throws {@link StandaloneServerError} unless the server is a replica-set
 * member or a mongos; returns the server's `hello` reply.
 */
export async function assertTransactions(db: Db, address: string): Promise<Document> {
  const hello = await db.admin().command({ hello: 1 });
  const replicaSet = typeof hello.setName === 'string';
  const router = hello.msg === 'isdbgrid';
  if (!replicaSet && !router) throw new StandaloneServerError(address);
  return hello;
}

/** The wire version of MongoDB 8.0, the first with the multi-collection `bulkWrite` command. */
export const BULK_WRITE_WIRE_VERSION = 25;

/**
 * Whether appends can use MongoDB 8's `bulkWrite` command (writes to several
 * collections in one round trip): the server says wire version 25 or newer
 * in its `hello`, and the driver has `MongoClient.bulkWrite` (6.10 and newer).
 */
export function hasBulkWriteCommand(hello: Document, client: MongoClient): boolean {
  const wire = hello.maxWireVersion;
  return (
    typeof wire === 'number' &&
    wire >= BULK_WRITE_WIRE_VERSION &&
    typeof (client as { bulkWrite?: unknown }).bulkWrite === 'function'
  );
}
