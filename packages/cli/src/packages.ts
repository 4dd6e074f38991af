/**
 * Optional packages: the adapters, their clients and ADK's dev tools are peers
 * that a user installs only when the store or command asks for them.
 */

/** An optional package that the asked-for store or command needs is not installed. */
export class MissingPackageError extends Error {
  readonly code = 'MISSING_PACKAGE';
  /** Every package to install, the missing one first. */
  readonly packages: readonly string[];
  /** `npm install <packages>` */
  readonly installCommand: string;

  constructor(missing: string, purpose: string, companions: readonly string[], options?: { cause?: unknown }) {
    const packages = [missing, ...companions];
    const installCommand = `npm install ${packages.join(' ')}`;
    super(`${purpose} needs ${missing}, which is not installed. Install it with: ${installCommand}`, options);
    this.name = 'MissingPackageError';
    this.packages = packages;
    this.installCommand = installCommand;
  }
}

function isNotFound(error: unknown, name: string): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  const message = error instanceof Error ? error.message : '';
  return (code === 'ERR_MODULE_NOT_FOUND' || code === 'MODULE_NOT_FOUND') && message.includes(name);
}

/**
 * Imports `name`, or rejects with {@link MissingPackageError} when it is not
 * installed. `purpose` names what needs it (a URI scheme, a command);
 * `companions` are the other packages the install command should add.
 */
export async function loadOptional<K extends keyof OptionalModules>(
  name: K,
  purpose: string,
  companions: readonly string[] = [],
): Promise<OptionalModules[K]> {
  try {
    return (await import(name)) as OptionalModules[K];
  } catch (error) {
    if (isNotFound(error, name)) {
      throw new MissingPackageError(name, purposeText(purpose), companions, { cause: error });
    }
    throw error;
  }
}

function purposeText(purpose: string): string {
  return /^[a-z][a-z0-9+.-]*$/.test(purpose) ? `The ${purpose}:// session store` : purpose;
}

/** The optional modules this package loads, for typed imports. */
export interface OptionalModules {
  '@adk-state/adapter-redis': typeof import('@adk-state/adapter-redis');
  '@adk-state/adapter-mongo': typeof import('@adk-state/adapter-mongo');
  '@adk-state/adapter-firestore': typeof import('@adk-state/adapter-firestore');
  '@google/adk-devtools': typeof import('@google/adk-devtools');
  '@google-cloud/firestore': typeof import('@google-cloud/firestore');
  ioredis: typeof import('ioredis');
}
