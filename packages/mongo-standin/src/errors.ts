/**
 * Server errors with MongoDB's own codes, code names and error labels, so the
 * driver classifies them exactly as it would a real server's.
 */

/** The largest document mongod stores (its `maxBsonObjectSize`), in bytes of BSON. */
export const MAX_DOCUMENT_BYTES = 16 * 1024 * 1024;

export class CommandError extends Error {
  readonly code: number;
  readonly codeName: string;
  readonly labels: readonly string[];

  constructor(code: number, codeName: string, message: string, labels: readonly string[] = []) {
    super(message);
    this.code = code;
    this.codeName = codeName;
    this.labels = labels;
  }

  toReply(): Record<string, unknown> {
    return {
      ok: 0,
      errmsg: this.message,
      code: this.code,
      codeName: this.codeName,
      ...(this.labels.length > 0 ? { errorLabels: [...this.labels] } : {}),
    };
  }
}

const TRANSIENT = ['TransientTransactionError'];

export const errors = {
  badValue: (message: string) => new CommandError(2, 'BadValue', message),
  typeMismatch: (message: string) => new CommandError(14, 'TypeMismatch', message),
  unauthorized: (message: string) => new CommandError(13, 'Unauthorized', message),
  illegalOperation: (message: string) => new CommandError(20, 'IllegalOperation', message),
  namespaceNotFound: (message: string) => new CommandError(26, 'NamespaceNotFound', message),
  pathNotViable: (message: string) => new CommandError(28, 'PathNotViable', message),
  conflictingUpdate: (message: string) => new CommandError(40, 'ConflictingUpdateOperators', message),
  cursorNotFound: (id: string) => new CommandError(43, 'CursorNotFound', `cursor id ${id} not found`),
  maxTimeExpired: () => new CommandError(50, 'MaxTimeMSExpired', 'operation exceeded time limit'),
  commandNotFound: (name: string) => new CommandError(59, 'CommandNotFound', `no such command: '${name}'`),
  immutableField: (path: string) =>
    new CommandError(
      66,
      'ImmutableField',
      `Performing an update on the path '${path}' would modify the immutable field '${path}'`,
    ),
  invalidOptions: (message: string) => new CommandError(72, 'InvalidOptions', message),
  invalidNamespace: (message: string) => new CommandError(73, 'InvalidNamespace', message),
  indexOptionsConflict: (message: string) => new CommandError(85, 'IndexOptionsConflict', message),
  indexKeySpecsConflict: (message: string) => new CommandError(86, 'IndexKeySpecsConflict', message),
  writeConflict: () =>
    new CommandError(
      112,
      'WriteConflict',
      'Caused by :: Write conflict during plan execution and yielding is disabled. :: Please retry your operation or multi-document transaction.',
      TRANSIENT,
    ),
  transactionTooOld: (txnNumber: number, current: number) =>
    new CommandError(
      225,
      'TransactionTooOld',
      `Cannot start transaction ${txnNumber} on session because a newer transaction ${current} has already started`,
    ),
  noSuchTransaction: (txnNumber: number, detail = 'has been aborted') =>
    new CommandError(251, 'NoSuchTransaction', `Transaction with { txnNumber: ${txnNumber} } ${detail}.`, TRANSIENT),
  transactionCommitted: (txnNumber: number) =>
    new CommandError(256, 'TransactionCommitted', `Transaction with { txnNumber: ${txnNumber} } has been committed.`),
  notSupportedInTransaction: (name: string) =>
    new CommandError(
      263,
      'OperationNotSupportedInTransaction',
      `Cannot run '${name}' in a multi-document transaction.`,
    ),
  unknownStage: (name: string) =>
    new CommandError(40324, 'Location40324', `Unrecognized pipeline stage name: '${name}'`),
  /** What mongod answers a write whose document would pass {@link MAX_DOCUMENT_BYTES}: an insert, or any other write. */
  documentTooLarge: (bytes: number, inserting: boolean) =>
    inserting
      ? new CommandError(
          10334,
          'BSONObjectTooLarge',
          `object to insert too large. size in bytes: ${bytes}, max size: ${MAX_DOCUMENT_BYTES}`,
        )
      : new CommandError(
          17419,
          'Location17419',
          `Resulting document after update is larger than ${MAX_DOCUMENT_BYTES}`,
        ),
  duplicateKey: (ns: string, index: string, key: string) =>
    new CommandError(
      11000,
      'DuplicateKey',
      `E11000 duplicate key error collection: ${ns} index: ${index} dup key: ${key}`,
    ),
};
