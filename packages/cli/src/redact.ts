/**
 * Passwords never reach the screen: {@link redactUri} hides the secrets of a
 * store URI, whatever form it takes, and {@link Redactor} hides them in any
 * text (an error of a client library that quotes the URI or the password, a
 * progress line, a banner, the help).
 */

/** Query parameters whose value is a secret (case-insensitive). */
const SECRET_PARAMETERS = /^(password|pass|passwd|pwd|secret|token|auth|auth_token|access_token|api_key|apikey)$/i;

const MASK = '***';

/** The shortest secret masked wherever it appears in a text, not only inside its URI. */
const MIN_FREE_SECRET = 4;

/** Where the parts of a `scheme://userinfo@host…` URI are; `undefined` for text without `scheme://`. */
interface UriParts {
  /** `scheme://` */
  scheme: string;
  /** Between `scheme://` and the `@` that ends the user information; `undefined` without one. */
  userInfo: string | undefined;
  /** Everything after the user information (host, path, query, fragment). */
  rest: string;
}

function split(uri: string): UriParts | undefined {
  const match = /^([a-z][a-z0-9+.-]*:\/\/)/i.exec(uri);
  if (!match?.[1]) return undefined;
  const scheme = match[1];
  const after = uri.slice(scheme.length);
  // The query and fragment may hold an `@` of their own (`?password=p@ss`):
  // the user information ends at the last `@` before the first `?password=`-like
  // parameter, or else at the last `@` of all, since a password may hold an
  // unencoded `/`, `?`, `#` or `@` that a URL parser would take for the end of it.
  const secretQuery = /[?&][a-z_]+=/i.exec(after);
  const searchEnd =
    secretQuery && SECRET_PARAMETERS.test(secretQuery[0].slice(1, -1)) ? secretQuery.index : after.length;
  const at = after.lastIndexOf('@', searchEnd - 1);
  if (at === -1) return { scheme, userInfo: undefined, rest: after };
  return { scheme, userInfo: after.slice(0, at), rest: after.slice(at) };
}

function redactQuery(text: string): string {
  return text.replace(/([?&])([^=&#?]+)=([^&]*)/g, (whole, separator: string, name: string) =>
    SECRET_PARAMETERS.test(name) ? `${separator}${name}=${MASK}` : whole,
  );
}

/**
 * The URI with its secrets replaced by `***`: the password of
 * `user:password@` (also when it holds an unencoded `/`, `?`, `#` or `@`)
 * and the value of a `password=` (or `pass`, `secret`, `token`, …) query
 * parameter. The user name, hosts, database and other parameters stay, so
 * that the result still names the store.
 */
export function redactUri(uri: string): string {
  const parts = split(uri);
  if (!parts) return uri;
  let userInfo = '';
  if (parts.userInfo !== undefined) {
    const colon = parts.userInfo.indexOf(':');
    userInfo = colon === -1 ? parts.userInfo : `${parts.userInfo.slice(0, colon)}:${MASK}`;
  }
  return `${parts.scheme}${userInfo}${redactQuery(parts.rest)}`;
}

function safeDecode(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}

/** Every secret of a URI as it may appear in a message: raw, decoded and encoded. */
export function secretsOf(uri: string): string[] {
  const parts = split(uri);
  if (!parts) return [];
  const found: string[] = [];
  if (parts.userInfo !== undefined) {
    const colon = parts.userInfo.indexOf(':');
    if (colon !== -1) found.push(parts.userInfo.slice(colon + 1));
  }
  for (const match of parts.rest.matchAll(/[?&]([^=&#?]+)=([^&]*)/g)) {
    if (SECRET_PARAMETERS.test(match[1] ?? '')) found.push(match[2] ?? '');
  }
  const all = new Set<string>();
  for (const secret of found) {
    for (const form of [secret, safeDecode(secret), encodeURIComponent(safeDecode(secret))]) {
      if (form.length > 0) all.add(form);
    }
  }
  return [...all];
}

/**
 * Hides the secrets of some URIs in any text: each URI's redacted form
 * replaces the URI, and each secret on its own (a client library may quote
 * just the password, decoded or not) becomes `***`.
 */
export class Redactor {
  readonly #uris: string[] = [];
  readonly #secrets: string[] = [];

  constructor(uris: Iterable<string | undefined> = []) {
    for (const uri of uris) this.add(uri);
  }

  /** Hides the secrets of one more URI. */
  add(uri: string | undefined): void {
    if (uri === undefined || uri === '') return;
    this.#uris.push(uri);
    this.#uris.sort((a, b) => b.length - a.length);
    for (const secret of secretsOf(uri)) {
      // Shorter ones would mask ordinary words too; the URIs they belong to are redacted whole all the same.
      if (secret.length >= MIN_FREE_SECRET && !this.#secrets.includes(secret)) this.#secrets.push(secret);
    }
    this.#secrets.sort((a, b) => b.length - a.length);
  }

  /** `text` with every known URI redacted and every known secret masked. */
  redact(text: string): string {
    let out = text;
    for (const uri of this.#uris) out = out.split(uri).join(redactUri(uri));
    for (const secret of this.#secrets) {
      out = out.split(secret).join(MASK);
    }
    return out;
  }
}

/**
 * Passes everything written to `stream` through `redactor` first: the lines
 * other libraries print (ADK's server logs, a client's warnings) included.
 */
export function redactStream(stream: NodeJS.WriteStream, redactor: Redactor): void {
  const write = stream.write.bind(stream) as (chunk: unknown, ...rest: unknown[]) => boolean;
  stream.write = ((chunk: unknown, ...rest: unknown[]) => {
    if (typeof chunk === 'string') return write(redactor.redact(chunk), ...rest);
    if (chunk instanceof Uint8Array) {
      const text = Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength).toString('utf8');
      const redacted = redactor.redact(text);
      return write(redacted === text ? chunk : redacted, ...rest);
    }
    return write(chunk, ...rest);
  }) as NodeJS.WriteStream['write'];
}
